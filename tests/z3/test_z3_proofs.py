"""Every rule property in spec.z3.proofs is proved, and the proofs are not vacuous."""

from __future__ import annotations

import z3

from spec.z3.proofs import (
    Obligation,
    check,
    divergence_obligations,
    format_results,
    obligations,
    run_proofs,
)


def test_all_proofs_proved() -> None:
    results = run_proofs()
    assert len(results) == len(obligations()) >= 25
    assert all(r.proved for r in results), format_results(results)
    assert "proved" in format_results(results)


def test_divergence_hypotheses_admit_diverging_logs() -> None:
    """The divergence hypotheses allow logs that really diverge after a shared prefix
    (else the proofs about them would say little)."""
    ob = divergence_obligations()[1]
    solver = z3.Solver()
    solver.add(*ob.hypotheses)
    f_leo, l_leo = z3.Ints("F_leo L_leo")
    f_len, l_len = z3.Ints("F_length L_length")
    f_e1, l_e1 = z3.Ints("F_epoch_1 L_epoch_1")
    f_s1 = z3.Int("F_start_1")
    solver.add(f_leo >= 3, l_leo >= 3, f_len == 2, l_len == 3, f_e1 != l_e1, f_s1 == 1)
    assert solver.check() == z3.sat


def test_false_claim_is_refuted() -> None:
    """The checker reports a counterexample for a false claim (it can fail)."""
    x = z3.Int("x")
    result = check(Obligation("false", "x > 0", (x >= 0,), x > 0))
    assert result.status == "counterexample"
    assert result.counterexample == "x=0"
    vacuous = check(Obligation("vacuous", "anything", (x > 0, x < 0), x == 5))
    assert vacuous.status == "vacuous"
