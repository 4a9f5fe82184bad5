"""Replica rules found unpinned by mutation testing (docs/mutation.md), one Kafka rule per
test: becoming follower, truncation, the leader's fetch handling and ISR writes, idempotent
producer ids, and the bug switches that model historic Kafka code. Driven through
`core.step` (or the `core.replica` function that implements the rule)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core import effects as fx
from core import events as ev
from core import replica as rep_mod
from core.config import ProtocolConfig
from core.messages import (
    BatchInfo,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    StopReplicaRequest,
)
from core.node import BrokerState, DurableReplica, recover, replica, step
from core.replica import ReplicaState
from core.rules.epochs import UNDEFINED_EPOCH, EpochEntry
from core.timers import FetchTimeoutTimer, FetchTimer, ProduceTimeoutTimer, ReplicaLagTimer
from core.types import (
    Errors,
    FetchState,
    InvariantBroken,
    LeaderIsr,
    PartitionInfo,
    Role,
    TopicPartition,
)

TP = TopicPartition("t", 0)
CFG = ProtocolConfig()
FETCH = FetchTimer(TP)


def with_bug(**switch: bool) -> ProtocolConfig:
    return replace(CFG, bugs=replace(CFG.bugs, **switch))


def lair(leader: int, epoch: int, isr: tuple[int, ...]) -> ev.MessageReceived:
    info = PartitionInfo(TP, leader, epoch, isr, epoch, (0, 1, 2))
    return ev.MessageReceived(9, LeaderAndIsrRequest(9, 1, 1, (info,)))


def rep(s: BrokerState) -> ReplicaState:
    r = replica(s, TP)
    assert r is not None
    return r


def sent(out: list[fx.Effect], kind: type) -> list[object]:
    return [e.message for e in out if isinstance(e, fx.Send) and isinstance(e.message, kind)]


def broker(broker_id: int, cfg: ProtocolConfig = CFG, leo: int = 0,
           epochs: tuple[EpochEntry, ...] = ()) -> BrokerState:
    """A registered broker holding `leo` records of the partition, high watermark 0."""
    s = recover(broker_id, cfg, (DurableReplica(TP, (0, 1, 2), 0, leo, epochs, 0),))
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def fetching_follower(cfg: ProtocolConfig = CFG) -> BrokerState:
    """Broker 1 follows 0 in epoch 1; its log is empty (nothing to truncate), so its first
    fetch timer sends a Fetch from offset 0 at once, which is in flight."""
    s, _ = step(broker(1, cfg), lair(0, 1, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    assert sent(out, FetchRequest) == [FetchRequest(1, TP, 0, 1, UNDEFINED_EPOCH)]
    assert rep(s).fetch_state == FetchState.FETCHING and rep(s).fetch_in_flight
    return s


def leader(cfg: ProtocolConfig = CFG, epoch: int = 2) -> BrokerState:
    """Broker 0 leads `epoch` with ISR [0] and replicas [0, 1, 2], 2 records from epoch 0."""
    s = broker(0, cfg, leo=2, epochs=(EpochEntry(0, 0),))
    s, _ = step(s, lair(0, epoch, (0,)))
    assert rep(s).role == Role.LEADER
    return s


# ---------------------------------------------------------------------------------------
# becoming follower


def test_a_follower_told_of_a_new_epoch_of_the_same_leader_truncates_again() -> None:
    """Kafka rule (KAFKA-7164, fixed in 2.1): a LeaderAndIsr with a new leader epoch makes
    the follower go through truncation (OffsetsForLeaderEpoch) even when the leader id is
    unchanged: that leader may have lost records in between."""
    s = fetching_follower()
    s, out = step(s, lair(0, 2, (0, 1)))
    r = rep(s)
    assert (r.leader, r.leader_epoch, r.fetch_state) == (0, 2, FetchState.TRUNCATING)
    assert out[-2:] == [fx.CancelTimer(FetchTimeoutTimer(TP)), fx.SetTimer(FETCH, 0)]


def test_the_kafka_7164_switch_skips_truncation_only_for_the_same_leader() -> None:
    """Historic code (bug switch `skip_truncate_same_leader`): the become-follower steps
    were skipped only when the broker already followed that same leader; a follower told of
    a different leader still truncates."""
    cfg = with_bug(skip_truncate_same_leader=True)
    s, out = step(fetching_follower(cfg), lair(0, 2, (0, 1)))
    assert rep(s).fetch_state == FetchState.FETCHING and rep(s).leader_epoch == 2
    assert fx.SetTimer(FETCH, 0) not in out
    s, out = step(fetching_follower(cfg), lair(2, 2, (2, 1)))
    assert rep(s).fetch_state == FetchState.TRUNCATING and rep(s).leader == 2
    assert out[-1] == fx.SetTimer(FETCH, 0)


# ---------------------------------------------------------------------------------------
# truncation


def test_a_follower_whose_log_ends_at_the_divergence_point_truncates_nothing() -> None:
    """Kafka rule (`Log.truncateTo`): truncating to the log end offset or beyond is a no-op;
    no truncation reaches the log (nor the epoch cache, which holds nothing at or past the
    log end), and the follower starts fetching at its log end."""
    s = broker(1, leo=3, epochs=(EpochEntry(0, 0),))
    s, _ = step(s, lair(0, 1, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    (ofle,) = sent(out, OffsetForLeaderEpochRequest)
    assert ofle.leader_epoch == 0  # type: ignore[attr-defined]
    s, out = step(s, ev.MessageReceived(0, OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 0,
                                                                        0, 3)))
    assert not [e for e in out if isinstance(e, (fx.TruncateTo, fx.CheckpointLeaderEpochs))]
    r = rep(s)
    assert (r.fetch_state, r.log_end_offset, r.epochs) == (
        FetchState.FETCHING, 3, (EpochEntry(0, 0),))


def test_a_truncation_at_the_log_end_drops_an_epoch_that_starts_there() -> None:
    """Kafka rule (`UnifiedLog.truncateTo`): at or past the log end the log is left alone,
    but the epoch cache is still truncated from the end at the log end offset: a broker that
    became leader (its epoch starting at its log end) and lost leadership before appending
    holds an entry no record backs (simulator seed 302110)."""
    s = broker(1, leo=3, epochs=(EpochEntry(0, 0),))
    s, _ = step(s, lair(1, 1, (0, 1)))
    assert rep(s).epochs == (EpochEntry(0, 0), EpochEntry(1, 3))
    s, _ = step(s, lair(0, 2, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    (ofle,) = sent(out, OffsetForLeaderEpochRequest)
    assert ofle.leader_epoch == 1  # type: ignore[attr-defined]
    s, out = step(s, ev.MessageReceived(0, OffsetForLeaderEpochResponse(TP, Errors.NONE, 2, 1,
                                                                        0, 3)))
    assert not [e for e in out if isinstance(e, fx.TruncateTo)]
    assert [e for e in out if isinstance(e, fx.CheckpointLeaderEpochs)] == [
        fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0),))]
    r = rep(s)
    assert (r.fetch_state, r.log_end_offset, r.epochs) == (
        FetchState.FETCHING, 3, (EpochEntry(0, 0),))


def test_fetched_batches_must_continue_the_followers_log() -> None:
    """Kafka rule (`Log.appendAsFollower`, UnexpectedAppendOffsetException): a fetched batch
    that does not start at the follower's log end offset is never appended."""
    s = fetching_follower()
    gap = FetchResponse(TP, Errors.NONE, 0, 1, 0, 0, end_offset=3,
                        batches=(BatchInfo(1, 2, 1),))
    with pytest.raises(InvariantBroken, match="not contiguous"):
        step(s, ev.MessageReceived(0, gap))
    ok = replace(gap, batches=(BatchInfo(0, 2, 1),))
    s, _ = step(s, ev.MessageReceived(0, ok))
    assert rep(s).log_end_offset == 3


