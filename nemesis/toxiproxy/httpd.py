"""A small HTTP/1.1 server on asyncio streams, enough for Toxiproxy's REST API.

Keep-alive, ``Content-Length`` and chunked request bodies, ``Expect: 100-continue``. Every read
is bounded: request line and header lines by the stream limit, the number of headers, the body
size, and the time a request may take to arrive.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

LINE_LIMIT = 64 * 1024
MAX_HEADERS = 100
MAX_BODY_BYTES = 8 * 1024 * 1024
READ_TIMEOUT_S = 15.0  # Toxiproxy's read_timeout
IDLE_TIMEOUT_S = 60.0  # Toxiproxy's IdleTimeout
MAX_EMPTY_LINES = 8


@dataclass(slots=True)
class Request:
    method: str
    target: str
    path: str
    version: str
    headers: dict[str, str]
    body: bytes

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Response]]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def serialize(response: Response, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {_reason(response.status)}"]
    if response.content_type is not None:
        lines.append(f"Content-Type: {response.content_type}")
    lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
    lines.extend(f"{name}: {value}" for name, value in response.headers)
    if response.status >= 200 and response.status not in (204, 304):
        lines.append(f"Content-Length: {len(response.body)}")
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if response.status in (204, 304):
        return head
    return head + response.body


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readline()
    except ValueError as exc:  # the line exceeded the stream limit
        raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "line too long") from exc
    if line and not line.endswith(b"\n"):
        raise asyncio.IncompleteReadError(line, None)
    return line


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = await _read_line(reader)
        if not line:
            raise asyncio.IncompleteReadError(line, None)
        if line in (b"\r\n", b"\n"):
            return headers
        text = line.decode("latin-1").rstrip("\r\n")
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(HTTPStatus.BAD_REQUEST, "malformed header line")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers")


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        line = await _read_line(reader)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError as exc:
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad chunk size") from exc
        if size < 0 or len(body) + size > MAX_BODY_BYTES:
            raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
        if size == 0:
            await _read_headers(reader)  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        if await _read_line(reader) not in (b"\r\n", b"\n"):
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad chunk terminator")


async def read_request(
    first_line: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Request:
    parts = first_line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed request line")
    method, target, version = parts
    headers = await _read_headers(reader)
    transfer_encoding = headers.get("transfer-encoding", "").lower()
    length_text = headers.get("content-length")
    if transfer_encoding and length_text is not None:
        raise HttpError(HTTPStatus.BAD_REQUEST, "both Transfer-Encoding and Content-Length")
    if transfer_encoding and transfer_encoding != "chunked":
        raise HttpError(HTTPStatus.NOT_IMPLEMENTED, "unsupported transfer encoding")
    length = 0
    if length_text is not None:
        if not length_text.isdigit():
            raise HttpError(HTTPStatus.BAD_REQUEST, "bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
    if headers.get("expect", "").lower() == "100-continue" and (transfer_encoding or length):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if transfer_encoding:
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(length) if length else b""
    path = unquote(urlsplit(target).path)
    return Request(method, target, path, version, headers, body)


def _keep_alive(request: Request) -> bool:
    connection = request.header("connection").lower()
    if request.version == "HTTP/1.0":
        return connection == "keep-alive"
    return connection != "close"


class HttpServer:
    """Serves ``handler`` on connections handed to ``handle_connection``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[object]] = set()

    async def close_all(self, timeout_s: float = 5.0) -> None:
        """Drop every open API connection and wait (bounded) for their handlers to end."""
        for writer in list(self._writers):
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    async def handle_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except HttpError as exc:
            body = f"{exc.status} {exc.message}".encode()
            response = Response(exc.status, body, "text/plain; charset=utf-8")
            try:
                writer.write(serialize(response, keep_alive=False))
                await writer.drain()
            except OSError:
                pass
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:
            log.exception("HTTP connection failed")
        finally:
            self._writers.discard(writer)
            writer.transport.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            async with asyncio.timeout(IDLE_TIMEOUT_S):
                line = await _read_line(reader)
                for _ in range(MAX_EMPTY_LINES):
                    if line not in (b"\r\n", b"\n"):
                        break
                    line = await _read_line(reader)
            if not line:
                return
            async with asyncio.timeout(READ_TIMEOUT_S):
                request = await read_request(line, reader, writer)
            response = await self._handler(request)
            keep_alive = _keep_alive(request)
            writer.write(serialize(response, keep_alive))
            await writer.drain()
            if not keep_alive:
                return
