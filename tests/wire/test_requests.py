"""Every served (API, version) request, encoded by kafka-python, decoded by broker.wire."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema

from broker.wire import (
    API_TABLE,
    ApiKey,
    Close,
    CloseCode,
    FrameDecoder,
    Reply,
    Request,
    decode_request,
    encode_request,
    frame,
    parse_request_header,
)
from broker.wire.build import build

from ._common import REQUESTS, SERVED, assert_kio_matches_data, kp_class, kp_instance


def kp_frame(api_key: ApiKey, version: int, correlation_id: int, client_id: str | None) -> bytes:
    msg = kp_instance(kp_class(api_key), REQUESTS[api_key], version)
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=lambda x: str(x))
def test_kafka_python_request_decodes(api_key: ApiKey, version: int) -> None:
    raw = kp_frame(api_key, version, correlation_id=1000 + version, client_id="kp-client")
    items = FrameDecoder().feed(raw)
    assert len(items) == 1
    result = decode_request(items[0].payload)  # type: ignore[union-attr]
    assert isinstance(result, Request), result
    h = result.header
    assert (h.api_key, h.api_version, h.correlation_id) == (api_key, version, 1000 + version)
    assert h.client_id == "kp-client"
    assert h.header_version == (2 if API_TABLE[api_key].is_flexible(version) else 1)
    assert type(result.body) is load_request_schema(api_key, version)
    assert_kio_matches_data(result.body, REQUESTS[api_key], f"{api_key.name}v{version}")


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=lambda x: str(x))
def test_kio_encoded_request_round_trips(api_key: ApiKey, version: int) -> None:
    body = build(load_request_schema(api_key, version), _kio_request_data(api_key))
    raw = encode_request(body, correlation_id=-5, client_id=None)
    result = decode_request(raw[4:])
    assert isinstance(result, Request), result
    assert result.body == body
    assert result.correlation_id == -5 and result.header.client_id is None


def _kio_request_data(api_key: ApiKey) -> dict[str, object]:
    data = dict(REQUESTS[api_key])
    renames = {"max_wait_ms": "max_wait", "timeout_ms": "timeout"}
    return {renames.get(k, k): v for k, v in data.items()}


def test_null_client_id_and_header_sizes() -> None:
    raw = kp_frame(ApiKey.METADATA, 9, 7, None)
    result = decode_request(raw[4:])
    assert isinstance(result, Request)
    assert result.header.client_id is None
    assert result.header.size == 8 + 2 + 1  # fixed part, null string, empty tagged fields


def test_produce_versions_advertised_but_not_served_close() -> None:
    for version in (0, 1, 2):
        raw = kp_frame(ApiKey.PRODUCE, version, 9, "c")
        result = decode_request(raw[4:])
        assert isinstance(result, Close)
        assert result.code is CloseCode.UNSUPPORTED_VERSION
        assert result.correlation_id == 9 and result.api_version == version


@pytest.mark.parametrize("api_key", list(ApiKey), ids=lambda k: k.name)
def test_versions_above_max_close_except_api_versions(api_key: ApiKey) -> None:
    if api_key == ApiKey.API_VERSIONS:
        return
    support = API_TABLE[api_key]
    for version in (support.max_version + 1, support.min_version - 1, 32767, -1):
        payload = (
            int(api_key).to_bytes(2, "big")
            + version.to_bytes(2, "big", signed=True)
            + (77).to_bytes(4, "big")
            + b"\xff\xff"  # null client id
            + b"\x00" * 16
        )
        result = decode_request(payload)
        assert isinstance(result, Close), (api_key, version, result)
        assert result.code in (CloseCode.UNSUPPORTED_VERSION, CloseCode.MALFORMED_HEADER)
        assert result.correlation_id == 77


@pytest.mark.parametrize("api_key", [4, 5, 6, 7, 17, 21, 24, 33, 36, 50, 1000, -1, 32767])
def test_unknown_api_keys_close(api_key: int) -> None:
    payload = api_key.to_bytes(2, "big", signed=True) + b"\x00\x00" + b"\x00\x00\x00\x01\xff\xff"
    result = decode_request(payload)
    assert isinstance(result, Close)
    assert result.code is CloseCode.UNKNOWN_API_KEY
    assert result.api_key == api_key and result.correlation_id == 1


def test_trailing_bytes_are_ignored_like_kafka() -> None:
    raw = kp_frame(ApiKey.HEARTBEAT, 3, 1, "c")
    result = decode_request(raw[4:] + b"\x00")
    assert isinstance(result, Request) and result.trailing_bytes == 1
    # What librdkafka 2.16.0 really sent for Metadata v12 (all topics): 3 bytes after the body.
    rdkafka = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    result = decode_request(rdkafka)
    assert isinstance(result, Request) and result.trailing_bytes == 3
    assert result.body.topics is None  # type: ignore[attr-defined]
    assert result.header.client_id == "rdkafka"


def test_truncated_body_closes_at_every_cut() -> None:
    raw = kp_frame(ApiKey.FETCH, 12, 1, "c")[4:]
    for cut in range(len(raw)):
        result = decode_request(raw[:cut])
        assert isinstance(result, Close), cut


def test_bad_utf8_client_id_closes() -> None:
    payload = b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x02\xff\xfe" + b"\x00\x00\x00\x00"
    result = decode_request(payload)
    assert isinstance(result, Close) and result.code is CloseCode.MALFORMED_HEADER


def test_huge_array_count_is_rejected_before_kio() -> None:
    # Produce v9 with a topic_data count of 0x7fffffff: kio's native reader would try to
    # allocate ~256 GiB and abort the process; the walk rejects it first.
    head = b"\x00\x00\x00\x09\x00\x00\x00\x01\xff\xff\x00"
    body = b"\x00" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\xff\xff\xff\xff\x07"
    result = decode_request(head + body)
    assert isinstance(result, Close) and result.code is CloseCode.MALFORMED_BODY
    legacy = b"\x00\x00\x00\x07\x00\x00\x00\x01\xff\xff" + b"\xff\xff\xff\xff\x00\x00\x03\xe8"
    result = decode_request(legacy + b"\x7f\xff\xff\xff")
    assert isinstance(result, Close) and result.code is CloseCode.MALFORMED_BODY


def test_frame_helper() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"


def test_parse_request_header_versions() -> None:
    from broker.wire._walk import Malformed

    fixed = b"\x00\x07\x00\x00\x00\x00\x00\x2a"
    h0 = parse_request_header(fixed + b"rest", 0)
    assert (h0.api_key, h0.correlation_id, h0.client_id, h0.size) == (7, 42, None, 8)
    h1 = parse_request_header(fixed + b"\x00\x03abc", 1)
    assert (h1.client_id, h1.size) == ("abc", 13)
    # v2: an unknown tagged field (tag 5, 2 bytes) in the header is skipped.
    h2 = parse_request_header(fixed + b"\xff\xff" + b"\x01\x05\x02zz" + b"body", 2)
    assert (h2.client_id, h2.size, h2.header_version) == (None, 15, 2)
    for bad in (fixed[:7], fixed + b"\x00", fixed + b"\x00\x05ab", fixed + b"\xff\xfe"):
        with pytest.raises(Malformed):
            parse_request_header(bad, 1)
    with pytest.raises(Malformed):
        parse_request_header(fixed + b"\xff\xff\x01\x05\x09z", 2)


def test_api_versions_negative_version_gets_reply() -> None:
    payload = b"\x00\x12\xff\xff\x00\x00\x00\x03\xff\xff"
    result = decode_request(payload)
    assert isinstance(result, Reply) and result.header.correlation_id == 3
