"""Hand codecs for the replication data path: Produce and Fetch requests, Fetch v12 responses.

Every acks=all produce costs the leader one Produce and each follower about two Fetch round
trips, so these few messages are most of what a broker decodes and encodes. kio's generic
reader walked each one twice (`_walk` first, as a guard for its native reader), copied the
records out of the frame, and its writer checked every primitive through phantom types: a
third of a follower's CPU per fetch round went there (issue #12 profile).

- `decode_produce` / `decode_fetch` read a request frame payload (bytes, bytearray or
  memoryview) into plain slotted objects with the attribute names of kio's entities (what
  the handlers read); records stay `memoryview`s of the frame, uncopied. Anything unusual
  (a null array, a bad length, a version outside the table) raises `Malformed`, and the
  caller falls back to `decode_request`, which gives Kafka's exact answer (close, or reply).
- `encode_replica_fetch` writes a follower's Fetch v12 request; `decode_fetch_response`
  reads a Fetch v12 response into partitions whose records are `memoryview`s of the frame.

Tests check each against kio's encoding or decoding of the same message.
"""

from __future__ import annotations

import datetime
import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ._walk import Malformed, read_uvarint
from .apis import API_TABLE, ApiKey, request_header_version
from .request import Request, parse_request_header

__all__ = [
    "FetchBody",
    "FetchPartitionData",
    "FetchedPartition",
    "FetchedTopic",
    "ProduceBody",
    "decode_fast",
    "decode_fetch_response",
    "encode_replica_fetch",
]

Buf = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">hhi")
_PRODUCE_HEAD = struct.Struct(">hi")  # acks, timeout_ms
_FETCH_PART_V12 = struct.Struct(">iiqiqi")  # partition .. partition_max_bytes (v12)
_RESP_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_RESP_PART = struct.Struct(">ihqqq")  # index, error, high_watermark, last_stable, log_start