def test_a_refused_or_diverging_fetch_answer_ends_the_fetch_in_flight() -> None:
    """Kafka rule (`AbstractFetcherThread.processFetchRequest`: one fetch in flight per
    leader, and its answer ends it, whatever it says): after a diverging answer, an
    out-of-range one, an error or an answer for another offset, the next fetch timer asks
    the leader again instead of waiting for an answer that will not come."""
    answers = (
        FetchResponse(TP, Errors.NONE, 0, 1, 0, 0, end_offset=0, diverging=True),
        FetchResponse(TP, Errors.OFFSET_OUT_OF_RANGE, 0, 1, 0, 0, end_offset=0),
        FetchResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, 0, 1, 0, 0, end_offset=0),
        FetchResponse(TP, Errors.NONE, 5, 1, 0, 0, end_offset=5),
    )
    for resp in answers:
        s, _ = step(fetching_follower(), ev.MessageReceived(0, resp))
        assert not rep(s).fetch_in_flight, resp
        _, out = step(s, ev.TimerFired(FETCH))
        assert sent(out, FetchRequest) == [FetchRequest(1, TP, 0, 1, UNDEFINED_EPOCH)], resp


def test_a_step_replaces_only_the_replica_it_changed() -> None:
    """A broker hosting several partitions keeps one replica state per partition: a step on
    one partition replaces that one in place and leaves the others as they were."""
    tps = (TP, TopicPartition("t", 1), TopicPartition("t", 2))
    s = recover(0, CFG, tuple(DurableReplica(tp, (0, 1, 2), 0, 0, (), 0) for tp in tps))
    s, _ = step(s, ev.BrokerRegistered(1))
    infos = tuple(PartitionInfo(tp, 0, 1, (0,), 1, (0, 1, 2)) for tp in tps)
    s, _ = step(s, ev.MessageReceived(9, LeaderAndIsrRequest(9, 1, 1, infos)))
    for i, tp in enumerate(tps):
        before = s.replicas
        s, _ = step(s, ev.ProduceReceived(7 + i, tp, 1, 2, b"ab"))
        assert [r.tp for r in s.replicas] == list(tps)
        assert [r.log_end_offset for r in s.replicas] == [2 if j <= i else 0 for j in range(3)]
        assert all(s.replicas[j] is before[j] for j in range(3) if j != i)


