"""Seed 302110 of the simulator, reduced to the core: a follower's truncation to its own log
end must still drop the leader-epoch entries that start there.

Kafka's rule (`UnifiedLog.truncateTo`): when the target offset is >= the log end offset the
log is left alone, but the epoch cache is still truncated from the end at the log end offset,
"since we may have a conflicting epoch entry at the end of the log from the leader": a broker
that became leader (assigning its epoch at its log end) and lost leadership before appending.

In seed 302110 broker 2 holds epoch 2 from offset 22 (one record, LEO 23), acts on a held
LeaderAndIsr making it leader of epoch 3 (cache gains (3, 23)), then on the next one making
it a follower of epoch 4. OffsetsForLeaderEpoch(3) is answered (epoch 2, end 24); the
divergence offset is 23 == its LEO, so `core.replica._truncate` returns without touching the
epochs; the fetched epoch-2 batch at 23 then makes `assign_epoch` drop both (2, 22) and
(3, 23) and record (2, 23). As leader of epoch 5 broker 2 answers OffsetsForLeaderEpoch(1)
with 23 instead of 22, and broker 1 keeps a divergent epoch-1 record at offset 22 below the
HW (log_matching).
"""

from __future__ import annotations

from core import events as ev
from core.config import ProtocolConfig
from core.messages import (
    BatchInfo,
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from core.node import DurableReplica, recover, replica, step
from core.rules.epochs import EpochEntry
from core.timers import FetchTimer
from core.types import Errors, FetchState, Role
from tests.core.test_replica import TP, leader_and_isr, sends

CFG = ProtocolConfig()


def test_truncation_to_the_log_end_drops_an_epoch_started_there_without_records() -> None:
    durable = DurableReplica(TP, (0, 1, 2), 0, 23, (EpochEntry(1, 0), EpochEntry(2, 22)), 22)
    s = recover(2, CFG, (durable,))
    s, _ = step(s, ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    s, _ = step(s, leader_and_isr(2, 3, (0, 2), zk_version=3))
    r = replica(s, TP)
    assert r is not None and r.role == Role.LEADER
    assert r.epochs == (EpochEntry(1, 0), EpochEntry(2, 22), EpochEntry(3, 23))
    s, _ = step(s, leader_and_isr(0, 4, (0, 2), zk_version=4))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    req = sends(out, OffsetForLeaderEpochRequest)[0].message
    assert isinstance(req, OffsetForLeaderEpochRequest) and req.leader_epoch == 3
    # leader 0 never had epoch 3: its epoch 2 ends at 24 (where its epoch 4 starts)
    s, out = step(s, ev.MessageReceived(0, OffsetForLeaderEpochResponse(TP, Errors.NONE, 4, 3,
                                                                        2, 24)))
    r = replica(s, TP)
    assert r is not None and r.fetch_state == FetchState.FETCHING and r.log_end_offset == 23
    assert r.epochs == (EpochEntry(1, 0), EpochEntry(2, 22))  # Kafka: (3, 23) is gone
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    fetch = sends(out, FetchRequest)[0].message
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 23
    batches = (BatchInfo(23, 23, 2),)
    s, out = step(s, ev.MessageReceived(0, FetchResponse(TP, Errors.NONE, 23, 4, 24, 0, 24,
                                                         batches=batches, records=b"r")))
    r = replica(s, TP)
    assert r is not None and r.log_end_offset == 24
    assert r.epochs == (EpochEntry(1, 0), EpochEntry(2, 22))  # epoch 2 still starts at 22
