"""Record batch v2 headers (the 61 bytes before the records), for the wire layer's own needs.

``broker/store`` owns full batch validation (CRC-32C, sequences); this module only reads the
header so that wire-level code can split a ``records`` field into batches and report what it
holds, without depending on the store.

Layout (big-endian, ``>qiiBIhiqqqhii``)::

    0 baseOffset i64 | 8 batchLength i32 (bytes after this field) | 12 partitionLeaderEpoch i32
    16 magic i8 (2) | 17 crc u32 over [21, 12+batchLength) | 21 attributes i16
    23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64
    51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 records...
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchError",
    "BatchHeader",
    "BatchScan",
    "parse_batch_header",
    "scan_batches",
]

BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")
BATCH_HEADER_SIZE = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batch size = 12 + batchLength
CURRENT_MAGIC = 2
NO_SEQUENCE = -1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (``12 + batchLength``)."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & _COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & _TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at Int32.MaxValue), or -1 without a sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


@dataclass(frozen=True, slots=True)
class BatchError:
    position: int
    reason: str


def parse_batch_header(
    buf: bytes | bytearray | memoryview, position: int = 0
) -> BatchHeader | BatchError:
    """Read the batch header at ``position``; checks magic and that the length is plausible.

    It does not check that the whole batch is present (``scan_batches`` does) nor the CRC.
    """
    available = len(buf) - position
    if position < 0 or available < BATCH_HEADER_SIZE:
        return BatchError(
            position, f"batch header needs {BATCH_HEADER_SIZE} bytes, {available} left"
        )
    h = BatchHeader(*BATCH_HEADER.unpack_from(buf, position))
    if h.magic != CURRENT_MAGIC:
        return BatchError(position, f"magic {h.magic}, only magic 2 is supported")
    if h.size < BATCH_HEADER_SIZE:
        return BatchError(position, f"batchLength {h.batch_length} is shorter than the header")
    if h.last_offset_delta < 0 or h.record_count < 0:
        return BatchError(
            position, f"negative lastOffsetDelta {h.last_offset_delta} or count {h.record_count}"
        )
    return h


@dataclass(frozen=True, slots=True)
class BatchScan:
    """The whole batches at the start of a record set, and why scanning stopped (if not at end)."""

    batches: tuple[tuple[int, BatchHeader], ...]
    """(position, header) of each complete batch, in order."""
    valid_bytes: int
    """Length of the prefix made of complete batches."""
    error: BatchError | None
    """Why the remaining bytes are not a complete batch; ``None`` if everything was consumed."""


def scan_batches(buf: bytes | bytearray | memoryview, max_batches: int | None = None) -> BatchScan:
    """Split a ``records`` field into batches by their headers (at most ``max_batches``)."""
    pos = 0
    end = len(buf)
    out: list[tuple[int, BatchHeader]] = []
    while pos < end:
        if max_batches is not None and len(out) >= max_batches:
            return BatchScan(tuple(out), pos, BatchError(pos, f"more than {max_batches} batches"))
        h = parse_batch_header(buf, pos)
        if isinstance(h, BatchError):
            return BatchScan(tuple(out), pos, h)
        if pos + h.size > end:
            return BatchScan(
                tuple(out),
                pos,
                BatchError(pos, f"truncated batch: {h.size} bytes declared, {end - pos} present"),
            )
        out.append((pos, h))
        pos += h.size
    return BatchScan(tuple(out), pos, None)