# ---------------------------------------------------------------------------------------
# the leader's side


def test_a_refused_fetch_is_not_the_followers_progress() -> None:
    """Kafka rule (`Partition.fetchRecords`: the follower's state is updated only for a
    fetch that is served): a fetch refused with FENCED_LEADER_EPOCH neither moves the
    follower's position nor restarts its lag clock nor brings it into the ISR."""
    s = leader()
    s2, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 1, 1, 0, request_id=4)))
    (resp,) = sent(out, FetchResponse)
    assert isinstance(resp, FetchResponse) and resp.error == Errors.FENCED_LEADER_EPOCH
    assert resp.end_offset == 1  # nothing to send: the range [1, 1) is empty
    assert out == [fx.Send(1, resp)]  # no lag timer, no ISR write
    assert rep(s2) == rep(s)
    # the same fetch in the current epoch is served and counts
    s3, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 0, request_id=5)))
    assert fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms) in out
    assert dict(rep(s3).followers)[1] == 2


@pytest.mark.parametrize("switch", ["no_fetch_epoch_fencing", "kip320_first_try"])
def test_either_historic_switch_alone_serves_fetches_of_any_epoch(switch: str) -> None:
    """Historic code (before KIP-320, and KIP-320's first try): the leader did not check
    the fetch's current leader epoch, so a follower of an older epoch was served."""
    s = leader(with_bug(**{switch: True}))
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 1, 0, request_id=4)))
    (resp,) = sent(out, FetchResponse)
    assert resp.error == Errors.NONE  # type: ignore[attr-defined]


def test_the_epoch_of_an_offset_is_the_latest_epoch_starting_at_or_before_it() -> None:
    """Kafka rule (the leader epoch cache read as a map from offsets to epochs, which
    KIP-320's first try compared with the follower's last fetched epoch): an offset before
    the cache's first entry has no epoch."""
    cache = (EpochEntry(1, 3), EpochEntry(4, 6))
    assert [rep_mod._epoch_at(cache, o) for o in (0, 2, 3, 5, 6, 9)] == [
        UNDEFINED_EPOCH, UNDEFINED_EPOCH, 1, 1, 4, 4]


def test_kip320_first_try_answers_a_mismatched_last_fetched_epoch_as_diverging() -> None:
    """Historic code (bug switch `kip320_first_try`): the leader compares the follower's
    last fetched epoch with its own epoch of the offset before the fetch offset, from
    offset 1 on (at offset 0 there is no previous record: a follower that led an epoch
    without records and follows without truncating still sends that epoch), and answers a
    mismatch as diverging, with nothing to send."""
    s = leader(with_bug(kip320_first_try=True))  # records 0 and 1 in epoch 0
    for offset, last_epoch, diverging in ((1, 1, True), (1, 0, False), (2, 1, True),
                                          (0, UNDEFINED_EPOCH, False), (0, 1, False)):
        _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, offset, 2, last_epoch)))
        (resp,) = sent(out, FetchResponse)
        assert isinstance(resp, FetchResponse)
        assert (resp.diverging, resp.error) == (diverging, Errors.NONE), (offset, last_epoch)
        assert resp.end_offset == (offset if diverging else 2)


