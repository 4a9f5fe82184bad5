"""Each toxic's effect on real loopback traffic, driven through the toxiproxy-python client.

Timing assertions are lower bounds (a toxic must delay at least this much) with generous upper
bounds, so a loaded machine does not make them flaky.
"""

from __future__ import annotations

import socket
import threading
import time

from toxiproxy import Toxiproxy
from toxiproxy.proxy import Proxy
from toxiproxy_testlib import (
    TcpServer,
    connect,
    http_request,
    nothing_arrives,
    recv_exactly,
    recv_until_closed,
)

from nemesis.toxiproxy import ThreadedToxiproxy


def round_trip(listen: str, payload: bytes = b"ping", timeout_s: float = 10.0) -> float:
    with connect(listen) as sock:
        started = time.monotonic()
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload), timeout_s) == payload
        return time.monotonic() - started


def make_proxy(client: Toxiproxy, echo: TcpServer, name: str = "echo") -> Proxy:
    return client.create(upstream=echo.address, name=name)


def test_latency_delays_each_direction(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    assert round_trip(proxy.listen) < 1.0
    proxy.add_toxic(type="latency", attributes={"latency": 300})
    elapsed = round_trip(proxy.listen)
    assert 0.29 <= elapsed < 5.0
    proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 200})
    elapsed = round_trip(proxy.listen)
    assert 0.49 <= elapsed < 5.0


def test_latency_jitter_stays_within_bounds(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="latency", attributes={"latency": 200, "jitter": 100})
    for _ in range(3):
        elapsed = round_trip(proxy.listen)
        assert 0.099 <= elapsed < 5.0


def test_latency_pipelines_instead_of_serialising(client: Toxiproxy, echo: TcpServer) -> None:
    """Each chunk is delayed from when it was read, so 10 chunks take ~latency, not 10x."""
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="latency", attributes={"latency": 300})
    with connect(proxy.listen) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.monotonic()
        for i in range(10):
            sock.sendall(bytes([i]) * 10)
            time.sleep(0.01)
        assert recv_exactly(sock, 100, timeout_s=10) == b"".join(bytes([i]) * 10 for i in range(10))
        elapsed = time.monotonic() - started
    assert 0.29 <= elapsed < 2.5


def test_toxic_on_open_connection_and_removal_flushes(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    with connect(proxy.listen) as sock:
        sock.sendall(b"before")
        assert recv_exactly(sock, 6) == b"before"
        proxy.add_toxic(type="latency", attributes={"latency": 4000})
        started = time.monotonic()
        sock.sendall(b"held")
        assert nothing_arrives(sock, 0.3)
        proxy.destroy_toxic("latency_downstream")
        assert recv_exactly(sock, 4, timeout_s=3) == b"held"
        assert time.monotonic() - started < 3.0  # released at removal, not after 4 s


def test_toxicity_zero_never_applies(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 3000})
    for _ in range(3):
        assert round_trip(proxy.listen) < 1.5


def test_toxicity_is_drawn_per_connection(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 250})
    delayed = sum(round_trip(proxy.listen) >= 0.24 for _ in range(16))
    assert 0 < delayed < 16


def test_bandwidth_limits_rate(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 200})  # KB/s
    payload = b"b" * 150_000
    elapsed = round_trip(proxy.listen, payload, timeout_s=15)
    expected = len(payload) / 200_000  # 0.75 s
    assert 0.8 * expected <= elapsed < 10 * expected


def test_bandwidth_zero_holds_data_until_removed(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="bandwidth", name="stall", attributes={"rate": 0})
    with connect(proxy.listen) as sock:
        sock.sendall(b"waiting")
        assert nothing_arrives(sock, 0.4)
        proxy.destroy_toxic("stall")
        assert recv_exactly(sock, 7) == b"waiting"


def test_slow_close_delays_the_close(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="slow_close", stream="upstream", attributes={"delay": 400})
    sock = connect(proxy.listen)
    sock.sendall(b"bye")
    assert recv_exactly(sock, 3) == b"bye"
    closed_at = time.monotonic()
    sock.close()
    eof = echo.next_event("eof")
    assert 0.39 <= eof.at - closed_at < 5.0
    assert eof.total == 3


