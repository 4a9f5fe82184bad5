"""`hiwater dump-log FILE [--deep-iteration]`: Kafka's DumpLogSegments for our segment files.

Prints every batch of a `.log` file (offsets, position, size, CRC and its validity, magic,
compression, producer id/epoch/sequence, leader epoch, timestamps), and with deep iteration every
record (offset, timestamp, key, value, headers). `.index` and `.timeindex` files print their
entries. Exit code: 0 when everything is valid, 1 when corruption was found, 2 when the file
cannot be read or is of an unknown kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from broker.store.batch import (
    HEADER,
    HEADER_SIZE,
    BatchHeader,
    check_crc,
    check_header,
    crc32c,
    decode_records,
)
from broker.store.errors import CorruptIndexError, CorruptRecordError
from broker.store.index import OFFSET_ENTRY, TIME_ENTRY
from broker.store.segment import parse_stem

VALUE_PREVIEW_MAX = 200  # printed characters of a key or value


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    text = data.decode("utf-8", "backslashreplace")
    if len(text) > VALUE_PREVIEW_MAX:
        return text[:VALUE_PREVIEW_MAX] + f"...({len(data)} bytes)"
    return text


def dump_log(path: Path, deep_iteration: bool, out: TextIO) -> int:
    """Dump one segment file to `out`; returns the exit code."""
    try:
        data = path.read_bytes()
    except OSError as e:
        out.write(f"cannot read {path}: {e.strerror or e}\n")
        return 2
    base = parse_stem(path.name)
    out.write(f"Dumping {path}\n")
    if path.name.endswith(".log"):
        return _dump_segment(data, base, deep_iteration, out)
    if path.name.endswith(".index"):
        return _dump_index(data, base or 0, out)
    if path.name.endswith(".timeindex"):
        return _dump_time_index(data, base or 0, out)
    out.write(f"{path.name}: unknown file kind (expected .log, .index or .timeindex)\n")
    return 2


def _batch_line(h: BatchHeader, position: int, crc_ok: bool) -> str:
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    horizon = h.delete_horizon_ms
    horizon_text = f"OptionalLong[{horizon}]" if horizon is not None else "OptionalLong.empty"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon_text} "
        f"position: {position} {ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {h.compression_name} crc: {h.crc} isvalid: {str(crc_ok).lower()}"
    )


def _dump_segment(data: bytes, base: int | None, deep: bool, out: TextIO) -> int:
    if base is not None:
        out.write(f"Log starting offset: {base}\n")
    position = 0
    total = len(data)
    code = 0
    while position < total:
        if total - position < HEADER_SIZE:
            out.write(
                f"Found {total - position} trailing bytes at position {position}: a partial "
                f"batch header (torn write?)\n"
            )
            return 1
        h = BatchHeader._make(HEADER.unpack_from(data, position))
        try:
            check_header(h, position)
        except CorruptRecordError as e:
            out.write(f"Found invalid batch header at position {position}: {e}\n")
            return 1
        if position + h.size > total:
            out.write(
                f"Found truncated batch at position {position}: size {h.size}, "
                f"{total - position} bytes left\n"
            )
            return 1
        crc_ok = crc32c(memoryview(data)[position + 21 : position + h.size]) == h.crc
        out.write(_batch_line(h, position, crc_ok) + "\n")
        if not crc_ok:
            out.write(f"Found invalid batch at position {position}: CRC mismatch\n")
            code = 1
        elif deep:
            code = max(code, _dump_records(data, position, h, out))
        position += h.size
    return code


def _dump_records(data: bytes, position: int, h: BatchHeader, out: TextIO) -> int:
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    batch = data[position : position + h.size]
    try:
        check_crc(batch, 0, h)
        records = decode_records(batch, h)
    except CorruptRecordError as e:
        out.write(f"Found undecodable records in batch at position {position}: {e}\n")
        return 1
    for i, r in enumerate(records):
        sequence = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
        timestamp = h.max_timestamp if h.is_log_append_time else r.timestamp
        header_keys = "[" + ",".join(k for k, _ in r.headers) + "]"
        out.write(
            f"| offset: {r.offset} {ts_type}: {timestamp} "
            f"keySize: {-1 if r.key is None else len(r.key)} "
            f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {sequence} "
            f"headerKeys: {header_keys} key: {_text(r.key)} payload: {_text(r.value)}\n"
        )
        if i + 1 >= 1_000_000:
            break
    return 0


def _dump_index(data: bytes, base: int, out: TextIO) -> int:
    usable = len(data) - len(data) % OFFSET_ENTRY.size
    last = (-1, -1)
    code = 0
    for rel, pos in OFFSET_ENTRY.iter_unpack(data[:usable]):
        if rel == 0 and pos == 0 and last != (-1, -1):
            break  # zero padding of a preallocated index
        out.write(f"offset: {base + rel} position: {pos}\n")
        if (rel, pos) <= last or rel < 0 or pos < 0:
            out.write(str(CorruptIndexError(f"entry ({rel}, {pos}) does not ascend")) + "\n")
            code = 1
        last = (rel, pos)
    if usable != len(data):
        out.write(f"index size {len(data)} is not a multiple of {OFFSET_ENTRY.size}\n")
        code = 1
    return code


def _dump_time_index(data: bytes, base: int, out: TextIO) -> int:
    usable = len(data) - len(data) % TIME_ENTRY.size
    code = 0
    last = -(2**63)
    for ts, rel in TIME_ENTRY.iter_unpack(data[:usable]):
        out.write(f"timestamp: {ts} offset: {base + rel}\n")
        if ts <= last:
            out.write(f"timestamp {ts} does not ascend\n")
            code = 1
        last = ts
    if usable != len(data):
        out.write(f"time index size {len(data)} is not a multiple of {TIME_ENTRY.size}\n")
        code = 1
    return code
