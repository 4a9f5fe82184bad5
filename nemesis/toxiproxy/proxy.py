"""Proxies (listen, accept, dial upstream) and the proxy collection (``proxy.go``,
``proxy_collection.go``).

Disabling a proxy stops listening and closes every connection it carries: that is how a link is
cut. Unlike Toxiproxy, listen addresses must be loopback (127.0.0.0/8, ::1) unless the server is
started with ``allow_non_loopback``; an empty host means 127.0.0.1 then.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import socket
from dataclasses import dataclass

from nemesis.toxiproxy import gojson
from nemesis.toxiproxy.errors import (
    MISSING_FIELD,
    NON_LOOPBACK_LISTEN,
    PROXY_ALREADY_EXISTS,
    PROXY_NOT_FOUND,
    ProxyAlreadyStarted,
)
from nemesis.toxiproxy.link import Connection, ToxicCollection

log = logging.getLogger(__name__)

# Bound on the time to connect to an upstream (Go dials without one; the OS bound is minutes).
DIAL_TIMEOUT_S = 10.0
# StreamReader buffer limit; reading pauses above twice this.
STREAM_LIMIT = 64 * 1024
LISTEN_BACKLOG = 128


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    allow_non_loopback: bool = False
    max_connections: int = 1024


def split_host_port(address: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``; ``""`` means ``":0"`` as for ``net.Listen``."""
    if address == "":
        return "", "0"
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise ValueError(f"address {address}: missing ']' in address")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f"address {address}: missing port in address")
        return host, rest[1:]
    if ":" not in address:
        raise ValueError(f"address {address}: missing port in address")
    host, port = address.rsplit(":", 1)
    if ":" in host:
        raise ValueError(f"address {address}: too many colons in address")
    return host, port


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def resolve(address: str, options: ProxyOptions) -> tuple[str, int]:
    """Resolve a listen address to one IP and port, enforcing the loopback policy."""
    host, port_text = split_host_port(address)
    if host == "":
        host = "0.0.0.0" if options.allow_non_loopback else "127.0.0.1"
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host, port_text, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    if not infos:
        raise OSError(f"lookup {host}: no such host")
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    sockaddr = infos[0][4]
    ip, port = str(sockaddr[0]), int(sockaddr[1])
    if not options.allow_non_loopback and not ipaddress.ip_address(ip).is_loopback:
        raise NON_LOOPBACK_LISTEN.joined(address)
    return ip, port


class Proxy:
    """A named TCP proxy from ``listen`` to ``upstream`` with its toxics."""

    def __init__(
        self, name: str, listen: str, upstream: str, rng: random.Random, options: ProxyOptions
    ) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics = ToxicCollection()
        self._rng = rng
        self._options = options
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._generation = 0
        self._lock = asyncio.Lock()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [wrapper.to_json() for wrapper in self.toxics.toxic_array()],
        }

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        async with self._lock:
            await self._start()

    async def stop(self) -> None:
        async with self._lock:
            await self._stop()

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        """Go's ``Proxy.Update``: a changed address restarts the proxy (dropping its
        connections); then ``enabled`` is applied."""
        async with self._lock:
            if await self.differs(listen, upstream):
                await self._stop()
                self.listen = listen
                self.upstream = upstream
            if enabled != self.enabled:
                if enabled:
                    await self._start()
                else:
                    await self._stop()

    async def differs(self, listen: str, upstream: str) -> bool:
        ip, port = await resolve(listen, self._options)
        return self.listen != join_host_port(ip, port) or self.upstream != upstream

    async def _start(self) -> None:
        if self.enabled:
            raise ProxyAlreadyStarted(self.name)
        ip, port = await resolve(self.listen, self._options)
        self._server = await asyncio.start_server(
            self._accept,
            ip,
            port,
            reuse_address=True,
            limit=STREAM_LIMIT,
            backlog=LISTEN_BACKLOG,
        )
        bound = self._server.sockets[0].getsockname()
        self.listen = join_host_port(str(bound[0]), int(bound[1]))
        self.enabled = True
        log.info("proxy %s listening on %s -> %s", self.name, self.listen, self.upstream)

    async def _stop(self) -> None:
        if not self.enabled:
            return
        self.enabled = False
        self._generation += 1
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            connection.kill()
        if server is not None:
            try:
                async with asyncio.timeout(5.0):
                    await server.wait_closed()
            except TimeoutError:
                log.warning("proxy %s: listener did not close within 5 s", self.name)
        log.info("proxy %s stopped", self.name)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_client(reader, writer)
        except Exception:
            log.exception("proxy %s: failed to set up a connection", self.name)
            writer.transport.abort()

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        generation = self._generation
        if not self.enabled or len(self._connections) >= self._options.max_connections:
            writer.transport.abort()
            return
        try:
            host, port = split_host_port(self.upstream)
            async with asyncio.timeout(DIAL_TIMEOUT_S):
                upstream = await asyncio.open_connection(host, int(port), limit=STREAM_LIMIT)
        except (OSError, TimeoutError, ValueError) as exc:
            log.info("proxy %s: cannot connect to upstream %s: %s", self.name, self.upstream, exc)
            writer.close()
            return
        connection = Connection((reader, writer), upstream, self._rng, self._connections.discard)
        if generation != self._generation:
            connection.kill()
            return
        self._connections.add(connection)
        async with self.toxics.lock:
            if generation != self._generation:
                connection.kill()
                return
            connection.start(self.toxics)


