"""The replica and controller machines, driven event by event through `core.step`."""

from __future__ import annotations

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
)
from core.node import BrokerState, DurableReplica, init, recover, replica, step
from core.rules.epochs import EpochEntry
from core.timers import FetchTimer, ProduceTimeoutTimer, ReplicaLagTimer
from core.types import (
    NO_LEADER,
    Errors,
    FetchState,
    LeaderIsr,
    LiveBroker,
    PartitionInfo,
    Role,
    TopicPartition,
)

TP = TopicPartition("t", 0)
CFG = ProtocolConfig()


def registered(broker_id: int, cfg: ProtocolConfig = CFG) -> BrokerState:
    s = init(broker_id, cfg)
    s, out = step(s, ev.Started())
    assert out == [fx.ZkRegisterBroker(broker_id)]
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def leader_and_isr(leader: int, epoch: int, isr: tuple[int, ...], controller_epoch: int = 1,
                   broker_epoch: int = 1, zk_version: int = 0) -> ev.MessageReceived:
    info = PartitionInfo(TP, leader, epoch, isr, zk_version, (0, 1, 2))
    return ev.MessageReceived(9, LeaderAndIsrRequest(9, controller_epoch, broker_epoch, (info,)))


def sends(out: list[fx.Effect], kind: type) -> list[fx.Send]:
    return [e for e in out if isinstance(e, fx.Send) and isinstance(e.message, kind)]


def test_leader_waits_for_isr_before_acking_acks_all() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1)))
    r = replica(s, TP)
    assert r is not None and r.role == Role.LEADER and r.epochs == (EpochEntry(0, 0),)
    s, out = step(s, ev.ProduceReceived(7, TP, -1, 2, b"x"))
    assert fx.AppendAsLeader(TP, 0, 2, 0, b"x") in out
    assert not any(isinstance(e, fx.ProduceReply) for e in out)  # in purgatory
    # follower 1 fetches from offset 0: learns nothing yet, the HW stays at 0
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, -1)))
    resp = sends(out, FetchResponse)[0].message
    assert isinstance(resp, FetchResponse) and resp.end_offset == 2 and resp.high_watermark == 0
    # next fetch from offset 2: follower caught up, HW -> 2, the produce is answered
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 0, 0)))
    assert fx.ProduceReply(7, TP, Errors.NONE, 0) in out
    assert replica(s, TP).high_watermark == 2  # type: ignore[union-attr]


def test_not_enough_replicas_before_append() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0,)))
    s, out = step(s, ev.ProduceReceived(1, TP, -1, 1, b"x"))
    assert out == [fx.ProduceReply(1, TP, Errors.NOT_ENOUGH_REPLICAS, -1)]
    s, out = step(s, ev.ProduceReceived(2, TP, 1, 1, b"x"))  # acks=1 is allowed
    assert fx.ProduceReply(2, TP, Errors.NONE, 0) in out
    s, out = step(s, ev.ProduceReceived(3, TP, 0, 1, b"x"))  # acks=0: no reply at all
    assert not any(isinstance(e, fx.ProduceReply) for e in out)


def test_fetch_is_fenced_by_leader_epoch() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 3, (0, 1)))
    for epoch, error in ((2, Errors.FENCED_LEADER_EPOCH), (4, Errors.UNKNOWN_LEADER_EPOCH),
                         (3, Errors.NONE)):
        _, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, epoch, -1)))
        msg = sends(out, FetchResponse)[0].message
        assert isinstance(msg, FetchResponse) and msg.error == error
    s1 = registered(1)
    s1, _ = step(s1, leader_and_isr(0, 3, (0, 1)))
    _, out = step(s1, ev.MessageReceived(2, FetchRequest(2, TP, 0, 3, -1)))
    msg = sends(out, FetchResponse)[0].message
    assert isinstance(msg, FetchResponse) and msg.error == Errors.NOT_LEADER_OR_FOLLOWER


def test_stale_controller_and_stale_epochs_are_ignored() -> None:
    s, _ = step(registered(1), leader_and_isr(0, 2, (0, 1), controller_epoch=5))
    before = replica(s, TP)
    s2, out = step(s, leader_and_isr(2, 9, (2,), controller_epoch=4))  # older controller
    assert out == [] and replica(s2, TP) == before
    s3, out = step(s, leader_and_isr(2, 2, (2,), controller_epoch=5))  # same leader epoch
    assert out == [] and replica(s3, TP) == before
    s4, _ = step(s, leader_and_isr(2, 3, (2,), controller_epoch=5, broker_epoch=0))  # old me
    assert replica(s4, TP) == before