def test_timeout_zero_stops_data_and_holds_connection(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    with connect(proxy.listen) as sock:
        proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
        sock.sendall(b"lost")
        assert nothing_arrives(sock, 0.5)  # neither data nor a close
        # Removing a timeout toxic closes the connections it held, as in Toxiproxy.
        proxy.destroy_toxic("timeout_upstream")
        outcome, data = recv_until_closed(sock)
        assert outcome in ("eof", "reset") and data == b""
    assert round_trip(proxy.listen) < 2.0


def test_timeout_closes_after_timeout(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(proxy.listen) as sock:
        started = time.monotonic()
        sock.sendall(b"dropped")
        outcome, data = recv_until_closed(sock, timeout_s=5)
        elapsed = time.monotonic() - started
    assert outcome == "eof" and data == b""
    assert 0.29 <= elapsed < 4.0


def test_reset_peer_resets_connection(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="reset_peer", attributes={"timeout": 0})
    with connect(proxy.listen) as sock:
        sock.sendall(b"trigger")
        outcome, data = recv_until_closed(sock)
    assert outcome == "reset" and data == b""


def test_reset_peer_waits_for_timeout(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 300})
    with connect(proxy.listen) as sock:
        started = time.monotonic()
        sock.sendall(b"trigger")
        outcome, data = recv_until_closed(sock)
        elapsed = time.monotonic() - started
    assert outcome == "reset" and data == b""
    assert 0.29 <= elapsed < 4.0
    event = echo.next_event("reset")  # the upstream side is reset as well
    assert event.total == 0


def test_slicer_splits_data_into_delayed_pieces(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(
        type="slicer",
        attributes={"average_size": 10, "size_variation": 4, "delay": 30_000},  # 30 ms
    )
    payload = bytes(range(100))
    with connect(proxy.listen) as sock:
        started = time.monotonic()
        sock.sendall(payload)
        pieces: list[bytes] = []
        while sum(map(len, pieces)) < len(payload):
            assert time.monotonic() - started < 10
            piece = sock.recv(1000)
            assert piece
            pieces.append(piece)
        elapsed = time.monotonic() - started
    assert b"".join(pieces) == payload
    assert len(pieces) >= 3
    assert all(len(piece) <= 14 * 3 for piece in pieces[:2])
    assert elapsed >= 0.15  # at least ~7 slices, 30 ms apart


def test_limit_data_closes_after_bytes(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="limit_data", attributes={"bytes": 100})
    with connect(proxy.listen) as sock:
        sock.sendall(b"x" * 300)
        outcome, data = recv_until_closed(sock)
    assert outcome == "eof"
    assert data == b"x" * 100


def test_limit_data_upstream_counts_across_writes(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="limit_data", stream="upstream", attributes={"bytes": 10})
    with connect(proxy.listen) as sock:
        sock.sendall(b"12345")
        assert recv_exactly(sock, 5) == b"12345"
        sock.sendall(b"6789abcdef")
        outcome, data = recv_until_closed(sock)
    # The upstream socket is closed right after the 10th byte, and Toxiproxy closes whole
    # connections (no half-close), so the echo of the last bytes may or may not make it.
    assert outcome in ("eof", "reset") and b"6789a".startswith(data)
    assert echo.next_event("end").total == 10


def test_update_toxic_changes_attributes(
    client: Toxiproxy, echo: TcpServer, toxiproxy_server: ThreadedToxiproxy
) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="latency", name="lag", attributes={"latency": 2000})
    result = http_request(
        toxiproxy_server.url, "POST", "/proxies/echo/toxics/lag", {"attributes": {"latency": 200}}
    )
    assert result.status == 200
    assert result.json()["attributes"] == {"latency": 200, "jitter": 0}
    assert 0.19 <= round_trip(proxy.listen) < 1.5


def test_toxic_changes_under_traffic_lose_nothing(client: Toxiproxy, echo: TcpServer) -> None:
    """Add, update and remove toxics while data streams: the echo is exactly what was sent."""
    proxy = make_proxy(client, echo)
    payload = b"".join(i.to_bytes(4, "big") for i in range(100_000))  # 400 kB
    received = bytearray()
    errors: list[BaseException] = []

    with connect(proxy.listen, timeout_s=10) as sock:

        def reader() -> None:
            try:
                received.extend(recv_exactly(sock, len(payload), timeout_s=20))
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()

        def writer() -> None:
            try:
                for offset in range(0, len(payload), 4000):
                    sock.sendall(payload[offset : offset + 4000])
                    time.sleep(0.001)
            except BaseException as exc:
                errors.append(exc)

        sender = threading.Thread(target=writer, daemon=True)
        sender.start()
        for round_ in range(4):
            proxy.add_toxic(type="latency", name="lag", attributes={"latency": 20, "jitter": 10})
            proxy.add_toxic(
                type="slicer",
                name="slice",
                stream="upstream",
                attributes={"average_size": 500, "size_variation": 100, "delay": 100},
            )
            proxy.add_toxic(type="bandwidth", name="bw", attributes={"rate": 2000 + round_})
            time.sleep(0.05)
            proxy.destroy_toxic("slice")
            proxy.destroy_toxic("lag")
            time.sleep(0.05)
            proxy.destroy_toxic("bw")
        sender.join(20)
        thread.join(20)
    assert not errors, errors
    assert bytes(received) == payload


def test_backpressure_bounds_buffering(client: Toxiproxy) -> None:
    """Against an upstream that never reads, the proxy stops reading too: the client's
    writes block after the (bounded) kernel and proxy buffers fill."""
    with TcpServer(read=False) as sink:
        proxy = client.create(upstream=sink.address, name="sink")
        proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 1})
        with connect(proxy.listen) as sock:
            sock.setblocking(False)
            sent = 0
            block = b"z" * 65536
            stalled_since: float | None = None
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    sent += sock.send(block)
                    stalled_since = None
                except BlockingIOError:
                    if stalled_since is None:
                        stalled_since = time.monotonic()
                    elif time.monotonic() - stalled_since > 0.5:
                        break
                    time.sleep(0.01)
            assert stalled_since is not None, "writes never blocked"
            # Kernel socket buffers (a few MB per socket on loopback) plus the link's bounded
            # channels (1024 chunks of at most 32 KiB behind a latency toxic).
            assert sent < 96 * 1024 * 1024
        proxy.destroy()


def test_disable_drops_held_connections(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = make_proxy(client, echo)
    proxy.add_toxic(type="timeout", attributes={"timeout": 0})
    with connect(proxy.listen) as sock:
        sock.sendall(b"held")
        assert nothing_arrives(sock, 0.2)
        started = time.monotonic()
        proxy.disable()
        outcome, _ = recv_until_closed(sock)
        assert outcome in ("eof", "reset")
        assert time.monotonic() - started < 3.0
