"""Response encoding with kio (every API but the zero-copy Fetch path), and client-side decoding.

Response header: v0 (correlation id) or, for flexible versions, v1 (correlation id + tagged
fields); ApiVersions always uses v0 — kio's ``__header_schema__`` already encodes this rule,
and ``apis.response_header_version`` states it as data (the tests check they agree).
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any, cast

import kio.index
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from ._walk import walk_entity
from .chunks import ChunkCollector, ResponseFrame

__all__ = [
    "DecodedResponse",
    "EncodeError",
    "ResponseDecodeError",
    "decode_response",
    "encode_response",
    "encode_response_frame",
    "response_class",
]

_I32 = struct.Struct(">i")


class EncodeError(ValueError):
    """A response value kio cannot encode: a bug in the caller (wrong type or missing field)."""


@functools.cache
def response_class(api_key: int, api_version: int) -> type[ResponsePayload]:
    """kio's response class; raises ``KioIndexError`` for an unknown key or version."""
    return kio.index.load_response_schema(api_key, api_version)


def _write_header(out: Any, body: ResponsePayload, correlation_id: int) -> None:
    header_cls = body.__header_schema__
    entity_writer(header_cls)(out, header_cls(correlation_id=i32(correlation_id)))


def _write(out: Any, body: ResponsePayload, correlation_id: int) -> None:
    if not -(2**31) <= correlation_id < 2**31:
        raise EncodeError(f"correlation id {correlation_id} does not fit int32")
    try:
        _write_header(out, body, correlation_id)
        entity_writer(type(body))(out, body)
    except Exception as e:
        raise EncodeError(
            f"cannot encode {type(body).__module__}.{type(body).__name__}: {e!r}"
        ) from e


def encode_response(correlation_id: int, body: ResponsePayload) -> bytes:
    """The complete frame (size prefix, response header, body) as one ``bytes``.

    For small control-plane responses; use ``encode_response_frame`` when the body can be
    large, and ``fetch.encode_fetch_response`` for Fetch.
    """
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    _write(out, body, correlation_id)
    size = out.tell() - 4
    buf = out.getbuffer()
    _I32.pack_into(buf, 0, size)
    del buf
    return out.getvalue()


def encode_response_frame(correlation_id: int, body: ResponsePayload) -> ResponseFrame:
    """Like ``encode_response`` but as chunks: large byte fields are not copied."""
    out = ChunkCollector()
    _write(out, body, correlation_id)
    return out.finish()


@dataclass(frozen=True, slots=True)
class DecodedResponse:
    correlation_id: int
    body: ResponsePayload


def response_fields(resp: DecodedResponse) -> Any:
    """The response's kio body, to read fields by name (kio types `body` only as a
    header-version protocol; its class is the one of the API and version asked for)."""
    return resp.body


@dataclass(frozen=True, slots=True)
class ResponseDecodeError:
    """A response frame that could not be decoded (the peer is broken: close the connection)."""

    correlation_id: int | None
    reason: str


def decode_response(
    payload: bytes | bytearray, api_key: int, api_version: int
) -> DecodedResponse | ResponseDecodeError:
    """Decode a response frame (without size prefix) to a request we sent at ``api_version``.

    The inverse of ``encode_response``, for the broker acting as a client (replica fetchers)
    and for tests.  Never raises.
    """
    data = bytes(payload)
    try:
        cls = response_class(api_key, api_version)
    except kio.index.KioIndexError as e:
        return ResponseDecodeError(None, f"no codec for api {api_key} v{api_version}: {e}")
    header_cls = cls.__header_schema__
    correlation_id: int | None = None
    try:
        pos = walk_entity(header_cls, data, 0, len(data))
        (correlation_id,) = _I32.unpack_from(data, 0)
        end = walk_entity(cls, data, pos, len(data))  # trailing bytes ignored, as clients do
        body, read = entity_reader(cls)(data, pos)
    except Exception as e:  # Malformed, kio DecodeError, UnicodeDecodeError, ValueError...
        return ResponseDecodeError(correlation_id, f"malformed {cls.__name__}: {e}")
    if pos + read != end:
        return ResponseDecodeError(correlation_id, f"kio read {read} bytes, walk {end - pos}")
    return DecodedResponse(cast(int, correlation_id), body)
