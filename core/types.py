"""Values shared by the whole core: identifiers, the partition state kept in ZooKeeper, errors."""

from __future__ import annotations

import enum
from typing import NamedTuple

NO_LEADER = -1
UNDEFINED_EPOCH = -1
NO_BROKER_EPOCH = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class LeaderIsr(NamedTuple):
    """`/brokers/topics/<t>/partitions/<p>/state` with the znode's version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


class PartitionInfo(NamedTuple):
    """What a LeaderAndIsr request says about one partition."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]


class LiveBroker(NamedTuple):
    broker_id: int
    broker_epoch: int


class Errors(enum.IntEnum):
    """Kafka error codes the core produces (same numbers as the wire protocol)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    STALE_CONTROLLER_EPOCH = 11
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    UNKNOWN_PRODUCER_ID = 59
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78


class Role(enum.IntEnum):
    NONE = 0  # hosted, no LeaderAndIsr accepted yet (or after a restart)
    LEADER = 1
    FOLLOWER = 2


class FetchState(enum.IntEnum):
    IDLE = 0
    TRUNCATING = 1
    FETCHING = 2


class InvariantBroken(Exception):
    """A local impossibility: the core's own state contradicts itself. Always a bug."""


def require(cond: bool, why: str) -> None:
    """Like assert, but never switched off by -O (DESIGN rule 6)."""
    if not cond:
        raise InvariantBroken(why)