class _Reader:
    """A bounds-checked cursor over one frame."""

    __slots__ = ("buf", "end", "flexible", "pos")

    def __init__(self, buf: Buf, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.flexible = flexible

    def need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise Malformed(f"needs {n} bytes at {p}, {self.end - p} left")
        self.pos = p + n
        return p

    def i8(self) -> int:
        return int(_I8.unpack_from(self.buf, self.need(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack_from(self.buf, self.need(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack_from(self.buf, self.need(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack_from(self.buf, self.need(8))[0])

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos, self.end)  # type: ignore[arg-type]
        return value

    def count(self) -> int:
        """A non-nullable array's length (null is `Malformed`: the slow path decides)."""
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0 or n > self.end - self.pos:  # every element takes at least one byte
            raise Malformed(f"array length {n}")
        return n

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if n == -1:
                return None
            raise Malformed(f"string length {n}")
        p = self.need(n)
        return bytes(self.buf[p:p + n]).decode("utf-8")

    def name(self) -> str:
        s = self.string()
        if s is None:
            raise Malformed("null name")
        return s

    def records(self) -> memoryview | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            if n == -1:
                return None
            raise Malformed(f"bytes length {n}")
        p = self.need(n)
        return memoryview(self.buf)[p:p + n].toreadonly()  # hashable, and never written

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.need(self.uvarint())


# -- Produce (v3-v9) ---------------------------------------------------------------------------


@dataclass(slots=True)
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopic:
    name: str
    partition_data: tuple[ProducePartition, ...]


@dataclass(slots=True)
class ProduceBody:
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[ProduceTopic, ...]


def _produce_body(r: _Reader) -> ProduceBody:
    transactional_id = r.string()
    acks, timeout_ms = _PRODUCE_HEAD.unpack_from(r.buf, r.need(6))
    topics = []
    for _ in range(r.count()):
        name = r.name()
        parts = []
        for _ in range(r.count()):
            index = r.i32()
            parts.append(ProducePartition(index, r.records()))
            r.skip_tags()
        topics.append(ProduceTopic(name, tuple(parts)))
        r.skip_tags()
    r.skip_tags()
    return ProduceBody(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms),
                       tuple(topics))


# -- Fetch (v4-v12) ----------------------------------------------------------------------------


@dataclass(slots=True)
class FetchPartitionData:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopicData:
    topic: str
    partitions: tuple[FetchPartitionData, ...]


@dataclass(slots=True)
class FetchBody:
    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: tuple[FetchTopicData, ...]
    rack_id: str


# Fetch's fixed-size parts by version, each read with one unpack (a follower sends one
# Fetch per replication round: field-by-field reads were most of its decoding)
_FETCH_HEAD_V4 = struct.Struct(">iiiib")  # replica_id, max_wait_ms, min/max_bytes, isolation
_FETCH_HEAD_V7 = struct.Struct(">iiiibii")  # ... session_id, session_epoch


@functools.cache
def _fetch_partition_struct(v: int) -> struct.Struct:
    """partition, [current_leader_epoch v9+], fetch_offset, [last_fetched_epoch v12+],
    [log_start_offset v5+], partition_max_bytes."""
    return struct.Struct(">i" + ("i" if v >= 9 else "") + "q" + ("i" if v >= 12 else "")
                         + ("q" if v >= 5 else "") + "i")


def _fetch_partition(r: _Reader, v: int, st: struct.Struct) -> FetchPartitionData:
    f = st.unpack_from(r.buf, r.need(st.size))
    if v >= 12:
        return FetchPartitionData(f[0], f[1], f[2], f[3], f[4], f[5])
    if v >= 9:
        return FetchPartitionData(f[0], f[1], f[2], -1, f[3], f[4])
    if v >= 5:
        return FetchPartitionData(f[0], -1, f[1], -1, f[2], f[3])
    return FetchPartitionData(f[0], -1, f[1], -1, -1, f[2])


def _fetch_body(r: _Reader, v: int) -> FetchBody:
    session_id = session_epoch = -1
    if v >= 7:
        (replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
         session_epoch) = _FETCH_HEAD_V7.unpack_from(r.buf, r.need(_FETCH_HEAD_V7.size))
    else:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level = \
            _FETCH_HEAD_V4.unpack_from(r.buf, r.need(_FETCH_HEAD_V4.size))
    st = _fetch_partition_struct(v)
    topics = []
    for _ in range(r.count()):
        topic = r.name()
        parts = []
        for _ in range(r.count()):
            parts.append(_fetch_partition(r, v, st))
            r.skip_tags()
        topics.append(FetchTopicData(topic, tuple(parts)))
        r.skip_tags()
    if v >= 7:
        for _ in range(r.count()):  # forgotten topics: no fetch sessions here, read and dropped
            r.name()
            r.need(4 * r.count())
            r.skip_tags()
    rack_id = r.name() if v >= 11 else ""
    r.skip_tags()
    return FetchBody(replica_id, datetime.timedelta(milliseconds=max_wait_ms), min_bytes,
                     max_bytes, isolation_level, session_id, session_epoch, tuple(topics),
                     rack_id)


def decode_fast(payload: Buf) -> Request | None:
    """A Produce or Fetch request decoded by hand, or None when the slow path must decide
    (another API, a version outside the table, anything malformed or unusual)."""
    if len(payload) < _HEAD.size:
        return None
    api_key, version, _ = _HEAD.unpack_from(payload, 0)
    if api_key not in (ApiKey.PRODUCE, ApiKey.FETCH):
        return None
    support = API_TABLE.get(api_key)
    if support is None or not support.serves(version):
        return None
    flexible = support.is_flexible(version)
    try:
        header = parse_request_header(payload, request_header_version(support, version))  # type: ignore[arg-type]
        r = _Reader(payload, header.size, flexible)
        body = _produce_body(r) if api_key == ApiKey.PRODUCE else _fetch_body(r, version)
    except (Malformed, struct.error, UnicodeDecodeError):
        return None
    return Request(header, body, r.end - r.pos)  # type: ignore[arg-type]


# -- the follower's side: Fetch v12 out, its response in ---------------------------------------


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    partition_max_bytes: int


def encode_replica_fetch(
    correlation_id: int, client_id: str, replica_id: int, max_wait_ms: int, min_bytes: int,
    max_bytes: int, topics: Sequence[tuple[str, Sequence[FetchPartitionRequest]]],
) -> bytes:
    """A follower's Fetch v12 request frame (header v2, no session, no rack, read
    uncommitted), byte for byte what kio writes for the same request."""
    cid = client_id.encode("utf-8")
    out = [_HEAD.pack(ApiKey.FETCH, 12, correlation_id), _I16.pack(len(cid)), cid, b"\x00",
           struct.pack(">iiiibii", replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1),
           _uvarint(len(topics) + 1)]
    for topic, parts in topics:
        out.append(_compact_string(topic))
        out.append(_uvarint(len(parts) + 1))
        for p in parts:
            out.append(_FETCH_PART_V12.pack(p.partition, p.current_leader_epoch, p.fetch_offset,
                                            p.last_fetched_epoch, -1, p.partition_max_bytes))
            out.append(b"\x00")
        out.append(b"\x00")
    out.append(b"\x01\x01\x00")  # no forgotten topics, rack_id "", no tagged fields
    body = b"".join(out)
    return _I32.pack(len(body)) + body


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None
    diverging_end_offset: int  # -1 without a diverging epoch


@dataclass(slots=True)
class FetchedTopic:
    topic: str
    partitions: tuple[FetchedPartition, ...]


def decode_fetch_response(payload: Buf) -> tuple[int, int, tuple[FetchedTopic, ...]]:
    """(correlation_id, error_code, topics) of a Fetch v12 response frame payload; records
    are views of `payload`. Raises `Malformed` on anything that does not parse."""
    try:
        r = _Reader(payload, 0, True)
        correlation_id = r.i32()
        r.skip_tags()
        _, error_code, _ = _RESP_TOP.unpack_from(r.buf, r.need(10))
        topics = []
        for _ in range(r.count()):
            topic = r.name()
            parts = []
            for _ in range(r.count()):
                index, error, hw, lso, lso_start = _RESP_PART.unpack_from(r.buf, r.need(30))
                aborted = r.uvarint() - 1
                if aborted > 0:
                    for _ in range(aborted):
                        r.need(16)
                        r.skip_tags()
                r.need(4)  # preferred_read_replica
                records = r.records()
                diverging = -1
                for _ in range(r.uvarint()):
                    tag, size = r.uvarint(), r.uvarint()
                    start = r.need(size)
                    if tag == 0 and size >= 12:
                        diverging = int(_I64.unpack_from(r.buf, start + 4)[0])
                parts.append(FetchedPartition(index, error, hw, lso, lso_start, records,
                                              diverging))
            topics.append(FetchedTopic(topic, tuple(parts)))
            r.skip_tags()
        r.skip_tags()
    except (struct.error, UnicodeDecodeError) as e:
        raise Malformed(str(e)) from None
    return correlation_id, error_code, tuple(topics)


# -- the Produce response (v3-v9) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    index: int
    error_code: int
    base_offset: int
    log_start_offset: int


def encode_produce_response(
    version: int, correlation_id: int,
    topics: Sequence[tuple[str, Sequence[ProducePartitionResult]]], throttle_time_ms: int,
) -> bytes:
    """A Produce response frame (v3-v9), byte for byte what kio writes for the same values
    with log_append_time -1, no record errors and no error message."""
    if not 3 <= version <= 9:
        raise ValueError(f"Produce v{version} is not encoded here (3-9)")
    flexible = version >= 9
    out = [_I32.pack(correlation_id)]
    if flexible:
        out.append(b"\x00")
    out.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, parts in topics:
        if flexible:
            out.append(_compact_string(name))
            out.append(_uvarint(len(parts) + 1))
        else:
            raw = name.encode("utf-8")
            out.append(_I16.pack(len(raw)) + raw)
            out.append(_I32.pack(len(parts)))
        for p in parts:
            out.append(struct.pack(">ihqq", p.index, p.error_code, p.base_offset, -1))
            if version >= 5:
                out.append(_I64.pack(p.log_start_offset))
            if version >= 8:  # record_errors empty, error_message null
                out.append(b"\x01\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff")
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(throttle_time_ms))
    if flexible:
        out.append(b"\x00")
    body = b"".join(out)
    return _I32.pack(len(body)) + body
