"""Proxied connections, their two toxic links, and a proxy's toxic collection.

Mirrors Toxiproxy's ``link.go`` and ``toxic_collection.go``. A connection has two links,
``upstream`` (client -> server) and ``downstream`` (server -> client). A link is

    reader task -> [noop stub] -> [toxic stub] ... -> writer task

joined by bounded channels. When a link's stream ends, its writer closes the destination
socket completely (Toxiproxy does not forward half-closes), which ends the other link's
input too. Adding, updating or removing a toxic rewires every live link of the proxy.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import struct
from collections import deque
from collections.abc import Callable

from nemesis.toxiproxy import gojson
from nemesis.toxiproxy.channel import Channel, Chunk
from nemesis.toxiproxy.errors import (
    INVALID_STREAM,
    INVALID_TOXIC_TYPE,
    TOXIC_ALREADY_EXISTS,
    TOXIC_NOT_FOUND,
)
from nemesis.toxiproxy.toxics import (
    REGISTRY,
    Direction,
    ToxicStub,
    ToxicWrapper,
    noop_wrapper,
    parse_direction,
)

log = logging.getLogger(__name__)

# Bytes read from a socket at a time (Go's io.Copy buffer).
READ_SIZE = 32 * 1024
# How long a normal close may wait for buffered bytes to reach a peer that does not read.
CLOSE_FLUSH_TIMEOUT_S = 5.0

_LINGER_ZERO = struct.pack("ii", 1, 0)


class Connection:
    """One accepted client connection and its upstream connection."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        rng: random.Random,
        on_closed: Callable[[Connection], None],
    ) -> None:
        self.client_reader, self.client_writer = client
        self.upstream_reader, self.upstream_writer = upstream
        self._rng = rng
        self._on_closed = on_closed
        self._links: list[ToxicLink] = []
        self._finished = 0
        self._closed = False
        self.reset = False
        peer = self.client_writer.get_extra_info("peername")
        self.name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else repr(peer)

    @property
    def rng(self) -> random.Random:
        return self._rng

    def request_reset(self) -> None:
        """SO_LINGER 0 on both sockets, so closing them sends RST (reset_peer)."""
        if self.reset:
            return
        self.reset = True
        for writer in (self.client_writer, self.upstream_writer):
            sock = writer.get_extra_info("socket")
            if sock is None:
                continue
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            except OSError as exc:
                log.debug("connection %s: cannot set SO_LINGER: %s", self.name, exc)

    def start(self, collection: ToxicCollection) -> None:
        """Start both links; the caller holds ``collection.lock``."""
        upstream = ToxicLink(
            collection, Direction.UPSTREAM, self, self.client_reader, self.upstream_writer
        )
        downstream = ToxicLink(
            collection, Direction.DOWNSTREAM, self, self.upstream_reader, self.client_writer
        )
        self._links = [upstream, downstream]
        for link in self._links:
            collection.links[id(link)] = link
            link.start()

    async def close_writer(self, writer: asyncio.StreamWriter) -> None:
        """Close one socket at the end of a link: RST after reset_peer, else FIN."""
        if self.reset:
            writer.transport.abort()
            return
        writer.close()
        try:
            async with asyncio.timeout(CLOSE_FLUSH_TIMEOUT_S):
                await writer.wait_closed()
        except TimeoutError:
            writer.transport.abort()
        except OSError:
            pass

    def link_finished(self, link: ToxicLink) -> None:
        link.detach()
        self._finished += 1
        if self._finished >= len(self._links):
            self._mark_closed()

    def kill(self) -> None:
        """Drop the connection now (proxy disabled or deleted): both sockets closed."""
        for link in self._links:
            link.detach()
        for writer in (self.client_writer, self.upstream_writer):
            writer.transport.abort()
        self._mark_closed()

    def _mark_closed(self) -> None:
        if not self._closed:
            self._closed = True
            self._on_closed(self)


