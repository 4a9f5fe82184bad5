"""Kafka frame splitting: an int32 big-endian size, then that many bytes.

Sans-I/O: the caller feeds whatever bytes it read and gets back complete frames or one
explicit, final ``FrameError`` (the connection must then be closed, as Kafka's
``NetworkReceive`` does with ``InvalidReceiveException``).

Buffering is bounded: a size prefix is checked as soon as its 4 bytes arrive, so the decoder
never holds more than ``4 + max_frame_bytes`` bytes between calls.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "MIN_REQUEST_FRAME_BYTES",
    "MIN_RESPONSE_FRAME_BYTES",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "FrameErrorKind",
    "check_frame_size",
    "frame",
]

DEFAULT_MAX_REQUEST_BYTES = 104_857_600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""

MIN_REQUEST_FRAME_BYTES = 8
"""api_key int16 + api_version int16 + correlation_id int32: nothing shorter is a request."""

MIN_RESPONSE_FRAME_BYTES = 4
"""correlation_id int32."""

_SIZE = struct.Struct(">i")


class FrameErrorKind(enum.Enum):
    NEGATIVE_SIZE = "negative_size"
    OVERSIZED = "oversized"
    UNDERSIZED = "undersized"
    TRUNCATED = "truncated"


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete frame without its size prefix (read-only ``bytes``, as kio needs)."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class FrameError:
    """The byte stream is not (or no longer) a Kafka frame stream: close the connection."""

    kind: FrameErrorKind
    size: int | None
    reason: str


def _looks_like(prefix: bytes) -> str:
    if prefix[:1] == b"\x16" and prefix[1:2] == b"\x03":
        return " (looks like a TLS handshake: is the client using SSL against a plaintext port?)"
    if prefix[:4] in (b"GET ", b"POST", b"PUT ", b"HEAD", b"OPTI", b"DELE", b"PATC", b"CONN"):
        return " (looks like an HTTP request)"
    return ""


def check_frame_size(
    prefix: bytes,
    max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    min_frame_bytes: int = MIN_REQUEST_FRAME_BYTES,
) -> int | FrameError:
    """Validate a 4-byte size prefix (for callers that ``readexactly(4)`` themselves)."""
    if len(prefix) != 4:
        return FrameError(FrameErrorKind.TRUNCATED, None, f"size prefix has {len(prefix)} bytes")
    size = int(_SIZE.unpack(prefix)[0])
    if size < 0:
        return FrameError(
            FrameErrorKind.NEGATIVE_SIZE,
            size,
            f"invalid receive (size = {size})" + _looks_like(prefix),
        )
    if size > max_frame_bytes:
        return FrameError(
            FrameErrorKind.OVERSIZED,
            size,
            f"invalid receive (size = {size} larger than {max_frame_bytes})" + _looks_like(prefix),
        )
    if size < min_frame_bytes:
        return FrameError(
            FrameErrorKind.UNDERSIZED,
            size,
            f"invalid receive (size = {size} smaller than the minimum {min_frame_bytes})",
        )
    return size


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return _SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frames.

    ``feed`` returns the frames completed by ``data``; after the first ``FrameError`` the
    decoder is dead: the error is returned once, stays in ``error``, and later data is ignored.
    At end of stream, call ``eof()`` to learn whether a frame was cut short.
    """

    __slots__ = ("_buf", "_error", "max_frame_bytes", "min_frame_bytes")

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        min_frame_bytes: int = MIN_REQUEST_FRAME_BYTES,
    ) -> None:
        if not 0 <= min_frame_bytes <= max_frame_bytes <= 0x7FFFFFFF:
            raise ValueError("need 0 <= min_frame_bytes <= max_frame_bytes <= 2**31-1")
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._buf = bytearray()
        self._error: FrameError | None = None

    @property
    def error(self) -> FrameError | None:
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (at most ``4 + max_frame_bytes``)."""
        return len(self._buf)

    @property
    def pending_frame_size(self) -> int | None:
        """Declared size of the incomplete frame being buffered, if its prefix has arrived."""
        if len(self._buf) < 4:
            return None
        return int(_SIZE.unpack_from(self._buf, 0)[0])

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | FrameError]:
        if self._error is not None or not data:
            return []
        buf = self._buf
        buf += data
        out: list[Frame | FrameError] = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            size = check_frame_size(
                bytes(buf[pos : pos + 4]), self.max_frame_bytes, self.min_frame_bytes
            )
            if isinstance(size, FrameError):
                self._error = size
                out.append(size)
                buf.clear()
                return out
            if n - pos - 4 < size:
                break
            out.append(Frame(bytes(buf[pos + 4 : pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out

    def eof(self) -> FrameError | None:
        """End of stream: a ``TRUNCATED`` error if a frame was cut short, else ``None``."""
        if self._error is not None:
            return None
        if not self._buf:
            return None
        size = self.pending_frame_size
        got = len(self._buf)
        self._buf.clear()
        self._error = FrameError(
            FrameErrorKind.TRUNCATED,
            size,
            f"stream ended inside a frame ({got} bytes buffered"
            + (f", frame size {size})" if size is not None else ", size prefix incomplete)"),
        )
        return self._error
