"""Bounded channels between the stages of a toxic link.

The asyncio counterpart of the Go ``chan *StreamChunk`` values that connect Toxiproxy's toxic
stubs. A channel has a fixed capacity (at least 1), so a stage that stops reading pushes back
on the stage before it, and in the end on the socket: no queue in a link can grow without bound.

Closing a channel works like closing a Go channel: the items already buffered are still
delivered, then every ``get`` returns ``None``. A ``put`` on a closed channel drops the chunk and
returns ``False`` (Go would panic; a link being torn down must not).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class Chunk:
    """Bytes read from one socket, stamped with the event-loop time they were read at."""

    data: bytes
    timestamp: float


class Channel:
    """A bounded FIFO of chunks with Go-style close semantics."""

    __slots__ = ("_buffer", "_capacity", "_closed", "_readable", "_writable")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"channel capacity must be at least 1, got {capacity}")
        self._buffer: deque[Chunk] = deque()
        self._capacity = capacity
        self._closed = False
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._buffer)

    async def get(self) -> Chunk | None:
        """Next chunk; ``None`` once the channel is closed and drained. Cancel-safe."""
        while not self._buffer:
            if self._closed:
                return None
            self._readable.clear()
            await self._readable.wait()
        chunk = self._buffer.popleft()
        self._writable.set()
        return chunk

    def get_nowait(self) -> Chunk | None:
        """A buffered chunk, or ``None`` when nothing is buffered."""
        if not self._buffer:
            return None
        chunk = self._buffer.popleft()
        self._writable.set()
        return chunk

    async def put(self, chunk: Chunk) -> bool:
        """Append ``chunk``, waiting while the channel is full. Cancel-safe: a cancelled put
        has not appended. Returns ``False`` (and drops the chunk) if the channel is closed."""
        while len(self._buffer) >= self._capacity:
            if self._closed:
                return False
            self._writable.clear()
            await self._writable.wait()
        if self._closed:
            return False
        self._buffer.append(chunk)
        self._readable.set()
        return True

    def close(self) -> None:
        self._closed = True
        self._readable.set()
        self._writable.set()
