"""Record batch v2 header: the one definition both ``broker/store`` and ``broker/wire`` read.

Layout (big-endian, 61 bytes, ``>qiiBIhiqqqhii``)::

    0 baseOffset i64 | 8 batchLength i32 (bytes after this field) | 12 partitionLeaderEpoch i32
    16 magic i8 (2) | 17 crc u32 over [21, 12+batchLength) | 21 attributes i16
    23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64
    51 producerEpoch i16 | 53 baseSequence i32 | 57 recordsCount i32 | 61 records...

baseOffset and partitionLeaderEpoch lie outside the CRC-32C, so a broker rewrites them without
recomputing it.  This module only describes the header; the store does full validation (CRC,
record decoding) and the wire layer its own lenient, error-returning scan.  No I/O, no
dependency on either.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

HEADER = struct.Struct(">qiiBIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batch size = 12 + batchLength
BATCH_LENGTH_MIN = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_OFFSET = 16
CRC_OFFSET = 17
CRC_START = 21
MAGIC_V2 = 2

NO_SEQUENCE = -1
NO_TIMESTAMP = -1

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# Compression codec ids (attributes bits 0-2).
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

Buf = bytes | bytearray | memoryview


class BatchHeader(NamedTuple):
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
    records_count: int

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
        return self.attributes & ATTR_CODEC_MASK

    @property
    def compression_name(self) -> str:
        return CODEC_NAMES.get(self.compression, f"unknown({self.compression})")

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when set, baseTimestamp holds the time after which tombstones may go."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at Int32.MaxValue), or -1 without a sequence."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


# `BatchHeader._make` without its Python frame and its length test (`HEADER` unpacks exactly
# the header's fields): headers are parsed on every read, several per batch.
header_of: Callable[[tuple[Any, ...]], BatchHeader] = functools.partial(
    tuple.__new__, BatchHeader)


def unpack_header(buf: Buf, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos`` without checking it; the caller ensures 61 bytes are there."""
    return header_of(HEADER.unpack_from(buf, pos))
