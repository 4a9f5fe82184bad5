"""Properties of the rule encodings in `spec.z3.rules`, proved for unbounded integers.

Each proof asserts the hypotheses and the negation of the claim; UNSAT means the claim holds
for every integer input (the epoch-cache proofs fix the cache capacity, the integers inside
stay unbounded). `run_proofs()` runs them all; `format_results()` prints a table.

Entry points: `run_proofs() -> list[ProofResult]`, `format_results(results) -> str`,
`main()` (prints the table, exit status 1 unless everything is proved).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3

from spec.z3.rules import (
    FollowerSlot,
    ZBool,
    ZCache,
    ZInt,
    ZOptInt,
    z_acks_all_admissible,
    z_acks_all_satisfied,
    z_cache_well_formed,
    z_can_expand_isr,
    z_divergence_offset,
    z_end_offset_for_epoch,
    z_high_watermark,
    z_is_out_of_sync,
    z_latest_epoch,
    z_min,
    z_truncate_epochs,
    z_truncation_point,
)

HW_FOLLOWERS = 4
CACHE_CAPACITY = 3
TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class ProofResult:
    name: str
    statement: str
    status: str  # "proved" | "counterexample" | "unknown" | "vacuous"
    seconds: float
    counterexample: str | None = None

    @property
    def proved(self) -> bool:
        return self.status == "proved"


@dataclass(frozen=True)
class Obligation:
    name: str
    statement: str
    hypotheses: tuple[ZBool, ...]
    claim: ZBool


def check(ob: Obligation, timeout_ms: int = TIMEOUT_MS) -> ProofResult:
    """UNSAT of hypotheses + not(claim) is a proof, provided the hypotheses are satisfiable
    (checked too, so that no proof is vacuous: status "vacuous" otherwise)."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*ob.hypotheses)
    start = time.perf_counter()
    if ob.hypotheses and solver.check() != z3.sat:
        seconds = time.perf_counter() - start
        return ProofResult(ob.name, ob.statement, "vacuous", seconds,
                           "hypotheses unsatisfiable or unknown")
    solver.add(z3.Not(ob.claim))
    verdict = solver.check()
    seconds = time.perf_counter() - start
    if verdict == z3.unsat:
        return ProofResult(ob.name, ob.statement, "proved", seconds)
    if verdict == z3.sat:
        model = solver.model()
        shown = ", ".join(sorted(f"{d.name()}={model[d]}" for d in model.decls()))
        return ProofResult(ob.name, ob.statement, "counterexample", seconds, shown)
    return ProofResult(ob.name, ob.statement, "unknown", seconds, solver.reason_unknown())


# ------------------------------------------------------------------------------ high watermark


def _hw_inputs() -> tuple[ZInt, ZInt, list[FollowerSlot]]:
    hw, leo = z3.Ints("hw leader_leo")
    return hw, leo, [FollowerSlot.fresh(f"f{i}") for i in range(HW_FOLLOWERS)]


def hw_obligations() -> list[Obligation]:
    out: list[Obligation] = []
    hw, leo, slots = _hw_inputs()
    new = z_high_watermark(hw, leo, slots)
    out.append(Obligation(
        "hw_never_decreases", "high_watermark(hw, leo, isr) >= hw", (), new >= hw))
    out.append(Obligation(
        "hw_le_leader_leo", "hw <= leader LEO  =>  high_watermark(...) <= leader LEO",
        (hw <= leo,), new <= leo))
    advanced_bounded = z3.And([
        z3.Implies(s.in_isr, z3.And(s.leo.present, new <= s.leo.value)) for s in slots
    ])
    out.append(Obligation(
        "hw_advance_bounded_by_isr",
        "if the HW moves, every ISR follower's LEO is known and >= the new HW, and the new HW"
        " <= leader LEO",
        (), z3.Implies(new > hw, z3.And(advanced_bounded, new <= leo))))
    is_member = z3.Or(new == leo, *[z3.And(s.in_isr, new == s.leo.value) for s in slots])
    out.append(Obligation(
        "hw_advance_is_a_min",
        "if the HW moves, it equals the leader LEO or some ISR follower's LEO (it is the min)",
        (), z3.Implies(new > hw, is_member)))
    # Monotone in the followers' LEOs: a follower catching up never lowers the result.
    bumped = [FollowerSlot(s.in_isr, ZOptInt(s.leo.present, z3.Int(f"g{i}_leo_value")))
              for i, s in enumerate(slots)]
    grows = z3.And([b.leo.value >= s.leo.value for b, s in zip(bumped, slots, strict=True)])
    out.append(Obligation(
        "hw_monotone_in_follower_leos",
        "follower LEOs only growing  =>  high_watermark only grows",
        (grows,), z_high_watermark(hw, leo, bumped) >= new))
    # Removing a follower from the ISR never lowers the result (shrink is safe for liveness).
    shrunk = [FollowerSlot(z3.And(s.in_isr, z3.Bool(f"keep{i}")), s.leo)
              for i, s in enumerate(slots)]
    out.append(Obligation(
        "hw_monotone_in_isr_shrink",
        "a smaller ISR never gives a smaller high watermark",
        (), z_high_watermark(hw, leo, shrunk) >= new))
    return out


