"""The ZooKeeper-era inter-broker APIs, hand-written: core messages <-> Kafka wire bytes.

kio 0.6.5 is generated from Kafka 4.x, which removed LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6) and ControlledShutdown (7), so this module encodes and decodes them itself,
at exactly one version each: the first version carrying the broker epoch (KIP-380, Kafka 2.2),
all of them non-flexible.

=================== ======= ======================================================
API                 version layout (Kafka's ``clients/.../common/message/*.json``)
=================== ======= ======================================================
LeaderAndIsr (4)    v2      controller_id, controller_epoch, broker_epoch,
                            topic_states[topic, partition_states[partition,
                            controller_epoch, leader, leader_epoch, isr,
                            zk_version, replicas, is_new]],
                            live_leaders[broker_id, host, port]
StopReplica (5)     v1      controller_id, controller_epoch, broker_epoch,
                            delete_partitions, topics[name, partition_indexes]
UpdateMetadata (6)  v5      controller_id, controller_epoch, broker_epoch,
                            topic_states[topic, partition_states[partition,
                            controller_epoch, leader, leader_epoch, isr,
                            zk_version, replicas, offline_replicas]],
                            live_brokers[id, endpoints[port, host, listener,
                            security_protocol], rack]
ControlledShutdown  v2      broker_id, broker_epoch
(7)
=================== ======= ======================================================

Responses: LeaderAndIsr v2 and StopReplica v1 are ``error_code, partition_errors[topic,
partition, error_code]``; UpdateMetadata v5 is ``error_code``; ControlledShutdown v2 is
``error_code, remaining_partitions[topic, partition]``.  Requests use request header v1
(api_key, api_version, correlation_id, client_id), responses header v0 (correlation_id).

What the core's messages do not hold, and so how the mapping goes:

* per-partition ``controller_epoch``: encoded as the request's controller epoch (the core's
  ``PartitionInfo`` has none of its own); ignored on decode.
* LeaderAndIsr ``is_new``: always false; ignored on decode.
* UpdateMetadata ``offline_replicas``: encoded as the replicas not among the live brokers;
  ignored on decode (it follows from replicas and live brokers).
* Partitions are grouped by topic in order of first appearance, keeping their order within a
  topic; decode returns them in wire order.  So a round trip is the identity when each topic's
  partitions are contiguous (the controller sends them sorted).
* UpdateMetadata live brokers: Kafka's v5 has no per-broker epoch, so decode gives
  ``LiveBroker(id, NO_BROKER_EPOCH)``.  Nothing reads them: a broker keeps the received
  ``live_brokers`` only as its metadata cache (``BrokerState.live_brokers``); the epochs the
  core checks come from ZooKeeper (the controller's own ``ControllerState.live``).  Endpoints
  travel beside the message (``Endpoint``: one ``PLAINTEXT`` listener plus the rack).
* LeaderAndIsr live leaders carry no rack: decode gives ``rack=None``.

These APIs are not in ``apis.API_TABLE``: they are not advertised to clients (Kafka 4's
ApiVersions, which kio models, has no rows for them), and ``request.decode_request`` closes
the connection on them.  The broker routes a frame whose api key ``is_interbroker`` here.

Decoding never raises: a bad request gives ``request.Close`` (as Kafka closes the connection
on an unparsable request), a bad response ``response.ResponseDecodeError``.  Encoding raises
``response.EncodeError`` (a ``ValueError``) for values that do not fit the wire: a bug in the
caller.  Bytes after a complete body are ignored, as Kafka does.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from core.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.types import NO_BROKER_EPOCH, Errors, LiveBroker, PartitionInfo, TopicPartition

from ._walk import Malformed
from .framing import frame
from .request import Close, CloseCode, RequestHeader, parse_request_header
from .response import EncodeError, ResponseDecodeError

__all__ = [
    "INTERBROKER_APIS",
    "LISTENER_NAME",
    "REQUEST_HEADER_VERSION",
    "SECURITY_PROTOCOL_PLAINTEXT",
    "Endpoint",
    "InterbrokerApiKey",
    "InterbrokerMessage",
    "InterbrokerRequest",
    "InterbrokerResponse",
    "PartitionError",
    "decode_interbroker_request",
    "decode_interbroker_response",
    "encode_controlled_shutdown",
    "encode_controlled_shutdown_response",
    "encode_interbroker_response",
    "encode_leader_and_isr",
    "encode_stop_replica",
    "encode_update_metadata",
    "is_interbroker",
]


class InterbrokerApiKey(enum.IntEnum):
    """Kafka's names (``ApiKeys.java``)."""

    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7


