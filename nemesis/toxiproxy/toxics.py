"""Toxics with Toxiproxy 2.x semantics, and the stub that runs one toxic on one link.

A link (one direction of one proxied connection) is a pipeline of stubs joined by bounded
channels: ``socket -> noop -> toxic 1 -> ... -> toxic n -> socket``. Each stub runs its toxic's
``pipe`` as a task. As in Toxiproxy (``toxics/toxic.go``), a running toxic can be *interrupted*
so the chain can be rewired when toxics are added, updated or removed, and an interrupted
toxic never drops data.

Go's toxics wait in ``select`` on "next input" or "interrupt", and an interrupted toxic first
pushes the chunk it holds into its output, which blocks while the next stage is full (for
instance while the destination socket is not read), so in Toxiproxy a toxic change can hang
behind a stalled peer. Here an interrupt is a task cancellation; a toxic that holds data when
interrupted leaves it in ``stub.pending``, and the stub sends the pending chunks first when it
runs again, on whatever output it has then. Interrupts therefore take effect at once, nothing
is lost, and order is kept. ``pending`` only ever holds data that was already buffered in the
link, so it is bounded by the link's channel capacities.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import enum
import logging
import random
from collections import deque
from dataclasses import dataclass
from typing import ClassVar, Protocol

from nemesis.toxiproxy import gojson
from nemesis.toxiproxy.channel import Channel, Chunk
from nemesis.toxiproxy.errors import INVALID_ATTRIBUTE

log = logging.getLogger(__name__)


class Direction(enum.IntEnum):
    """``stream``: upstream is client -> server, downstream is server -> client."""

    UPSTREAM = 0
    DOWNSTREAM = 1

    @property
    def label(self) -> str:
        return self.name.lower()


def parse_direction(value: str) -> Direction | None:
    lowered = value.lower()
    if lowered == "upstream":
        return Direction.UPSTREAM
    if lowered == "downstream":
        return Direction.DOWNSTREAM
    return None


class LinkContext(Protocol):
    """What a running toxic may ask of the link it runs on."""

    @property
    def rng(self) -> random.Random: ...

    def request_reset(self) -> None:
        """Make the coming close of this connection a TCP RST (SO_LINGER 0), both sides."""


class ToxicStub:
    """Per-link runner of one toxic: input channel, output channel, state, and the task."""

    __slots__ = ("_closed", "_killed", "_task", "context", "input", "output", "pending", "state")

    def __init__(self, input: Channel, output: Channel, context: LinkContext) -> None:
        self.input = input
        self.output = output
        self.context = context
        self.state: object = None
        self.pending: deque[Chunk] = deque()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._killed = False

    @property
    def rng(self) -> random.Random:
        return self.context.rng

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def killed(self) -> bool:
        return self._killed

    # -- lifecycle, driven by the link -------------------------------------------------------

    def start(self, wrapper: ToxicWrapper) -> None:
        """Run ``wrapper``'s toxic (or a noop, with probability ``1 - toxicity``)."""
        if self._killed:
            return
        self._task = asyncio.get_running_loop().create_task(self._run(wrapper))

    async def _run(self, wrapper: ToxicWrapper) -> None:
        toxic = wrapper.toxic if self.rng.random() < wrapper.toxicity else NOOP
        try:
            while self.pending:
                await self.output.put(self.pending[0])
                self.pending.popleft()
            await toxic.pipe(self)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("toxic %s (%s) failed; closing its stream", wrapper.name, wrapper.type)
            self.close()

    async def interrupt(self) -> bool:
        """Stop the running toxic so the chain can be changed. ``False`` if the stub is closed
        (the stream has ended and there is nothing to rewire)."""
        if self._closed or self._killed:
            return False
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        return not self._closed and not self._killed

    def close(self) -> None:
        """End the stream after this stub: the next stages drain and see end of stream."""
        if not self._closed:
            self._closed = True
            self.output.close()

    def kill(self) -> None:
        """Tear down: abort whatever the toxic is doing. Used when the connection goes away."""
        self._killed = True
        self.pending.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # -- helpers for toxics ---------------------------------------------------------------

    async def recv(self) -> Chunk | None:
        """Next input chunk, ``None`` at end of stream. Interruptible."""
        return await self.input.get()

    async def sleep(self, seconds: float) -> None:
        """Interruptible sleep; non-positive durations still yield once (Go's time.After(0))."""
        await asyncio.sleep(max(0.0, seconds))

    async def send(self, chunk: Chunk) -> None:
        """Pass ``chunk`` on. If interrupted meanwhile, the chunk is kept in ``pending``."""
        try:
            await self.output.put(chunk)
        except asyncio.CancelledError:
            self.hold(chunk)
            raise

    def hold(self, chunk: Chunk) -> None:
        """Keep ``chunk`` for the next run of this stub (called when interrupted)."""
        if chunk.data and not self._killed:
            self.pending.append(chunk)

    async def sleep_through_interrupts(self, seconds: float) -> None:
        """A sleep an interrupt cannot shorten (Go's bare ``<-time.After(d)``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, seconds)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            try:
                await asyncio.sleep(remaining)
            except asyncio.CancelledError:
                if self._killed:
                    raise


class Toxic(abc.ABC):
    """A toxic's settings (its ``attributes``) and how it pipes data through a stub."""

    type_name: ClassVar[str]
    # Capacity of the channel feeding this toxic (Go's BufferedToxic; 0 means unbuffered).
    buffer_size: ClassVar[int] = 0

    @abc.abstractmethod
    async def pipe(self, stub: ToxicStub) -> None:
        """Move chunks from ``stub.input`` to ``stub.output`` until end of stream (then
        ``stub.close()``) or an interrupt (``CancelledError``)."""

    def attributes(self) -> dict[str, object]:
        if not dataclasses.is_dataclass(self):
            return {}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def new_state(self) -> object:
        """Per-link state kept across interrupts (Go's StatefulToxic); ``None`` if stateless."""
        return None

    def cleanup(self, stub: ToxicStub) -> None:
        """Called on each link when the toxic is removed (Go's CleanupToxic)."""
        return None

    def validate(self) -> None:
        """Refuse attribute values that cannot work (raise ``ApiError``)."""
        return None

    @classmethod
    def from_attributes(cls, raw: object, base: Toxic | None) -> Toxic:
        """Decode ``attributes`` over ``base`` (update) or over zero values (create)."""
        where = f"{cls.__name__}.attributes"
        obj = gojson.as_object(raw, cls.__name__)
        values: dict[str, int] = {}
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                current = getattr(base, f.name) if isinstance(base, cls) else 0
                values[f.name] = gojson.get_int64(obj, f.name, current, f"{where}.{f.name}")
        toxic = cls(**values)
        toxic.validate()
        return toxic


