"""Record batch v2 header parsing, and the superset entity builder."""

from __future__ import annotations

import dataclasses
import datetime
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kio.schema.errors import ErrorCode

from broker.wire import (
    BATCH_HEADER_SIZE,
    ApiKey,
    BatchError,
    BatchHeader,
    BuildError,
    build,
    parse_batch_header,
    response_class,
    scan_batches,
)

from ._common import record_batch


def test_header_matches_kafka_python_reader() -> None:
    raw = record_batch(4, base_sequence=17, producer_id=99)
    h = parse_batch_header(raw)
    assert isinstance(h, BatchHeader)
    kp = DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert h.size == len(raw) and BATCH_HEADER_SIZE == 61
    assert (h.base_offset, h.magic, h.crc) == (kp.base_offset, 2, kp.crc)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (99, 0, 17)
    assert (h.records_count, h.last_offset_delta) == (4, 3)
    assert (h.last_offset, h.next_offset, h.last_sequence) == (3, 4, 20)
    assert h.compression == 0 and not h.is_transactional and not h.is_control
    assert not h.is_log_append_time and not h.has_delete_horizon


def test_last_sequence_wraps_and_absent() -> None:
    h = parse_batch_header(record_batch(3, base_sequence=2**31 - 2, producer_id=1))
    assert isinstance(h, BatchHeader) and h.last_sequence == 0
    h = parse_batch_header(record_batch(3))
    assert isinstance(h, BatchHeader) and h.last_sequence == -1


def test_scan_batches() -> None:
    batches = [record_batch(n) for n in (1, 2, 3)]
    blob = b"".join(batches)
    scan = scan_batches(blob)
    assert scan.error is None and scan.valid_bytes == len(blob)
    assert [pos for pos, _ in scan.batches] == [
        0,
        len(batches[0]),
        len(batches[0]) + len(batches[1]),
    ]
    cut = scan_batches(blob[:-1])
    assert len(cut.batches) == 2 and cut.error is not None and "truncated" in cut.error.reason
    limited = scan_batches(blob, max_batches=1)
    assert len(limited.batches) == 1 and limited.error is not None
    assert scan_batches(b"").batches == () and scan_batches(b"").error is None


def test_bad_headers() -> None:
    raw = bytearray(record_batch(2))
    assert isinstance(parse_batch_header(bytes(raw[:60])), BatchError)
    bad_magic = bytearray(raw)
    bad_magic[16] = 1
    assert "magic" in parse_batch_header(bytes(bad_magic)).reason  # type: ignore[union-attr]
    short = bytearray(raw)
    struct.pack_into(">i", short, 8, 10)
    assert isinstance(parse_batch_header(bytes(short)), BatchError)
    neg = bytearray(raw)
    struct.pack_into(">i", neg, 57, -5)
    assert isinstance(parse_batch_header(bytes(neg)), BatchError)
    assert isinstance(parse_batch_header(raw, -1), BatchError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_scan_never_raises(data: bytes) -> None:
    scan = scan_batches(data)
    assert scan.valid_bytes <= len(data)
    assert (scan.error is None) == (scan.valid_bytes == len(data))


def test_build_drops_unknown_and_converts() -> None:
    cls = response_class(ApiKey.JOIN_GROUP, 2)
    body = build(
        cls,
        {
            "throttle_time_ms": 12,
            "error_code": 79,
            "generation_id": 1,
            "protocol_name": "range",
            "leader": "a",
            "member_id": "a",
            "members": [{"member_id": "a", "group_instance_id": "i", "metadata": b"m"}],
            "skip_assignment": True,  # v9 only: dropped
            "not_a_field": 1,
        },
    )
    assert body.throttle_time == datetime.timedelta(milliseconds=12)  # type: ignore[attr-defined]
    assert body.error_code is ErrorCode.member_id_required  # type: ignore[attr-defined]
    member = body.members[0]  # type: ignore[attr-defined]
    assert not any(f.name == "group_instance_id" for f in dataclasses.fields(member))
    assert build(cls, body) is body  # an instance of the class passes through


def test_build_reports_missing_and_bad_shapes() -> None:
    cls = response_class(ApiKey.FIND_COORDINATOR, 1)
    with pytest.raises(BuildError, match="node_id"):
        build(cls, error_code=0, host="h", port=1, error_message=None)
    with pytest.raises(BuildError, match="unknown error code"):
        build(response_class(ApiKey.HEARTBEAT, 0), error_code=12345)
    meta = response_class(ApiKey.METADATA, 1)
    with pytest.raises(BuildError, match="expected an array"):
        build(meta, brokers="nope", topics=[], controller_id=1)
    with pytest.raises(BuildError, match="mapping or a dataclass"):
        build(meta, brokers=[1], topics=[], controller_id=1)


def test_build_datetime_and_nested_dataclass_source() -> None:
    cls = response_class(ApiKey.PRODUCE, 5)

    @dataclasses.dataclass
    class Part:
        index: int
        error_code: int
        base_offset: int
        log_append_time: int
        log_start_offset: int

    body = build(cls, responses=[{"name": "t", "partition_responses": [Part(0, 0, 5, 1000, 0)]}])
    p = body.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    assert p.log_append_time == datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)
