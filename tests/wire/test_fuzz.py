"""Fuzzing the decoders: garbage must give explicit results, never an exception, crash or hang.

kio's native reader aborts the whole process on a huge declared array length, so these tests
also guard the structural walk that runs before it.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.wire import (
    ApiKey,
    Close,
    DecodedResponse,
    Reply,
    Request,
    ResponseDecodeError,
    decode_request,
    decode_response,
    encode_response,
)

from ._common import REQUESTS, SERVED, kp_class, kp_instance
from .test_responses import make_response

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(
    max_examples=400,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def valid_request(api_key: ApiKey, version: int) -> bytes:
    msg = kp_instance(kp_class(api_key), REQUESTS[api_key], version)
    msg.with_header(correlation_id=5, client_id="fuzz")
    return bytes(msg.encode(header=True, framed=False))


VALID = {kv: valid_request(*kv) for kv in SERVED}


# Length/count words that make kio 0.6.5's reader abort the process if they reach it: an
# overflowing 5-byte uvarint (a ~256 GiB pre-allocation), plus large legal counts.
HUGE = [b"\xff\xff\xff\xff\x7f", b"\xe8\xff\xff\xff\x7f", b"\x7f\xff\xff\xff", b"\xff\xff\xff\x0f"]


def check(result: object) -> None:
    assert isinstance(result, Request | Reply | Close), result


@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes(data: bytes) -> None:
    check(decode_request(data))


@FUZZ
@given(st.sampled_from(SERVED), st.binary(max_size=400), st.booleans())
def test_valid_header_random_body(
    kv: tuple[ApiKey, int], body: bytes, flexible_header: bool
) -> None:
    api_key, version = kv
    head = struct.pack(">hhi", api_key, version, 1) + b"\x00\x01c"
    if flexible_header:
        head += b"\x00"
    check(decode_request(head + body))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    kv = draw(st.sampled_from(SERVED))
    data = bytearray(VALID[kv])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "big"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[i:]
        else:  # a huge length/count word anywhere
            data[i : i + 5] = draw(st.sampled_from(HUGE))
    return bytes(data)


@FUZZ
@given(mutated())
def test_mutated_valid_requests(data: bytes) -> None:
    check(decode_request(data))


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=lambda x: str(x))
def test_every_4_byte_window_set_to_max(api_key: ApiKey, version: int) -> None:
    data = VALID[(api_key, version)]
    for i in range(8, len(data)):
        for word in HUGE:
            check(decode_request(data[:i] + word + data[i + len(word) :]))


RESPONSE_BYTES = {kv: encode_response(9, make_response(*kv))[4:] for kv in SERVED}


@FUZZ
@given(st.sampled_from(SERVED), st.data())
def test_mutated_responses(kv: tuple[ApiKey, int], data: st.DataObject) -> None:
    raw = bytearray(RESPONSE_BYTES[kv])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i : i + 4] = data.draw(st.binary(min_size=1, max_size=4))
    result = decode_response(bytes(raw), *kv)
    assert isinstance(result, DecodedResponse | ResponseDecodeError)