# ------------------------------------------------------------------------------ acks


def acks_obligations() -> list[Obligation]:
    size, size2, min_isr, min_isr2, hw, hw2, req = z3.Ints("isr isr2 min min2 hw hw2 req")
    done, ok = z_acks_all_satisfied(hw, req, size, min_isr)
    done2, ok2 = z_acks_all_satisfied(hw2, req, size2, min_isr)
    return [
        Obligation(
            "acks_admissible_monotone_in_isr",
            "admissible(isr, min) and isr' >= isr  =>  admissible(isr', min)",
            (z_acks_all_admissible(size, min_isr), size2 >= size),
            z_acks_all_admissible(size2, min_isr)),
        Obligation(
            "acks_admissible_antitone_in_min_isr",
            "admissible(isr, min) and min' <= min  =>  admissible(isr, min')",
            (z_acks_all_admissible(size, min_isr), min_isr2 <= min_isr),
            z_acks_all_admissible(size, min_isr2)),
        Obligation(
            "acks_ok_implies_done_and_admissible",
            "satisfied = (done, ok): ok => done, ok => admissible(isr, min),"
            " done <=> hw >= required",
            (), z3.And(z3.Implies(ok, done), z3.Implies(ok, z_acks_all_admissible(size, min_isr)),
                       done == (hw >= req))),
        Obligation(
            "acks_done_monotone",
            "once done, a larger HW with a larger ISR stays done, and ok stays ok",
            (hw2 >= hw, size2 >= size),
            z3.And(z3.Implies(done, done2), z3.Implies(ok, ok2))),
    ]


# ------------------------------------------------------------------------------ ISR guards


def isr_obligations() -> list[Obligation]:
    leo = ZOptInt.fresh("follower_leo")
    hw, leso, leader_leo = z3.Ints("leader_hw leso leader_leo")
    expired = z3.Bool("lag_expired")
    fixed = z_can_expand_isr(leo, hw, leso, True)
    buggy = z_can_expand_isr(leo, hw, leso, False)
    out_of_sync = z_is_out_of_sync(leo, leader_leo, expired)
    return [
        Obligation(
            "expand_implies_caught_up",
            "can_expand_isr  =>  the follower fetched in this epoch, LEO >= hw and LEO >= leso",
            (), z3.Implies(fixed, z3.And(leo.present, leo.value >= hw, leo.value >= leso))),
        Obligation(
            "expand_iff_reached_max_hw_leso",
            "can_expand_isr  <=>  follower LEO known and >= max(hw, leso)",
            (), fixed == z3.And(leo.present, leo.value >= hw, leo.value >= leso)),
        Obligation(
            "expand_epoch_check_redundant_once_hw_reached_epoch",
            "when the leader's HW has reached its epoch (hw >= leso) the KAFKA-7128 check adds"
            " nothing (so the check only matters right after an election)",
            (hw >= leso,), fixed == buggy),
        Obligation(
            "expand_fixed_stronger_than_buggy",
            "can_expand_isr(check) => can_expand_isr(no check)",
            (), z3.Implies(fixed, buggy)),
        Obligation(
            "caught_up_never_out_of_sync",
            "a follower whose known LEO equals the leader's LEO is never out of sync",
            (leo.present, leo.value == leader_leo), z3.Not(out_of_sync)),
        Obligation(
            "out_of_sync_needs_lag",
            "is_out_of_sync => the lag time expired",
            (), z3.Implies(out_of_sync, expired)),
    ]


# ------------------------------------------------------------------------------ epoch caches


