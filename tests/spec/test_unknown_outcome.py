"""A leader's ISR write whose outcome is unknown (its session expired with the write in
flight): ZooKeeper may have applied it, the answer lost with the session (`Model._expire`
explores both). The checker finds the core's old reading of such a failure as "refused"
(the simulator found it first, seeds 385633 and 397166), and the fixed core keeps
strong_isr over the whole bounded space, including the retry refused after the controller
moved on (which the first fix got wrong: the checker found that too)."""

from __future__ import annotations

import pytest

from core import replica
from core.config import ProtocolConfig
from spec.checker import check
from spec.model import Bounds, Model

# The ISR shrinks and the follower catches up again, so the leader proposes the larger ISR;
# its session expires with that write in flight; the controller hears of the expiry only
# later (asynchronous watches) and may elect from the ISR that landed, while a record is
# produced to the old leader (acks=1, as B14's bounds: with two brokers an ISR of one
# refuses acks=all under min.insync.replicas 2). acks=1 gives up other promises (B1), so
# the property checked is strong_isr, the one this fault breaks.
BOUNDS = Bounds(brokers=2, records=2, leader_epochs=2, crashes=0, expiries=1,
                isr_writes="async", zk_watches="async", acks=1)


def test_the_fixed_core_keeps_strong_isr_when_an_answer_is_lost() -> None:
    r = check(Model(ProtocolConfig(), BOUNDS), invariants=("strong_isr",))
    assert r.exhausted and r.violation is None, r.violation


def test_the_checker_finds_an_unknown_outcome_taken_as_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = replica.on_isr_written

    def as_refused(rs: replica.ReplicaState, proposed: replica.LeaderIsr, ok: bool,
                   current: replica.LeaderIsr | None, unknown: bool,
                   cfg: ProtocolConfig) -> tuple[replica.ReplicaState, replica.Effects]:
        # the code before the fix: no answer read as "someone else changed the partition"
        return fixed(rs, proposed, ok, None, False, cfg) if unknown else fixed(
            rs, proposed, ok, current, unknown, cfg)

    monkeypatch.setattr(replica, "on_isr_written", as_refused)
    r = check(Model(ProtocolConfig(), BOUNDS), invariants=("strong_isr",))
    assert r.violation is not None and r.violation[0] == "strong_isr", r.violation
    assert any("applied" in a for a, _ in r.trace)  # only a lost answer shows it
    assert len(r.trace) - 1 == 8  # breadth-first: the shortest trace
