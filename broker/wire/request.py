"""Request decoding: frame payload -> ``Request`` | ``Reply`` | ``Close``.  Never raises.

What Kafka does, and so what this returns:

* unknown API key, or a version the broker does not serve -> ``Close`` (Kafka throws
  ``InvalidRequestException`` in ``RequestContext.parseRequest`` and the socket server closes
  the connection);
* ApiVersions at a version outside the table -> ``Reply`` carrying ApiVersionsResponse v0 with
  UNSUPPORTED_VERSION and the full table (KIP-511), header v0; the connection stays open;
* a header or body that does not parse -> ``Close``; bytes after a complete body are ignored,
  as Kafka does (``Request.trailing_bytes`` counts them);
* otherwise ``Request`` with the parsed header and the kio request body.
"""

from __future__ import annotations

import enum
import functools
import struct
from dataclasses import dataclass
from typing import Any

import kio.index
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32
from kio.static.protocol import RequestPayload

from ._walk import Malformed, skip_tagged_fields, walk_entity
from .api_versions import unsupported_api_versions_frame
from .apis import API_TABLE, ApiKey, ApiTable, request_header_version
from .framing import frame

__all__ = [
    "Close",
    "CloseCode",
    "Reply",
    "Request",
    "RequestHeader",
    "decode_request",
    "encode_request",
    "parse_request_header",
    "request_class",
]

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    size: int
    """Encoded header length: the body starts at this offset of the frame payload."""


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: RequestPayload
    trailing_bytes: int = 0
    """Bytes after the body.  Kafka ignores them and so do we: librdkafka 2.16 sends 3 extra
    bytes after a Metadata v12 request for all topics (observed)."""

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


@dataclass(frozen=True, slots=True)
class Reply:
    """Wire answered by itself: send ``frame`` (complete, size-prefixed) and keep the connection."""

    header: RequestHeader
    frame: bytes
    reason: str


class CloseCode(enum.Enum):
    MALFORMED_HEADER = "malformed_header"
    UNKNOWN_API_KEY = "unknown_api_key"
    UNSUPPORTED_VERSION = "unsupported_version"
    MALFORMED_BODY = "malformed_body"


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection without answering.  Header fields are what could be read."""

    code: CloseCode
    reason: str
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None


@functools.cache
def request_class(api_key: int, api_version: int) -> type[RequestPayload] | None:
    try:
        return kio.index.load_request_schema(api_key, api_version)
    except kio.index.KioIndexError:
        return None


def parse_request_header(payload: bytes, header_version: int) -> RequestHeader:
    """Parse request header v0, v1 or v2 at the start of ``payload``; raises ``Malformed``.

    v0: api_key, api_version, correlation_id.  v1 adds client_id (nullable int16 string).  v2
    adds a tagged-field section; client_id stays a *legacy* string even there (Kafka's
    RequestHeader.json special case).
    """
    end = len(payload)
    if end < _HEAD.size:
        raise Malformed(f"request header needs 8 bytes, frame has {end}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(payload, 0)
    pos = _HEAD.size
    client_id: str | None = None
    if header_version >= 1:
        if end - pos < 2:
            raise Malformed("truncated client_id")
        (n,) = _I16.unpack_from(payload, pos)
        pos += 2
        if n < -1 or pos + n > end:
            raise Malformed(f"bad client_id length {n}")
        if n >= 0:
            try:
                client_id = payload[pos : pos + n].decode("utf-8")
            except UnicodeDecodeError as e:
                raise Malformed(f"client_id is not UTF-8: {e}") from None
            pos += n
    if header_version >= 2:
        pos = skip_tagged_fields(payload, pos, end, None)
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version, pos)


def decode_request(
    payload: bytes | bytearray, table: ApiTable = API_TABLE
) -> Request | Reply | Close:
    """Decode one request frame payload (without its size prefix).  Never raises."""
    data = bytes(payload)  # kio readers need a read-only buffer
    if len(data) < _HEAD.size:
        return Close(CloseCode.MALFORMED_HEADER, f"frame of {len(data)} bytes has no header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(data, 0)
    support = table.get(api_key)
    if support is None:
        return Close(
            CloseCode.UNKNOWN_API_KEY,
            f"unknown or unsupported api key {api_key}",
            api_key,
            api_version,
            correlation_id,
        )
    try:
        header = parse_request_header(data, request_header_version(support, api_version))
    except Malformed as e:
        return Close(
            CloseCode.MALFORMED_HEADER,
            f"{support.name} v{api_version}: {e}",
            api_key,
            api_version,
            correlation_id,
        )

    if support.api_key == ApiKey.API_VERSIONS and not support.advertises(api_version):
        return Reply(
            header,
            unsupported_api_versions_frame(correlation_id, table),
            f"ApiVersions v{api_version} is outside {support.min_version}-{support.max_version}",
        )
    cls = request_class(api_key, api_version) if support.serves(api_version) else None
    if cls is None:
        return Close(
            CloseCode.UNSUPPORTED_VERSION,
            f"{support.name} v{api_version} is not served "
            f"(serving {support.min_served}-{support.max_version})",
            api_key,
            api_version,
            correlation_id,
        )

    try:
        end = walk_entity(cls, data, header.size, len(data))
        body, read = entity_reader(cls)(data, header.size)
        if header.size + read != end:
            raise Malformed(f"kio read {read} bytes, expected {end - header.size}")
    except Exception as e:  # Malformed, kio DecodeError, ValueError, ...: never escapes
        return Close(
            CloseCode.MALFORMED_BODY,
            f"{support.name} v{api_version}: {e}",
            api_key,
            api_version,
            correlation_id,
        )
    return Request(header, body, len(data) - end)


def encode_request(
    body: RequestPayload, correlation_id: int, client_id: str | None = "hiwater"
) -> bytes:
    """A complete request frame (client side: replica fetchers, controller, tests)."""
    header_cls = body.__header_schema__
    header = header_cls(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    chunks: list[bytes] = []

    class _Sink:
        def write(self, b: bytes) -> int:
            chunks.append(bytes(b))
            return len(b)

    sink = _Sink()
    entity_writer(header_cls)(sink, header)  # type: ignore[arg-type]
    entity_writer(type(body))(sink, body)  # type: ignore[arg-type]
    return frame(b"".join(chunks))


def request_fields(req: Request) -> Any:
    """The request's kio body, to read fields by name: its class depends on the API key and
    version (kio types `body` only as a header-version protocol), and each handler reads the
    fields every version it accepts has (`getattr` with a default for the others)."""
    return req.body
