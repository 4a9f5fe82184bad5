"""Every ISR member a leader keeps is watched by its lag timer (spec's `isr_members_watched`).

Found live: during a controlled shutdown the stopping broker, made a follower again by a
LeaderAndIsr, fetched once more and was re-added to the ISR at the HW but below the log end.
The lag timer was armed only on a fetch that reached the log end, so none watched it; the
broker then stopped, stayed in the ISR for good, and the HW and every acks=all produce of
the partition waited for it (librdkafka: "Timed out ProduceRequest in flight"). The model
checker finds both paths below in 4-6 steps once either fix is taken out.
"""

from __future__ import annotations

from core import effects as fx
from core import events as ev
from core.messages import FetchRequest
from core.node import BrokerState, replica, step
from core.timers import ReplicaLagTimer
from tests.core.test_replica import CFG, TP, leader_and_isr, registered


def _isr_write(out: list[fx.Effect]) -> fx.ZkWritePartitionState:
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert len(writes) == 1, out
    return writes[0]


def _shrunk_to_0_2() -> BrokerState:
    """Leader 0 of ISR [0, 2] after follower 1's lag timer removed it."""
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1, 2)))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    w = _isr_write(out)
    s, _ = step(s, ev.PartitionStateWritten(TP, w.proposed, False, True, False, None))
    assert replica(s, TP).isr == (0, 2)  # type: ignore[union-attr]
    return s


def test_a_follower_that_joins_below_the_log_end_is_watched() -> None:
    s = _shrunk_to_0_2()
    s, _ = step(s, ev.ProduceReceived(1, TP, -1, 1, b"x"))  # LEO 1, HW 0
    # follower 1 fetches at offset 0: at the HW (it may join) but below the log end
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, 0)))
    w = _isr_write(out)
    assert w.proposed.isr == (0, 1, 2)
    assert fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms) in out
    s, _ = step(s, ev.PartitionStateWritten(TP, w.proposed, False, True, False, None))
    assert replica(s, TP).isr == (0, 1, 2)  # type: ignore[union-attr]
    # it never fetches again: its timer proposes to remove it
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    w = _isr_write(out)
    assert w.proposed.isr == (0, 2)


def test_a_refused_shrink_looks_again() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1, 2)))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    w = _isr_write(out)
    assert w.proposed.isr == (0, 2)
    # the controller changed the znode first (refused, not ours): follower 1 stays in the ISR
    s, out = step(s, ev.PartitionStateWritten(TP, w.proposed, False, False, False, None))
    r = replica(s, TP)
    assert r is not None and r.isr == (0, 1, 2) and r.pending_isr is None
    assert out == [fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms // 2)]
    # no LeaderAndIsr came: the timer proposes the shrink again
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    assert _isr_write(out).proposed.isr == (0, 2)


def test_a_refused_expansion_arms_nothing_more() -> None:
    s = _shrunk_to_0_2()
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, 0)))  # caught up: LEO 0
    w = _isr_write(out)
    s, out = step(s, ev.PartitionStateWritten(TP, w.proposed, False, False, False, None))
    assert out == [] and replica(s, TP).isr == (0, 2)  # type: ignore[union-attr]
