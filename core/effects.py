"""Effects: commands `step` returns, applied in order by the driver. Completions of
asynchronous ones (ZooKeeper writes, choices) come back as events."""

from __future__ import annotations

from dataclasses import dataclass

from core.messages import BatchInfo, Message
from core.rules.epochs import EpochEntry
from core.timers import TimerKey
from core.types import Errors, LeaderIsr, TopicPartition


@dataclass(frozen=True, slots=True)
class Send:
    dst: int
    message: Message


@dataclass(frozen=True, slots=True)
class AppendAsLeader:
    tp: TopicPartition
    base_offset: int
    record_count: int
    leader_epoch: int
    records: object


@dataclass(frozen=True, slots=True)
class AppendAsFollower:
    tp: TopicPartition
    batches: tuple[BatchInfo, ...]
    records: object


@dataclass(frozen=True, slots=True)
class TruncateTo:
    tp: TopicPartition
    offset: int


@dataclass(frozen=True, slots=True)
class CheckpointHighWatermark:
    tp: TopicPartition
    high_watermark: int


@dataclass(frozen=True, slots=True)
class CheckpointLeaderEpochs:
    tp: TopicPartition
    epochs: tuple[EpochEntry, ...]


@dataclass(frozen=True, slots=True)
class DeletePartition:
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class SetTimer:
    key: TimerKey
    delay_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(frozen=True, slots=True)
class Choose:
    """A decision the core leaves to its driver: options are in Kafka's order of preference
    (a broker takes the first; the model checker tries each)."""

    key: tuple[object, ...]
    options: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ZkRegisterBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class ZkElectController:
    """Create ephemeral `/controller` and increment `/controller_epoch` conditionally."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ZkResignController:
    """Delete `/controller` if this broker still holds it."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ZkWritePartitionState:
    """Conditional write of a partition's state znode (version `expected_zk_version`, -1 to
    create). A controller's write also checks `/controller_epoch`'s version (KAFKA-6082)
    unless `controller_epoch_zk_version` is None."""

    tp: TopicPartition
    proposed: LeaderIsr
    expected_zk_version: int
    controller_epoch_zk_version: int | None
    by_controller: bool


@dataclass(frozen=True, slots=True)
class ZkNotifyIsrChange:
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class ZkDeleteTopic:
    """Remove a deleted topic's znodes: assignment, partition states, config, and its
    `/admin/delete_topics` marker."""

    topic: str


@dataclass(frozen=True, slots=True)
class ProduceReply:
    request_id: int
    tp: TopicPartition
    error: Errors
    base_offset: int


@dataclass(frozen=True, slots=True)
class ConsumerFetchReply:
    request_id: int
    tp: TopicPartition
    error: Errors
    high_watermark: int
    fetch_offset: int
    end_offset: int  # records [fetch_offset, end_offset) are the driver's to read and send


@dataclass(frozen=True, slots=True)
class ListOffsetsReply:
    request_id: int
    tp: TopicPartition
    error: Errors
    offset: int


Effect = (
    Send
    | AppendAsLeader
    | AppendAsFollower
    | TruncateTo
    | CheckpointHighWatermark
    | CheckpointLeaderEpochs
    | DeletePartition
    | SetTimer
    | CancelTimer
    | Choose
    | ZkRegisterBroker
    | ZkElectController
    | ZkResignController
    | ZkWritePartitionState
    | ZkNotifyIsrChange
    | ZkDeleteTopic
    | ProduceReply
    | ConsumerFetchReply
    | ListOffsetsReply
)
