"""Timer keys are typed values: one frozen type per purpose, dispatched on by `step`."""

from __future__ import annotations

import dataclasses

import pytest

from core import effects as fx
from core import events as ev
from core import timers
from core.config import ProtocolConfig
from core.messages import (
    FetchRequest,
    LeaderAndIsrRequest,
)
from core.node import BrokerState, init, replica, step
from core.timers import FetchTimeoutTimer, FetchTimer, ReplicaLagTimer
from core.types import Errors, PartitionInfo, TopicPartition

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