def epoch_at(cache: ZCache, offset: ZInt) -> ZInt:
    """Epoch of the record at `offset` in a log abstracted by its epoch cache: the epoch of the
    last entry starting at or before it (-1 before the first entry)."""
    out: ZInt = z3.IntVal(-1)
    for i in range(cache.capacity):
        out = z3.If(z3.And(i < cache.length, cache.starts[i] <= offset), cache.epochs[i], out)
    return out


def abstract_log(cache: ZCache, leo: ZInt) -> ZBool:
    """A well-formed cache describing a log of length `leo`: every offset `< leo` has an epoch
    (the first entry starts at 0 when the log is not empty)."""
    return z3.And(
        leo >= 0,
        z_cache_well_formed(cache, leo),
        z3.Implies(leo > 0, z3.And(cache.length > 0, cache.starts[0] == 0)),
    )


def end_offset_obligations() -> list[Obligation]:
    cache = ZCache.fresh("c", CACHE_CAPACITY)
    req, leo = z3.Ints("requested leo")
    epoch, end = z_end_offset_for_epoch(cache, req, leo)
    wf = abstract_log(cache, leo)
    defined = end != -1
    floor_is_largest = z3.And([
        z3.Implies(z3.And(i < cache.length, cache.epochs[i] <= req, epoch != req),
                   cache.epochs[i] <= epoch)
        for i in range(CACHE_CAPACITY)
    ])
    boundary = z3.Or(end == leo, *[z3.And(i < cache.length, cache.epochs[i] > req,
                                          end == cache.starts[i])
                                   for i in range(CACHE_CAPACITY)])
    # Every record of an epoch <= the answer's epoch lies below the returned end offset, and
    # every record at or after it has a larger epoch than requested.
    x = z3.Int("x")
    segment = z3.Implies(z3.And(x >= 0, x < leo),
                         z3.And(z3.Implies(x < end, epoch_at(cache, x) <= req),
                                z3.Implies(x >= end, epoch_at(cache, x) > req)))
    return [
        Obligation(
            "end_offset_le_leo",
            "well-formed cache: end_offset_for_epoch returns an offset in [0, LEO] (or undefined)",
            (wf,), z3.Implies(defined, z3.And(end >= 0, end <= leo))),
        Obligation(
            "end_offset_epoch_le_requested",
            "the returned epoch is <= the requested one, and is the largest cached epoch <= it",
            (wf,), z3.Implies(defined, z3.And(epoch <= req, floor_is_largest))),
        Obligation(
            "end_offset_undefined_together",
            "the epoch is undefined exactly when the offset is",
            (wf, req >= 0), (epoch == -1) == (end == -1)),
        Obligation(
            "end_offset_is_epoch_boundary",
            "the returned offset is the LEO or the start of the first epoch > requested",
            (wf,), z3.Implies(defined, boundary)),
        Obligation(
            "end_offset_splits_log",
            "records below the returned offset have epoch <= requested, those at or above it"
            " have a larger epoch",
            (wf, req >= 0), z3.Implies(defined, segment)),
    ]


def _agree(f: ZCache, f_leo: ZInt, ld: ZCache, l_leo: ZInt, x: ZInt) -> ZBool:
    return z3.And(x >= 0, x < f_leo, x < l_leo, epoch_at(f, x) == epoch_at(ld, x))