INTERBROKER_APIS: Mapping[int, int] = MappingProxyType({
    InterbrokerApiKey.LEADER_AND_ISR: 2,
    InterbrokerApiKey.STOP_REPLICA: 1,
    InterbrokerApiKey.UPDATE_METADATA: 5,
    InterbrokerApiKey.CONTROLLED_SHUTDOWN: 2,
})
"""api key -> the one version encoded and served (requests and responses alike)."""

REQUEST_HEADER_VERSION = 1
"""Non-flexible requests: header v1.  (ControlledShutdown v0 had a header without client_id;
we never speak it.)  Responses use header v0."""

LISTENER_NAME = "PLAINTEXT"
SECURITY_PROTOCOL_PLAINTEXT = 0
"""The one UpdateMetadata endpoint we send per broker (Kafka's ``SecurityProtocol.id``)."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">hhi")
_STRING_MAX = 0x7FFF


def is_interbroker(api_key: int) -> bool:
    return api_key in INTERBROKER_APIS


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a broker listens (``/brokers/ids/<id>``): LeaderAndIsr live leaders and
    UpdateMetadata live brokers.  ``rack`` travels only in UpdateMetadata."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None


InterbrokerMessage = (
    LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest | ControlledShutdownRequest
)


def _no_endpoints() -> Mapping[int, Endpoint]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class InterbrokerRequest:
    """A decoded inter-broker request: the core's message plus what travels beside it."""

    header: RequestHeader
    message: InterbrokerMessage
    live_leaders: tuple[Endpoint, ...] = ()
    """LeaderAndIsr only, in wire order (``rack`` is always None)."""
    endpoints: Mapping[int, Endpoint] = field(default_factory=_no_endpoints)
    """UpdateMetadata only: broker id -> endpoint, for live brokers that sent one."""
    trailing_bytes: int = 0

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


@dataclass(frozen=True, slots=True)
class PartitionError:
    tp: TopicPartition
    error: int


@dataclass(frozen=True, slots=True)
class InterbrokerResponse:
    """A decoded response.  ``error`` codes are plain ints: a peer may send codes the core
    does not produce (e.g. KAFKA_STORAGE_ERROR 56, UNKNOWN_SERVER_ERROR -1)."""

    correlation_id: int
    api_key: int
    error: int
    partition_errors: tuple[PartitionError, ...] = ()
    """LeaderAndIsr and StopReplica."""
    remaining: tuple[TopicPartition, ...] = ()
    """ControlledShutdown: the partitions the broker still leads."""

    def controlled_shutdown(self) -> ControlledShutdownResponse | ResponseDecodeError:
        """The core's message, for a ControlledShutdown response with an error it knows."""
        if self.api_key != InterbrokerApiKey.CONTROLLED_SHUTDOWN:
            return ResponseDecodeError(
                self.correlation_id, f"api {self.api_key} is not ControlledShutdown"
            )
        try:
            error = Errors(self.error)
        except ValueError:
            return ResponseDecodeError(
                self.correlation_id, f"ControlledShutdown error code {self.error} unknown"
            )
        return ControlledShutdownResponse(error, self.remaining)


