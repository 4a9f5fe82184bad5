"""Replica paths pinned one Kafka rule per test: role changes, stopping, the fetcher's
timers and error handling, fencing of clients, ListOffsets. Driven through `core.step`."""

from __future__ import annotations

from dataclasses import replace

from core import effects as fx
from core import events as ev
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
from core.node import BrokerState, DurableReplica, init, recover, replica, step
from core.replica import ReplicaState
from core.rules.epochs import EpochEntry
from core.timers import FetchTimeoutTimer, FetchTimer, ProduceTimeoutTimer, ReplicaLagTimer
from core.types import NO_LEADER, Errors, FetchState, PartitionInfo, Role, TopicPartition

TP = TopicPartition("t", 0)
CFG = ProtocolConfig()
FETCH = FetchTimer(TP)
FETCH_TIMEOUT = FetchTimeoutTimer(TP)


def registered(broker_id: int, cfg: ProtocolConfig = CFG) -> BrokerState:
    s = init(broker_id, cfg)
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def lair(leader: int, epoch: int, isr: tuple[int, ...], controller_epoch: int = 1,
         replicas: tuple[int, ...] = (0, 1, 2)) -> ev.MessageReceived:
    info = PartitionInfo(TP, leader, epoch, isr, epoch, replicas)
    return ev.MessageReceived(9, LeaderAndIsrRequest(9, controller_epoch, 1, (info,)))


def rep(s: BrokerState) -> ReplicaState:
    r = replica(s, TP)
    assert r is not None
    return r


def sent(out: list[fx.Effect], kind: type) -> list[object]:
    return [e.message for e in out if isinstance(e, fx.Send) and isinstance(e.message, kind)]


def follower_with_log(cfg: ProtocolConfig = CFG, leo: int = 3, hw: int = 1,
                      epochs: tuple[EpochEntry, ...] = (EpochEntry(0, 0),)) -> BrokerState:
    durable = DurableReplica(TP, (0, 1, 2), 0, leo, epochs, hw)
    s = recover(1, cfg, (durable,))
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def fetching_follower(cfg: ProtocolConfig = CFG) -> BrokerState:
    """Broker 1 follows 0 in epoch 1, truncation done, a fetch from offset 3 in flight."""
    s, _ = step(follower_with_log(cfg), lair(0, 1, (0, 1)))
    s, _ = step(s, ev.TimerFired(FETCH))
    resp = OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 0, 0, 3)
    s, _ = step(s, ev.MessageReceived(0, resp))
    assert rep(s).fetch_state == FetchState.FETCHING
    s, out = step(s, ev.TimerFired(FETCH))
    assert sent(out, FetchRequest) == [FetchRequest(1, TP, 3, 1, 0)]
    return s


# ---------------------------------------------------------------------------------------
# role changes


def test_a_replica_without_leader_and_isr_is_neither_leader_nor_follower() -> None:
    """Kafka rule: after a restart a replica serves nobody until a LeaderAndIsr arrives:
    produce and consumer fetches get NOT_LEADER_OR_FOLLOWER and it does not fetch."""
    s = follower_with_log()
    assert rep(s).role == Role.NONE
    assert rep(s).leader_epoch_start_offset == -1  # known to leaders only
    _, out = step(s, ev.ProduceReceived(1, TP, 1, 1, b"x"))
    assert out == [fx.ProduceReply(1, TP, Errors.NOT_LEADER_OR_FOLLOWER, -1)]
    _, out = step(s, ev.ConsumerFetchReceived(2, TP, 0, -1))
    assert out[0].error == Errors.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
    _, out = step(s, ev.TimerFired(FETCH))
    assert out == []