def test_a_leader_applies_only_the_answer_to_its_own_isr_write() -> None:
    """Kafka rule (`Partition.updateIsr` / the zkVersion check): an answer to an ISR write
    is applied only by the leader that has exactly that write in flight, in the epoch it
    proposed it in; any other answer changes nothing."""
    s = leader()
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 0, request_id=5)))
    (write,) = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    # conditional on the partition's zkVersion alone: only the controller's own writes are
    # also fenced by the controller epoch znode
    assert (write.expected_zk_version, write.controller_epoch_zk_version, write.by_controller) \
        == (rep(s).zk_version, None, False)
    r = rep(s)
    assert r.pending_isr == (0, 1)
    other_isr = write.proposed._replace(isr=(0, 2))
    other_epoch = write.proposed._replace(leader_epoch=1)
    for proposed in (other_isr, other_epoch):
        assert rep_mod.on_isr_written(r, proposed, True, None, False, CFG) == (r, [])
    follower = r._replace(role=Role.FOLLOWER)
    answer = rep_mod.on_isr_written(follower, write.proposed, True, None, False, CFG)
    assert answer == (follower, [])
    applied, out = rep_mod.on_isr_written(r, write.proposed, True, None, False, CFG)
    assert (applied.isr, applied.pending_isr) == ((0, 1), None)
    assert fx.ZkNotifyIsrChange(TP) in out


def test_an_isr_write_of_unknown_outcome_keeps_bounding_the_hw_and_is_written_again() -> None:
    """Kafka rule (KIP-497's maximal ISR; `checkLeaderAndIsrZkData` on a retried update): a
    leader whose ISR write failed with its outcome unknown (no `current`: the session
    expired or the answer was lost) may find it applied in ZooKeeper, where a controller
    elects from it. It keeps the pending ISR, so the HW still waits for the member it
    proposed, and writes again on the same zkVersion; a refusal that shows exactly its own
    write is the write done. Any other refusal means the controller moved on: after an
    attempt of unknown outcome that attempt may have landed first (and the controller
    elected from it), so the HW stays bounded until the LeaderAndIsr; a write refused at its
    only attempt was not applied, and the pending ISR goes. Regression: harness/sim seeds
    385633 and 397166, and spec's model checker once expiries could lose answers."""
    s = leader()  # ISR [0], log end 2
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 0, request_id=5)))
    (write,) = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    s, _ = step(s, ev.ProduceReceived(7, TP, 1, 3, b"abc"))  # log end 5, member 1 at 2
    assert (rep(s).pending_isr, rep(s).high_watermark) == ((0, 1), 2)
    pending = s

    unknown = ev.PartitionStateWritten(TP, write.proposed, False, False, False, None, unknown=True)
    s, out = step(s, unknown)
    assert (rep(s).isr, rep(s).pending_isr, rep(s).high_watermark) == ((0,), (0, 1), 2)
    assert out == [write]  # the same conditional write again

    moved_on = write.proposed._replace(leader=1, leader_epoch=3, isr=(1,))
    for current in (moved_on, None):  # None: the znode is gone (the topic was deleted)
        refused = ev.PartitionStateWritten(TP, write.proposed, False, False, False, current)
        # the first attempt may have landed before the change: still bounded, no retry
        kept, out = step(s, refused)
        assert (rep(kept).pending_isr, rep(kept).high_watermark, out) == ((0, 1), 2, [])
        # a write refused at its only attempt was not applied: the pending ISR goes
        dropped, out = step(pending, refused)
        assert (rep(dropped).isr, rep(dropped).pending_isr, out) == ((0,), None, [])

    landed = ev.PartitionStateWritten(TP, write.proposed, False, False, False, write.proposed)
    s, out = step(s, landed)
    r = rep(s)
    assert (r.isr, r.pending_isr, r.zk_version) == ((0, 1), None, write.proposed.zk_version)
    assert fx.ZkNotifyIsrChange(TP) in out