def test_follower_truncates_to_the_leaders_epoch_end() -> None:
    durable = DurableReplica(TP, (0, 1, 2), 0, 3, (EpochEntry(0, 0), EpochEntry(1, 2)), 1)
    s = recover(1, CFG, (durable,))
    assert replica(s, TP).leader_epoch == -1  # type: ignore[union-attr]
    s, _ = step(s, ev.Started())
    s, _ = step(s, ev.BrokerRegistered(2))
    s, out = step(s, leader_and_isr(0, 2, (0, 1), broker_epoch=2))
    r = replica(s, TP)
    assert r is not None and r.role == Role.FOLLOWER and r.fetch_state == FetchState.TRUNCATING
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    req = sends(out, OffsetForLeaderEpochRequest)[0].message
    assert isinstance(req, OffsetForLeaderEpochRequest) and req.leader_epoch == 1
    # the leader never had epoch 1: its largest epoch <= 1 is 0, which ended at offset 2
    resp = OffsetForLeaderEpochResponse(TP, Errors.NONE, 2, 1, 0, 2)
    s, out = step(s, ev.MessageReceived(0, resp))
    assert fx.TruncateTo(TP, 2) in out
    r = replica(s, TP)
    assert r is not None and r.log_end_offset == 2 and r.epochs == (EpochEntry(0, 0),)
    assert r.fetch_state == FetchState.FETCHING
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    fetch = sends(out, FetchRequest)[0].message
    assert isinstance(fetch, FetchRequest) and fetch.fetch_offset == 2
    batches = (BatchInfo(2, 4, 2),)
    s, out = step(s, ev.MessageReceived(0, FetchResponse(TP, Errors.NONE, 2, 2, 4, 0, 5,
                                                         batches=batches, records=b"r")))
    assert fx.AppendAsFollower(TP, batches, b"r") in out
    r = replica(s, TP)
    assert r is not None and r.log_end_offset == 5 and r.high_watermark == 4
    assert r.epochs == (EpochEntry(0, 0), EpochEntry(2, 2))


def test_isr_shrinks_after_lag_and_expands_when_caught_up() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1, 2)))
    s, _ = step(s, ev.ProduceReceived(1, TP, 1, 1, b"x"))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 2)))
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert writes and writes[0].proposed.isr == (0, 1) and writes[0].expected_zk_version == 0
    s, out = step(s, ev.PartitionStateWritten(TP, writes[0].proposed, False, True, False, None))
    assert replica(s, TP).isr == (0, 1)  # type: ignore[union-attr]
    assert fx.ZkNotifyIsrChange(TP) in out
    # broker 2 catches up: it rejoins through another conditional write
    s, out = step(s, ev.MessageReceived(2, FetchRequest(2, TP, 1, 0, 0)))
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert writes and writes[0].proposed.isr == (0, 1, 2) and writes[0].expected_zk_version == 1
    # a failed write (someone changed the znode) leaves the ISR as it was
    s, _ = step(s, ev.PartitionStateWritten(TP, writes[0].proposed, False, False, False, None))
    assert replica(s, TP).isr == (0, 1)  # type: ignore[union-attr]


def test_a_caught_up_follower_is_never_shrunk() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1)))
    s, _ = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, -1)))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    assert out == [fx.SetTimer(ReplicaLagTimer(TP, 1), CFG.replica_lag_time_max_ms)]


