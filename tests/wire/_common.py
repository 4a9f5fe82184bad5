"""Shared test helpers: kafka-python <-> kio conversion and comparison, sample data per API."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import uuid
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.wire import API_TABLE, ApiKey

# (API, version) pairs the broker decodes (and therefore answers).
SERVED: list[tuple[ApiKey, int]] = [
    (s.api_key, v) for s in API_TABLE for v in range(s.min_served, s.max_version + 1)
]

KP_REQUEST_CLASSES = {
    ApiKey.PRODUCE: ("kafka.protocol.producer", "ProduceRequest", "ProduceResponse"),
    ApiKey.FETCH: ("kafka.protocol.consumer", "FetchRequest", "FetchResponse"),
    ApiKey.LIST_OFFSETS: ("kafka.protocol.consumer", "ListOffsetsRequest", "ListOffsetsResponse"),
    ApiKey.METADATA: ("kafka.protocol.metadata", "MetadataRequest", "MetadataResponse"),
    ApiKey.OFFSET_COMMIT: (
        "kafka.protocol.consumer",
        "OffsetCommitRequest",
        "OffsetCommitResponse",
    ),
    ApiKey.OFFSET_FETCH: ("kafka.protocol.consumer", "OffsetFetchRequest", "OffsetFetchResponse"),
    ApiKey.FIND_COORDINATOR: (
        "kafka.protocol.metadata",
        "FindCoordinatorRequest",
        "FindCoordinatorResponse",
    ),
    ApiKey.JOIN_GROUP: ("kafka.protocol.consumer", "JoinGroupRequest", "JoinGroupResponse"),
    ApiKey.HEARTBEAT: ("kafka.protocol.consumer", "HeartbeatRequest", "HeartbeatResponse"),
    ApiKey.LEAVE_GROUP: ("kafka.protocol.consumer", "LeaveGroupRequest", "LeaveGroupResponse"),
    ApiKey.SYNC_GROUP: ("kafka.protocol.consumer", "SyncGroupRequest", "SyncGroupResponse"),
    ApiKey.API_VERSIONS: ("kafka.protocol.metadata", "ApiVersionsRequest", "ApiVersionsResponse"),
    ApiKey.CREATE_TOPICS: ("kafka.protocol.admin", "CreateTopicsRequest", "CreateTopicsResponse"),
    ApiKey.DELETE_TOPICS: ("kafka.protocol.admin", "DeleteTopicsRequest", "DeleteTopicsResponse"),
    ApiKey.DESCRIBE_GROUPS: (
        "kafka.protocol.admin",
        "DescribeGroupsRequest",
        "DescribeGroupsResponse",
    ),
    ApiKey.LIST_GROUPS: ("kafka.protocol.admin", "ListGroupsRequest", "ListGroupsResponse"),
    ApiKey.DESCRIBE_CONFIGS: (
        "kafka.protocol.admin",
        "DescribeConfigsRequest",
        "DescribeConfigsResponse",
    ),
    ApiKey.INIT_PRODUCER_ID: (
        "kafka.protocol.producer",
        "InitProducerIdRequest",
        "InitProducerIdResponse",
    ),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        "kafka.protocol.consumer",
        "OffsetForLeaderEpochRequest",
        "OffsetForLeaderEpochResponse",
    ),
}


def kp_class(api_key: ApiKey, response: bool = False) -> Any:
    module, req, resp = KP_REQUEST_CLASSES[api_key]
    return getattr(importlib.import_module(module), resp if response else req)


def record_batch(n: int = 3, base_sequence: int = -1, producer_id: int = -1) -> bytes:
    """A real v2 batch built by kafka-python's builder."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(
            i, timestamp=1_700_000_000_000 + i, key=f"k{i}".encode(), value=b"v" * i, headers=[]
        )
    return bytes(b.build())


TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
BATCH = record_batch()