class ToxicLink:
    """One direction of one connection: reader -> toxic stubs -> writer."""

    def __init__(
        self,
        collection: ToxicCollection,
        direction: Direction,
        connection: Connection,
        source: asyncio.StreamReader,
        dest: asyncio.StreamWriter,
    ) -> None:
        self.collection = collection
        self.direction = direction
        self.connection = connection
        self.source = source
        self.dest = dest
        chain = collection.chain[direction]
        self.input = Channel(1)
        last = self.input
        self.stubs: list[ToxicStub] = []
        for i in range(len(chain)):
            after = Channel(max(1, chain[i + 1].buffer_size)) if i + 1 < len(chain) else Channel(1)
            self.stubs.append(ToxicStub(last, after, connection))
            last = after
        self.output = last
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._detached = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read())
        chain = self.collection.chain[self.direction]
        for stub, wrapper in zip(self.stubs, chain, strict=True):
            stub.state = wrapper.toxic.new_state()
            stub.start(wrapper)
        self._writer = loop.create_task(self._write())

    @property
    def dying(self) -> bool:
        """A link with a closed or killed stub is ending; toxic changes skip it."""
        return self._detached or any(stub.closed or stub.killed for stub in self.stubs)

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await self.source.read(READ_SIZE)
                if not data:
                    break
                if not await self.input.put(Chunk(data, loop.time())):
                    break
        except OSError as exc:
            log.debug("link %s %s: source ended: %s", self.connection.name, self.label, exc)
        finally:
            self.input.close()

    async def _write(self) -> None:
        try:
            while True:
                chunk = await self.output.get()
                if chunk is None:
                    break
                if chunk.data:
                    self.dest.write(chunk.data)
                    await self.dest.drain()
        except OSError as exc:
            log.debug("link %s %s: cannot write: %s", self.connection.name, self.label, exc)
        await self.connection.close_writer(self.dest)
        self.connection.link_finished(self)

    @property
    def label(self) -> str:
        return self.direction.label

    def detach(self) -> None:
        """Stop every task of this link and forget it. Idempotent."""
        if self._detached:
            return
        self._detached = True
        self.collection.links.pop(id(self), None)
        for stub in self.stubs:
            stub.kill()
        self.input.close()
        self.output.close()
        for stub in self.stubs:
            stub.input.close()
            stub.output.close()
        current = asyncio.current_task()
        for task in (self._reader, self._writer):
            if task is not None and task is not current and not task.done():
                task.cancel()

    # -- rewiring (the caller holds collection.lock) -----------------------------------------

    async def add_toxic(self, wrapper: ToxicWrapper) -> None:
        if self.dying:
            return
        i = len(self.stubs)
        new_input = Channel(max(1, wrapper.buffer_size))
        previous = self.stubs[i - 1]
        stub = ToxicStub(new_input, previous.output, self.connection)
        self.stubs.append(stub)
        if await previous.interrupt():
            previous.output = new_input
            stub.state = wrapper.toxic.new_state()
            stub.start(wrapper)
            previous.start(self.collection.chain[self.direction][i - 1])
        else:
            stub.output = new_input
            stub.close()

    async def update_toxic(self, wrapper: ToxicWrapper) -> None:
        if self.dying:
            return
        stub = self.stubs[wrapper.index]
        if await stub.interrupt():
            stub.start(wrapper)

    async def remove_toxic(self, wrapper: ToxicWrapper, index: int) -> None:
        if self.dying:
            return
        current = self.stubs[index]
        previous = self.stubs[index - 1]
        if not await current.interrupt():
            return
        wrapper.toxic.cleanup(current)
        if current.closed:
            return
        if not await previous.interrupt():
            # The stream ended before this stub: let it pass on what it holds, then end.
            current.start(noop_wrapper(self.direction))
            return
        # Everything still inside the removed stage leaves through the previous stub, in
        # order: what the removed toxic held, its buffered input, then what the previous
        # toxic held.
        carried: deque[Chunk] = deque(current.pending)
        while (item := current.input.get_nowait()) is not None:
            carried.append(item)
        carried.extend(previous.pending)
        previous.pending = carried
        previous.output = current.output
        del self.stubs[index]
        previous.start(self.collection.chain[self.direction][index - 1])


