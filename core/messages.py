"""Messages between brokers (the inter-broker protocol, as values).

Every message carries a request id: a request's is given by whoever sends it over a
transport (the broker's interpreter numbers its outgoing requests; a server numbers the
requests it reads off the wire), and a response carries the id of the request it answers, so
a driver matches replies to requests by id. The core only copies ids from a request to its
response: it checks that a response is still wanted by leader epoch, as Kafka's fetcher does,
so ids add nothing to its state (the model checker leaves them at NO_REQUEST_ID)."""

from __future__ import annotations

from dataclasses import dataclass

from core.types import Errors, LiveBroker, PartitionInfo, TopicPartition

NO_REQUEST_ID = 0  # not numbered yet (a request the core just made), or in the model


@dataclass(frozen=True, slots=True, order=True)
class BatchInfo:
    """What the core needs to know of a record batch: its offsets and leader epoch."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    # The idempotent producer that wrote the batch (-1: none): followers rebuild the
    # producer table from what they replicate, so a new leader still recognises retries.
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(frozen=True, slots=True, order=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionInfo, ...]
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionInfo, ...]
    live_brokers: tuple[LiveBroker, ...]
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[TopicPartition, ...]
    delete: bool
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class ControlledShutdownResponse:
    error: Errors
    remaining: tuple[TopicPartition, ...]
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class FetchRequest:
    replica_id: int
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class FetchResponse:
    tp: TopicPartition
    error: Errors
    fetch_offset: int
    current_leader_epoch: int
    high_watermark: int
    log_start_offset: int
    # The leader's core decides the range [fetch_offset, end_offset); the driver that sends the
    # response fills `batches` and the opaque `records` from its store (bytes on the wire, a
    # tuple of abstract records in the model) before the message leaves the leader.
    end_offset: int
    diverging: bool = False  # KIP-320 first try: the follower's last epoch does not match
    batches: tuple[BatchInfo, ...] = ()
    records: object = None
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class OffsetForLeaderEpochRequest:
    replica_id: int
    tp: TopicPartition
    current_leader_epoch: int
    leader_epoch: int
    request_id: int = NO_REQUEST_ID


@dataclass(frozen=True, slots=True, order=True)
class OffsetForLeaderEpochResponse:
    tp: TopicPartition
    error: Errors
    current_leader_epoch: int
    requested_epoch: int
    leader_epoch: int
    end_offset: int
    request_id: int = NO_REQUEST_ID


Message = (
    LeaderAndIsrRequest
    | UpdateMetadataRequest
    | StopReplicaRequest
    | ControlledShutdownRequest
    | ControlledShutdownResponse
    | FetchRequest
    | FetchResponse
    | OffsetForLeaderEpochRequest
    | OffsetForLeaderEpochResponse
)