def test_a_leader_that_becomes_follower_fails_purgatory_and_stops_its_lag_timers() -> None:
    """Kafka rule: a leader that loses leadership answers every waiting acks=all produce
    with NOT_LEADER_OR_FOLLOWER and stops tracking followers; it then truncates first."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(5, TP, -1, 1, b"x"))
    s, out = step(s, lair(1, 1, (1, 0)))
    assert out[:5] == [
        fx.CancelTimer(ProduceTimeoutTimer(TP, 5)),
        fx.ProduceReply(5, TP, Errors.NOT_LEADER_OR_FOLLOWER, -1),
        fx.CancelTimer(ReplicaLagTimer(TP, 1)),
        fx.CancelTimer(ReplicaLagTimer(TP, 2)),
        fx.CancelTimer(FETCH_TIMEOUT),
    ]
    assert out[-1] == fx.SetTimer(FETCH, 0)
    r = rep(s)
    assert (r.role, r.leader, r.fetch_state, r.purgatory, r.isr, r.followers) == (
        Role.FOLLOWER, 1, FetchState.TRUNCATING, (), (), ())
    assert r.leader_epoch_start_offset == -1


def test_a_leader_reelected_in_a_new_epoch_restarts_lag_timers_and_its_epoch() -> None:
    """Kafka rule: a new leader epoch starts at the leader's LEO (KAFKA-7415: recorded even
    without records) and every ISR follower counts as caught up again."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"xy"))
    s, out = step(s, lair(0, 1, (0, 1, 2)))
    assert out == [
        fx.CancelTimer(ReplicaLagTimer(TP, 1)),
        fx.CancelTimer(ReplicaLagTimer(TP, 2)),
        fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0), EpochEntry(1, 2))),
        fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms),
        fx.SetTimer(ReplicaLagTimer(TP, 2), CFG.replica_lag_time_max_ms),
    ]
    r = rep(s)
    assert r.leader_epoch_start_offset == 2 and r.followers == ((1, None), (2, None))


def test_a_follower_that_becomes_leader_stops_fetching() -> None:
    s, _ = step(registered(1), lair(0, 0, (0, 1)))
    s, out = step(s, lair(1, 1, (1,)))
    assert out[:2] == [fx.CancelTimer(FETCH), fx.CancelTimer(FETCH_TIMEOUT)]
    assert rep(s).role == Role.LEADER and not rep(s).fetch_in_flight


def test_a_follower_of_no_leader_does_not_fetch() -> None:
    """Kafka rule: LeaderAndIsr with leader -1 (offline partition): the replica stays a
    follower of nobody and its fetcher is removed."""
    s, _ = step(registered(1), lair(0, 0, (0, 1)))
    s, out = step(s, lair(NO_LEADER, 1, (0,)))
    assert out == [fx.CancelTimer(FETCH_TIMEOUT), fx.CancelTimer(FETCH)]
    assert rep(s).fetch_state == FetchState.IDLE and rep(s).leader == NO_LEADER


def test_an_old_or_foreign_leader_and_isr_is_ignored() -> None:
    """Kafka rule: only a strictly newer leader epoch is accepted, and only by a replica the
    request names."""
    s, _ = step(registered(0), lair(0, 3, (0,)))
    s2, out = step(s, lair(1, 3, (1,)))
    assert s2 == s and out == []
    s3, out = step(s, lair(1, 4, (1,), replicas=(1, 2)))
    assert rep(s3) == rep(s) and out == []


def test_before_kip101_a_new_follower_truncates_to_its_high_watermark_at_once() -> None:
    """The historic rule (bug switch truncate_to_hw, KAFKA-1211): truncate to the HW, then
    fetch; the fixed protocol truncates only after OffsetsForLeaderEpoch."""
    bug = CFG.with_bug("truncate_to_hw")
    s, out = step(follower_with_log(bug), lair(0, 1, (0, 1)))
    assert fx.TruncateTo(TP, 1) in out and rep(s).log_end_offset == 1
    assert rep(s).fetch_state == FetchState.FETCHING
    s, out = step(follower_with_log(CFG.with_bug("kip320_first_try")), lair(0, 1, (0, 1)))
    assert not any(isinstance(e, fx.TruncateTo) for e in out)
    assert rep(s).fetch_state == FetchState.FETCHING and rep(s).log_end_offset == 3
    s, out = step(follower_with_log(), lair(0, 1, (0, 1)))
    assert not any(isinstance(e, fx.TruncateTo) for e in out)
    assert rep(s).fetch_state == FetchState.TRUNCATING