def _invalid(detail: str) -> Exception:
    return INVALID_ATTRIBUTE.joined(detail)


class NoopToxic(Toxic):
    """Passes everything through. Heads every chain so the first real toxic can be paused."""

    type_name = "noop"

    async def pipe(self, stub: ToxicStub) -> None:
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return
            await stub.send(chunk)


NOOP = NoopToxic()


@dataclass(frozen=True, slots=True)
class LatencyToxic(Toxic):
    """Delays each chunk by ``latency`` ± ``jitter`` ms, measured from when it was read."""

    type_name = "latency"
    buffer_size = 1024

    latency: int = 0
    jitter: int = 0

    def delay_s(self, rng: random.Random) -> float:
        delay_ms = self.latency
        if self.jitter > 0:
            delay_ms += rng.randrange(self.jitter * 2) - self.jitter
        return delay_ms / 1000.0

    async def pipe(self, stub: ToxicStub) -> None:
        loop = asyncio.get_running_loop()
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return
            wait = self.delay_s(stub.rng) - (loop.time() - chunk.timestamp)
            try:
                await stub.sleep(wait)
            except asyncio.CancelledError:
                stub.hold(chunk)  # interrupted: it leaves without further delay
                raise
            chunk.timestamp += wait
            await stub.send(chunk)


