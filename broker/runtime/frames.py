"""A Kafka connection as an asyncio `BufferedProtocol`: size-prefixed frames straight into buffers.

`asyncio.StreamReader` copied every received byte three times (`feed_data` into its
bytearray, `readexactly` into a new `bytes`, `del buf[:n]` moving the rest) and woke the reading
task twice per frame (size prefix, payload). Here the socket is read with `recv_into`:

- small frames (and the first bytes of a large one) land in one reused scratch buffer, and a
  read that brings several small frames splits them in one pass;
- a frame larger than what is left of the scratch buffer gets a buffer of its own, sized from
  its prefix, and the rest of it is received directly into that buffer: a produce batch or a
  fetched record set is never copied in user space (handlers and fetchers slice it with
  `memoryview`s; the buffer lives as long as a view of it does, so nothing is overwritten).

Completed frames wait in a bounded queue (`FRAMES_QUEUED_MAX` frames or
`BYTES_QUEUED_MAX` bytes, then reading pauses until the consumer catches up). A bad size
prefix ends the stream with the `FrameError` (after the frames before it). The protocol is
also the connection's writer (`write`, `drain` with the transport's flow control, `close`).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from typing import Any, cast

from broker.runtime.ports import running_loop
from broker.wire import FrameError, check_frame_size
from broker.wire.framing import MIN_REQUEST_FRAME_BYTES

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 64 * 1024  # one recv_into for many small frames
FRAMES_QUEUED_MAX = 16  # read ahead at most this many complete frames ...
BYTES_QUEUED_MAX = 8 * 1024 * 1024  # ... or this many bytes (then reading pauses)

Frame = bytes | bytearray


class FrameProtocol(asyncio.BufferedProtocol):
    """One connection: frames in (`next_frame`), bytes out (`write`/`drain`)."""

    def __init__(self, max_frame_bytes: int, min_frame_bytes: int = MIN_REQUEST_FRAME_BYTES
                 ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.min_frame_bytes = min_frame_bytes
        self._loop: list[asyncio.AbstractEventLoop] = []  # running_loop's cache
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._len = 0  # bytes of the scratch buffer in use, from its start
        self._frame: bytearray | None = None  # a large frame being received into its own buffer
        self._filled = 0
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0
        self._end: FrameError | BaseException | None = None  # after the queued frames
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._paused_writing = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._deadline: float | None = None  # of the `next_frame` waiting, loop time
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self.closed = False

    # -- asyncio callbacks ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's (TCPTransport) does not derive from asyncio.Transport
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._filled:]
        return self._view[self._len:]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled == len(frame):
                self._frame = None
                self._deliver(frame)
            return
        self._len += nbytes
        self._split()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._eof = True
        if exc is not None and self._end is None:
            self._end = exc
        self._wake()
        w = self._drain_waiter
        if w is not None and not w.done():
            w.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        w = self._drain_waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- frames in --------------------------------------------------------------------------

    def _split(self) -> None:
        """Deliver every complete frame in the scratch buffer; start a large one's own buffer."""
        buf, end, pos = self._scratch, self._len, 0
        while end - pos >= 4 and self._end is None and not self._full():
            size = check_frame_size(bytes(self._view[pos:pos + 4]), self.max_frame_bytes,
                                    self.min_frame_bytes)
            if isinstance(size, FrameError):
                self._end = size
                self._pause()
                self._wake()
                break
            start = pos + 4
            if end - start >= size:
                # one copy, out of the view (`bytes(buf[a:b])` made two: the slice, then bytes)
                self._deliver(self._view[start:start + size].tobytes())
                pos = start + size
                continue
            if size > len(buf) - 4:  # will not fit: its own buffer, the rest received into it
                frame = bytearray(size)
                have = end - start
                frame[:have] = buf[start:end]
                self._frame, self._filled = frame, have
                pos = end
            break
        if pos:
            rest = end - pos
            if rest:
                buf[:rest] = buf[pos:end]
            self._len = rest

    def _full(self) -> bool:
        return len(self._frames) >= FRAMES_QUEUED_MAX or self._queued_bytes >= BYTES_QUEUED_MAX

    def _deliver(self, frame: Frame) -> None:
        self._frames.append(frame)
        self._queued_bytes += len(frame)
        if self._full():
            self._pause()  # the rest of what was read stays in the scratch buffer
        self._wake()

    def _pause(self) -> None:
        if not self._paused_reading and self.transport is not None \
                and not self.transport.is_closing():
            self._paused_reading = True
            self.transport.pause_reading()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def next_frame(self, timeout_s: float | None = None) -> Frame | FrameError | None:
        """The next frame; a `FrameError` once the stream is not Kafka framing; None at the
        end of the stream (a frame cut short included). Raises `TimeoutError` after
        `timeout_s`, and the error the connection was lost with, if any."""
        while not self._frames:
            if self._end is not None:
                if isinstance(self._end, FrameError):
                    return self._end
                raise self._end
            if self._eof:
                return None
            loop = running_loop(self._loop)
            w = self._waiter = loop.create_future()
            if timeout_s is not None:
                deadline = self._deadline = loop.time() + timeout_s
                if self._timer is None or deadline < self._timer_due:
                    if self._timer is not None:
                        self._timer.cancel()
                    self._timer_due = deadline
                    self._timer = loop.call_at(deadline, self._on_timer)
            try:
                await w
            finally:
                self._deadline = None  # the handle stays armed, and finds nothing due
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        if self._paused_reading and self._end is None and not self._full():
            if self._frame is None:
                self._split()  # frames read before the pause, still in the scratch buffer
            if self._end is None and not self._full():
                self._paused_reading = False
                if self.transport is not None and not self.transport.is_closing():
                    self.transport.resume_reading()
        return frame

    def _on_timer(self) -> None:
        """One clock handle per connection for the `next_frame` timeouts (a follower's fetch
        has one per request): a new deadline only moves `_deadline`; the handle, when it
        fires before it, waits again for the rest (a `call_later` and a cancel per request
        before)."""
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return
        loop = running_loop(self._loop)
        if loop.time() < deadline:
            self._timer_due = deadline
            self._timer = loop.call_at(deadline, self._on_timer)
            return
        self._deadline = None
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(TimeoutError())

    # -- bytes out (the StreamWriter calls the broker uses) -----------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection closed")
        self.transport.write(data)

    async def drain(self) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("connection closed")
        if not self._paused_writing:
            return
        w = self._drain_waiter = running_loop(self._loop).create_future()
        await w

    @property
    def writing_paused(self) -> bool:
        """The transport asked us to stop writing (its buffer is above the high mark)."""
        return self._paused_writing

    def is_closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default if self.transport is None else self.transport.get_extra_info(name, default)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()
