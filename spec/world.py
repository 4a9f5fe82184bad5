"""The cluster as one value: brokers running the real core, an abstract ZooKeeper, abstract
disks, the network, and ghost variables for the invariants.

Everything here is a frozen, hashable value so the model checker can store and compare worlds.
"""

from __future__ import annotations

from typing import NamedTuple

from core.effects import ZkWritePartitionState
from core.messages import Message
from core.node import BrokerState
from core.rules.epochs import EpochEntry
from core.timers import TimerKey
from core.types import NO_LEADER, LeaderIsr, LiveBroker, TopicPartition

TP = TopicPartition("t", 0)

# An abstract record: (record id, leader epoch it was written in). Ids are unique per write.
Record = tuple[int, int]


class Disk(NamedTuple):
    """One broker's log of the model's single partition, and its checkpoint files.

    `records[:durable]` survives any crash; the rest is in the page cache, which survives a
    process crash but not a machine crash ("lossy" crash)."""

    records: tuple[Record, ...] = ()
    durable: int = 0
    epochs: tuple[EpochEntry, ...] = ()
    hw_checkpoint: int = 0


class Node(NamedTuple):
    state: BrokerState | None  # None while crashed
    disk: Disk
    timers: frozenset[TimerKey] = frozenset()
    # kinds of ZooKeeper watch that fired and the broker has not processed yet:
    # "controller", "brokers", "isr", "expired"
    inbox: tuple[str, ...] = ()

    @property
    def alive(self) -> bool:
        return self.state is not None


class PendingWrite(NamedTuple):
    """A leader's conditional ISR write sent to ZooKeeper and not yet applied."""

    broker_id: int
    write: ZkWritePartitionState


class Zk(NamedTuple):
    """Abstract ZooKeeper: the znodes replication needs, with versions."""

    controller: int = NO_LEADER
    controller_epoch: int = 0
    controller_epoch_version: int = 0
    registered: tuple[LiveBroker, ...] = ()  # ephemeral /brokers/ids, sorted by id
    registrations: tuple[int, ...] = ()  # per broker: how many times it registered
    assignment: tuple[int, ...] = ()
    partition: LeaderIsr | None = None
    pending: tuple[PendingWrite, ...] = ()  # leader ISR writes in flight (async mode)
    # A leader's ISR write landed whose answer was lost with its session: the controller is
    # owed the change notification the leader sends only once it learns the write is done.
    unseen: bool = False
    # The brokers whose registration is newer than the partition state's last write (real
    # ZooKeeper orders them by zxid: czxid above mzxid), sorted: what a new controller reads.
    registered_since: tuple[int, ...] = ()


class InFlight(NamedTuple):
    dst: int
    src: int
    kind: str
    message: Message


class Ghost(NamedTuple):
    """History the invariants need but no broker keeps."""

    next_record: int = 0
    acked: frozenset[int] = frozenset()
    exposed: tuple[Record, ...] = ()  # longest log prefix any leader ever exposed (HW)
    conflicting_exposure: bool = False
    leaders: tuple[tuple[int, int], ...] = ()  # (leader epoch, broker) for each epoch led
    crashes: int = 0
    lossy_crashes: int = 0
    expiries: int = 0
    drops: int = 0
    duplicates: int = 0
    moves: int = 0
    listings: int = 0
    latest_listed: int = 0  # the largest "latest offset" ListOffsets ever returned
    listed_backwards: bool = False
    # controlled shutdown (`Bounds.shutdowns`): how many were asked for; whether a broker
    # ever stopped after its controlled shutdown while ZooKeeper still named it leader with
    # another live ISR member to take over; whether a controller ever wrote an ISR that kept a
    # shutting-down broker next to other members
    shutdowns: int = 0
    stopped_as_leader: bool = False
    stopped_in_isr: bool = False


class World(NamedTuple):
    nodes: tuple[Node, ...]
    zk: Zk
    network: tuple[InFlight, ...]  # a sorted multiset
    ghost: Ghost
