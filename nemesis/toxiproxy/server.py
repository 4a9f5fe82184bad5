"""The Toxiproxy-compatible server: API listener plus proxies, in-process or in a thread.

- ``ToxiproxyServer``: asyncio object; ``await start()``, ``await close()``.
- ``serve(host, port)``: run one until SIGINT/SIGTERM (what ``python -m nemesis.toxiproxy``
  does).
- ``ThreadedToxiproxy``: run one on its own event loop in a background thread, for synchronous
  callers such as the ``toxiproxy-python`` client in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import signal
import socket
import threading
from pathlib import Path
from types import TracebackType

from nemesis.toxiproxy.api import VERSION, ToxiproxyApi
from nemesis.toxiproxy.errors import ApiError
from nemesis.toxiproxy.httpd import LINE_LIMIT, HttpServer
from nemesis.toxiproxy.proxy import ProxyCollection, ProxyOptions, join_host_port

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8474


class ToxiproxyServer:
    """A Toxiproxy 2.x compatible API server and the proxies it manages."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        allow_non_loopback: bool = False,
        seed: int | None = None,
        max_connections_per_proxy: int = 1024,
        version: str = VERSION,
    ) -> None:
        self._host = host
        self._port = port
        self._options = ProxyOptions(allow_non_loopback, max_connections_per_proxy)
        self.rng = random.Random(seed)
        self.collection = ProxyCollection(self.rng, self._options)
        self.api = ToxiproxyApi(self.collection, version)
        self._http = HttpServer(self.api.handle)
        self._server: asyncio.Server | None = None
        self._bound: tuple[str, int] | None = None

    @property
    def host(self) -> str:
        if self._bound is None:
            raise RuntimeError("server not started")
        return self._bound[0]

    @property
    def port(self) -> int:
        if self._bound is None:
            raise RuntimeError("server not started")
        return self._bound[1]

    @property
    def url(self) -> str:
        return f"http://{join_host_port(self.host, self.port)}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"cannot resolve {self._host}")
        ip = str(infos[0][4][0])
        if not self._options.allow_non_loopback and not ipaddress.ip_address(ip).is_loopback:
            raise ValueError(
                f"refusing to serve the API on non-loopback address {ip}"
                " (pass allow_non_loopback to do so)"
            )
        self._server = await asyncio.start_server(
            self._http.handle_connection, ip, self._port, reuse_address=True, limit=LINE_LIMIT
        )
        sockname = self._server.sockets[0].getsockname()
        self._bound = (str(sockname[0]), int(sockname[1]))
        log.info("Toxiproxy API listening on %s", self.url)

    async def populate_file(self, path: Path) -> int:
        """Create proxies from a JSON file, like ``toxiproxy-server -config``."""
        try:
            proxies, error = await self.collection.populate(path.read_bytes())
        except ApiError as exc:
            proxies, error = [], exc
        if error is not None:
            raise ValueError(f"failed to populate proxies from {path}: {error}") from error
        return len(proxies)

    async def close(self) -> None:
        """Stop the API listener and every proxy (closing all proxied connections)."""
        if self._server is not None:
            self._server.close()
            await self._http.close_all()
        await self.collection.clear()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await self._server.wait_closed()
            self._server = None


async def _serve_until_signalled(server: ToxiproxyServer, config: Path | None) -> None:
    await server.start()
    if config is not None:
        count = await server.populate_file(config)
        log.info("populated %d proxies from %s", count, config)
    print(f"Toxiproxy API listening on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close()


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    config: Path | None = None,
    seed: int | None = None,
    allow_non_loopback: bool = False,
) -> None:
    """Run a server until SIGINT or SIGTERM."""
    server = ToxiproxyServer(host, port, seed=seed, allow_non_loopback=allow_non_loopback)
    asyncio.run(_serve_until_signalled(server, config))


class ThreadedToxiproxy:
    """A ``ToxiproxyServer`` on its own event loop in a daemon thread.

    >>> with ThreadedToxiproxy(port=0) as server:   # doctest: +SKIP
    ...     Toxiproxy().update_api_consumer(server.host, server.port)
    """

    def __init__(self, host: str = DEFAULT_HOST, port: int = 0, *, seed: int | None = None) -> None:
        self._server = ToxiproxyServer(host, port, seed=seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def server(self) -> ToxiproxyServer:
        return self._server

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return self._server.url

    def start(self, timeout_s: float = 10.0) -> ThreadedToxiproxy:
        self._thread = threading.Thread(target=self._main, name="toxiproxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"toxiproxy server did not start within {timeout_s} s")
        if self._error is not None:
            raise RuntimeError("toxiproxy server failed to start") from self._error
        return self

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self._server.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._server.close()

    def stop(self, timeout_s: float = 10.0) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                raise TimeoutError(f"toxiproxy server did not stop within {timeout_s} s")

    def __enter__(self) -> ThreadedToxiproxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
