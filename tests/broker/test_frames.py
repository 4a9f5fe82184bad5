"""FrameProtocol (broker/runtime/frames.py): Kafka frames read off a real loopback socket.

Frames split across reads, many frames in one read, a large frame received into its own
buffer (a view of it outlives later frames unchanged), a bad size prefix after good frames,
the end of the stream inside a frame, and the bounded read-ahead (reading pauses, then
resumes when the consumer catches up)."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Awaitable, Callable

from broker.runtime import frames
from broker.runtime.frames import FrameProtocol
from broker.wire import FrameError, FrameErrorKind


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _run(test: Callable[[FrameProtocol, socket.socket], Awaitable[None]],
         max_frame_bytes: int = 64 << 20) -> None:
    """`test(protocol, peer)`: `peer` is the other end's blocking socket."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        b.setblocking(True)
        _, proto = await loop.create_connection(lambda: FrameProtocol(max_frame_bytes), sock=a)
        try:
            await test(proto, b)
        finally:
            proto.close()
            b.close()

    asyncio.run(asyncio.wait_for(main(), 60))


async def _send(peer: socket.socket, data: bytes, pieces: int = 1) -> None:
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):
        await asyncio.get_running_loop().run_in_executor(None, peer.sendall, data[i:i + step])
        await asyncio.sleep(0.001)


def test_frames_split_and_joined_across_reads() -> None:
    payloads = [os.urandom(n) for n in (8, 9, 100, 4000, 70_000, 8, 300_000, 12)]
    wire = b"".join(_frame(p) for p in payloads)

    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        for pieces in (1, 7, 97):
            sender = asyncio.create_task(_send(peer, wire, pieces))
            got = [await proto.next_frame(10) for _ in payloads]
            await sender
            assert [bytes(g) for g in got if not isinstance(g, FrameError) and g] == payloads

    _run(test)


def test_large_frame_has_its_own_buffer() -> None:
    big, small = os.urandom(1 << 20), os.urandom(100)

    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        await _send(peer, _frame(big) + _frame(small) + _frame(big[::-1]))
        first = await proto.next_frame(10)
        assert isinstance(first, bytearray) and bytes(first) == big
        view = memoryview(first)[10:20]
        assert bytes(await proto.next_frame(10) or b"") == small  # type: ignore[arg-type]
        third = await proto.next_frame(10)
        assert third is not first and bytes(third or b"") == big[::-1]  # type: ignore[arg-type]
        assert bytes(view) == big[10:20]  # a view of an earlier frame is never overwritten

    _run(test)


def test_bad_size_prefix_ends_the_stream_after_the_good_frames() -> None:
    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        await _send(peer, _frame(b"12345678") + struct.pack(">i", -1) + b"\0" * 8)
        assert await proto.next_frame(10) == b"12345678"
        err = await proto.next_frame(10)
        assert isinstance(err, FrameError) and err.kind == FrameErrorKind.NEGATIVE_SIZE

    _run(test)


def test_oversized_and_undersized_frames_are_errors() -> None:
    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        await _send(peer, struct.pack(">i", 2000))
        err = await proto.next_frame(10)
        assert isinstance(err, FrameError) and err.kind == FrameErrorKind.OVERSIZED

    _run(test, max_frame_bytes=1000)

    async def tiny(proto: FrameProtocol, peer: socket.socket) -> None:
        await _send(peer, _frame(b"abc"))
        err = await proto.next_frame(10)
        assert isinstance(err, FrameError) and err.kind == FrameErrorKind.UNDERSIZED

    _run(tiny)


def test_end_of_stream_inside_a_frame_and_timeout() -> None:
    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        try:
            await proto.next_frame(0.05)
            raise AssertionError("no timeout")
        except TimeoutError:
            pass
        await _send(peer, _frame(b"whole-frame") + struct.pack(">i", 500_000) + b"x" * 1000)
        assert await proto.next_frame(10) == b"whole-frame"
        peer.shutdown(socket.SHUT_WR)
        assert await proto.next_frame(10) is None

    _run(test)


def test_read_ahead_is_bounded_and_resumes() -> None:
    n = frames.FRAMES_QUEUED_MAX * 4
    payloads = [i.to_bytes(4, "big") * 4 for i in range(n)]

    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        await _send(peer, b"".join(_frame(p) for p in payloads))
        for _ in range(100):
            if proto._paused_reading:
                break
            await asyncio.sleep(0.01)
        assert proto._paused_reading and len(proto._frames) <= frames.FRAMES_QUEUED_MAX
        got = [await proto.next_frame(10) for _ in payloads]
        assert got == payloads and not proto._paused_reading

    _run(test)


def test_writes_and_drain() -> None:
    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        data = os.urandom(4 << 20)  # more than the socket buffer: drain waits for the reader
        proto.write(data)
        reader = asyncio.get_running_loop().run_in_executor(
            None, lambda: b"".join(peer.recv(1 << 20) for _ in range(64)))
        await proto.drain()
        proto.close()
        got = await reader
        while len(got) < len(data):
            more = peer.recv(1 << 20)
            if not more:
                break
            got += more
        assert got == data

    _run(test)


def test_next_frame_timeouts_share_one_clock_handle() -> None:
    """A follower's fetches each wait with a timeout: 50 answered requests arm one clock
    handle, not 50; a shorter timeout after a longer one still fires on time, and a
    timeout that keeps being pushed out fires once the last deadline has passed."""

    async def test(proto: FrameProtocol, peer: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        armed = 0
        call_at = loop.call_at

        def counting(when: float, cb: Callable[..., object], *args: object,
                     **kw: object) -> asyncio.TimerHandle:
            nonlocal armed
            armed += cb == proto._on_timer
            return call_at(when, cb, *args, **kw)  # type: ignore[arg-type]

        loop.call_at = counting  # type: ignore[method-assign]
        try:
            for i in range(50):  # each waits before its frame arrives, as a fetch does
                waiting = asyncio.ensure_future(proto.next_frame(30))
                await asyncio.sleep(0)
                await _send(peer, _frame(b"request-%d" % i))
                assert await waiting == b"request-%d" % i
            assert armed == 1
            t = loop.time()
            try:
                await proto.next_frame(0.05)  # earlier than the handle armed for 30 s
                raise AssertionError("no timeout")
            except TimeoutError:
                pass
            assert loop.time() - t < 5
        finally:
            loop.call_at = call_at  # type: ignore[method-assign]

    _run(test)