def test_idempotent_producer_dedupes_retries() -> None:
    s, _ = step(registered(0), leader_and_isr(0, 0, (0,)))
    s, out = step(s, ev.ProduceReceived(1, TP, 1, 2, b"a", 42, 0, 0))
    assert fx.ProduceReply(1, TP, Errors.NONE, 0) in out
    s, out = step(s, ev.ProduceReceived(2, TP, 1, 2, b"a", 42, 0, 0))  # retry
    assert out == [fx.ProduceReply(2, TP, Errors.NONE, 0)]
    s, out = step(s, ev.ProduceReceived(3, TP, 1, 1, b"b", 42, 0, 5))  # gap
    assert out == [fx.ProduceReply(3, TP, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]
    s, out = step(s, ev.ProduceReceived(4, TP, 1, 1, b"c", 7, 0, 3))  # unknown producer
    assert out == [fx.ProduceReply(4, TP, Errors.UNKNOWN_PRODUCER_ID, -1)]
    assert replica(s, TP).log_end_offset == 2  # type: ignore[union-attr]


def test_acks_all_retry_of_an_uncommitted_batch_waits_for_the_high_watermark() -> None:
    """Regression (found by the live register workload and a campaign: a lost write with
    acks=all): the leader answered an idempotent retry at once, before the original batch
    was committed; a failover then lost an acknowledged record."""
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1)))
    s, out = step(s, ev.ProduceReceived(1, TP, -1, 2, b"a", 42, 0, 0))
    assert not any(isinstance(e, fx.ProduceReply) for e in out)  # in purgatory
    s, out = step(s, ev.ProduceReceived(2, TP, -1, 2, b"a", 42, 0, 0))  # client's retry
    assert not any(isinstance(e, fx.ProduceReply) for e in out)  # waits as well
    assert not any(isinstance(e, fx.AppendAsLeader) for e in out)  # and appends nothing
    s, out = step(s, ev.MessageReceived(1, FetchRequest(1, TP, 2, 0, 0)))  # follower at 2
    assert fx.ProduceReply(1, TP, Errors.NONE, 0) in out
    assert fx.ProduceReply(2, TP, Errors.NONE, 0) in out
    # once committed, a later retry is answered at once
    s, out = step(s, ev.ProduceReceived(3, TP, -1, 2, b"a", 42, 0, 0))
    assert fx.ProduceReply(3, TP, Errors.NONE, 0) in out
    # an uncommitted duplicate times out like any acks=all produce
    s, _ = step(s, ev.ProduceReceived(4, TP, -1, 1, b"b", 42, 0, 2))
    s, _ = step(s, ev.ProduceReceived(5, TP, -1, 1, b"b", 42, 0, 2, timeout_ms=10))
    s, out = step(s, ev.TimerFired(ProduceTimeoutTimer(TP, 5)))
    assert out == [fx.ProduceReply(5, TP, Errors.REQUEST_TIMED_OUT, -1)]


def test_followers_learn_idempotent_producers_from_replicated_batches() -> None:
    """Regression (a campaign: UNKNOWN_PRODUCER_ID after a failover, and duplicates): a
    follower must rebuild the producer table from what it replicates, as Kafka's does."""
    s, _ = step(registered(1), leader_and_isr(0, 0, (0, 1)))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))  # an empty log fetches at once
    assert [m.message.fetch_offset for m in sends(out, FetchRequest)] == [0]
    resp = FetchResponse(TP, Errors.NONE, 0, 0, 0, 0, 2,
                         batches=(BatchInfo(0, 1, 0, 42, 0, 0),), records=b"ab")
    s, out = step(s, ev.MessageReceived(0, resp))
    r = replica(s, TP)
    assert r is not None and r.log_end_offset == 2
    assert [e.producer_id for e in r.producers] == [42]
    # becoming leader, it recognises the producer's retry
    s, _ = step(s, leader_and_isr(1, 1, (1,)))
    s, out = step(s, ev.ProduceReceived(9, TP, 1, 2, b"ab", 42, 0, 0))
    assert out == [fx.ProduceReply(9, TP, Errors.NONE, 0)]


def _controller(cfg: ProtocolConfig = CFG) -> tuple[BrokerState, list[fx.Effect]]:
    s = registered(0, cfg)
    s, out = step(s, ev.ControllerChanged(NO_LEADER))
    assert out == [fx.ZkElectController(0)]
    live = tuple(LiveBroker(b, 1) for b in (0, 1, 2))
    state = LeaderIsr(1, 4, (1, 2), 1, 7)
    snap = ev.PartitionSnapshot(TP, (0, 1, 2), state)
    return step(s, ev.ControllerElection(True, 0, 2, 2, live, (snap,)))


def test_controller_failover_tells_everyone_and_elects_on_failure() -> None:
    s, out = _controller()
    assert s.controller is not None and s.controller.controller_epoch == 2
    lairs = sends(out, LeaderAndIsrRequest)
    assert {e.dst for e in lairs} == {0, 1, 2}
    # leader 1 dies: candidates are the live ISR in assignment order, a choice for the driver
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert writes and writes[0].proposed == LeaderIsr(2, 5, (2,), 2, 8)
    assert writes[0].controller_epoch_zk_version == 2  # fenced by /controller_epoch (T2)


def test_controller_keeps_last_replica_standing_and_respects_unclean_setting() -> None:
    s, _ = _controller()
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1),)))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.leader == NO_LEADER and w.proposed.isr == (1, 2)  # ISR never empties
    from dataclasses import replace

    unclean = replace(CFG, unclean_leader_election_enable=True)
    s, _ = _controller(unclean)
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1),)))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.leader == 0 and w.proposed.isr == (0,)