def test_the_unknown_outcome_mark_ends_with_its_write() -> None:
    """A write refused at its only attempt was not applied, whatever earlier writes went
    through: the mark of an unknown outcome belongs to one write and ends when it lands or
    the leadership changes, so a later refused write drops its pending ISR."""
    other = LeaderIsr(1, 9, (1,), 1, 99)

    def expand(s: BrokerState, follower: int, epoch: int) -> tuple[BrokerState, LeaderIsr]:
        s, out = step(s, ev.MessageReceived(follower, FetchRequest(
            follower, TP, 2, epoch, 0, request_id=5)))
        (write,) = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
        return s, write.proposed

    def refused(s: BrokerState, proposed: LeaderIsr) -> ReplicaState:
        return rep(step(s, ev.PartitionStateWritten(TP, proposed, False, False, False,
                                                    other))[0])

    s, proposed = expand(leader(), 1, 2)
    assert refused(s, proposed).pending_isr is None  # the first write of a leader
    s, _ = step(s, ev.PartitionStateWritten(TP, proposed, False, False, False, None,
                                            unknown=True))
    landed, _ = step(s, ev.PartitionStateWritten(TP, proposed, False, True, False, None))
    landed, proposed2 = expand(landed, 2, 2)
    assert refused(landed, proposed2).pending_isr is None  # after the unknown one landed
    again, _ = step(s, lair(1, 3, (0, 1)))  # follower now, then leader again
    again, _ = step(again, lair(0, 4, (0,)))
    again, proposed3 = expand(again, 1, 4)
    assert refused(again, proposed3).pending_isr is None  # after a change of leadership


def test_a_leader_checkpoints_its_high_watermark_when_it_advances() -> None:
    """Kafka rule (replication-offset-checkpoint): every advance of the leader's HW is
    written to the checkpoint, so a restarted broker does not go back below what it
    exposed."""
    s = leader()  # ISR [0]: the HW follows the leader's own log end
    assert rep(s).high_watermark == 2
    s, out = step(s, ev.ProduceReceived(7, TP, 1, 3, b"abc"))
    assert rep(s).high_watermark == 5
    assert fx.CheckpointHighWatermark(TP, 5) in out


# ---------------------------------------------------------------------------------------
# producers


