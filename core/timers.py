"""Timer keys: one frozen type per purpose, carrying its subject. A driver arms a timer with
`SetTimer(key, delay_ms)`, re-arming replaces the timer of an equal key, and `TimerFired(key)`
brings the key back; `core.node.step` dispatches on the key's type."""

from __future__ import annotations

from dataclasses import dataclass

from core.types import TopicPartition


@dataclass(frozen=True, slots=True)
class FetchTimer:
    """A follower's replica fetcher: time for the next Fetch (or OffsetForLeaderEpoch)."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class FetchTimeoutTimer:
    """A follower's request in flight went unanswered for `request.timeout.ms`."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class ReplicaLagTimer:
    """A leader's `replica.lag.time.max.ms` for one follower: it has not caught up since."""

    tp: TopicPartition
    follower: int


@dataclass(frozen=True, slots=True)
class ProduceTimeoutTimer:
    """An acks=all produce in purgatory for longer than its `timeout_ms`."""

    tp: TopicPartition
    request_id: int


@dataclass(frozen=True, slots=True)
class LeaderImbalanceTimer:
    """The controller's `leader.imbalance.check.interval.seconds` (auto leader rebalance)."""


TimerKey = (
    FetchTimer | FetchTimeoutTimer | ReplicaLagTimer | ProduceTimeoutTimer | LeaderImbalanceTimer
)