# ---------------------------------------------------------------------------------------
# writing


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def _pack(self, s: struct.Struct, value: int, what: str) -> None:
        try:
            self.buf += s.pack(value)
        except struct.error:
            raise EncodeError(f"{what} = {value!r} does not fit {8 * s.size} bits") from None

    def i16(self, value: int, what: str) -> None:
        self._pack(_I16, value, what)

    def i32(self, value: int, what: str) -> None:
        self._pack(_I32, value, what)

    def i64(self, value: int, what: str) -> None:
        self._pack(_I64, value, what)

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def nullable_string(self, value: str | None, what: str) -> None:
        if value is None:
            self.i16(-1, what)
            return
        raw = value.encode("utf-8")
        if len(raw) > _STRING_MAX:
            raise EncodeError(f"{what}: {len(raw)} bytes is longer than {_STRING_MAX}")
        self.i16(len(raw), what)
        self.buf += raw

    def string(self, value: str, what: str) -> None:
        if not isinstance(value, str):
            raise EncodeError(f"{what} = {value!r} is not a string")
        self.nullable_string(value, what)

    def count(self, n: int, what: str) -> None:
        self.i32(n, what)

    def i32_array(self, values: Sequence[int], what: str) -> None:
        self.count(len(values), what)
        for v in values:
            self.i32(v, what)


def _request_writer(
    api_key: InterbrokerApiKey, correlation_id: int, client_id: str | None
) -> _Writer:
    w = _Writer()
    w.i16(api_key, "api_key")
    w.i16(INTERBROKER_APIS[api_key], "api_version")
    w.i32(correlation_id, "correlation_id")
    w.nullable_string(client_id, "client_id")
    return w


_T = TypeVar("_T")


def _by_topic(items: Iterable[_T], topic_of: Callable[[_T], str]) -> list[tuple[str, list[_T]]]:
    """Group by topic in order of first appearance, keeping the order within each topic."""
    groups: dict[str, list[_T]] = {}
    for item in items:
        groups.setdefault(topic_of(item), []).append(item)
    return list(groups.items())


def _write_partition_state(w: _Writer, p: PartitionInfo, controller_epoch: int) -> None:
    """The fields LeaderAndIsrPartitionState and UpdateMetadataPartitionState share."""
    w.i32(p.tp.partition, "partition_index")
    w.i32(controller_epoch, "controller_epoch")
    w.i32(p.leader, "leader")
    w.i32(p.leader_epoch, "leader_epoch")
    w.i32_array(p.isr, "isr")
    w.i32(p.zk_version, "zk_version")
    w.i32_array(p.replicas, "replicas")


def _write_control_head(
    w: _Writer, controller_id: int, controller_epoch: int, broker_epoch: int
) -> None:
    w.i32(controller_id, "controller_id")
    w.i32(controller_epoch, "controller_epoch")
    w.i64(broker_epoch, "broker_epoch")


def encode_leader_and_isr(
    msg: LeaderAndIsrRequest,
    live_leaders: Sequence[Endpoint],
    correlation_id: int,
    client_id: str | None = "hiwater",
) -> bytes:
    """LeaderAndIsr v2, a complete size-prefixed frame.  ``live_leaders``: the endpoints of
    the partitions' leaders (Kafka sends those of the live ones)."""
    w = _request_writer(InterbrokerApiKey.LEADER_AND_ISR, correlation_id, client_id)
    _write_control_head(w, msg.controller_id, msg.controller_epoch, msg.broker_epoch)
    groups = _by_topic(msg.partitions, lambda p: p.tp.topic)
    w.count(len(groups), "topic_states")
    for topic, infos in groups:
        w.string(topic, "topic_name")
        w.count(len(infos), "partition_states")
        for p in infos:
            _write_partition_state(w, p, msg.controller_epoch)
            w.boolean(False)  # is_new
    w.count(len(live_leaders), "live_leaders")
    for e in live_leaders:
        w.i32(e.broker_id, "live_leaders.broker_id")
        w.string(e.host, "live_leaders.host_name")
        w.i32(e.port, "live_leaders.port")
    return frame(bytes(w.buf))