# Superset request data, with kafka-python's (= Kafka JSON's) field names.
REQUESTS: dict[ApiKey, dict[str, Any]] = {
    ApiKey.PRODUCE: {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": BATCH}]}],
    },
    ApiKey.FETCH: {
        "cluster_id": None,
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": 3,
                        "fetch_offset": 5,
                        "last_fetched_epoch": 2,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1048576,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [{"topic": "old", "partitions": [1, 2]}],
        "rack_id": "rack-a",
    },
    ApiKey.LIST_OFFSETS: {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "current_leader_epoch": 0, "timestamp": -1}],
            }
        ],
    },
    ApiKey.METADATA: {
        "topics": [{"name": "t", "topic_id": None}, {"name": "u", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    },
    ApiKey.OFFSET_COMMIT: {
        "group_id": "g",
        "generation_id_or_member_epoch": 3,
        "member_id": "m-1",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": 0,
                        "committed_metadata": "meta",
                    }
                ],
            }
        ],
    },
    ApiKey.OFFSET_FETCH: {
        "group_id": "g",
        "topics": [{"name": "t", "partition_indexes": [0, 1]}],
        "require_stable": True,
    },
    ApiKey.FIND_COORDINATOR: {"key": "g", "key_type": 0},
    ApiKey.JOIN_GROUP: {
        "group_id": "g",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 30000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01sub"}],
        "reason": "start",
    },
    ApiKey.HEARTBEAT: {
        "group_id": "g",
        "generation_id": 4,
        "member_id": "m-1",
        "group_instance_id": None,
    },
    ApiKey.LEAVE_GROUP: {
        "group_id": "g",
        "member_id": "m-1",
        "members": [{"member_id": "m-1", "group_instance_id": None, "reason": "bye"}],
    },
    ApiKey.SYNC_GROUP: {
        "group_id": "g",
        "generation_id": 4,
        "member_id": "m-1",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": "m-1", "assignment": b"\x00\x01asg"}],
    },
    ApiKey.API_VERSIONS: {
        "client_software_name": "kafka-python",
        "client_software_version": "3.0.12",
    },
    ApiKey.CREATE_TOPICS: {
        "topics": [
            {
                "name": "t",
                "num_partitions": 3,
                "replication_factor": 2,
                "assignments": [],
                "configs": [{"name": "cleanup.policy", "value": "compact"}],
            }
        ],
        "timeout_ms": 1000,
        "validate_only": False,
    },
    ApiKey.DELETE_TOPICS: {"topic_names": ["t", "u"], "timeout_ms": 1000},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g", "h"], "include_authorized_operations": True},
    ApiKey.LIST_GROUPS: {"states_filter": ["Stable", "Empty"], "types_filter": ["classic"]},
    ApiKey.DESCRIBE_CONFIGS: {
        "resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": ["retention.ms"]},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
        ],
        "include_synonyms": True,
        "include_documentation": False,
    },
    ApiKey.INIT_PRODUCER_ID: {
        "transactional_id": None,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    },
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {
        "replica_id": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [{"partition": 0, "current_leader_epoch": 1, "leader_epoch": 0}],
            }
        ],
    },
}

# Superset response data, with kio's field names (``*_ms`` accepted by ``build``).
RESPONSES: dict[ApiKey, dict[str, Any]] = {
    ApiKey.PRODUCE: {
        "throttle_time_ms": 0,
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 2,
                        "error_code": 0,
                        "base_offset": 10,
                        "log_append_time": None,
                        "log_start_offset": 0,
                        "record_errors": [],
                        "error_message": None,
                    }
                ],
            }
        ],
    },
    ApiKey.FETCH: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 3,
                        "last_stable_offset": 3,
                        "log_start_offset": 0,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        "records": BATCH,
                    }
                ],
            }
        ],
    },
    ApiKey.LIST_OFFSETS: {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "timestamp": -1,
                        "offset": 5,
                        "leader_epoch": 0,
                    }
                ],
            }
        ],
    },
    ApiKey.METADATA: {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "hiwater",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -2147483648,
            }
        ],
        "cluster_authorized_operations": -2147483648,
    },
    ApiKey.OFFSET_COMMIT: {
        "throttle_time_ms": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}],
    },
    ApiKey.OFFSET_FETCH: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": 0,
                        "metadata": "meta",
                        "error_code": 0,
                    }
                ],
            }
        ],
    },
    ApiKey.FIND_COORDINATOR: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": 1,
        "host": "127.0.0.1",
        "port": 9092,
    },
    ApiKey.JOIN_GROUP: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "generation_id": 1,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader": "m-1",
        "skip_assignment": False,
        "member_id": "m-1",
        "members": [{"member_id": "m-1", "group_instance_id": None, "metadata": b"\x00\x01sub"}],
    },
    ApiKey.HEARTBEAT: {"throttle_time_ms": 0, "error_code": 27},
    ApiKey.LEAVE_GROUP: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "members": [{"member_id": "m-1", "group_instance_id": None, "error_code": 0}],
    },
    ApiKey.SYNC_GROUP: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignment": b"\x00\x01asg",
    },
    ApiKey.CREATE_TOPICS: {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "t",
                "topic_id": TOPIC_ID,
                "error_code": 0,
                "error_message": None,
                "num_partitions": 3,
                "replication_factor": 2,
                "configs": [
                    {
                        "name": "cleanup.policy",
                        "value": "compact",
                        "read_only": False,
                        "config_source": 1,
                        "is_sensitive": False,
                    }
                ],
            }
        ],
    },
    ApiKey.DESCRIBE_GROUPS: {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "error_message": None,
                "group_id": "g",
                "group_state": "Stable",
                "protocol_type": "consumer",
                "protocol_data": "range",
                "members": [
                    {
                        "member_id": "m-1",
                        "group_instance_id": None,
                        "client_id": "c",
                        "client_host": "/127.0.0.1",
                        "member_metadata": b"\x00\x01sub",
                        "member_assignment": b"\x00\x01asg",
                    }
                ],
                "authorized_operations": 328,
            }
        ],
    },
    ApiKey.LIST_GROUPS: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {
                "group_id": "g",
                "protocol_type": "consumer",
                "group_state": "Stable",
                "group_type": "classic",
            }
        ],
    },
    ApiKey.DESCRIBE_CONFIGS: {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": 0,
                "error_message": None,
                "resource_type": 2,
                "resource_name": "t",
                "configs": [
                    {
                        "name": "retention.ms",
                        "value": "3600000",
                        "read_only": False,
                        "config_source": 1,
                        "is_sensitive": False,
                        "synonyms": [
                            {"name": "retention.ms", "value": "3600000", "source": 1},
                            {"name": "log.retention.hours", "value": "168", "source": 5},
                        ],
                        "config_type": 5,
                        "documentation": None,
                    }
                ],
            }
        ],
    },
    ApiKey.DELETE_TOPICS: {
        "throttle_time_ms": 0,
        "responses": [{"name": "t", "error_code": 0, "error_message": None}],
    },
    ApiKey.INIT_PRODUCER_ID: {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": 1000,
        "producer_epoch": 0,
    },
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {
        "throttle_time_ms": 0,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {"error_code": 0, "partition": 0, "leader_epoch": 0, "end_offset": 100}
                ],
            }
        ],
    },
}


