"""The advertised table, header-version rules, and the KIP-511 unsupported-version reply."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from broker.wire import (
    API_TABLE,
    ApiKey,
    ApiSupport,
    ApiTable,
    Close,
    DecodedResponse,
    Reply,
    Request,
    api_versions_response,
    client_software_valid,
    decode_request,
    decode_response,
    request_header_version,
    response_header_version,
)

# reference/kafka-protocol.md §2.4 (validated against four clients), plus DeleteTopics 1-5.
EXPECTED = {
    0: (0, 9),
    1: (4, 12),
    2: (1, 7),
    3: (0, 12),
    8: (2, 8),
    9: (1, 7),
    10: (0, 3),
    11: (0, 7),
    12: (0, 4),
    13: (0, 4),
    14: (0, 5),
    15: (0, 6),
    16: (0, 5),
    18: (0, 4),
    19: (2, 7),
    20: (1, 5),
    22: (0, 4),
    23: (2, 4),
    32: (1, 4),
}


def test_table_is_the_validated_one() -> None:
    assert {int(s.api_key): (s.min_version, s.max_version) for s in API_TABLE} == EXPECTED
    assert API_TABLE[ApiKey.PRODUCE].min_served == 3
    assert all(s.min_served == s.min_version for s in API_TABLE if s.api_key != ApiKey.PRODUCE)


@pytest.mark.parametrize("support", list(API_TABLE), ids=lambda s: s.name)
def test_header_versions_agree_with_kio(support: ApiSupport) -> None:
    for v in range(support.min_served, support.max_version + 1):
        req = load_request_schema(support.api_key, v)
        resp = load_response_schema(support.api_key, v)
        assert req.__flexible__ == support.is_flexible(v) == resp.__flexible__
        assert req.__header_schema__.__version__ == request_header_version(support, v)
        assert resp.__header_schema__.__version__ == response_header_version(support, v)


def test_client_constraints_from_the_reference() -> None:
    t = {int(s.api_key): s for s in API_TABLE}
    assert t[0].min_version == 0  # librdkafka < 2.11.1 compresses only if Produce v0 is in range
    assert t[22].min_version == 0  # aiokafka has InitProducerId v0 only
    assert t[8].min_version <= 2 and t[9].min_version <= 1 and t[2].min_version <= 1
    assert all(t[k].min_version == 0 for k in (10, 11, 12, 13, 14))
    assert t[19].min_version <= 3 and t[3].min_version <= 4 and t[1].min_version <= 4
    assert (t[0].max_version, t[1].max_version) == (9, 12)  # no topic IDs


def kp_api_versions_frame(version: int, correlation_id: int) -> bytes:
    if version <= KpApiVersionsRequest.max_version:
        msg = KpApiVersionsRequest[version](
            client_software_name="kafka-python", client_software_version="3.0.12"
        )
        msg.with_header(correlation_id=correlation_id, client_id="kp")
        return bytes(msg.encode(header=True, framed=False))
    # A future version: header v2 (flexible), body unknown to us.
    return (
        struct.pack(">hhi", 18, version, correlation_id)
        + b"\x00\x02kp\x00"
        + b"\x0dkafka-python\x073.0.12\x00\x99\x98"
    )


@pytest.mark.parametrize("version", [5, 6, 127, 32767])
def test_unsupported_api_versions_gets_v0_reply_with_table(version: int) -> None:
    result = decode_request(kp_api_versions_frame(version, 31337))
    assert isinstance(result, Reply), result
    assert result.header.correlation_id == 31337
    frame = result.frame
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    # Header v0 then the v0 body, readable by kafka-python and kio as v0.
    kp = KpApiVersionsResponse.decode(frame, version=0, header=True, framed=True)
    assert kp.header.correlation_id == 31337
    assert kp.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in kp.api_keys} == EXPECTED
    decoded = decode_response(frame[4:], 18, 0)
    assert isinstance(decoded, DecodedResponse)
    assert decoded.body.error_code is ErrorCode.unsupported_version  # type: ignore[attr-defined]


def test_capped_table_replies_for_v3_and_clients_can_retry() -> None:
    capped = API_TABLE.with_range(ApiKey.API_VERSIONS, 0, 2)
    result = decode_request(kp_api_versions_frame(3, 1), capped)
    assert isinstance(result, Reply)
    kp = KpApiVersionsResponse.decode(result.frame, version=0, header=True, framed=True)
    assert kp.error_code == 35
    assert {k.api_key: k.max_version for k in kp.api_keys}[18] == 2
    retry = decode_request(kp_api_versions_frame(2, 2), capped)
    assert isinstance(retry, Request)


@pytest.mark.parametrize("version", range(5))
def test_supported_api_versions_request_decodes(version: int) -> None:
    result = decode_request(kp_api_versions_frame(version, 4))
    assert isinstance(result, Request)
    if version >= 3:
        body = result.body
        assert body.client_software_name == "kafka-python"  # type: ignore[attr-defined]


def test_malformed_api_versions_header_closes() -> None:
    # Flexible header with a truncated tagged-field section.
    result = decode_request(struct.pack(">hhi", 18, 9, 1) + b"\x00\x00\x05")
    assert isinstance(result, Close)


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_body(version: int) -> None:
    body = api_versions_response(version, throttle_time_ms=7)
    assert body.__version__ == version
    keys = body.api_keys  # type: ignore[attr-defined]
    assert [k.api_key for k in keys] == sorted(EXPECTED)


def test_client_software_validation() -> None:
    assert client_software_valid("kafka-python", "3.0.12")
    assert client_software_valid("librdkafka", "2.16.0")
    assert not client_software_valid("", "1")
    assert not client_software_valid("bad name", "1")
    assert not client_software_valid("x", "-1")


def test_table_validation() -> None:
    with pytest.raises(ValueError):
        ApiSupport(ApiKey.HEARTBEAT, 3, 2, flexible_from=4)
    with pytest.raises(ValueError):
        ApiTable((ApiSupport(ApiKey.HEARTBEAT, 0, 4, flexible_from=4),))
    hb = ApiSupport(ApiKey.HEARTBEAT, 0, 4, flexible_from=4)
    av = ApiSupport(ApiKey.API_VERSIONS, 0, 4, flexible_from=3)
    with pytest.raises(ValueError):
        ApiTable((hb, hb, av))
    t = ApiTable((hb, av))
    assert len(t) == 2 and ApiKey.HEARTBEAT in t and t.get(0) is None