def test_a_truncating_follower_clamps_its_high_watermark_and_checkpoints() -> None:
    """Kafka rule: truncation below the HW lowers the HW to the truncation offset, drops the
    epochs that started at or after it, and checkpoints both."""
    epochs = (EpochEntry(0, 0), EpochEntry(2, 2))
    s = follower_with_log(leo=4, hw=3, epochs=epochs)
    s, _ = step(s, lair(0, 3, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    assert sent(out, OffsetForLeaderEpochRequest) == [OffsetForLeaderEpochRequest(1, TP, 3, 2)]
    # the leader knows epoch 2 as ending at 1 (it never had epoch 2's records)
    resp = OffsetForLeaderEpochResponse(TP, Errors.NONE, 3, 2, 0, 1)
    s, out = step(s, ev.MessageReceived(0, resp))
    assert out == [
        fx.CancelTimer(FETCH_TIMEOUT),
        fx.TruncateTo(TP, 1),
        fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0),)),
        fx.CheckpointHighWatermark(TP, 1),
        fx.SetTimer(FETCH, 0),
    ]
    r = rep(s)
    assert (r.log_end_offset, r.high_watermark, r.fetch_state) == (1, 1, FetchState.FETCHING)


def test_a_follower_with_no_epoch_truncates_to_its_high_watermark() -> None:
    """Kafka rule: a follower that has no leader epoch cached cannot ask OffsetsForLeaderEpoch
    and truncates to its high watermark, then fetches."""
    s = follower_with_log(leo=3, hw=2, epochs=())
    s, _ = step(s, lair(0, 1, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    assert out[0] == fx.TruncateTo(TP, 2)
    assert sent(out, FetchRequest) == [FetchRequest(1, TP, 2, 1, -1)]
    assert rep(s).fetch_in_flight


# ---------------------------------------------------------------------------------------
# the fetcher


def test_a_fetch_with_records_is_followed_by_another_at_once_an_empty_one_waits() -> None:
    """Kafka rule: the replica fetcher fetches again at once after records came, and after
    an empty fetch waits replica.fetch.wait.max.ms (the leader's long poll)."""
    s = fetching_follower()
    full = FetchResponse(TP, Errors.NONE, 3, 1, 3, 0, 4, batches=(BatchInfo(3, 3, 1),),
                         records=b"r")
    s2, out = step(s, ev.MessageReceived(0, full))
    assert out[-1] == fx.SetTimer(FETCH, 0)
    assert fx.AppendAsFollower(TP, full.batches, b"r") in out
    assert fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0), EpochEntry(1, 3))) in out
    assert fx.CheckpointHighWatermark(TP, 3) in out
    assert (rep(s2).log_end_offset, rep(s2).high_watermark) == (4, 3)
    empty = FetchResponse(TP, Errors.NONE, 3, 1, 1, 0, 3)
    s3, out = step(s, ev.MessageReceived(0, empty))
    assert out == [fx.CancelTimer(FETCH_TIMEOUT), fx.SetTimer(FETCH, CFG.replica_fetch_wait_max_ms)]
    assert not rep(s3).fetch_in_flight


def test_a_followers_high_watermark_is_the_leaders_clamped_to_its_own_log() -> None:
    """Kafka rule: a follower's HW is min(leader's HW, own LEO), and at least its log start."""
    s = fetching_follower()
    resp = FetchResponse(TP, Errors.NONE, 3, 1, 9, 0, 3)
    s2, _ = step(s, ev.MessageReceived(0, resp))
    assert rep(s2).high_watermark == 3


def test_fetch_errors_back_off_and_out_of_range_truncates_again() -> None:
    """Kafka rule: OFFSET_OUT_OF_RANGE (or a diverging epoch) sends the fetcher back to
    truncation at once; any other error retries after replica.fetch.backoff.ms; a response
    to another offset is stale."""
    s = fetching_follower()
    oor = FetchResponse(TP, Errors.OFFSET_OUT_OF_RANGE, 3, 1, 0, 0, 3)
    s2, out = step(s, ev.MessageReceived(0, oor))
    assert out == [fx.CancelTimer(FETCH_TIMEOUT), fx.SetTimer(FETCH, 0)]
    assert rep(s2).fetch_state == FetchState.TRUNCATING
    div = FetchResponse(TP, Errors.NONE, 3, 1, 0, 0, 3, diverging=True)
    s2, out = step(s, ev.MessageReceived(0, div))
    assert rep(s2).fetch_state == FetchState.TRUNCATING
    backoff = [fx.CancelTimer(FETCH_TIMEOUT), fx.SetTimer(FETCH, CFG.replica_fetch_backoff_ms)]
    other = FetchResponse(TP, Errors.NOT_LEADER_OR_FOLLOWER, 3, 1, 0, 0, 3)
    s2, out = step(s, ev.MessageReceived(0, other))
    assert out == backoff and rep(s2).fetch_state == FetchState.FETCHING
    stale = FetchResponse(TP, Errors.NONE, 2, 1, 0, 0, 3)
    s2, out = step(s, ev.MessageReceived(0, stale))
    assert out == backoff and rep(s2).log_end_offset == 3
    # an answer for another leader epoch, or when none is in flight, is ignored
    wrong = FetchResponse(TP, Errors.NONE, 3, 0, 0, 0, 3)
    s2, out = step(s, ev.MessageReceived(0, wrong))
    assert (s2, out) == (s, [])


