"""Encoded output as a list of chunks: bytes, or regions of a file to send with ``os.sendfile``."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "COALESCE_LIMIT",
    "Chunk",
    "ChunkCollector",
    "FileRegion",
    "ResponseFrame",
    "chunk_length",
]

COALESCE_LIMIT = 64 * 1024
"""Byte pieces at least this long stay separate chunks instead of being copied together."""


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``length`` bytes of a file starting at ``position``; ``source`` is an fd or a path.

    The sender passes it to ``loop.sendfile``/``os.sendfile`` with explicit offsets (never the
    file object's own position).  ``read()`` is the ``pread`` fallback (TLS, uvloop, tests).
    """

    source: int | str
    position: int
    length: int

    def __post_init__(self) -> None:
        if self.position < 0 or self.length < 0:
            raise ValueError(f"invalid file region {self!r}")

    def read(self) -> bytes:
        """The region's bytes; raises ``OSError`` if the file is shorter than the region."""
        if isinstance(self.source, int):
            data = os.pread(self.source, self.length, self.position)
        else:
            fd = os.open(self.source, os.O_RDONLY)
            try:
                data = os.pread(fd, self.length, self.position)
            finally:
                os.close(fd)
        if len(data) != self.length:
            raise OSError(f"short read: {len(data)} of {self.length} bytes from {self!r}")
        return data


Chunk = bytes | FileRegion


def chunk_length(chunk: Chunk) -> int:
    return chunk.length if isinstance(chunk, FileRegion) else len(chunk)


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """A complete frame: ``chunks`` start with the int32 size prefix, whose value is ``size``.

    Bytes on the wire: ``4 + size`` (``wire_length``).  Send the chunks in order.
    """

    chunks: tuple[Chunk, ...]
    size: int

    @property
    def wire_length(self) -> int:
        return 4 + self.size

    @staticmethod
    def from_chunks(body_chunks: Iterable[Chunk]) -> ResponseFrame:
        """Frame a chunk list (header + body), coalescing small adjacent byte chunks."""
        collector = ChunkCollector()
        for c in body_chunks:
            collector.add(c)
        return collector.finish()

    def to_bytes(self) -> bytes:
        """Materialise everything, reading file regions (tests, TLS/uvloop fallback)."""
        return b"".join(c.read() if isinstance(c, FileRegion) else c for c in self.chunks)


class ChunkCollector:
    """A ``.write(bytes)`` sink (what kio's writers need) that builds a framed ``ResponseFrame``.

    Small writes are coalesced; pieces of ``COALESCE_LIMIT`` bytes or more and file regions
    stay separate chunks, so large record sets are never copied into one buffer."""

    __slots__ = ("_chunks", "_pending", "_size")

    def __init__(self) -> None:
        self._chunks: list[Chunk] = []
        self._pending = bytearray()
        self._size = 0

    def write(self, data: bytes) -> int:
        n = len(data)
        if n >= COALESCE_LIMIT:
            self._flush()
            self._chunks.append(bytes(data))
        else:
            self._pending += data
        self._size += n
        return n

    def add(self, chunk: Chunk) -> None:
        if isinstance(chunk, FileRegion):
            if chunk.length == 0:
                return
            self._flush()
            self._chunks.append(chunk)
            self._size += chunk.length
        else:
            self.write(chunk)

    def extend(self, chunks: Sequence[Chunk]) -> None:
        for c in chunks:
            self.add(c)

    @property
    def size(self) -> int:
        return self._size

    def _flush(self) -> None:
        if self._pending:
            self._chunks.append(bytes(self._pending))
            self._pending.clear()

    def finish(self) -> ResponseFrame:
        self._flush()
        if self._size > 0x7FFFFFFF:
            raise ValueError(f"frame of {self._size} bytes does not fit an int32 size")
        chunks = self._chunks
        prefix = struct.pack(">i", self._size)
        if chunks and isinstance(chunks[0], bytes) and len(chunks[0]) < COALESCE_LIMIT:
            chunks[0] = prefix + chunks[0]
        else:
            chunks.insert(0, prefix)
        return ResponseFrame(tuple(chunks), self._size)
