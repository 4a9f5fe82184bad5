"""Events: facts that happened, fed to `step`. Every nondeterminism enters the core here."""

from __future__ import annotations

from dataclasses import dataclass

from core.config import DEFAULT_TOPIC_CONFIG, TopicConfig
from core.messages import Message
from core.timers import TimerKey
from core.types import LeaderIsr, LiveBroker, TopicPartition


@dataclass(frozen=True, slots=True)
class Started:
    """The broker process started (fresh or after `recover`)."""


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    """`/brokers/ids/<id>` was created; `broker_epoch` is its czxid (KIP-380)."""

    broker_epoch: int


@dataclass(frozen=True, slots=True)
class SessionExpired:
    """This broker's ZooKeeper session expired: its ephemeral nodes are gone."""


@dataclass(frozen=True, slots=True)
class ControllerChanged:
    """The `/controller` watch fired; `controller_id` is NO_LEADER when the node is gone."""

    controller_id: int


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    tp: TopicPartition
    assignment: tuple[int, ...]
    state: LeaderIsr | None  # None: the partition has no state znode yet (new topic)
    config: TopicConfig = DEFAULT_TOPIC_CONFIG  # the topic's `/config/topics/<t>` when read
    # The brokers whose registration is newer than the state znode's last write (their
    # `/brokers/ids` czxid, the broker epoch, is above its mzxid), sorted. Read where a new
    # controller takes over (`ControllerElection`); () where the reader does not know.
    registered_since: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ControllerElection:
    """Answer to `ZkElectController`: whether this broker won, and what ZooKeeper held."""

    won: bool
    controller_id: int
    controller_epoch: int
    epoch_zk_version: int
    live_brokers: tuple[LiveBroker, ...]
    partitions: tuple[PartitionSnapshot, ...]


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The `/brokers/ids` children watch fired (controller only)."""

    live_brokers: tuple[LiveBroker, ...]


@dataclass(frozen=True, slots=True)
class TopicsChanged:
    """New topics appeared under `/brokers/topics` (controller only)."""

    partitions: tuple[PartitionSnapshot, ...]


@dataclass(frozen=True, slots=True)
class TopicsDeleted:
    """Topics were marked for deletion under `/admin/delete_topics` (controller only)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IsrChanged:
    """An ISR change notification: leaders rewrote these partitions' state (controller only)."""

    partitions: tuple[PartitionSnapshot, ...]


@dataclass(frozen=True, slots=True)
class PartitionStateWritten:
    """Completion of `ZkWritePartitionState`. On a refusal `current` is what ZooKeeper holds
    (None: no znode). `unknown`: no answer came (the deadline passed or the session expired
    with the answer lost), so ZooKeeper may or may not have applied the write."""

    tp: TopicPartition
    proposed: LeaderIsr
    by_controller: bool
    ok: bool
    fenced: bool  # the controller-epoch check failed: the writer is a zombie controller
    current: LeaderIsr | None
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    """This broker read the topic's replication settings from `/config/topics/<topic>`:
    when it first hosts the topic (a LeaderAndIsr for it, or after a restart), and as the
    controller when elected or when the topic is created. Its partitions obey it from now on,
    on this broker as leader and, when this broker is the controller, in leader elections.
    (No `/config/changes` watch: the broker has no AlterConfigs, so a value edited in
    ZooKeeper by hand reaches a broker only when it next reads the topic.)"""

    topic: str
    config: TopicConfig


@dataclass(frozen=True, slots=True)
class MessageReceived:
    src: int
    message: Message


@dataclass(frozen=True, slots=True)
class SendFailed:
    """A message this broker sent to `dst` (with its request id) was not delivered, or its
    response never arrived: the connection failed or `dst` is not reachable. Control requests
    are retried by the driver until `dst` leaves the cluster, so this reports their end."""

    dst: int
    message: Message


@dataclass(frozen=True, slots=True)
class TimerFired:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class Chosen:
    """The answer to a `Choose` effect."""

    key: tuple[object, ...]
    option: int


@dataclass(frozen=True, slots=True)
class ProduceReceived:
    request_id: int
    tp: TopicPartition
    acks: int  # 0, 1 or -1 (all)
    record_count: int
    records: object  # opaque batch payload handed to the store
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ConsumerFetchReceived:
    request_id: int
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int  # UNDEFINED_EPOCH when the client does not send one


@dataclass(frozen=True, slots=True)
class ListOffsetsReceived:
    request_id: int
    tp: TopicPartition
    timestamp: int  # -1 latest, -2 earliest
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class LeaderMoveRequested:
    """An operator moved `target` to the head of the partition's replica list and asked for
    a preferred leader election (`kafka-reassign-partitions` then `kafka-leader-election
    --election-type preferred`). Controller only."""

    tp: TopicPartition
    target: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequested:
    """The operator asked this broker to shut down cleanly."""


Event = (
    Started
    | BrokerRegistered
    | SessionExpired
    | ControllerChanged
    | ControllerElection
    | BrokersChanged
    | TopicsChanged
    | TopicsDeleted
    | IsrChanged
    | PartitionStateWritten
    | TopicConfigChanged
    | MessageReceived
    | SendFailed
    | TimerFired
    | Chosen
    | ProduceReceived
    | ConsumerFetchReceived
    | ListOffsetsReceived
    | LeaderMoveRequested
    | ControlledShutdownRequested
)