def encode_update_metadata(
    msg: UpdateMetadataRequest,
    endpoints: Mapping[int, Endpoint],
    correlation_id: int,
    client_id: str | None = "hiwater",
) -> bytes:
    """UpdateMetadata v5, a complete size-prefixed frame.  ``endpoints`` must hold every broker
    of ``msg.live_brokers`` (their epochs are not on the wire)."""
    w = _request_writer(InterbrokerApiKey.UPDATE_METADATA, correlation_id, client_id)
    _write_control_head(w, msg.controller_id, msg.controller_epoch, msg.broker_epoch)
    live = {b.broker_id for b in msg.live_brokers}
    groups = _by_topic(msg.partitions, lambda p: p.tp.topic)
    w.count(len(groups), "topic_states")
    for topic, infos in groups:
        w.string(topic, "topic_name")
        w.count(len(infos), "partition_states")
        for p in infos:
            _write_partition_state(w, p, msg.controller_epoch)
            w.i32_array([r for r in p.replicas if r not in live], "offline_replicas")
    w.count(len(msg.live_brokers), "live_brokers")
    for b in msg.live_brokers:
        e = endpoints.get(b.broker_id)
        if e is None:
            raise EncodeError(f"no endpoint for live broker {b.broker_id}")
        if e.broker_id != b.broker_id:
            raise EncodeError(f"endpoint {e!r} filed under broker {b.broker_id}")
        w.i32(b.broker_id, "live_brokers.id")
        w.count(1, "live_brokers.endpoints")
        w.i32(e.port, "endpoints.port")
        w.string(e.host, "endpoints.host")
        w.string(LISTENER_NAME, "endpoints.listener")
        w.i16(SECURITY_PROTOCOL_PLAINTEXT, "endpoints.security_protocol")
        w.nullable_string(e.rack, "live_brokers.rack")
    return frame(bytes(w.buf))


def encode_stop_replica(
    msg: StopReplicaRequest, correlation_id: int, client_id: str | None = "hiwater"
) -> bytes:
    """StopReplica v1, a complete size-prefixed frame."""
    w = _request_writer(InterbrokerApiKey.STOP_REPLICA, correlation_id, client_id)
    _write_control_head(w, msg.controller_id, msg.controller_epoch, msg.broker_epoch)
    w.boolean(msg.delete)
    groups = _by_topic(msg.partitions, lambda tp: tp.topic)
    w.count(len(groups), "topics")
    for topic, tps in groups:
        w.string(topic, "topics.name")
        w.i32_array([tp.partition for tp in tps], "topics.partition_indexes")
    return frame(bytes(w.buf))


def encode_controlled_shutdown(
    msg: ControlledShutdownRequest, correlation_id: int, client_id: str | None = "hiwater"
) -> bytes:
    """ControlledShutdown v2, a complete size-prefixed frame."""
    w = _request_writer(InterbrokerApiKey.CONTROLLED_SHUTDOWN, correlation_id, client_id)
    w.i32(msg.broker_id, "broker_id")
    w.i64(msg.broker_epoch, "broker_epoch")
    return frame(bytes(w.buf))


def encode_interbroker_response(
    correlation_id: int,
    api_key: int,
    error: int,
    partition_errors: Sequence[PartitionError] = (),
    remaining: Sequence[TopicPartition] = (),
) -> bytes:
    """The response (header v0) at the served version, a complete size-prefixed frame.

    ``partition_errors`` only for LeaderAndIsr and StopReplica, ``remaining`` only for
    ControlledShutdown; UpdateMetadata carries the error alone.
    """
    if not is_interbroker(api_key):
        raise EncodeError(f"api {api_key} is not an inter-broker api")
    key = InterbrokerApiKey(api_key)
    has_partitions = key in (InterbrokerApiKey.LEADER_AND_ISR, InterbrokerApiKey.STOP_REPLICA)
    if partition_errors and not has_partitions:
        raise EncodeError(f"{key.name} response has no partition errors")
    if remaining and key != InterbrokerApiKey.CONTROLLED_SHUTDOWN:
        raise EncodeError(f"{key.name} response has no remaining partitions")
    w = _Writer()
    w.i32(correlation_id, "correlation_id")
    w.i16(error, "error_code")
    if has_partitions:
        w.count(len(partition_errors), "partition_errors")
        for pe in partition_errors:
            w.string(pe.tp.topic, "partition_errors.topic_name")
            w.i32(pe.tp.partition, "partition_errors.partition_index")
            w.i16(pe.error, "partition_errors.error_code")
    elif key == InterbrokerApiKey.CONTROLLED_SHUTDOWN:
        w.count(len(remaining), "remaining_partitions")
        for tp in remaining:
            w.string(tp.topic, "remaining_partitions.topic_name")
            w.i32(tp.partition, "remaining_partitions.partition_index")
    return frame(bytes(w.buf))