def test_producer_id_zero_is_an_idempotent_producer() -> None:
    """Kafka rule: producer ids are allocated from 0, so id 0 is an idempotent producer
    like any other: its retry of the last batch is recognised and not appended twice."""
    s = leader()
    produce = ev.ProduceReceived(7, TP, 1, 2, b"ab", producer_id=0, producer_epoch=0,
                                 base_sequence=0)
    s, out = step(s, produce)
    assert fx.ProduceReply(7, TP, Errors.NONE, 2) in out
    s, out = step(s, replace(produce, request_id=8))
    assert out == [fx.ProduceReply(8, TP, Errors.NONE, 2)]
    assert rep(s).log_end_offset == 4
    _, out = step(s, replace(produce, request_id=9, base_sequence=5))
    assert out == [fx.ProduceReply(9, TP, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]


def test_only_idempotent_producers_enter_the_producer_table() -> None:
    """Kafka rule (`ProducerStateManager`, `RecordBatch.hasProducerId`): a batch without a
    producer id (-1) leaves no producer state, on the leader that appends it and on a
    follower that replicates it; a follower does record producer 0's batches, so it
    recognises their retries once it leads."""
    s = leader()
    s, _ = step(s, ev.ProduceReceived(7, TP, 1, 2, b"ab"))
    assert rep(s).producers == ()
    s = fetching_follower()
    batches = (BatchInfo(0, 1, 1, producer_id=-1, base_sequence=0),
               BatchInfo(2, 2, 1, producer_id=0, producer_epoch=0, base_sequence=0),
               BatchInfo(3, 3, 1, producer_id=3, producer_epoch=0, base_sequence=-1))
    resp = FetchResponse(TP, Errors.NONE, 0, 1, 0, 0, end_offset=4,
                         batches=batches)
    s, _ = step(s, ev.MessageReceived(0, resp))
    assert rep(s).log_end_offset == 4
    assert [e.producer_id for e in rep(s).producers] == [0]


def test_a_stopped_replica_has_no_fetch_in_flight() -> None:
    """Kafka rule (StopReplica removes the partition from the fetcher threads): a stopped
    follower's fetch and its timeout are cancelled, and nothing counts as in flight."""
    s = fetching_follower()
    stop = StopReplicaRequest(9, 1, 1, (TP,), False)
    s, out = step(s, ev.MessageReceived(9, stop))
    assert fx.CancelTimer(FETCH) in out and fx.CancelTimer(FetchTimeoutTimer(TP)) in out
    r = rep(s)
    assert (r.role, r.fetch_state, r.fetch_in_flight) == (Role.NONE, FetchState.IDLE, False)
    # as a replica that never got a LeaderAndIsr (the epoch start is known to leaders only)
    fresh = rep(broker(1))
    fields = ("role", "leader", "isr", "pending_isr", "followers", "purgatory",
              "leader_epoch_start_offset", "fetch_state", "fetch_in_flight")
    assert [getattr(r, f) for f in fields] == [getattr(fresh, f) for f in fields]


def test_a_follower_of_no_leader_has_no_fetch_in_flight() -> None:
    """Kafka rule: a LeaderAndIsr naming no leader (-1) removes the partition from the
    fetcher: the fetch in flight is forgotten, its timeout and the next fetch cancelled."""
    s, out = step(fetching_follower(), lair(-1, 2, (0,)))
    assert out[-2:] == [fx.CancelTimer(FetchTimeoutTimer(TP)), fx.CancelTimer(FETCH)]
    r = rep(s)
    assert (r.leader, r.fetch_state, r.fetch_in_flight) == (-1, FetchState.IDLE, False)


def test_a_recovered_replica_keeps_the_epochs_of_the_records_it_holds() -> None:
    """Kafka rule (the leader-epoch checkpoint is truncated to the log on recovery): epochs
    starting below the recovered log end offset stay, later ones go; an empty log has none."""
    epochs = (EpochEntry(0, 0), EpochEntry(2, 1), EpochEntry(3, 4))
    assert rep(broker(1, leo=1, epochs=epochs)).epochs == (EpochEntry(0, 0),)
    assert rep(broker(1, leo=2, epochs=epochs)).epochs == epochs[:2]
    assert rep(broker(1, leo=0, epochs=epochs)).epochs == ()


def test_a_produce_timeout_answers_only_its_own_request() -> None:
    """Kafka rule (DelayedProduce expiry): an acks=all produce that times out is answered
    REQUEST_TIMED_OUT; the other produces waiting in purgatory keep waiting."""
    s = broker(0)
    s, _ = step(s, lair(0, 1, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(5, TP, -1, 1, b"a"))
    s, _ = step(s, ev.ProduceReceived(6, TP, -1, 1, b"b"))
    s, out = step(s, ev.TimerFired(ProduceTimeoutTimer(TP, 5)))
    assert out == [fx.ProduceReply(5, TP, Errors.REQUEST_TIMED_OUT, -1)]
    assert [p.request_id for p in rep(s).purgatory] == [6]
    assert step(s, ev.TimerFired(ProduceTimeoutTimer(TP, 5))) == (s, [])


def test_a_new_leader_lists_its_latest_offset_once_its_hw_reaches_its_epoch_start() -> None:
    """Kafka rule (KIP-207): ListOffsets for the latest offset is refused with
    OFFSET_NOT_AVAILABLE only while the new leader's HW is below its epoch start offset;
    at the epoch start it answers its HW."""
    s = leader()  # epoch 2 starts at offset 2, ISR [0]: HW 2 at once
    assert (rep(s).leader_epoch_start_offset, rep(s).high_watermark) == (2, 2)
    _, out = step(s, ev.ListOffsetsReceived(3, TP, -1, 2))
    assert out == [fx.ListOffsetsReply(3, TP, Errors.NONE, 2)]
    s, _ = step(broker(0, leo=2, epochs=(EpochEntry(0, 0),)), lair(0, 2, (0, 1)))
    assert rep(s).high_watermark == 0
    _, out = step(s, ev.ListOffsetsReceived(3, TP, -1, 2))
    assert out == [fx.ListOffsetsReply(3, TP, Errors.OFFSET_NOT_AVAILABLE, -1)]


def test_while_an_isr_expansion_is_in_flight_the_hw_waits_for_the_joining_replica() -> None:
    """Kafka rule (KIP-497's maximal ISR): from the moment the leader proposes adding a
    follower, the HW respects that follower too; a replica in neither ISR never holds it
    back."""
    s = leader()  # ISR [0], HW 2
    s, _ = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 0)))
    assert rep(s).pending_isr == (0, 1)
    s, _ = step(s, ev.ProduceReceived(7, TP, 1, 2, b"ab"))
    assert rep(s).high_watermark == 2  # follower 1 holds 2 records of 4
    s, _ = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 4, 2, 2)))
    assert rep(s).high_watermark == 4  # follower 2 (not in either ISR) is not waited for


def test_a_produce_with_no_records_never_reaches_the_log() -> None:
    """Kafka rule: an empty produce is refused before the log (a batch holds at least one
    record); the core treats one reaching it as a broken invariant."""
    r = rep(leader())
    with pytest.raises(InvariantBroken, match="no records"):
        rep_mod.on_produce(r, 1, 1, 0, b"", -1, -1, -1, 1000, CFG)