def kp_instance(cls: Any, data: dict[str, Any], version: int, top: bool = True) -> Any:
    """A kafka-python message (or nested container) of ``version`` from superset data."""
    fields = cls._struct.fields
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        f = fields.get(name)
        if f is None or not f.for_version_q(version):
            continue
        if value is not None and f.is_struct_array():
            value = [kp_instance(f.data_class, v, version, top=False) for v in value]
        elif value is not None and f.is_struct():
            value = kp_instance(f.data_class, value, version, top=False)
        kwargs[name] = value
    if top:
        return cls[version](**kwargs)
    return cls(version=version, **kwargs)


def normalize(value: Any) -> Any:
    """A plain, comparable form of kio and kafka-python values."""
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalize(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def kp_name(kio_name: str, kp_obj: Any) -> str | None:
    fields = kp_obj._struct.fields
    # kafka-python renames a few fields (e.g. Metadata's ``authorized_operations``).
    stripped = kio_name.removeprefix("topic_").removeprefix("cluster_")
    for candidate in (kio_name, kio_name + "_ms", stripped):
        if candidate in fields:
            return candidate
    return None


def assert_kio_matches_data(entity: Any, data: dict[str, Any], where: str = "") -> None:
    """Every kio field that the superset data names has the data's value."""
    for f in dataclasses.fields(entity):
        key = f.name if f.name in data else f.name + "_ms"
        if key not in data:
            continue
        got = getattr(entity, f.name)
        want = data[key]
        at = f"{where}.{f.name}"
        if isinstance(want, list) and want and isinstance(want[0], dict):
            assert got is not None and len(got) == len(want), at
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_kio_matches_data(g, w, f"{at}[{i}]")
        elif isinstance(want, dict):
            assert_kio_matches_data(got, want, at)
        else:
            assert normalize(got) == normalize(want), (at, got, want)


def assert_kp_matches_kio(kp_obj: Any, entity: Any, where: str = "") -> None:
    """A kafka-python object holds the same values as a kio entity, field by field."""
    for f in dataclasses.fields(entity):
        name = kp_name(f.name, kp_obj)
        at = f"{where}.{f.name}"
        assert name is not None, f"kafka-python has no field for {at}"
        got = getattr(kp_obj, name)
        want = getattr(entity, f.name)
        if isinstance(want, tuple) and want and dataclasses.is_dataclass(want[0]):
            assert len(got) == len(want), at
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_kp_matches_kio(g, w, f"{at}[{i}]")
        elif dataclasses.is_dataclass(want) and not isinstance(want, type):
            if got is None:  # an omitted tagged struct: it must have its default value
                assert want == type(want)(), at
            else:
                assert_kp_matches_kio(got, want, at)
        elif want is None and f.metadata.get("kafka_type") == "datetime_i64":
            assert got == -1, (at, got)  # a null timestamp is -1 on the wire
        elif got is None and name == "authorized_operations":
            assert want == -(2**31), at  # kafka-python maps the "omitted" sentinel to None
        elif isinstance(got, set) and name == "authorized_operations":
            assert sum(1 << b for b in got) == want, (at, got, want)  # a bitfield, as bits
        else:
            assert normalize(got) == normalize(want), (at, got, want)