def test_an_unanswered_fetch_is_retried_after_the_backoff() -> None:
    """Kafka rule: a fetch with no answer within request.timeout.ms is abandoned and retried
    after replica.fetch.backoff.ms."""
    s = fetching_follower()
    s2, out = step(s, ev.TimerFired(FETCH_TIMEOUT))
    assert out == [fx.SetTimer(FETCH, CFG.replica_fetch_backoff_ms)]
    assert not rep(s2).fetch_in_flight
    s3, out = step(s2, ev.TimerFired(FETCH_TIMEOUT))
    assert (s3, out) == (s2, [])
    # with a request in flight the fetch timer does not send another
    s4, out = step(s, ev.TimerFired(FETCH))
    assert (s4, out) == (s, [])


def test_an_offset_for_leader_epoch_error_retries_after_the_backoff() -> None:
    s, _ = step(follower_with_log(), lair(0, 1, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    assert out[-1] == fx.SetTimer(FETCH_TIMEOUT, CFG.request_timeout_ms)
    err = OffsetForLeaderEpochResponse(TP, Errors.FENCED_LEADER_EPOCH, 1, 0, -1, -1)
    s2, out = step(s, ev.MessageReceived(0, err))
    assert out == [fx.CancelTimer(FETCH_TIMEOUT), fx.SetTimer(FETCH, CFG.replica_fetch_backoff_ms)]
    assert rep(s2).fetch_state == FetchState.TRUNCATING and rep(s2).log_end_offset == 3
    # an answer about another epoch than the one asked is stale
    other = OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 5, 0, 0)
    assert step(s, ev.MessageReceived(0, other)) == (s, [])


def test_kip320_first_try_leader_reports_a_diverging_fetch() -> None:
    """The historic rule (bug switch kip320_first_try): the leader compares the follower's
    last fetched epoch with its own epoch at fetch_offset - 1 and answers `diverging`."""
    cfg = CFG.with_bug("kip320_first_try")
    s, _ = step(registered(0, cfg), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    s, _ = step(s, lair(0, 2, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(2, TP, 1, 1, b"c"))  # epochs (0,0), (2,2)
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 1)))
    assert sent(out, FetchResponse)[0].diverging  # type: ignore[attr-defined]
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 0)))
    assert not sent(out, FetchResponse)[0].diverging  # type: ignore[attr-defined]
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 3, 2, 2)))
    assert not sent(out, FetchResponse)[0].diverging  # type: ignore[attr-defined]
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 3, 2, 0)))
    r = sent(out, FetchResponse)[0]
    assert r.diverging and r.end_offset == 3  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# the leader


def test_only_a_caught_up_fetch_rearms_the_followers_lag_timer() -> None:
    """Kafka rule: a follower's lastCaughtUpTime moves only when it fetches from the leader's
    log end offset; a fetch from below does not keep it in the ISR."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 1, 0, 0)))
    assert not any(isinstance(e, fx.SetTimer) for e in out)
    _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 0, 0)))
    assert fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms) in out


def test_a_fetch_outside_the_log_is_offset_out_of_range() -> None:
    """Kafka rule: a fetch beyond the leader's LEO or below its log start offset gets
    OFFSET_OUT_OF_RANGE; a fetch from a broker that holds no replica gets
    NOT_LEADER_OR_FOLLOWER."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    for offset, error in ((3, Errors.OFFSET_OUT_OF_RANGE), (2, Errors.NONE),
                          (0, Errors.NONE), (-1, Errors.OFFSET_OUT_OF_RANGE)):
        _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, offset, 0, 0)))
        resp = sent(out, FetchResponse)[0]
        assert resp.error == error, offset  # type: ignore[attr-defined]
    _, out = step(s, ev.MessageReceived(5, FetchRequest(5, TP, 0, 0, 0)))
    assert sent(out, FetchResponse)[0].error == Errors.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]


