"""The unmodified toxiproxy-python client against the asyncio server: proxies, enable/disable,
toxic bookkeeping, reset, populate."""

from __future__ import annotations

import socket

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
from toxiproxy_testlib import (
    TcpServer,
    connect,
    recv_exactly,
    recv_until_closed,
    split_listen,
)


def test_version_and_running(client: Toxiproxy) -> None:
    assert client.running()
    assert b'"version"' in client.version()


def test_create_list_get_destroy(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    host, port = split_listen(proxy.listen)
    assert host == "127.0.0.1" and port > 0
    assert proxy.enabled is True
    assert proxy.upstream == echo.address
    assert set(client.proxies()) == {"echo"}
    fetched = client.get_proxy("echo")
    assert fetched is not None and fetched.listen == proxy.listen
    assert proxy.destroy()
    assert client.proxies() == {}
    assert client.get_proxy("echo") is None


def test_duplicate_proxy_raises(client: Toxiproxy, echo: TcpServer) -> None:
    client.create(upstream=echo.address, name="dup")
    with pytest.raises(ProxyExists):
        client.create(upstream=echo.address, name="dup")


def test_echo_through_proxy_keeps_bytes_intact(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    payload = bytes(range(256)) * 4096  # 1 MiB
    with connect(proxy.listen) as sock:
        sock.sendall(b"ping")
        assert recv_exactly(sock, 4) == b"ping"
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload


def test_many_concurrent_connections(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    socks = [connect(proxy.listen) for _ in range(20)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(f"conn-{i:02d}".encode())
        for i, sock in enumerate(socks):
            assert recv_exactly(sock, 7) == f"conn-{i:02d}".encode()
    finally:
        for sock in socks:
            sock.close()


def test_disable_cuts_connections_and_stops_listening(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    host, port = split_listen(proxy.listen)
    with connect(proxy.listen) as sock:
        sock.sendall(b"a")
        assert recv_exactly(sock, 1) == b"a"
        proxy.disable()
        assert client.get_proxy("echo").enabled is False  # type: ignore[union-attr]
        outcome, _ = recv_until_closed(sock)
        assert outcome in ("eof", "reset")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    proxy.enable()
    assert client.get_proxy("echo").listen == proxy.listen  # type: ignore[union-attr]
    with connect(proxy.listen) as sock:
        sock.sendall(b"b")
        assert recv_exactly(sock, 1) == b"b"


def test_down_context_manager(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    host, port = split_listen(proxy.listen)
    with proxy.down(), pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    with connect(proxy.listen) as sock:
        sock.sendall(b"up")
        assert recv_exactly(sock, 2) == b"up"


def test_create_disabled_then_enable(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="later", enabled=False)
    assert proxy.enabled is False
    proxy.enable()
    listen = client.get_proxy("later").listen  # type: ignore[union-attr]
    with connect(listen) as sock:
        sock.sendall(b"hi")
        assert recv_exactly(sock, 2) == b"hi"


def test_upstream_down_closes_client(client: Toxiproxy) -> None:
    with TcpServer() as gone:
        address = gone.address
    proxy = client.create(upstream=address, name="nowhere")
    with connect(proxy.listen) as sock:
        outcome, data = recv_until_closed(sock)
    assert outcome in ("eof", "reset") and data == b""


def test_toxic_bookkeeping(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    proxy.add_toxic(type="latency", attributes={"latency": 10, "jitter": 2})
    proxy.add_toxic(type="bandwidth", stream="upstream", name="bw", attributes={"rate": 500})
    proxy.add_toxic(type="timeout", toxicity=0.25, attributes={"timeout": 1000})
    toxics = proxy.toxics()
    assert set(toxics) == {"latency_downstream", "bw", "timeout_downstream"}
    latency = toxics["latency_downstream"]
    assert (latency.type, latency.stream, latency.toxicity) == ("latency", "downstream", 1)
    assert latency.attributes == {"latency": 10, "jitter": 2}
    assert toxics["bw"].stream == "upstream" and toxics["bw"].attributes == {"rate": 500}
    assert toxics["timeout_downstream"].toxicity == 0.25
    assert proxy.get_toxic("nope") is None
    assert proxy.destroy_toxic("bw")
    assert set(proxy.toxics()) == {"latency_downstream", "timeout_downstream"}
    with pytest.raises(NotFound):
        proxy.destroy_toxic("bw")
    with pytest.raises(ProxyExists):  # the client maps every 409 to ProxyExists
        proxy.add_toxic(type="latency", attributes={"latency": 5})
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="latency", name="bad_stream", stream="sideways")


def test_reset_enables_proxies_and_removes_toxics(client: Toxiproxy, echo: TcpServer) -> None:
    first = client.create(upstream=echo.address, name="first")
    second = client.create(upstream=echo.address, name="second")
    first.add_toxic(type="timeout", attributes={"timeout": 0})
    second.add_toxic(type="latency", stream="upstream", attributes={"latency": 5000})
    second.disable()
    assert client.reset()
    proxies = client.proxies()
    assert all(proxy.enabled for proxy in proxies.values())
    assert first.toxics() == {} and second.toxics() == {}
    for name in ("first", "second"):
        with connect(proxies[name].listen) as sock:
            sock.sendall(b"ok")
            assert recv_exactly(sock, 2, timeout_s=2) == b"ok"


def test_populate_and_destroy_all(client: Toxiproxy, echo: TcpServer) -> None:
    created = client.populate(
        [
            {"name": "one", "upstream": echo.address, "listen": "127.0.0.1:0"},
            {"name": "two", "upstream": echo.address, "listen": "127.0.0.1:0"},
        ]
    )
    assert sorted(proxy.name for proxy in created) == ["one", "two"]
    assert set(client.proxies()) == {"one", "two"}
    client.destroy_all()
    assert client.proxies() == {}


def test_destroy_closes_connections(client: Toxiproxy, echo: TcpServer) -> None:
    proxy = client.create(upstream=echo.address, name="echo")
    with connect(proxy.listen) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.destroy()
        outcome, _ = recv_until_closed(sock)
        assert outcome in ("eof", "reset")
    echo.next_event("eof")
