"""The hand codecs of the replication data path (broker/wire/fast.py) against kio."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from broker.wire import (
    ApiKey,
    EpochEndOffset,
    FetchPartitionResponse,
    FetchResponseBody,
    FetchTopicResponse,
    Request,
    decode_request,
    decode_response,
    encode_fetch_response,
    encode_request,
)
from broker.wire.build import build
from broker.wire.fast import (
    FetchPartitionRequest,
    decode_fast,
    decode_fetch_response,
    encode_replica_fetch,
)

from ._common import REQUESTS, SERVED, kp_class, kp_instance, record_batch

DATA_PATH = [(k, v) for k, v in SERVED if k in (ApiKey.PRODUCE, ApiKey.FETCH)]


def _same(fast: Any, slow: Any, fields: tuple[str, ...]) -> None:
    for f in fields:
        a, b = getattr(fast, f, None), getattr(slow, f, None)
        if f in ("acks", "replica_id", "min_bytes", "max_bytes", "isolation_level",
                 "session_id", "session_epoch", "index", "partition", "fetch_offset",
                 "current_leader_epoch", "last_fetched_epoch", "log_start_offset",
                 "partition_max_bytes") and b is None:
            continue  # a field this version does not have: the fast decoder's default
        if isinstance(a, memoryview):
            a = bytes(a)
        assert a == b or int(a) == int(b), (f, a, b)  # type: ignore[arg-type]


def _compare(fast: Request, slow: Request) -> None:
    assert fast.header == slow.header and fast.trailing_bytes == slow.trailing_bytes
    fb, sb = fast.body, slow.body
    if fast.api_key == ApiKey.PRODUCE:
        _same(fb, sb, ("transactional_id", "acks", "timeout"))
        assert len(fb.topic_data) == len(sb.topic_data)
        for ft, st in zip(fb.topic_data, sb.topic_data, strict=True):
            assert ft.name == st.name
            for fp, sp in zip(ft.partition_data, st.partition_data, strict=True):
                _same(fp, sp, ("index", "records"))
        return
    _same(fb, sb, ("replica_id", "max_wait", "min_bytes", "max_bytes", "isolation_level",
                   "session_id", "session_epoch"))
    for ft, st in zip(fb.topics, sb.topics, strict=True):
        assert ft.topic == st.topic
        for fp, sp in zip(ft.partitions, st.partitions, strict=True):
            _same(fp, sp, ("partition", "current_leader_epoch", "fetch_offset",
                           "last_fetched_epoch", "log_start_offset", "partition_max_bytes"))


@pytest.mark.parametrize(("api_key", "version"), DATA_PATH, ids=lambda x: str(x))
def test_fast_decode_equals_kio_for_kafka_python_frames(api_key: ApiKey, version: int) -> None:
    msg = kp_instance(kp_class(api_key), REQUESTS[api_key], version)
    msg.with_header(correlation_id=7, client_id="kp")
    payload = bytes(msg.encode(header=True, framed=False))
    fast, slow = decode_fast(payload), decode_request(payload)
    assert isinstance(fast, Request) and isinstance(slow, Request)
    _compare(fast, slow)
    fast_ba = decode_fast(bytearray(payload))  # the frame reader's large-frame buffers
    assert isinstance(fast_ba, Request)
    _compare(fast_ba, slow)


@pytest.mark.parametrize(("api_key", "version"), DATA_PATH, ids=lambda x: str(x))
def test_fast_decode_gives_up_on_every_truncation(api_key: ApiKey, version: int) -> None:
    """A cut frame is never decoded by hand: the slow path decides (it closes)."""
    msg = kp_instance(kp_class(api_key), REQUESTS[api_key], version)
    msg.with_header(correlation_id=7, client_id="kp")
    payload = bytes(msg.encode(header=True, framed=False))
    for cut in range(len(payload)):
        fast = decode_fast(payload[:cut])
        if fast is not None:  # a prefix that is itself a whole request: the same as kio's
            slow = decode_request(payload[:cut])
            assert isinstance(slow, Request), (cut, slow)
            _compare(fast, slow)


def test_fast_decode_leaves_other_apis_and_versions_to_kio() -> None:
    metadata = kp_instance(kp_class(ApiKey.METADATA), REQUESTS[ApiKey.METADATA], 1)
    metadata.with_header(correlation_id=1, client_id="kp")
    assert decode_fast(bytes(metadata.encode(header=True, framed=False))) is None
    produce_v2 = kp_instance(kp_class(ApiKey.PRODUCE), REQUESTS[ApiKey.PRODUCE], 2)
    produce_v2.with_header(correlation_id=1, client_id="kp")
    assert decode_fast(bytes(produce_v2.encode(header=True, framed=False))) is None


def test_produce_records_are_a_view_of_the_frame() -> None:
    batch = record_batch(5)
    body = build(load_request_schema(0, 9), {
        "transactional_id": None, "acks": -1, "timeout": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": batch}]}]})
    frame = bytearray(encode_request(body, 3)[4:])
    req = decode_fast(frame)
    assert isinstance(req, Request)
    records = req.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and bytes(records) == batch


def test_replica_fetch_request_is_kio_byte_for_byte() -> None:
    from kio.schema.fetch.v12 import request as fetch_req
    from kio.static.primitive import i8, i32, i64

    def _ms(ms: int) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=ms)

    parts = {("a", 0): FetchPartitionRequest(0, 3, 1234567890123, 2, 1 << 20),
             ("a", 5): FetchPartitionRequest(5, -1, 0, -1, 7),
             ("bb", 1): FetchPartitionRequest(1, 9, 42, 9, 100)}
    by_topic: dict[str, list[FetchPartitionRequest]] = {}
    for (t, _), p in sorted(parts.items()):
        by_topic.setdefault(t, []).append(p)
    body = fetch_req.FetchRequest(
        cluster_id=None, replica_id=i32(2), max_wait=_ms(500), min_bytes=i32(1),
        max_bytes=i32(10 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1),
        topics=tuple(fetch_req.FetchTopic(topic=t, partitions=tuple(
            fetch_req.FetchPartition(
                partition=i32(p.partition), current_leader_epoch=i32(p.current_leader_epoch),
                fetch_offset=i64(p.fetch_offset), last_fetched_epoch=i32(p.last_fetched_epoch),
                log_start_offset=i64(-1), partition_max_bytes=i32(p.partition_max_bytes))
            for p in ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=(), rack_id="")
    assert encode_replica_fetch(77, "hiwater", 2, 500, 1, 10 << 20,
                                list(by_topic.items())) == encode_request(body, 77)


def test_fetch_response_decode_equals_kio(tmp_path: Any) -> None:
    batch = record_batch(4)
    path = tmp_path / "seg.log"
    path.write_bytes(b"x" * 10 + batch)
    from broker.wire import FileRegion

    body = FetchResponseBody(responses=(
        FetchTopicResponse("t", (
            FetchPartitionResponse(0, 100, error_code=0, last_stable_offset=100,
                                   log_start_offset=3, records=(FileRegion(str(path), 10,
                                                                           len(batch)),)),
            FetchPartitionResponse(1, -1, error_code=6, records=()),
            FetchPartitionResponse(2, 7, records=None,
                                   diverging_epoch=EpochEndOffset(epoch=-1, end_offset=55)),
        )),
        FetchTopicResponse("u", ()),
    ), throttle_time_ms=0, error_code=0, session_id=0)
    wire = encode_fetch_response(12, 99, body).to_bytes()[4:]
    cid, error, topics = decode_fetch_response(bytearray(wire))
    slow = decode_response(wire, 1, 12)
    assert cid == 99 and error == 0
    assert type(slow.body) is load_response_schema(1, 12)  # type: ignore[union-attr]
    for ft, st in zip(topics, slow.body.responses, strict=True):  # type: ignore[union-attr]
        assert ft.topic == st.topic
        for fp, sp in zip(ft.partitions, st.partitions, strict=True):
            assert fp.partition_index == int(sp.partition_index)
            assert fp.error_code == int(sp.error_code.value)
            assert (fp.high_watermark, fp.log_start_offset) == (
                int(sp.high_watermark), int(sp.log_start_offset))
            assert (bytes(fp.records) if fp.records is not None else None) == (
                bytes(sp.records) if sp.records is not None else None)
            expected = int(sp.diverging_epoch.end_offset) \
                if sp.diverging_epoch is not None else -1
            assert fp.diverging_end_offset == expected
    assert bytes(topics[0].partitions[0].records) == batch  # type: ignore[arg-type]


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_response_is_kio_byte_for_byte(version: int) -> None:
    from broker.wire import encode_response, response_class
    from broker.wire.fast import ProducePartitionResult, encode_produce_response

    topics = [("t", [ProducePartitionResult(0, 0, 123456789012, 5),
                     ProducePartitionResult(7, 6, -1, -1)]), ("ü-topic", [])]
    data = {"responses": [{"name": t, "partition_responses": [
        {"index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
         "log_append_time": -1, "log_start_offset": p.log_start_offset, "record_errors": [],
         "error_message": None} for p in ps]} for t, ps in topics],
        "throttle_time": 250}
    expected = encode_response(-3, build(response_class(0, version), data))
    assert encode_produce_response(version, -3, topics, 250) == expected


@pytest.mark.parametrize("version", [v for k, v in DATA_PATH if k == ApiKey.FETCH])
def test_fetch_partition_fields_are_read_in_place_at_every_version(version: int) -> None:
    """Fetch's fixed-size parts are read with one unpack per version: every field distinct
    (a swapped or shifted field would show), two partitions, compared with kio."""
    import copy

    values = copy.deepcopy(REQUESTS[ApiKey.FETCH])
    values["replica_id"], values["session_id"] = 3, 9
    part = values["topics"][0]["partitions"][0]
    part.update(partition=4, current_leader_epoch=6, fetch_offset=1 << 40,
                last_fetched_epoch=5, log_start_offset=77, partition_max_bytes=12345)
    values["topics"][0]["partitions"].append(dict(part, partition=8, fetch_offset=11))
    msg = kp_instance(kp_class(ApiKey.FETCH), values, version)
    msg.with_header(correlation_id=7, client_id="kp")
    payload = bytes(msg.encode(header=True, framed=False))
    fast, slow = decode_fast(payload), decode_request(payload)
    assert isinstance(fast, Request) and isinstance(slow, Request)
    _compare(fast, slow)
    parts = fast.body.topics[0].partitions  # type: ignore[union-attr]
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in parts] == [
        (4, 1 << 40, 12345), (8, 11, 12345)]
    assert parts[0].log_start_offset == (77 if version >= 5 else -1)
    assert parts[0].current_leader_epoch == (6 if version >= 9 else -1)
    assert parts[0].last_fetched_epoch == (5 if version >= 12 else -1)
