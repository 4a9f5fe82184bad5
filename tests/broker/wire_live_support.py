"""Plain-socket Kafka client pieces for the live wire tests (tests/broker/test_wire_live.py).

Only loopback: every address comes from a `LocalCluster` (127.0.0.x). Every read has a
timeout; every loop a bound.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from pathlib import Path
from typing import Any

import kio.index
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.runtime.cluster import LocalCluster
from broker.wire import DecodedResponse, build, decode_response, encode_request

RECV_TIMEOUT_S = 10.0
MAX_RESPONSE = 64 << 20


class PeerClosed(ConnectionError):
    """The broker closed the connection (EOF or reset) before a complete response."""


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        try:
            chunk = s.recv(min(n - len(out), 1 << 20))
        except ConnectionResetError as e:
            raise PeerClosed(f"reset after {len(out)}/{n} bytes") from e
        if not chunk:
            raise PeerClosed(f"EOF after {len(out)}/{n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    assert 4 <= size <= MAX_RESPONSE, f"response size prefix {size}"
    return recv_exact(s, size)


def closed_by_peer(s: socket.socket, timeout_s: float = 5.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within `timeout_s` without
    sending anything; False on a timeout; AssertionError if it sends bytes."""
    s.settimeout(timeout_s)
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    assert data == b"", f"expected the connection to close, got {data[:64]!r}"
    return True


def connect(host: str, port: int, timeout_s: float = RECV_TIMEOUT_S) -> socket.socket:
    s = socket.create_connection((host, port), timeout=timeout_s)
    s.settimeout(timeout_s)
    return s


def reset_close(s: socket.socket) -> None:
    """An abrupt disconnect: RST instead of FIN (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def request_body(api_key: int, version: int, data: Any) -> Any:
    return build(kio.index.load_request_schema(api_key, version), data)


class Client:
    """One connection to one broker; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.sock = connect(host, port)
        self.cid = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def call(self, api_key: int, version: int, data: Any) -> Any:
        """Build, send, receive and decode; returns the decoded response body."""
        body = request_body(api_key, version, data)
        self.cid += 1
        cid = self.cid
        self.sock.sendall(encode_request(body, cid, "wire-live"))
        payload = recv_frame(self.sock)
        resp = decode_response(payload, api_key, version)
        assert isinstance(resp, DecodedResponse), f"api {api_key} v{version}: {resp}"
        assert resp.correlation_id == cid, (resp.correlation_id, cid)
        return resp.body


def client_for(cluster: LocalCluster, broker_id: int) -> Client:
    b = cluster.nodes[broker_id]
    return Client(b.host, b.port)


def record_batch(values: list[bytes], producer_id: int = -1, base_sequence: int = -1) -> bytes:
    """A v2 batch (kafka-python's builder), as a producer sends it."""
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence,
        batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(i, timestamp=now, key=None, value=v, headers=[])
    return bytes(b.build())


READY_S = 60.0  # brokers start slowly on a loaded 2-CPU machine (5 s of imports seen)


def start_cluster_patiently(base: Path, brokers: int = 3, **overrides: str) -> LocalCluster:
    """conftest's `start_cluster` (same SAFE settings), waiting up to READY_S for readiness."""
    from .conftest import SAFE, _require_zookeeper

    _require_zookeeper()
    c = LocalCluster(base, brokers, {**SAFE, **overrides})
    try:
        c.start(wait=False)
        c.wait_ready(READY_S)
    except BaseException:
        for i in sorted(c.nodes):
            print(f"--- broker {i} log tail ---\n{c.log_tail(i)}")
        c.stop()
        raise
    return c


def discard_cluster(c: LocalCluster) -> None:
    """Teardown for a cluster whose data nobody needs: SIGKILL every broker (a clean stop
    takes seconds per broker on a loaded machine), then stop ZooKeeper."""
    for i in sorted(c.nodes):
        with contextlib.suppress(Exception):
            c.kill(i)
    c.stop()