class ToxicCollection:
    """A proxy's toxics, one chain per direction, each headed by a hidden noop."""

    def __init__(self) -> None:
        self.chain: dict[Direction, list[ToxicWrapper]] = {
            direction: [noop_wrapper(direction)] for direction in Direction
        }
        self.links: dict[int, ToxicLink] = {}
        self.lock = asyncio.Lock()

    def toxic_array(self) -> list[ToxicWrapper]:
        """Upstream toxics first, then downstream, each in the order they were added."""
        return [w for direction in Direction for w in self.chain[direction][1:]]

    def find(self, name: str) -> ToxicWrapper | None:
        for wrapper in self.toxic_array():
            if wrapper.name == name:
                return wrapper
        return None

    def _links_of(self, direction: Direction) -> list[ToxicLink]:
        return [link for link in self.links.values() if link.direction == direction]

    async def add_toxic_json(self, body: bytes) -> ToxicWrapper:
        async with self.lock:
            obj = gojson.as_object(gojson.decode(body), "toxics.ToxicWrapper")
            where = "ToxicWrapper"
            name = gojson.get_str(obj, "name", "", f"{where}.name")
            toxic_type = gojson.get_str(obj, "type", "", f"{where}.type")
            stream = gojson.get_str(obj, "stream", "downstream", f"{where}.stream")
            toxicity = gojson.get_float32(obj, "toxicity", 1.0, f"{where}.toxicity")
            present, attributes = gojson.lookup(obj, "attributes")
            if present and attributes is not None and not isinstance(attributes, dict):
                raise gojson.bad_body(
                    "json: cannot unmarshal non-object into Go struct field "
                    f"{where}.attributes of type toxics.Toxic"
                )
            direction = parse_direction(stream)
            if direction is None:
                raise INVALID_STREAM
            if not name:
                name = f"{toxic_type}_{stream}"
            toxic_class = REGISTRY.get(toxic_type)
            if toxic_class is None:
                raise INVALID_TOXIC_TYPE
            if self.find(name) is not None:
                raise TOXIC_ALREADY_EXISTS
            toxic = toxic_class.from_attributes(attributes, None)
            wrapper = ToxicWrapper(toxic, name, toxic_type, stream, toxicity, direction)
            chain = self.chain[direction]
            wrapper.index = len(chain)
            chain.append(wrapper)
            links = self._links_of(direction)
            await asyncio.gather(*(link.add_toxic(wrapper) for link in links))
            return wrapper

    async def update_toxic_json(self, name: str, body: bytes) -> ToxicWrapper:
        async with self.lock:
            wrapper = self.find(name)
            if wrapper is None:
                raise TOXIC_NOT_FOUND
            obj = gojson.as_object(gojson.decode(body), "struct")
            present, attributes = gojson.lookup(obj, "attributes")
            if present and attributes is not None and not isinstance(attributes, dict):
                raise gojson.bad_body(
                    "json: cannot unmarshal non-object into Go struct field .attributes"
                )
            toxic = type(wrapper.toxic).from_attributes(attributes, wrapper.toxic)
            toxicity = gojson.get_float32(obj, "toxicity", wrapper.toxicity, ".toxicity")
            wrapper.toxic = toxic
            wrapper.toxicity = toxicity
            links = self._links_of(wrapper.direction)
            await asyncio.gather(*(link.update_toxic(wrapper) for link in links))
            return wrapper

    async def remove_toxic(self, name: str) -> None:
        async with self.lock:
            wrapper = self.find(name)
            if wrapper is None:
                raise TOXIC_NOT_FOUND
            await self._chain_remove(wrapper)

    async def reset_toxics(self) -> None:
        async with self.lock:
            for direction in Direction:
                while len(self.chain[direction]) > 1:
                    await self._chain_remove(self.chain[direction][1])

    async def _chain_remove(self, wrapper: ToxicWrapper) -> None:
        chain = self.chain[wrapper.direction]
        index = wrapper.index
        del chain[index]
        for i in range(index, len(chain)):
            chain[i].index = i
        links = self._links_of(wrapper.direction)
        await asyncio.gather(*(link.remove_toxic(wrapper, index) for link in links))
        wrapper.index = -1