@dataclass(frozen=True, slots=True)
class BandwidthToxic(Toxic):
    """Limits the stream to ``rate`` KB/s (1 KB = 1000 bytes); big chunks leave in 100 ms
    slices. ``rate`` 0 holds all data (as Toxiproxy does)."""

    type_name = "bandwidth"

    rate: int = 0

    def validate(self) -> None:
        if self.rate < 0:
            raise _invalid("bandwidth rate must not be negative")

    async def pipe(self, stub: ToxicStub) -> None:
        loop = asyncio.get_running_loop()
        debt_s = 0.0
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return
            if self.rate <= 0:
                try:
                    while True:
                        await stub.sleep(0.1)
                except asyncio.CancelledError:
                    stub.hold(chunk)
                    raise
            debt_s += len(chunk.data) / (self.rate * 1000.0)
            slice_bytes = self.rate * 100
            data = chunk.data
            while len(data) > slice_bytes:
                try:
                    await stub.sleep(0.1)
                except asyncio.CancelledError:
                    stub.hold(Chunk(data, chunk.timestamp))
                    raise
                head, data = data[:slice_bytes], data[slice_bytes:]
                try:
                    await stub.send(Chunk(head, chunk.timestamp))
                except asyncio.CancelledError:
                    stub.hold(Chunk(data, chunk.timestamp))
                    raise
                debt_s -= 0.1
            started = loop.time()
            try:
                await stub.sleep(debt_s)
            except asyncio.CancelledError:
                stub.hold(Chunk(data, chunk.timestamp))
                raise
            # Sleeps overshoot; carry the error into the next chunk's budget.
            debt_s -= loop.time() - started
            await stub.send(Chunk(data, chunk.timestamp))


@dataclass(frozen=True, slots=True)
class SlowCloseToxic(Toxic):
    """Delays the end of the stream (the close) by ``delay`` ms."""

    type_name = "slow_close"

    delay: int = 0

    async def pipe(self, stub: ToxicStub) -> None:
        while True:
            chunk = await stub.recv()
            if chunk is None:
                await stub.sleep(self.delay / 1000.0)
                stub.close()
                return
            await stub.send(chunk)


@dataclass(frozen=True, slots=True)
class TimeoutToxic(Toxic):
    """Drops all data; closes the connection after ``timeout`` ms without input (0: never).
    Removing it closes the connections it affected, as in Toxiproxy."""

    type_name = "timeout"

    timeout: int = 0

    async def pipe(self, stub: ToxicStub) -> None:
        if self.timeout > 0:
            while True:
                try:
                    async with asyncio.timeout(self.timeout / 1000.0):
                        chunk = await stub.recv()
                except TimeoutError:
                    stub.close()
                    return
                if chunk is None:
                    stub.close()
                    return
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return

    def cleanup(self, stub: ToxicStub) -> None:
        stub.close()


@dataclass(frozen=True, slots=True)
class ResetPeerToxic(Toxic):
    """On the first chunk (or end of stream), waits ``timeout`` ms, then resets the
    connection: SO_LINGER 0 and close, so both peers get a TCP RST."""

    type_name = "reset_peer"

    timeout: int = 0

    async def pipe(self, stub: ToxicStub) -> None:
        await stub.recv()
        await stub.sleep_through_interrupts(self.timeout / 1000.0)
        stub.context.request_reset()
        stub.close()


