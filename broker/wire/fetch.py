"""Hand-encoded Fetch responses (v4–v12) whose record sets stay in files.

The response is produced as chunks: for each partition, the bytes before its ``records`` field
(including the records length prefix), then the records themselves as ``FileRegion``s (to send
with ``os.sendfile``) or inline bytes, then the bytes after them.  The frame size is known
before anything is sent, because every region's length is.

Layout (Kafka ``FetchResponse.json``; ``[vN+]`` marks version-dependent fields; arrays and
strings are int32/int16-length prefixed, or uvarint(n+1)-prefixed in flexible v12)::

    header: correlation_id [v12: tagged fields]
    throttle_time_ms i32 | [v7+] error_code i16, session_id i32 | responses ARRAY(
        topic STRING | partitions ARRAY(
            partition_index i32, error_code i16, high_watermark i64, last_stable_offset i64,
            [v5+] log_start_offset i64,
            aborted_transactions nullable ARRAY(producer_id i64, first_offset i64 [v12: tags]),
            [v11+] preferred_read_replica i32,
            records nullable BYTES
            [v12] tagged fields: 0 diverging_epoch, 1 current_leader, 2 snapshot_id )
        [v12] tagged fields ) [v12] tagged fields

Tagged fields equal to their defaults are omitted, as Kafka's generated code (and kio) do, so
the output is byte-identical to kio's encoding of the same response with records inlined.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .chunks import Chunk, ChunkCollector, ResponseFrame, chunk_length

__all__ = [
    "FETCH_MAX_VERSION",
    "FETCH_MIN_VERSION",
    "AbortedTransaction",
    "EpochEndOffset",
    "FetchPartitionResponse",
    "FetchResponseBody",
    "FetchTopicResponse",
    "LeaderIdAndEpoch",
    "SnapshotId",
    "encode_fetch_response",
    "write_uvarint",
]

FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 12
_FLEXIBLE_FROM = 12

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TOP_V4 = struct.Struct(">i")  # throttle_time_ms
_TOP_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART_V4 = struct.Struct(">ihqq")  # index, error, high_watermark, last_stable_offset
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
_ABORTED = struct.Struct(">qq")


def write_uvarint(value: int) -> bytes:
    """Unsigned varint (Kafka ``ByteUtils.writeUnsignedVarint``)."""
    if value < 0:
        raise ValueError(f"uvarint of negative {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """v12 tag 0: the follower's log diverges from the leader's at ``end_offset``."""

    epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class LeaderIdAndEpoch:
    """v12 tag 1: the current leader, when the fetch went to a non-leader."""

    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """v12 tag 2 (KRaft snapshots; kept for completeness)."""

    end_offset: int = -1
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    partition_index: int
    high_watermark: int
    error_code: int = 0
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] | None = ()
    preferred_read_replica: int = -1
    records: tuple[Chunk, ...] | None = ()
    """Concatenated record batches: file regions and/or inline bytes; ``None`` encodes null."""
    diverging_epoch: EpochEndOffset | None = None
    current_leader: LeaderIdAndEpoch | None = None
    snapshot_id: SnapshotId | None = None

    @property
    def records_length(self) -> int:
        return sum(chunk_length(c) for c in self.records) if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class FetchResponseBody:
    responses: tuple[FetchTopicResponse, ...]
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0


def _array_len(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return write_uvarint(0 if n is None else n + 1)
    return _I32.pack(-1 if n is None else n)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode("utf-8")
    if flexible:
        return write_uvarint(len(raw) + 1) + raw
    if len(raw) > 0x7FFF:
        raise ValueError(f"topic name of {len(raw)} bytes")
    return _I16.pack(len(raw)) + raw


def _tag(tag: int, payload: bytes) -> bytes:
    return write_uvarint(tag) + write_uvarint(len(payload)) + payload


def _partition_tags(p: FetchPartitionResponse) -> bytes:
    tags: list[bytes] = []
    if p.diverging_epoch is not None and p.diverging_epoch != EpochEndOffset():
        d = p.diverging_epoch
        tags.append(_tag(0, _I32.pack(d.epoch) + _I64.pack(d.end_offset) + b"\x00"))
    if p.current_leader is not None and p.current_leader != LeaderIdAndEpoch():
        c = p.current_leader
        tags.append(_tag(1, _I32.pack(c.leader_id) + _I32.pack(c.leader_epoch) + b"\x00"))
    if p.snapshot_id is not None and p.snapshot_id != SnapshotId():
        s = p.snapshot_id
        tags.append(_tag(2, _I64.pack(s.end_offset) + _I32.pack(s.epoch) + b"\x00"))
    return write_uvarint(len(tags)) + b"".join(tags)


def _write_partition(
    out: ChunkCollector, p: FetchPartitionResponse, version: int, flexible: bool
) -> None:
    if version >= 5:
        head = _PART_V5.pack(
            p.partition_index,
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
        )
    else:
        head = _PART_V4.pack(
            p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
        )
    parts = [head]
    aborted = p.aborted_transactions
    parts.append(_array_len(None if aborted is None else len(aborted), flexible))
    if aborted:
        for a in aborted:
            parts.append(_ABORTED.pack(a.producer_id, a.first_offset))
            if flexible:
                parts.append(b"\x00")
    if version >= 11:
        parts.append(_I32.pack(p.preferred_read_replica))
    if p.records is None:
        parts.append(b"\x00" if flexible else _I32.pack(-1))
        out.write(b"".join(parts))
    else:
        n = p.records_length
        if n > 0x7FFFFFFF - 1:
            raise ValueError(f"records of {n} bytes do not fit a Kafka BYTES field")
        parts.append(write_uvarint(n + 1) if flexible else _I32.pack(n))
        out.write(b"".join(parts))
        out.extend(p.records)
    if flexible:
        out.write(_partition_tags(p))


def encode_fetch_response(
    version: int, correlation_id: int, body: FetchResponseBody
) -> ResponseFrame:
    """Frame a FetchResponse of ``version`` (4–12) as chunks; ``size`` is the frame prefix."""
    if not FETCH_MIN_VERSION <= version <= FETCH_MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not encoded here ({FETCH_MIN_VERSION}-12)")
    flexible = version >= _FLEXIBLE_FROM
    out = ChunkCollector()
    head = [_I32.pack(correlation_id)]
    if flexible:
        head.append(b"\x00")  # response header v1 tagged fields
    if version >= 7:
        head.append(_TOP_V7.pack(body.throttle_time_ms, body.error_code, body.session_id))
    else:
        head.append(_TOP_V4.pack(body.throttle_time_ms))
    head.append(_array_len(len(body.responses), flexible))
    out.write(b"".join(head))
    for t in body.responses:
        out.write(_string(t.topic, flexible) + _array_len(len(t.partitions), flexible))
        for p in t.partitions:
            _write_partition(out, p, version, flexible)
        if flexible:
            out.write(b"\x00")
    if flexible:
        out.write(b"\x00")
    return out.finish()