def parse_proxy_fields(obj: dict[str, object], defaults: Proxy | None) -> tuple[str, str, str]:
    """(name, listen, upstream) of a proxy body, over ``defaults`` for an update."""
    name = gojson.get_str(obj, "name", defaults.name if defaults else "", "Proxy.name")
    listen = gojson.get_str(obj, "listen", defaults.listen if defaults else "", "Proxy.listen")
    upstream = gojson.get_str(
        obj, "upstream", defaults.upstream if defaults else "", "Proxy.upstream"
    )
    return name, listen, upstream


class ProxyCollection:
    """All proxies by name. Callers serialise mutations (the API holds one lock)."""

    def __init__(self, rng: random.Random, options: ProxyOptions) -> None:
        self._proxies: dict[str, Proxy] = {}
        self._rng = rng
        self._options = options

    def new_proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        return Proxy(name, listen, upstream, self._rng, self._options)

    def proxies(self) -> list[Proxy]:
        return [self._proxies[name] for name in sorted(self._proxies)]

    def get(self, name: str) -> Proxy:
        proxy = self._proxies.get(name)
        if proxy is None:
            raise PROXY_NOT_FOUND
        return proxy

    async def add(self, proxy: Proxy, start: bool) -> None:
        if proxy.name in self._proxies:
            raise PROXY_ALREADY_EXISTS
        if start:
            await proxy.start()
        self._proxies[proxy.name] = proxy

    async def add_or_replace(self, proxy: Proxy, start: bool) -> Proxy:
        existing = self._proxies.get(proxy.name)
        if existing is not None:
            if not await existing.differs(proxy.listen, proxy.upstream):
                return existing
            await existing.stop()
        if start:
            await proxy.start()
        self._proxies[proxy.name] = proxy
        return proxy

    async def populate(self, body: bytes) -> tuple[list[Proxy], Exception | None]:
        """Go's ``PopulateJson``: validate all entries, then add or replace them in order.
        Returns the proxies handled and the error that stopped it, if any."""
        value = gojson.decode(body)
        if value is not None and not isinstance(value, list):
            raise gojson.bad_body("json: cannot unmarshal non-array into Go value of type []struct")
        entries: list[tuple[str, str, str, bool]] = []
        for i, item in enumerate(value or [], start=1):
            obj = gojson.as_object(item, "struct")
            name, listen, upstream = parse_proxy_fields(obj, None)
            enabled = gojson.get_bool(obj, "enabled", True, ".enabled")
            if not name:
                raise MISSING_FIELD.joined(f"name at proxy {i}")
            if not upstream:
                raise MISSING_FIELD.joined(f"upstream at proxy {i}")
            entries.append((name, listen, upstream, enabled))
        handled: list[Proxy] = []
        for name, listen, upstream, enabled in entries:
            try:
                proxy = await self.add_or_replace(self.new_proxy(name, listen, upstream), enabled)
            except Exception as exc:
                return handled, exc
            handled.append(proxy)
        return handled, None

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        await proxy.stop()
        del self._proxies[name]

    async def clear(self) -> None:
        for proxy in self.proxies():
            await proxy.stop()
        self._proxies.clear()
