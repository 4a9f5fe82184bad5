"""The inductive-invariant attempt: what it proves today (so that regressions show), and that
it is not vacuous (a bug switch breaks consecution)."""

from __future__ import annotations

from core.config import Bugs
from spec.z3.inductive import CONJUNCTS, attempt_inductive_proof

KINDS = (
    "ControllerElectLeader", "ControllerShrinkIsr", "BecomeLeader", "BecomeFollowerAndTruncate",
    "LeaderWrite", "FollowerFetch", "LeaderIncHighWatermark", "LeaderShrinkIsr",
    "LeaderExpandIsr",
)


def test_two_replicas_every_action_proved() -> None:
    report = attempt_inductive_proof(2)
    assert report.initiation == "proved"
    assert "strong_isr" in report.conjuncts == tuple(CONJUNCTS)
    assert report.by_kind() == {kind: "proved" for kind in KINDS}, report.format()
    assert len(report.results) == 20
    assert "by action" in report.format()


def test_three_replicas_proved_actions() -> None:
    """With three replicas the ISR-changing and HW actions (the ones the KAFKA-7128 and
    KIP-320 fixes are about) are proved; see the module docstring for the rest."""
    kinds = ("BecomeLeader", "LeaderIncHighWatermark", "LeaderExpandIsr")
    report = attempt_inductive_proof(3, only=kinds)
    assert report.by_kind() == {kind: "proved" for kind in kinds}, report.format()


def test_no_fetch_epoch_fencing_not_proved() -> None:
    """B8: with unfenced fetches the same invariant is no longer shown inductive for
    FollowerFetch (a follower in an older epoch appends records of a newer one, breaking
    `record_epochs`; the solver returns a CTI or gives up, never a proof)."""
    report = attempt_inductive_proof(2, timeout_ms=5_000, only=("FollowerFetch",),
                                     bugs=Bugs(no_fetch_epoch_fencing=True), explain=False)
    assert len(report.results) == 2
    assert all(r.status in ("cti", "unknown") for r in report.results), report.format()
    assert report.by_kind()["FollowerFetch"] != "proved"
