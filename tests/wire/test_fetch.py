"""Hand-encoded Fetch responses: chunks + file regions == kio's encoding with records inlined."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.record.memory_records import MemoryRecords

from broker.wire import (
    API_TABLE,
    AbortedTransaction,
    ApiKey,
    DecodedResponse,
    EpochEndOffset,
    FetchPartitionResponse,
    FetchResponseBody,
    FetchTopicResponse,
    FileRegion,
    LeaderIdAndEpoch,
    SnapshotId,
    build,
    decode_response,
    encode_fetch_response,
    encode_response,
    response_class,
)

from ._common import record_batch

FETCH = API_TABLE[ApiKey.FETCH]
VERSIONS = list(range(FETCH.min_version, FETCH.max_version + 1))
BATCHES = [record_batch(n) for n in (1, 3, 5)]


@pytest.fixture
def segment(tmp_path: pathlib.Path) -> tuple[str, list[tuple[int, int]]]:
    """A file holding the batches after some unrelated leading bytes; (path, [(pos, len)])."""
    path = tmp_path / "00000000000000000000.log"
    data = b"JUNK" * 10
    regions = []
    for b in BATCHES:
        regions.append((len(data), len(b)))
        data += b
    path.write_bytes(data + b"TAIL")
    return str(path), regions


def inline(chunks: tuple[Any, ...] | None) -> bytes | None:
    if chunks is None:
        return None
    return b"".join(c.read() if isinstance(c, FileRegion) else c for c in chunks)


def to_kio(version: int, body: FetchResponseBody) -> Any:
    """The same response as a kio entity with the records inlined."""
    data = {
        "throttle_time_ms": body.throttle_time_ms,
        "error_code": body.error_code,
        "session_id": body.session_id,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": (
                            None
                            if p.aborted_transactions is None
                            else [
                                {"producer_id": a.producer_id, "first_offset": a.first_offset}
                                for a in p.aborted_transactions
                            ]
                        ),
                        "preferred_read_replica": p.preferred_read_replica,
                        "records": inline(p.records),
                        **(
                            {"diverging_epoch": p.diverging_epoch}
                            if p.diverging_epoch is not None
                            else {}
                        ),
                        **(
                            {"current_leader": p.current_leader}
                            if p.current_leader is not None
                            else {}
                        ),
                        **({"snapshot_id": p.snapshot_id} if p.snapshot_id is not None else {}),
                    }
                    for p in t.partitions
                ],
            }
            for t in body.responses
        ],
    }
    return build(response_class(ApiKey.FETCH, version), data)


def sample_body(path: str, regions: list[tuple[int, int]], fd: int) -> FetchResponseBody:
    r0, r1, r2 = (FileRegion(path, pos, n) for pos, n in regions)
    return FetchResponseBody(
        throttle_time_ms=3,
        error_code=0,
        session_id=0,
        responses=(
            FetchTopicResponse(
                "orders",
                (
                    FetchPartitionResponse(
                        partition_index=0,
                        high_watermark=9,
                        last_stable_offset=9,
                        log_start_offset=0,
                        records=(r0, r1, r2),
                    ),
                    FetchPartitionResponse(
                        partition_index=1,
                        error_code=1,
                        high_watermark=0,
                        records=(),
                        aborted_transactions=None,
                    ),
                    FetchPartitionResponse(
                        partition_index=2,
                        high_watermark=100,
                        records=(FileRegion(fd, regions[1][0], regions[1][1]), BATCHES[0]),
                        aborted_transactions=(AbortedTransaction(7, 3), AbortedTransaction(8, 4)),
                        preferred_read_replica=2,
                        diverging_epoch=EpochEndOffset(epoch=2, end_offset=40),
                        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
                    ),
                    FetchPartitionResponse(
                        partition_index=3,
                        high_watermark=1,
                        records=None,
                        snapshot_id=SnapshotId(end_offset=10, epoch=1),
                        diverging_epoch=EpochEndOffset(),  # default: omitted, like kio
                    ),
                ),
            ),
            FetchTopicResponse("empty", ()),
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_chunks_equal_kio_encoding(
    version: int, segment: tuple[str, list[tuple[int, int]]]
) -> None:
    path, regions = segment
    fd = os.open(path, os.O_RDONLY)
    try:
        body = sample_body(path, regions, fd)
        frame = encode_fetch_response(version, 4242, body)
        wire = frame.to_bytes()
        expected = encode_response(4242, to_kio(version, body))
        assert wire == expected
        assert frame.size == len(expected) - 4 == int.from_bytes(wire[:4], "big")
        assert frame.wire_length == len(expected)
        # Record bytes are never copied: every file region survives as its own chunk.
        assert sum(isinstance(c, FileRegion) for c in frame.chunks) == 4
    finally:
        os.close(fd)


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_reads_records(
    version: int, segment: tuple[str, list[tuple[int, int]]]
) -> None:
    path, regions = segment
    fd = os.open(path, os.O_RDONLY)
    try:
        wire = encode_fetch_response(version, 1, sample_body(path, regions, fd)).to_bytes()
    finally:
        os.close(fd)
    kp = KpFetchResponse.decode(wire, version=version, header=True, framed=True)
    assert kp.header.correlation_id == 1
    p0 = kp.responses[0].partitions[0]
    assert (p0.partition_index, p0.high_watermark) == (0, 9)
    values = []
    records = MemoryRecords(bytes(p0.records))
    while records.has_next():
        batch = records.next_batch()
        values.extend(r.value for r in batch)
    assert values == [b"v" * i for n in (1, 3, 5) for i in range(n)]
    assert decode_is_ok(wire, version)


def decode_is_ok(wire: bytes, version: int) -> bool:
    return isinstance(decode_response(wire[4:], ApiKey.FETCH, version), DecodedResponse)


def test_chunk_layout_header_region_trailer(segment: tuple[str, list[tuple[int, int]]]) -> None:
    path, regions = segment
    body = FetchResponseBody(
        responses=(
            FetchTopicResponse(
                "t",
                (
                    FetchPartitionResponse(
                        partition_index=0,
                        high_watermark=1,
                        records=(FileRegion(path, *regions[0]),),
                    ),
                ),
            ),
        )
    )
    # v11: the region ends the frame, so no trailer chunk.
    head, region = encode_fetch_response(11, 1, body).chunks
    assert isinstance(head, bytes) and region == FileRegion(path, *regions[0])
    # v12: the partition, topic and response tagged-field sections follow the records.
    frame = encode_fetch_response(12, 1, body)
    head, region, trailer = frame.chunks
    assert isinstance(head, bytes) and region == FileRegion(path, *regions[0])
    assert trailer == b"\x00\x00\x00"
    assert len(head) + region.length + len(trailer) == frame.wire_length


def test_invalid_versions_and_regions() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(3, 1, FetchResponseBody(responses=()))
    with pytest.raises(ValueError):
        encode_fetch_response(13, 1, FetchResponseBody(responses=()))
    with pytest.raises(ValueError):
        FileRegion("x", -1, 3)


def test_short_file_region_read_raises(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    with pytest.raises(OSError):
        FileRegion(str(p), 1, 10).read()


_ints32 = st.integers(-(2**31), 2**31 - 1)
_ints64 = st.integers(-(2**63), 2**63 - 1)
_partition = st.builds(
    FetchPartitionResponse,
    partition_index=_ints32,
    high_watermark=_ints64,
    error_code=st.integers(0, 100),
    last_stable_offset=_ints64,
    log_start_offset=_ints64,
    aborted_transactions=st.none()
    | st.lists(st.builds(AbortedTransaction, _ints64, _ints64), max_size=3).map(tuple),
    preferred_read_replica=_ints32,
    records=st.none() | st.lists(st.binary(max_size=50), max_size=3).map(tuple),
    diverging_epoch=st.none() | st.builds(EpochEndOffset, _ints32, _ints64),
    current_leader=st.none() | st.builds(LeaderIdAndEpoch, _ints32, _ints32),
    snapshot_id=st.none() | st.builds(SnapshotId, _ints64, _ints32),
)
_body = st.builds(
    FetchResponseBody,
    responses=st.lists(
        st.builds(
            FetchTopicResponse,
            st.text(max_size=20),
            st.lists(_partition, max_size=4).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
    throttle_time_ms=st.integers(0, 2**31 - 1),
    error_code=st.integers(0, 100),
    session_id=_ints32,
)


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(VERSIONS), body=_body, correlation_id=_ints32)
def test_property_equal_to_kio(version: int, body: FetchResponseBody, correlation_id: int) -> None:
    wire = encode_fetch_response(version, correlation_id, body).to_bytes()
    assert wire == encode_response(correlation_id, to_kio(version, body))
