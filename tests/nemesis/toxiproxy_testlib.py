"""Helpers for the Toxiproxy tests: loopback TCP servers, bounded socket reads, raw HTTP.

Every server binds 127.0.0.1 and every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

LOOPBACK = "127.0.0.1"
IO_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Event:
    kind: str  # "accept", "eof", "reset"
    at: float  # time.monotonic()
    total: int  # bytes received on that connection so far


class TcpServer:
    """Threaded loopback server. ``echo``: send back what arrives; ``read=False``: never read
    (a stalled peer). Records per-connection events in ``events``."""

    def __init__(self, *, echo: bool = True, read: bool = True) -> None:
        self._echo = echo
        self._read = read
        self._listener = socket.create_server((LOOPBACK, 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self.address = f"{LOOPBACK}:{self.port}"
        self.events: queue.Queue[Event] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)
        self._accepter.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            self.events.put(Event("accept", time.monotonic(), 0))
            if self._read:
                thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                with self._lock:
                    self._threads.append(thread)
                thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        total = 0
        while not self._stop.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                self.events.put(Event("reset", time.monotonic(), total))
                return
            except OSError:
                return
            if not data:
                self.events.put(Event("eof", time.monotonic(), total))
                return
            total += len(data)
            if self._echo:
                try:
                    conn.settimeout(None)  # stop() unblocks a stuck send with shutdown()
                    conn.sendall(data)
                    conn.settimeout(0.1)
                except OSError:
                    return

    def next_event(self, kind: str, timeout_s: float = IO_TIMEOUT_S) -> Event:
        """The next event of ``kind`` ("end" matches "eof" or "reset"); skips others."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {kind!r} event within {timeout_s} s")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty as exc:
                raise AssertionError(f"no {kind!r} event within {timeout_s} s") from exc
            if event.kind == kind or (kind == "end" and event.kind in ("eof", "reset")):
                return event

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._accepter.join(2.0)
        for thread in threads:
            thread.join(2.0)

    def __enter__(self) -> TcpServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def split_listen(listen: str) -> tuple[str, int]:
    host, port = listen.rsplit(":", 1)
    return host, int(port)


def connect(listen: str, timeout_s: float = IO_TIMEOUT_S) -> socket.socket:
    host, port = split_listen(listen)
    assert host.startswith("127."), f"tests only talk to loopback, not {host}"
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.settimeout(timeout_s)
    return sock


def recv_exactly(sock: socket.socket, size: int, timeout_s: float = IO_TIMEOUT_S) -> bytes:
    """Exactly ``size`` bytes, or AssertionError on EOF or deadline."""
    deadline = time.monotonic() + timeout_s
    data = bytearray()
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"got {len(data)} of {size} bytes within {timeout_s} s")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(size - len(data))
        except TimeoutError as exc:
            raise AssertionError(f"got {len(data)} of {size} bytes within {timeout_s} s") from exc
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def recv_until_closed(sock: socket.socket, timeout_s: float = IO_TIMEOUT_S) -> tuple[str, bytes]:
    """Read until the peer closes: ("eof" | "reset" | "timeout", bytes read)."""
    deadline = time.monotonic() + timeout_s
    data = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout", bytes(data)
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return "timeout", bytes(data)
        except ConnectionResetError:
            return "reset", bytes(data)
        if not chunk:
            return "eof", bytes(data)
        data += chunk


def nothing_arrives(sock: socket.socket, wait_s: float) -> bool:
    """True if no byte and no close arrives on ``sock`` within ``wait_s``."""
    sock.settimeout(wait_s)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http_request(
    base_url: str,
    method: str,
    path: str,
    body: object = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> HttpResult:
    """One request on a fresh connection; ``body`` is sent as JSON, ``raw`` as is."""
    host_port = base_url.removeprefix("http://")
    host, port = split_listen(host_port)
    conn = http.client.HTTPConnection(host, port, timeout=IO_TIMEOUT_S)
    try:
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=payload, headers=headers or {})
        response = conn.getresponse()
        return HttpResult(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
    finally:
        conn.close()


def wait_until(predicate: Any, timeout_s: float = IO_TIMEOUT_S, interval_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