def divergence_obligations() -> list[Obligation]:
    """The truncation point for logs abstracted by their epoch caches.

    Setting: follower F and leader L, each a log given by (epoch cache, LEO) as `abstract_log`.
    Records are identified by (offset, epoch) (epoch/offset uniqueness), so two logs agree at an
    offset iff the cached epochs there are equal. Hypotheses, all invariants of the fixed
    protocol:
      * log matching: agreement at an offset implies agreement at every smaller offset;
      * an epoch cached by both sits at the same index of both caches, and the two caches are
        identical up to and including it (both copied that prefix from the epoch's leader,
        and a replica's cache entries for epochs it led without writing are dropped by the
        truncation that precedes any fetch);
      * KIP-320 fencing + KAFKA-7415: the leader's latest epoch is larger than the follower's;
      * the follower's HW is at most its LEO.
    """
    cap = CACHE_CAPACITY
    f, ld = ZCache.fresh("F", cap), ZCache.fresh("L", cap)
    f_leo, l_leo, f_hw = z3.Ints("F_leo L_leo F_hw")
    y, z = z3.Ints("y z")
    log_matching = z3.ForAll([y, z], z3.Implies(
        z3.And(y >= 0, y <= z, _agree(f, f_leo, ld, l_leo, z)), _agree(f, f_leo, ld, l_leo, y)))
    common_prefix = z3.And([
        z3.Implies(
            z3.And(i < f.length, j < ld.length, f.epochs[i] == ld.epochs[j]),
            z3.And([z3.And(f.epochs[k] == ld.epochs[k], f.starts[k] == ld.starts[k])
                    for k in range(i + 1)]) if i == j else z3.BoolVal(False))
        for i in range(cap) for j in range(cap)
    ])
    hyps = (
        abstract_log(f, f_leo), abstract_log(ld, l_leo), log_matching, common_prefix,
        ld.length > 0, z_latest_epoch(f) < z_latest_epoch(ld), f_hw >= 0, f_hw <= f_leo,
    )
    asked = z_latest_epoch(f)
    l_epoch, l_end = z_end_offset_for_epoch(ld, asked, l_leo)
    offset, done = z_divergence_offset(f, f_leo, f_hw, l_epoch, l_end)
    x = z3.Int("x")
    below_agree = z3.Implies(z3.And(x >= 0, x < offset), _agree(f, f_leo, ld, l_leo, x))
    keeps_shared = z3.Implies(_agree(f, f_leo, ld, l_leo, x), x < offset)
    maximal = z3.Or(offset == f_leo, offset == l_leo, z3.Not(_agree(f, f_leo, ld, l_leo, offset)))
    truncated = z_truncate_epochs(f, offset)
    progress = z3.And(truncated.length < f.length,
                      z_latest_epoch(truncated) < asked)
    final, final_cache, finished = z_truncation_point(f, f_leo, f_hw, ld, l_leo, cap + 1)
    final_below = z3.Implies(z3.And(x >= 0, x < final), _agree(f, f_leo, ld, l_leo, x))
    final_max = z3.Or(final == f_leo, final == l_leo, z3.Not(_agree(f, f_leo, ld, l_leo, final)))
    return [
        Obligation(
            "divergence_le_follower_leo",
            "divergence_offset never exceeds the follower's LEO (any inputs)",
            (), offset <= f_leo),
        Obligation(
            "divergence_keeps_shared_records",
            "one round (done or not): every offset where both logs hold the same record stays"
            " below the truncation point (no shared record is truncated)",
            hyps, keeps_shared),
        Obligation(
            "divergence_done_is_first_divergence",
            "one round, done: the truncation point is the first offset where the logs differ"
            " (or the end of one of them)",
            hyps, z3.Implies(done, z3.And(below_agree, maximal))),
        Obligation(
            "divergence_not_done_makes_progress",
            "one round, not done: truncation drops at least one cache entry and the next"
            " question is about a strictly smaller epoch",
            hyps, z3.Implies(z3.Not(done), progress)),
        Obligation(
            "truncation_exchange_finds_first_divergence",
            f"the whole exchange (<= {cap + 1} round trips) finishes and truncates the follower"
            " exactly to the first point of divergence",
            hyps, z3.And(finished, final_below, final_max, final >= 0,
                         final_cache.length <= f.length, z_min(final, f_leo) == final)),
    ]


ALL_GROUPS: tuple[Callable[[], list[Obligation]], ...] = (
    hw_obligations,
    acks_obligations,
    isr_obligations,
    end_offset_obligations,
    divergence_obligations,
)


def obligations() -> list[Obligation]:
    return [ob for group in ALL_GROUPS for ob in group()]


def run_proofs(timeout_ms: int = TIMEOUT_MS) -> list[ProofResult]:
    """Run every proof obligation; each result says proved / counterexample / unknown."""
    return [check(ob, timeout_ms) for ob in obligations()]


def format_results(results: Sequence[ProofResult]) -> str:
    width = max((len(r.name) for r in results), default=10)
    lines = []
    for r in results:
        lines.append(f"{r.status:<14} {r.name:<{width}} {r.seconds:7.3f}s  {r.statement}")
        if r.counterexample is not None:
            lines.append(f"{'':<14} counterexample: {r.counterexample}")
    proved = sum(r.proved for r in results)
    lines.append(f"{proved}/{len(results)} proved, {sum(r.seconds for r in results):.2f}s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    results = run_proofs()
    print(format_results(results))
    return 0 if all(r.proved for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