def test_while_an_isr_expansion_is_in_flight_the_hw_waits_for_the_joining_follower() -> None:
    """Kafka rule (KIP-497's maximal ISR): until the expansion is written, the HW counts the
    joining follower too; the historic bug hw_over_committed_isr counts only the committed
    ISR."""
    for cfg, hw in ((CFG, 0), (CFG.with_bug("hw_over_committed_isr"), 1)):
        s, _ = step(registered(0, cfg), lair(0, 0, (0,), replicas=(0, 1)))
        s, _out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, -1)))
        assert rep(s).pending_isr == (0, 1)
        s, _ = step(s, ev.ProduceReceived(1, TP, 1, 1, b"a"))
        assert rep(s).high_watermark == hw


def test_a_lag_timer_while_an_isr_write_is_in_flight_looks_again_later() -> None:
    """Kafka rule: the ISR expiration task skips a partition with an ISR update in flight and
    looks again after replica.lag.time.max.ms / 2."""
    s, _ = step(registered(0), lair(0, 0, (0, 1, 2)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 1, b"a"))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 2)))
    assert rep(s).pending_isr == (0, 1)
    _s2, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    assert out == [fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms // 2)]
    # a follower no longer in the ISR, or a lag timer at a follower, does nothing
    assert step(s, ev.TimerFired(ReplicaLagTimer(TP, 7)))[1] == []
    f, _ = step(registered(1), lair(0, 0, (0, 1)))
    assert step(f, ev.TimerFired(ReplicaLagTimer(TP, 2)))[1] == []


def test_consumers_read_only_below_the_high_watermark_of_the_current_epoch() -> None:
    """Kafka rule: a consumer fetch is answered by the leader only, fenced by the leader
    epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), OFFSET_OUT_OF_RANGE outside
    [log start, LEO], and returns records up to the high watermark only."""
    s, _ = step(registered(0), lair(0, 2, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 3, b"abc"))
    s, _ = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 2, 2)))  # HW 2
    assert rep(s).high_watermark == 2

    def fetch(offset: int, epoch: int = -1) -> fx.ConsumerFetchReply:
        _, out = step(s, ev.ConsumerFetchReceived(7, TP, offset, epoch))
        (reply,) = out
        assert isinstance(reply, fx.ConsumerFetchReply)
        return reply

    assert fetch(0) == fx.ConsumerFetchReply(7, TP, Errors.NONE, 2, 0, 2)
    assert fetch(2, 2) == fx.ConsumerFetchReply(7, TP, Errors.NONE, 2, 2, 2)
    assert fetch(3) == fx.ConsumerFetchReply(7, TP, Errors.NONE, 2, 3, 3)
    assert fetch(4).error == Errors.OFFSET_OUT_OF_RANGE and fetch(4).end_offset == 4
    assert fetch(-1).error == Errors.OFFSET_OUT_OF_RANGE
    assert fetch(0, 1).error == Errors.FENCED_LEADER_EPOCH
    assert fetch(0, 3).error == Errors.UNKNOWN_LEADER_EPOCH
    _, out = step(s, ev.ConsumerFetchReceived(8, TopicPartition("u", 0), 5, -1))
    assert out == [fx.ConsumerFetchReply(8, TopicPartition("u", 0),
                                         Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, 5, 5)]


