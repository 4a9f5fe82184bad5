"""Every served (API, version) response, encoded by broker.wire, decoded by kafka-python and kio."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.wire import (
    API_TABLE,
    ApiKey,
    DecodedResponse,
    EncodeError,
    ResponseDecodeError,
    api_versions_response,
    build,
    decode_response,
    encode_response,
    encode_response_frame,
    response_class,
    response_header_version,
)

from ._common import RESPONSES, SERVED, assert_kio_matches_data, assert_kp_matches_kio, kp_class


def make_response(api_key: ApiKey, version: int):  # type: ignore[no-untyped-def]
    if api_key == ApiKey.API_VERSIONS:
        return api_versions_response(version, throttle_time_ms=5)
    return build(response_class(api_key, version), RESPONSES[api_key])


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=lambda x: str(x))
def test_response_decodes_with_kafka_python_and_kio(api_key: ApiKey, version: int) -> None:
    body = make_response(api_key, version)
    raw = encode_response(2000 + version, body)
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4

    kp = kp_class(api_key, response=True).decode(raw, version=version, header=True, framed=True)
    assert kp.header.correlation_id == 2000 + version
    assert_kp_matches_kio(kp, body, f"{api_key.name}v{version}")

    decoded = decode_response(raw[4:], api_key, version)
    assert isinstance(decoded, DecodedResponse), decoded
    assert decoded.correlation_id == 2000 + version
    assert decoded.body == body
    if api_key != ApiKey.API_VERSIONS:
        assert_kio_matches_data(decoded.body, RESPONSES[api_key])

    # The chunked encoder produces the same bytes.
    assert encode_response_frame(2000 + version, body).to_bytes() == raw


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=lambda x: str(x))
def test_response_header_version(api_key: ApiKey, version: int) -> None:
    body = make_response(api_key, version)
    raw = encode_response(1, body)
    hv = response_header_version(API_TABLE[api_key], version)
    assert body.__header_schema__.__version__ == hv
    # Header v1 adds exactly one byte: the empty tagged-field section.
    assert raw[4:8] == b"\x00\x00\x00\x01"
    if hv == 1:
        assert raw[8] == 0
    if api_key == ApiKey.API_VERSIONS:
        assert hv == 0 and raw[8:10] == b"\x00\x00"  # error_code directly after correlation id


def test_large_bytes_field_is_not_copied_into_small_chunks() -> None:
    big = b"x" * (1 << 20)
    body = build(
        response_class(ApiKey.SYNC_GROUP, 3),
        error_code=0,
        throttle_time_ms=0,
        assignment=big,
    )
    f = encode_response_frame(1, body)
    assert any(c is big or (isinstance(c, bytes) and len(c) == len(big)) for c in f.chunks)
    assert f.size == len(encode_response(1, body)) - 4
    assert f.to_bytes() == encode_response(1, body)


def test_encode_error_for_bad_values() -> None:
    body = build(response_class(ApiKey.HEARTBEAT, 0), error_code=0)
    with pytest.raises(EncodeError):
        encode_response(2**31, body)
    bad = build(response_class(ApiKey.FIND_COORDINATOR, 0), RESPONSES[ApiKey.FIND_COORDINATOR])
    object.__setattr__(bad, "port", "not-a-port")
    with pytest.raises(EncodeError):
        encode_response(1, bad)


def test_decode_response_errors_are_results() -> None:
    raw = encode_response(3, make_response(ApiKey.METADATA, 12))[4:]
    for cut in range(len(raw)):
        result = decode_response(raw[:cut], ApiKey.METADATA, 12)
        assert isinstance(result, ResponseDecodeError), cut
    assert isinstance(decode_response(raw + b"\x00", ApiKey.METADATA, 12), DecodedResponse)
    assert isinstance(decode_response(raw, 999, 0), ResponseDecodeError)


def test_error_codes_round_trip() -> None:
    body = build(response_class(ApiKey.HEARTBEAT, 4), error_code=ErrorCode.rebalance_in_progress)
    decoded = decode_response(encode_response(1, body)[4:], ApiKey.HEARTBEAT, 4)
    assert isinstance(decoded, DecodedResponse)
    assert decoded.body.error_code is ErrorCode.rebalance_in_progress  # type: ignore[attr-defined]
