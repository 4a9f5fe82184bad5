"""Record batch v2: header checks, CRC-32C validation, record decoding, batch building.

The header layout, its struct and the ``BatchHeader`` type live in ``broker/recordbatch.py``
(shared with the wire layer) and are re-exported here. The CRC-32C covers bytes
[21, 12 + batchLength): attributes to the end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from broker.recordbatch import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_LENGTH_MIN,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    Buf,
    header_of,
)
from broker.store import codec
from broker.store.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

__all__ = [
    "ATTR_CODEC_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_LENGTH_MIN",
    "CRC_START",
    "EPOCH",
    "HEADER",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V2",
    "NO_TIMESTAMP",
    "OFFSET_AND_LENGTH",
    "BatchHeader",
    "Buf",
    "Record",
    "build_batch",
    "check_crc",
    "check_header",
    "crc32c",
    "decode_records",
    "encode_records",
    "header_of",
    "iter_headers",
    "parse_header",
    "records_payload",
    "validate_batch",
    "validate_produced",
]

OFFSET_AND_LENGTH = struct.Struct(">qi")
EPOCH = struct.Struct(">i")

crc32c = _crc32c.crc32c


def parse_header(buf: Buf, pos: int = 0, *, where: str = "") -> BatchHeader:
    """Parse and structurally check the header at `pos` (no CRC check)."""
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"{where}truncated batch header at position {pos}: {available} of {HEADER_SIZE} bytes"
        )
    header = header_of(HEADER.unpack_from(buf, pos))
    check_header(header, pos, where=where)
    return header


def check_header(header: BatchHeader, pos: int, *, where: str = "") -> None:
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(
            f"{where}batch at position {pos} has magic {header.magic}; only magic v2 is stored"
        )
    if header.batch_length < BATCH_LENGTH_MIN:
        raise CorruptRecordError(
            f"{where}batch at position {pos} has batchLength {header.batch_length} "
            f"< minimum {BATCH_LENGTH_MIN}"
        )
    if header.last_offset_delta < 0 or header.base_offset < 0:
        raise CorruptRecordError(
            f"{where}batch at position {pos} has baseOffset {header.base_offset} "
            f"and lastOffsetDelta {header.last_offset_delta}"
        )
    if not 0 <= header.records_count <= header.last_offset_delta + 1:
        raise CorruptRecordError(
            f"{where}batch at position {pos} has recordsCount {header.records_count} but "
            f"lastOffsetDelta {header.last_offset_delta}"
        )


def check_crc(buf: Buf, pos: int, header: BatchHeader, *, where: str = "") -> None:
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"{where}truncated batch at position {pos}: batchLength {header.batch_length} needs "
            f"{header.size} bytes, {len(buf) - pos} present"
        )
    actual = crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"{where}CRC mismatch in batch at position {pos} (baseOffset {header.base_offset}): "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )


def validate_batch(buf: Buf, pos: int = 0, *, where: str = "") -> BatchHeader:
    """Header checks plus CRC32C over the covered part."""
    header = parse_header(buf, pos, where=where)
    check_crc(buf, pos, header, where=where)
    return header


def validate_produced(buf: Buf, max_message_bytes: int) -> list[BatchHeader]:
    """Validate one or more concatenated batches as a leader receives them from a producer."""
    headers: list[BatchHeader] = []
    pos = 0
    total = len(buf)
    if total == 0:
        raise InvalidRecordError("empty records: a produce must carry at least one batch")
    while pos < total:
        header = validate_batch(buf, pos)
        if header.size > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}"
            )
        if header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"produced batch has recordsCount {header.records_count} but lastOffsetDelta "
                f"{header.last_offset_delta}: records must have consecutive offset deltas"
            )
        if header.compression not in codec.NAMES:
            raise InvalidRecordError(f"unknown compression codec {header.compression}")
        headers.append(header)
        pos += header.size
    return headers


def iter_headers(buf: Buf, *, validate: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every complete batch in `buf`; stops at a trailing partial batch."""
    pos = 0
    total = len(buf)
    while total - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if pos + header.size > total:
            return
        if validate:
            check_crc(buf, pos, header)
        yield pos, header
        pos += header.size


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


def _varint(buf: Buf, pos: int) -> tuple[int, int]:
    """Zig-zag varint (as Kafka's records use) at pos -> (value, next position)."""
    result = 0
    shift = 0
    for _ in range(10):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError("varint longer than 10 bytes")


def _put_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _bytes_field(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    length, pos = _varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptRecordError("record field runs past the end of the batch")
    return bytes(buf[pos:end]), end


def records_payload(batch: Buf, header: BatchHeader) -> bytes:
    """The (decompressed) records section of a validated batch."""
    raw = bytes(memoryview(batch)[HEADER_SIZE : header.size])
    if header.compression == codec.NONE:
        return raw
    return codec.decompress(header.compression, raw)


def decode_records(batch: Buf, header: BatchHeader | None = None) -> list[Record]:
    """Every record of one batch (decompressing if needed)."""
    if header is None:
        header = validate_batch(batch)
    data = records_payload(batch, header)
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(header.records_count):
            length, pos = _varint(data, pos)
            end = pos + length
            attributes = data[pos]
            ts_delta, p = _varint(data, pos + 1)
            offset_delta, p = _varint(data, p)
            key, p = _bytes_field(data, p)
            value, p = _bytes_field(data, p)
            n_headers, p = _varint(data, p)
            hdrs: list[tuple[str, bytes | None]] = []
            for _h in range(max(0, n_headers)):
                hk, p = _bytes_field(data, p)
                hv, p = _bytes_field(data, p)
                hdrs.append(((hk or b"").decode("utf-8", "replace"), hv))
            if p != end:
                raise CorruptRecordError(
                    f"record at offset delta {offset_delta} has length {length} but fields "
                    f"take {p - pos}"
                )
            records.append(
                Record(
                    offset=header.base_offset + offset_delta,
                    timestamp=header.base_timestamp + ts_delta,
                    key=key,
                    value=value,
                    headers=tuple(hdrs),
                    attributes=attributes,
                )
            )
            pos = end
    except IndexError:
        raise CorruptRecordError("records section ends in the middle of a record") from None
    return records


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytes:
    out = bytearray()
    body = bytearray()
    for r in records:
        body.clear()
        body.append(r.attributes & 0xFF)
        _put_varint(body, r.timestamp - base_timestamp)
        _put_varint(body, r.offset - base_offset)
        for field_value in (r.key, r.value):
            if field_value is None:
                _put_varint(body, -1)
            else:
                _put_varint(body, len(field_value))
                body += field_value
        _put_varint(body, len(r.headers))
        for hk, hv in r.headers:
            hkb = hk.encode()
            _put_varint(body, len(hkb))
            body += hkb
            if hv is None:
                _put_varint(body, -1)
            else:
                _put_varint(body, len(hv))
                body += hv
        _put_varint(out, len(body))
        out += body
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode a v2 batch (compressing with the codec in `attributes`) with a correct CRC.

    `last_offset_delta` may exceed the records' span: compaction keeps the original batch's
    offset range (Kafka's `overrideLastOffset`)."""
    if last_offset_delta is None:
        last_offset_delta = (records[-1].offset - base_offset) if records else 0
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    payload = encode_records(records, base_offset, base_timestamp)
    compression = attributes & ATTR_CODEC_MASK
    if compression != codec.NONE:
        payload = codec.compress(compression, payload)
    batch = bytearray(HEADER_SIZE)
    batch += payload
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)