def test_list_offsets_earliest_latest_and_kip207() -> None:
    """Kafka rule: ListOffsets -2 is the log start offset, -1 the high watermark; a new
    leader whose HW is still below its epoch's start offset answers OFFSET_NOT_AVAILABLE
    (KIP-207) so the latest offset never goes backwards."""
    s, _ = step(registered(0), lair(0, 0, (0,)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    assert rep(s).high_watermark == 2

    def offsets(s: BrokerState, ts: int, epoch: int = -1) -> fx.ListOffsetsReply:
        _, out = step(s, ev.ListOffsetsReceived(3, TP, ts, epoch))
        (reply,) = out
        assert isinstance(reply, fx.ListOffsetsReply)
        return reply

    assert offsets(s, -2) == fx.ListOffsetsReply(3, TP, Errors.NONE, 0)
    assert offsets(s, -1) == fx.ListOffsetsReply(3, TP, Errors.NONE, 2)
    assert offsets(s, -1, 1).error == Errors.UNKNOWN_LEADER_EPOCH
    # a new leader at LEO 3 whose HW (from its follower days) is 1
    f = follower_with_log(leo=3, hw=1)
    f, _ = step(f, lair(1, 1, (1, 0)))
    assert rep(f).leader_epoch_start_offset == 3 and rep(f).high_watermark == 1
    assert offsets(f, -1) == fx.ListOffsetsReply(3, TP, Errors.OFFSET_NOT_AVAILABLE, -1)
    assert offsets(f, -2) == fx.ListOffsetsReply(3, TP, Errors.NONE, 0)
    f2 = follower_with_log(CFG.with_bug("offsets_before_epoch_start"), leo=3, hw=1)
    f2, _ = step(f2, lair(1, 1, (1, 0)))
    assert offsets(f2, -1) == fx.ListOffsetsReply(3, TP, Errors.NONE, 1)
    _, out = step(s, ev.ListOffsetsReceived(4, TopicPartition("u", 0), -1, -1))
    assert out == [fx.ListOffsetsReply(4, TopicPartition("u", 0),
                                       Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_produce_to_an_unknown_partition() -> None:
    """Kafka rule: UNKNOWN_TOPIC_OR_PARTITION, and acks=0 gets no answer at all."""
    s = registered(0)
    u = TopicPartition("u", 0)
    assert step(s, ev.ProduceReceived(1, u, 1, 1, b"a"))[1] == [
        fx.ProduceReply(1, u, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert step(s, ev.ProduceReceived(1, u, 0, 1, b"a"))[1] == []
    assert step(s, ev.ProduceReceived(1, u, -1, 1, b"a"))[1] == [
        fx.ProduceReply(1, u, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_acks_zero_and_one_are_answered_at_append_acks_all_after_the_hw() -> None:
    """Kafka rule: acks=0 gets no answer, acks=1 is answered once the leader appended,
    acks=all waits in purgatory for the HW (and epochs are checkpointed on a new epoch)."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, out = step(s, ev.ProduceReceived(1, TP, 0, 1, b"a"))
    assert out == [fx.AppendAsLeader(TP, 0, 1, 0, b"a")]
    s, out = step(s, ev.ProduceReceived(2, TP, 1, 2, b"bc"))
    assert out == [fx.AppendAsLeader(TP, 1, 2, 0, b"bc"), fx.ProduceReply(2, TP, Errors.NONE, 1)]
    s, out = step(s, ev.ProduceReceived(3, TP, -1, 1, b"d", timeout_ms=99))
    assert out == [fx.AppendAsLeader(TP, 3, 1, 0, b"d"),
                   fx.SetTimer(ProduceTimeoutTimer(TP, 3), 99)]
    assert rep(s).log_end_offset == 4


# ---------------------------------------------------------------------------------------
# StopReplica


def test_stop_replica_stops_a_leader_or_follower_and_may_delete_it() -> None:
    """Kafka rule: StopReplica ends the replica's role (a leader fails its purgatory, a
    follower stops fetching); with delete=true the log is deleted too."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(5, TP, -1, 1, b"x"))
    stop = StopReplicaRequest(9, 2, 1, (TP, TopicPartition("u", 0)), False)
    s2, out = step(s, ev.MessageReceived(9, stop))
    assert fx.ProduceReply(5, TP, Errors.NOT_LEADER_OR_FOLLOWER, -1) in out
    r = rep(s2)
    assert (r.role, r.leader, r.isr, r.purgatory, r.followers) == (Role.NONE, NO_LEADER, (),
                                                                   (), ())
    assert r.log_end_offset == 1 and s2.controller_epoch == 2
    s3, out = step(s, ev.MessageReceived(9, replace(stop, delete=True)))
    assert replica(s3, TP) is None and out[-1] == fx.DeletePartition(TP)
    f, _ = step(registered(1), lair(0, 0, (0, 1)))
    f2, out = step(f, ev.MessageReceived(9, stop))
    assert out == [fx.CancelTimer(FETCH), fx.CancelTimer(FETCH_TIMEOUT)]
    assert rep(f2).fetch_state == FetchState.IDLE
    # an older controller's StopReplica is ignored
    s4, _ = step(s, lair(0, 1, (0, 1), controller_epoch=3))
    assert step(s4, ev.MessageReceived(9, stop)) == (s4, [])


def test_the_leader_answers_offsets_for_leader_epoch_fenced_by_its_epoch() -> None:
    """Kafka rule (KIP-101, KIP-320): the leader answers OffsetsForLeaderEpoch with the end
    offset of the asked epoch, only to a requester in its current leader epoch; the historic
    bug unfenced_truncation answers from any epoch."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    s, _ = step(s, lair(0, 1, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(2, TP, 1, 1, b"c"))  # epochs (0, 0), (1, 2); LEO 3
    _, out = step(s, ev.MessageReceived(1, OffsetForLeaderEpochRequest(1, TP, 1, 0)))
    assert out == [fx.Send(1, OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 0, 0, 2))]
    _, out = step(s, ev.MessageReceived(1, OffsetForLeaderEpochRequest(1, TP, 1, 1)))
    assert out == [fx.Send(1, OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 1, 1, 3))]
    _, out = step(s, ev.MessageReceived(1, OffsetForLeaderEpochRequest(1, TP, 0, 0)))
    assert out == [fx.Send(1, OffsetForLeaderEpochResponse(TP, Errors.FENCED_LEADER_EPOCH, 0,
                                                           0, -1, -1))]
    bug = CFG.with_bug("unfenced_truncation")
    b, _ = step(registered(0, bug), lair(0, 0, (0, 1)))
    b, _ = step(b, ev.ProduceReceived(1, TP, 1, 2, b"ab"))
    b, _ = step(b, lair(0, 1, (0, 1)))
    _, out = step(b, ev.MessageReceived(1, OffsetForLeaderEpochRequest(1, TP, 0, 0)))
    assert out == [fx.Send(1, OffsetForLeaderEpochResponse(TP, Errors.NONE, 0, 0, 0, 2))]
    # a follower never answers, bug or not
    f, _ = step(registered(1, bug), lair(0, 0, (0, 1)))
    _, out = step(f, ev.MessageReceived(2, OffsetForLeaderEpochRequest(2, TP, 0, 0)))
    assert out[0].message.error == Errors.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]


def test_a_kip101_follower_ignores_the_leaders_epoch_in_the_answer() -> None:
    """The historic rule (bug switch kip101_only, before KIP-279): the follower truncates to
    the leader's end offset without checking which epoch the leader meant."""
    epochs = (EpochEntry(0, 0), EpochEntry(2, 2))
    for cfg, offset in ((CFG, 2), (CFG.with_bug("kip101_only"), 3)):
        s = follower_with_log(cfg, leo=4, hw=0, epochs=epochs)
        s, _ = step(s, lair(0, 3, (0, 1)))
        s, _ = step(s, ev.TimerFired(FETCH))
        # the leader knows epoch 1 (not 2), ending at 3
        resp = OffsetForLeaderEpochResponse(TP, Errors.NONE, 3, 2, 1, 3)
        s, _ = step(s, ev.MessageReceived(0, resp))
        assert rep(s).log_end_offset == offset, cfg.bugs.enabled()


def test_before_kafka_7415_the_first_append_of_an_epoch_records_it() -> None:
    """The historic rule (bug switch kip101_only): a new leader records its epoch in the
    cache at its first append, not when it becomes leader."""
    bug = CFG.with_bug("kip101_only")
    s, out = step(registered(0, bug), lair(0, 0, (0,)))
    assert not any(isinstance(e, fx.CheckpointLeaderEpochs) for e in out)
    s, out = step(s, ev.ProduceReceived(1, TP, 1, 1, b"a"))
    assert fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0),)) in out
    s, out = step(s, ev.ProduceReceived(2, TP, 1, 1, b"b"))
    assert not any(isinstance(e, fx.CheckpointLeaderEpochs) for e in out)


def test_every_fetch_request_arms_the_request_timeout() -> None:
    """Kafka rule: a replica fetch (and an OffsetsForLeaderEpoch) not answered within
    request.timeout.ms is abandoned, so each arms that timeout when sent."""
    s, _ = step(follower_with_log(), lair(0, 1, (0, 1)))
    s, out = step(s, ev.TimerFired(FETCH))
    assert out == [fx.Send(0, OffsetForLeaderEpochRequest(1, TP, 1, 0)),
                   fx.SetTimer(FETCH_TIMEOUT, CFG.request_timeout_ms)]
    resp = OffsetForLeaderEpochResponse(TP, Errors.NONE, 1, 0, 0, 3)
    s, _ = step(s, ev.MessageReceived(0, resp))
    s, out = step(s, ev.TimerFired(FETCH))
    assert out == [fx.Send(0, FetchRequest(1, TP, 3, 1, 0)),
                   fx.SetTimer(FETCH_TIMEOUT, CFG.request_timeout_ms)]


def test_a_completed_acks_all_request_leaves_purgatory_and_its_timeout_is_cancelled() -> None:
    """Kafka rule (DelayedProduce): an acks=all request completes once: when the HW covers
    it, it is answered and its timeout is cancelled; a later timeout finds nothing."""
    s, _ = step(registered(0), lair(0, 0, (0, 1)))
    s, _ = step(s, ev.ProduceReceived(4, TP, -1, 1, b"a", timeout_ms=50))
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 1, 0, 0)))
    timeout = ProduceTimeoutTimer(TP, 4)
    k = out.index(fx.ProduceReply(4, TP, Errors.NONE, 0))
    assert out[k - 1] == fx.CancelTimer(timeout)
    assert rep(s).purgatory == ()
    assert step(s, ev.TimerFired(timeout))[1] == []


def test_a_new_epochs_first_records_are_appended_before_its_checkpoint() -> None:
    """Effects apply in order (DESIGN rule 2): the leader appends, then checkpoints the epoch
    cache that names the appended offset, so the checkpoint never runs ahead of the log."""
    bug = CFG.with_bug("kip101_only")  # the epoch is recorded at the first append
    s, _ = step(registered(0, bug), lair(0, 0, (0,)))
    _, out = step(s, ev.ProduceReceived(1, TP, 1, 1, b"a"))
    assert out[:2] == [fx.AppendAsLeader(TP, 0, 1, 0, b"a"),
                       fx.CheckpointLeaderEpochs(TP, (EpochEntry(0, 0),))]


def test_truncation_below_offset_zero_is_a_local_impossibility() -> None:
    """DESIGN rule 6: a local impossibility is a bug, raised, never carried on."""
    import pytest

    from core import replica as rep_mod
    from core.types import InvariantBroken

    r = rep(follower_with_log())
    with pytest.raises(InvariantBroken, match="below offset 0"):
        rep_mod._truncate(r, -1)
    assert rep_mod._truncate(r, 0)[0].log_end_offset == 0


def test_a_follower_records_each_replicated_batch_with_its_record_count() -> None:
    """Kafka rule: the follower's producer state holds each batch's first and last sequence
    (last = first + record count - 1), so after a failover a retry of exactly that batch is
    recognised and a different one is not."""
    s = fetching_follower()
    batch = BatchInfo(3, 5, 1, 42, 0, 7)  # offsets 3..5: sequences 7..9
    resp = FetchResponse(TP, Errors.NONE, 3, 1, 3, 0, 6, batches=(batch,), records=b"xyz")
    s, _ = step(s, ev.MessageReceived(0, resp))
    (entry,) = rep(s).producers
    assert (entry.batches[0].first_sequence, entry.batches[0].last_sequence) == (7, 9)
    s, _ = step(s, lair(1, 2, (1,)))
    _, out = step(s, ev.ProduceReceived(9, TP, 1, 3, b"xyz", 42, 0, 7))
    assert out == [fx.ProduceReply(9, TP, Errors.NONE, 3)]
    _, out = step(s, ev.ProduceReceived(9, TP, 1, 1, b"w", 42, 0, 10))
    assert fx.ProduceReply(9, TP, Errors.NONE, 6) in out


def test_a_retried_lag_check_never_fires_at_once() -> None:
    """Kafka rule: the ISR expiration task looks again after replica.lag.time.max.ms / 2,
    and at least 1 ms later (a zero delay would spin)."""
    from dataclasses import replace as dc_replace

    cfg = dc_replace(CFG, replica_lag_time_max_ms=1)
    s, _ = step(registered(0, cfg), lair(0, 0, (0, 1, 2)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 1, b"a"))
    s, _ = step(s, ev.TimerFired(ReplicaLagTimer(TP, 2)))
    _, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    assert out == [fx.SetTimer(ReplicaLagTimer(TP, 1), 1)]
