"""Timer keys are typed values, inter-broker messages carry request ids, and a failed send
comes back to the core as `SendFailed`."""

from __future__ import annotations

import dataclasses

import pytest

from core import effects as fx
from core import events as ev
from core import timers
from core.config import ProtocolConfig
from core.messages import (
    NO_REQUEST_ID,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from core.node import BrokerState, init, replica, step
from core.rules.epochs import EpochEntry
from core.timers import FetchTimeoutTimer, FetchTimer, ReplicaLagTimer
from core.types import Errors, LeaderIsr, LiveBroker, PartitionInfo, TopicPartition

TP = TopicPartition("t", 0)
CFG = ProtocolConfig()
KEYS = (timers.FetchTimer(TP), timers.FetchTimeoutTimer(TP), timers.ReplicaLagTimer(TP, 2),
        timers.ProduceTimeoutTimer(TP, 7), timers.LeaderImbalanceTimer())


def registered(broker_id: int) -> BrokerState:
    s, _ = step(init(broker_id, CFG), ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    return s


def leader_and_isr(leader: int, epoch: int, isr: tuple[int, ...]) -> ev.MessageReceived:
    info = PartitionInfo(TP, leader, epoch, isr, 0, (0, 1, 2))
    return ev.MessageReceived(9, LeaderAndIsrRequest(9, 1, 1, (info,)))


def follower_in_flight() -> BrokerState:
    """Broker 1 follows 0 in epoch 2 with a Fetch in flight."""
    s, _ = step(registered(1), leader_and_isr(0, 2, (0, 1)))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    assert any(isinstance(e, fx.Send) and isinstance(e.message, FetchRequest) for e in out)
    assert fx.SetTimer(FetchTimeoutTimer(TP), CFG.request_timeout_ms) in out
    return s


def test_timer_keys_are_frozen_slotted_hashable_values() -> None:
    assert len({type(k) for k in KEYS}) == len(KEYS)  # one type per purpose
    assert len(set(KEYS)) == len(KEYS)
    for k in KEYS:
        assert dataclasses.is_dataclass(k) and not hasattr(k, "__dict__")
        assert hash(k) == hash(dataclasses.replace(k)) and k == dataclasses.replace(k)
        for f in dataclasses.fields(k):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(k, f.name, getattr(k, f.name))
    assert ReplicaLagTimer(TP, 1) != ReplicaLagTimer(TP, 2)
    assert FetchTimer(TP) != FetchTimeoutTimer(TP)  # same fields, different purpose


def test_every_timer_key_is_dispatched_by_step() -> None:
    """A follower's fetch timer fetches; a leader's lag timer for a follower that never
    fetched shrinks the ISR; a produce timeout answers with REQUEST_TIMED_OUT."""
    s = follower_in_flight()
    r = replica(s, TP)
    assert r is not None and r.fetch_in_flight
    s2, out = step(s, ev.TimerFired(FetchTimeoutTimer(TP)))
    assert replica(s2, TP).fetch_in_flight is False  # type: ignore[union-attr]
    assert out == [fx.SetTimer(FetchTimer(TP), CFG.replica_fetch_backoff_ms)]
    lead, _ = step(registered(0), leader_and_isr(0, 0, (0, 1)))
    _, out = step(lead, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert writes and writes[0].proposed.isr == (0,)
    lead, out = step(lead, ev.ProduceReceived(5, TP, -1, 1, b"x", timeout_ms=100))
    assert fx.SetTimer(timers.ProduceTimeoutTimer(TP, 5), 100) in out
    _, out = step(lead, ev.TimerFired(timers.ProduceTimeoutTimer(TP, 5)))
    assert out == [fx.ProduceReply(5, TP, Errors.REQUEST_TIMED_OUT, -1)]


def test_responses_carry_the_request_id_they_answer() -> None:
    lead, _ = step(registered(0), leader_and_isr(0, 0, (0, 1)))
    _, out = step(lead, ev.MessageReceived(1, FetchRequest(1, TP, 0, 0, -1, request_id=41)))
    (resp,) = [e.message for e in out if isinstance(e, fx.Send)]
    assert isinstance(resp, FetchResponse) and resp.request_id == 41
    _, out = step(lead, ev.MessageReceived(
        1, OffsetForLeaderEpochRequest(1, TP, 0, 0, request_id=42)))
    (resp2,) = [e.message for e in out if isinstance(e, fx.Send)]
    assert isinstance(resp2, OffsetForLeaderEpochResponse) and resp2.request_id == 42
    # requests the core makes are numbered by whoever sends them
    s, out = step(registered(1), leader_and_isr(0, 2, (0, 1)))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    (req,) = [e.message for e in out if isinstance(e, fx.Send)]
    assert req.request_id == NO_REQUEST_ID


def test_controller_answers_controlled_shutdown_with_the_request_id() -> None:
    s = registered(0)
    s, _ = step(s, ev.ControllerChanged(-1))
    live = (LiveBroker(0, 1), LiveBroker(1, 1))
    snap = ev.PartitionSnapshot(TP, (0, 1), LeaderIsr(0, 0, (0, 1), 0, 1))
    s, _ = step(s, ev.ControllerElection(True, 0, 1, 1, live, (snap,)))
    assert s.controller is not None
    for broker_epoch, error in ((1, Errors.NONE), (7, Errors.STALE_BROKER_EPOCH)):
        req = ControlledShutdownRequest(1, broker_epoch, request_id=99)
        _, out = step(s, ev.MessageReceived(1, req))
        answers = [e.message for e in out if isinstance(e, fx.Send)
                   and isinstance(e.message, ControlledShutdownResponse)]
        assert [(a.error, a.request_id) for a in answers] == [(error, 99)]


def test_send_failed_backs_off_like_a_timeout_but_at_once() -> None:
    s = follower_in_flight()
    fetch = FetchRequest(1, TP, 0, 2, -1, request_id=3)
    s2, out = step(s, ev.SendFailed(0, fetch))
    assert out == [fx.CancelTimer(FetchTimeoutTimer(TP)),
                   fx.SetTimer(FetchTimer(TP), CFG.replica_fetch_backoff_ms)]
    assert replica(s2, TP).fetch_in_flight is False  # type: ignore[union-attr]
    # the same failure again: nothing is in flight any more
    assert step(s2, ev.SendFailed(0, fetch)) == (s2, [])


def test_send_failed_of_an_earlier_epochs_request_is_not_ours() -> None:
    s = follower_in_flight()
    old = FetchRequest(1, TP, 0, 1, -1, request_id=2)  # sent in leader epoch 1
    assert step(s, ev.SendFailed(0, old)) == (s, [])
    ofle = OffsetForLeaderEpochRequest(1, TP, 1, 0)
    assert step(s, ev.SendFailed(0, ofle)) == (s, [])


def test_send_failed_of_a_control_request_changes_nothing() -> None:
    s = follower_in_flight()
    lai = LeaderAndIsrRequest(1, 1, 1, (PartitionInfo(TP, 1, 3, (1,), 0, (0, 1, 2)),))
    assert step(s, ev.SendFailed(2, lai)) == (s, [])
    assert step(s, ev.SendFailed(0, ControlledShutdownRequest(1, 1))) == (s, [])


def test_truncation_request_failure_backs_off() -> None:
    from core.node import DurableReplica, recover

    durable = DurableReplica(TP, (0, 1, 2), 0, 3, (EpochEntry(0, 0), EpochEntry(1, 2)), 1)
    s, _ = step(recover(1, CFG, (durable,)), ev.Started())
    s, _ = step(s, ev.BrokerRegistered(1))
    s, _ = step(s, leader_and_isr(0, 2, (0, 1)))
    s, out = step(s, ev.TimerFired(FetchTimer(TP)))
    (req,) = [e.message for e in out if isinstance(e, fx.Send)]
    assert isinstance(req, OffsetForLeaderEpochRequest)
    s2, out = step(s, ev.SendFailed(0, req))
    assert fx.SetTimer(FetchTimer(TP), CFG.replica_fetch_backoff_ms) in out
    assert replica(s2, TP).fetch_in_flight is False  # type: ignore[union-attr]