def encode_controlled_shutdown_response(
    msg: ControlledShutdownResponse, correlation_id: int
) -> bytes:
    """ControlledShutdown v2 response from the core's message."""
    return encode_interbroker_response(
        correlation_id, InterbrokerApiKey.CONTROLLED_SHUTDOWN, msg.error, remaining=msg.remaining
    )


# ---------------------------------------------------------------------------------------
# reading


class _Reader:
    """A cursor over ``buf``; every read is bounds-checked and raises ``Malformed``."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def _take(self, n: int, what: str) -> int:
        at = self.pos
        if n < 0 or at + n > self.end:
            raise Malformed(f"{what}: needs {n} bytes at {at}, only {self.end - at} left")
        self.pos = at + n
        return at

    def _unpack(self, s: struct.Struct, what: str) -> int:
        value: int = s.unpack_from(self.buf, self._take(s.size, what))[0]
        return value

    def i16(self, what: str) -> int:
        return self._unpack(_I16, what)

    def i32(self, what: str) -> int:
        return self._unpack(_I32, what)

    def i64(self, what: str) -> int:
        return self._unpack(_I64, what)

    def boolean(self, what: str) -> bool:
        return self._unpack(_I8, what) != 0  # Kafka: any non-zero byte is true

    def nullable_string(self, what: str) -> str | None:
        n = self.i16(what)
        if n < -1:
            raise Malformed(f"{what}: negative string length {n}")
        if n == -1:
            return None
        at = self._take(n, what)
        try:
            return self.buf[at : at + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise Malformed(f"{what} is not UTF-8: {e}") from None

    def string(self, what: str) -> str:
        s = self.nullable_string(what)
        if s is None:
            raise Malformed(f"{what}: null in a non-nullable string")
        return s

    def count(self, item_min_size: int, what: str) -> int:
        """A non-nullable array's length; one that cannot fit the bytes left is refused
        before any element is read."""
        n = self.i32(what)
        if n < 0:
            raise Malformed(f"{what}: null or negative array length {n}")
        if n * item_min_size > self.end - self.pos:
            raise Malformed(f"{what}: {n} elements cannot fit in {self.end - self.pos} bytes")
        return n

    def i32_array(self, what: str) -> tuple[int, ...]:
        n = self.count(4, what)
        at = self._take(4 * n, what)
        return struct.unpack_from(f">{n}i", self.buf, at)


# Minimum encoded sizes of array elements, from the layouts above.
_PARTITION_STATE_MIN = 4 * 5 + 4 * 2  # five int32 + two empty int32 arrays
_TOPIC_STATE_MIN = 2 + 4  # empty name + empty array
_LIVE_LEADER_MIN = 4 + 2 + 4
_ENDPOINT_MIN = 4 + 2 + 2 + 2
_LIVE_BROKER_MIN = 4 + 4 + 2
_PARTITION_ERROR_MIN = 2 + 4 + 2
_REMAINING_MIN = 2 + 4


def _read_control_head(r: _Reader) -> tuple[int, int, int]:
    controller_id = r.i32("controller_id")
    controller_epoch = r.i32("controller_epoch")
    return controller_id, controller_epoch, r.i64("broker_epoch")


def _read_partition_state(r: _Reader, topic: str) -> PartitionInfo:
    partition = r.i32("partition_index")
    r.i32("controller_epoch")  # the request's own is the one the core uses
    leader = r.i32("leader")
    leader_epoch = r.i32("leader_epoch")
    isr = r.i32_array("isr")
    zk_version = r.i32("zk_version")
    replicas = r.i32_array("replicas")
    return PartitionInfo(
        TopicPartition(topic, partition), leader, leader_epoch, isr, zk_version, replicas
    )


def _read_topic_states(
    r: _Reader, extra: Callable[[_Reader], object]
) -> tuple[PartitionInfo, ...]:
    out: list[PartitionInfo] = []
    for _ in range(r.count(_TOPIC_STATE_MIN, "topic_states")):
        topic = r.string("topic_name")
        for _ in range(r.count(_PARTITION_STATE_MIN, "partition_states")):
            out.append(_read_partition_state(r, topic))
            extra(r)
    return tuple(out)


def _read_leader_and_isr(r: _Reader) -> tuple[LeaderAndIsrRequest, tuple[Endpoint, ...]]:
    controller_id, controller_epoch, broker_epoch = _read_control_head(r)
    partitions = _read_topic_states(r, lambda r: r.boolean("is_new"))
    leaders: list[Endpoint] = []
    for _ in range(r.count(_LIVE_LEADER_MIN, "live_leaders")):
        broker_id = r.i32("live_leaders.broker_id")
        host = r.string("live_leaders.host_name")
        leaders.append(Endpoint(broker_id, host, r.i32("live_leaders.port")))
    msg = LeaderAndIsrRequest(controller_id, controller_epoch, broker_epoch, partitions)
    return msg, tuple(leaders)


def _read_update_metadata(r: _Reader) -> tuple[UpdateMetadataRequest, dict[int, Endpoint]]:
    controller_id, controller_epoch, broker_epoch = _read_control_head(r)
    partitions = _read_topic_states(r, lambda r: r.i32_array("offline_replicas"))
    live: list[LiveBroker] = []
    endpoints: dict[int, Endpoint] = {}
    for _ in range(r.count(_LIVE_BROKER_MIN, "live_brokers")):
        broker_id = r.i32("live_brokers.id")
        found: list[tuple[str, str, int]] = []
        for _ in range(r.count(_ENDPOINT_MIN, "live_brokers.endpoints")):
            port = r.i32("endpoints.port")
            host = r.string("endpoints.host")
            listener = r.string("endpoints.listener")
            r.i16("endpoints.security_protocol")
            found.append((listener, host, port))
        rack = r.nullable_string("live_brokers.rack")
        live.append(LiveBroker(broker_id, NO_BROKER_EPOCH))
        if found:
            _, host, port = next((f for f in found if f[0] == LISTENER_NAME), found[0])
            endpoints[broker_id] = Endpoint(broker_id, host, port, rack)
    msg = UpdateMetadataRequest(
        controller_id, controller_epoch, broker_epoch, partitions, tuple(live)
    )
    return msg, endpoints


def _read_stop_replica(r: _Reader) -> StopReplicaRequest:
    controller_id, controller_epoch, broker_epoch = _read_control_head(r)
    delete = r.boolean("delete_partitions")
    tps: list[TopicPartition] = []
    for _ in range(r.count(_TOPIC_STATE_MIN, "topics")):
        topic = r.string("topics.name")
        tps.extend(TopicPartition(topic, p) for p in r.i32_array("topics.partition_indexes"))
    return StopReplicaRequest(controller_id, controller_epoch, broker_epoch, tuple(tps), delete)


def _read_request_body(r: _Reader, header: RequestHeader) -> InterbrokerRequest:
    key = InterbrokerApiKey(header.api_key)
    if key == InterbrokerApiKey.LEADER_AND_ISR:
        lai, leaders = _read_leader_and_isr(r)
        return InterbrokerRequest(header, lai, live_leaders=leaders)
    if key == InterbrokerApiKey.UPDATE_METADATA:
        um, endpoints = _read_update_metadata(r)
        return InterbrokerRequest(header, um, endpoints=MappingProxyType(endpoints))
    if key == InterbrokerApiKey.STOP_REPLICA:
        return InterbrokerRequest(header, _read_stop_replica(r))
    broker_id = r.i32("broker_id")
    return InterbrokerRequest(header, ControlledShutdownRequest(broker_id, r.i64("broker_epoch")))


def decode_interbroker_request(payload: bytes) -> InterbrokerRequest | Close:
    """Decode one request frame payload (without its size prefix).  Never raises."""
    data = bytes(payload)
    if len(data) < _HEAD.size:
        return Close(CloseCode.MALFORMED_HEADER, f"frame of {len(data)} bytes has no header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(data, 0)
    if not is_interbroker(api_key):
        return Close(
            CloseCode.UNKNOWN_API_KEY,
            f"api key {api_key} is not an inter-broker api",
            api_key,
            api_version,
            correlation_id,
        )
    name = InterbrokerApiKey(api_key).name
    served = INTERBROKER_APIS[api_key]
    if api_version != served:
        return Close(
            CloseCode.UNSUPPORTED_VERSION,
            f"{name} v{api_version} is not served (serving v{served})",
            api_key,
            api_version,
            correlation_id,
        )
    try:
        header = parse_request_header(data, REQUEST_HEADER_VERSION)
    except Malformed as e:
        return Close(
            CloseCode.MALFORMED_HEADER, f"{name} v{api_version}: {e}", api_key, api_version,
            correlation_id,
        )
    r = _Reader(data, header.size)
    try:
        req = _read_request_body(r, header)
    except Malformed as e:
        return Close(
            CloseCode.MALFORMED_BODY, f"{name} v{api_version}: {e}", api_key, api_version,
            correlation_id,
        )
    if r.pos == len(data):
        return req
    return InterbrokerRequest(
        req.header, req.message, req.live_leaders, req.endpoints, len(data) - r.pos
    )


def decode_interbroker_response(
    payload: bytes | bytearray, api_key: int
) -> InterbrokerResponse | ResponseDecodeError:
    """Decode a response frame (without size prefix) to a request we sent at the served
    version.  Never raises."""
    if not is_interbroker(api_key):
        return ResponseDecodeError(None, f"api {api_key} is not an inter-broker api")
    key = InterbrokerApiKey(api_key)
    data = bytes(payload)
    if len(data) < 4:
        return ResponseDecodeError(None, f"response of {len(data)} bytes has no header")
    r = _Reader(data, 0)
    correlation_id = r.i32("correlation_id")
    try:
        error = r.i16("error_code")
        partition_errors: list[PartitionError] = []
        remaining: list[TopicPartition] = []
        if key in (InterbrokerApiKey.LEADER_AND_ISR, InterbrokerApiKey.STOP_REPLICA):
            for _ in range(r.count(_PARTITION_ERROR_MIN, "partition_errors")):
                topic = r.string("partition_errors.topic_name")
                tp = TopicPartition(topic, r.i32("partition_errors.partition_index"))
                partition_errors.append(PartitionError(tp, r.i16("partition_errors.error_code")))
        elif key == InterbrokerApiKey.CONTROLLED_SHUTDOWN:
            for _ in range(r.count(_REMAINING_MIN, "remaining_partitions")):
                topic = r.string("remaining_partitions.topic_name")
                remaining.append(
                    TopicPartition(topic, r.i32("remaining_partitions.partition_index"))
                )
    except Malformed as e:
        return ResponseDecodeError(
            correlation_id, f"malformed {key.name} v{INTERBROKER_APIS[key]} response: {e}"
        )
    return InterbrokerResponse(
        correlation_id, key, error, tuple(partition_errors), tuple(remaining)
    )