def test_zombie_controller_resigns_when_fenced() -> None:
    s, _ = _controller()
    proposed = LeaderIsr(2, 5, (2,), 2, 8)
    s, out = step(s, ev.PartitionStateWritten(TP, proposed, True, False, True, None))
    assert s.controller is None and out == [fx.ZkResignController(0)]


def test_version_conflict_rereads_and_decides_again() -> None:
    s, _ = _controller()
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    newer = LeaderIsr(1, 4, (1,), 1, 9)  # the leader shrank its ISR meanwhile
    s, out = step(s, ev.PartitionStateWritten(TP, w.proposed, True, False, False, newer))
    again = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    # leader 1 is dead and 2 is out of the ISR now: no clean candidate
    assert again and again[0].expected_zk_version == 9 and again[0].proposed.leader == NO_LEADER


def test_more_than_one_candidate_is_a_choice() -> None:
    s = registered(0)
    s, _ = step(s, ev.ControllerChanged(NO_LEADER))
    live = tuple(LiveBroker(b, 1) for b in (0, 1, 2))
    snap = ev.PartitionSnapshot(TP, (0, 1, 2), LeaderIsr(1, 0, (0, 1, 2), 1, 0))
    s, _ = step(s, ev.ControllerElection(True, 0, 1, 1, live, (snap,)))
    s, out = step(s, ev.BrokersChanged((LiveBroker(0, 1), LiveBroker(2, 1))))
    choices = [e for e in out if isinstance(e, fx.Choose)]
    assert len(choices) == 1 and choices[0].options == (0, 2)  # Kafka's order: assignment
    s, out = step(s, ev.Chosen(choices[0].key, 1))
    w = next(e for e in out if isinstance(e, fx.ZkWritePartitionState))
    assert w.proposed.leader == 2 and w.proposed.isr == (0, 2)
    s, out = step(s, ev.Chosen(choices[0].key, 0))  # answered twice: the second is ignored
    assert out == []


def _fetching_follower(cfg: ProtocolConfig) -> tuple[BrokerState, FetchRequest]:
    s = registered(1, cfg)
    s, _ = step(s, leader_and_isr(0, 0, (0, 1)))
    r = replica(s, TP)
    assert r is not None and r.role == Role.FOLLOWER
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    (fetch,) = sends(out, FetchRequest)
    assert isinstance(fetch.message, FetchRequest)
    return s, fetch.message


def _response(req: FetchRequest, batches: tuple[BatchInfo, ...], hw: int) -> ev.MessageReceived:
    end = batches[-1].last_offset + 1 if batches else req.fetch_offset
    return ev.MessageReceived(0, FetchResponse(
        TP, Errors.NONE, req.fetch_offset, req.current_leader_epoch, hw, 0, end_offset=end,
        batches=batches, records=b"r" if batches else None, request_id=req.request_id))


def test_fetch_in_response_step_sends_the_next_fetch_at_once() -> None:
    """The live broker's follower (fetch_in_response_step, no follower-side wait): the step
    that appends a fetched batch also sends the next fetch from the new log end, after the
    append, and arms its request timeout; no FetchTimer step in between."""
    cfg = ProtocolConfig(replica_fetch_wait_max_ms=0, fetch_in_response_step=True)
    s, req = _fetching_follower(cfg)
    s, out = step(s, _response(req, (BatchInfo(0, 2, 0),), 3))
    (nxt,) = sends(out, FetchRequest)
    assert isinstance(nxt.message, FetchRequest) and nxt.message.fetch_offset == 3
    kinds = [type(e) for e in out]
    assert kinds.index(fx.AppendAsFollower) < out.index(nxt)
    assert not any(isinstance(e, fx.SetTimer) and e.key == FetchTimer(TP) for e in out)
    r = replica(s, TP)
    assert r is not None and r.fetch_in_flight and r.log_end_offset == 3
    # an empty response (the leader's hold expired) fetches again at once too (wait 0)
    s, out = step(s, _response(nxt.message, (), 3))
    (again,) = sends(out, FetchRequest)
    assert isinstance(again.message, FetchRequest) and again.message.fetch_offset == 3


def test_without_fetch_in_response_step_the_model_keeps_the_timer_step() -> None:
    """The checkers' follower (the default): a FetchTimer step between the response and the
    next fetch, so the model keeps that interleaving point."""
    s, req = _fetching_follower(CFG)
    s, out = step(s, _response(req, (BatchInfo(0, 2, 0),), 3))
    assert sends(out, FetchRequest) == []
    assert fx.SetTimer(FetchTimer(TP), 0) in out
    r = replica(s, TP)
    assert r is not None and not r.fetch_in_flight