@dataclass(frozen=True, slots=True)
class SlicerToxic(Toxic):
    """Slices each chunk into pieces of about ``average_size`` ± ``size_variation`` bytes,
    ``delay`` microseconds apart."""

    type_name = "slicer"

    average_size: int = 0
    size_variation: int = 0
    delay: int = 0

    def validate(self) -> None:
        # Toxiproxy recurses forever (average_size < 1) or slices out of range
        # (size_variation >= average_size) on these; refuse them instead.
        if self.average_size < 1:
            raise _invalid("slicer average_size must be at least 1")
        if not 0 <= self.size_variation < self.average_size:
            raise _invalid("slicer size_variation must be >= 0 and smaller than average_size")
        if self.delay < 0:
            raise _invalid("slicer delay must not be negative")

    def slice_bounds(self, start: int, end: int, rng: random.Random) -> list[int]:
        """Offsets ``[s0, e0, s1, e1, ...]`` of the slices of ``data[start:end]``: split
        about in half, recursively, until a piece is within ``size_variation`` of the
        average size."""
        if (end - start) - self.average_size <= self.size_variation:
            return [start, end]
        middle = start + (end - start) // 2
        if self.size_variation > 0:
            middle += rng.randrange(self.size_variation * 2) - self.size_variation
        return self.slice_bounds(start, middle, rng) + self.slice_bounds(middle, end, rng)

    async def pipe(self, stub: ToxicStub) -> None:
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return
            bounds = self.slice_bounds(0, len(chunk.data), stub.rng)
            for i in range(1, len(bounds), 2):
                piece = Chunk(chunk.data[bounds[i - 1] : bounds[i]], chunk.timestamp)
                try:
                    await stub.send(piece)
                    await stub.sleep(self.delay / 1_000_000.0)
                except asyncio.CancelledError:
                    stub.hold(Chunk(chunk.data[bounds[i] :], chunk.timestamp))
                    raise


@dataclass(slots=True)
class LimitDataState:
    bytes_transmitted: int = 0


@dataclass(frozen=True, slots=True)
class LimitDataToxic(Toxic):
    """Passes ``bytes`` bytes, then closes the connection. The count survives interrupts."""

    type_name = "limit_data"

    bytes: int = 0

    def new_state(self) -> object:
        return LimitDataState()

    async def pipe(self, stub: ToxicStub) -> None:
        state = stub.state
        if not isinstance(state, LimitDataState):
            state = stub.state = LimitDataState()
        remaining = self.bytes - state.bytes_transmitted
        while True:
            chunk = await stub.recv()
            if chunk is None:
                stub.close()
                return
            remaining = max(remaining, 0)
            if remaining < len(chunk.data):
                chunk = Chunk(chunk.data[:remaining], chunk.timestamp)
            if chunk.data:
                # Counted before sending: an interrupted send still delivers it later.
                state.bytes_transmitted += len(chunk.data)
                await stub.send(chunk)
            remaining = self.bytes - state.bytes_transmitted
            if remaining <= 0:
                stub.close()
                return


REGISTRY: dict[str, type[Toxic]] = {
    cls.type_name: cls
    for cls in (
        NoopToxic,
        LatencyToxic,
        BandwidthToxic,
        SlowCloseToxic,
        TimeoutToxic,
        ResetPeerToxic,
        SlicerToxic,
        LimitDataToxic,
    )
}


@dataclass(slots=True, eq=False)
class ToxicWrapper:
    """A named toxic on one stream of a proxy (Go's ToxicWrapper)."""

    toxic: Toxic
    name: str
    type: str
    stream: str
    toxicity: float
    direction: Direction
    index: int = -1

    @property
    def buffer_size(self) -> int:
        return type(self.toxic).buffer_size

    def to_json(self) -> dict[str, object]:
        return {
            "attributes": self.toxic.attributes(),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
        }


def noop_wrapper(direction: Direction) -> ToxicWrapper:
    return ToxicWrapper(NOOP, "", "noop", direction.label, 1.0, direction, 0)
