"""Raw HTTP against the API: status codes, error bodies and JSON shapes of Toxiproxy 2.x."""

from __future__ import annotations

import http.client
import socket

import pytest
from toxiproxy_testlib import TcpServer, connect, http_request, recv_exactly, split_listen

from nemesis.toxiproxy import ThreadedToxiproxy

PROXY_KEYS = ["name", "listen", "upstream", "enabled", "toxics"]
TOXIC_KEYS = ["attributes", "name", "type", "stream", "toxicity"]


@pytest.fixture
def url(toxiproxy_server: ThreadedToxiproxy) -> str:
    return toxiproxy_server.url


def create(url: str, name: str, upstream: str, **extra: object) -> dict[str, object]:
    result = http_request(url, "POST", "/proxies", {"name": name, "upstream": upstream, **extra})
    assert result.status == 201, result.body
    body = result.json()
    assert isinstance(body, dict)
    return body


def assert_error(result: object, status: int, message: str) -> None:
    assert result.status == status
    assert result.json() == {"error": message, "status": status}
    assert result.headers["content-type"].startswith("text/plain")


def test_version(url: str) -> None:
    result = http_request(url, "GET", "/version")
    assert result.status == 200
    assert result.headers["content-type"] == "application/json;charset=utf-8"
    assert result.json() == {"version": "2.9.0-hiwater"}


def test_create_shape_and_listing(url: str, echo: TcpServer) -> None:
    body = create(url, "shape", echo.address, listen="127.0.0.1:0")
    assert list(body) == PROXY_KEYS
    assert body["enabled"] is True and body["toxics"] == [] and body["upstream"] == echo.address
    host, port = split_listen(str(body["listen"]))
    assert host == "127.0.0.1" and port > 0
    create(url, "another", echo.address)
    index = http_request(url, "GET", "/proxies")
    assert index.status == 200 and index.headers["content-type"] == "application/json"
    assert list(index.json()) == ["another", "shape"]
    assert index.json()["shape"] == body
    shown = http_request(url, "GET", "/proxies/shape")
    assert shown.status == 200 and shown.json() == body


def test_create_errors(url: str, echo: TcpServer) -> None:
    create(url, "taken", echo.address)
    assert_error(
        http_request(url, "POST", "/proxies", {"name": "taken", "upstream": echo.address}),
        409,
        "proxy already exists",
    )
    assert_error(
        http_request(url, "POST", "/proxies", {"upstream": echo.address}),
        400,
        "missing required field: name",
    )
    assert_error(
        http_request(url, "POST", "/proxies", {"name": "x"}),
        400,
        "missing required field: upstream",
    )
    for raw in (b"", b"{not json", b"[1, 2]", b'{"name": 7, "upstream": "a:1"}'):
        result = http_request(url, "POST", "/proxies", raw=raw)
        assert result.status == 400, raw
        assert result.json()["error"].startswith("bad request body: "), raw
    result = http_request(url, "POST", "/proxies", {"name": "e", "upstream": "a:1", "enabled": 1})
    assert result.status == 400


def test_listen_must_be_loopback(url: str, echo: TcpServer) -> None:
    # never bound nor contacted: the API refuses before binding (203.0.113.0/24 is TEST-NET-3)
    for listen in ("0.0.0.0:0", "203.0.113.7:0"):
        result = http_request(
            url, "POST", "/proxies", {"name": "wide", "upstream": echo.address, "listen": listen}
        )
        assert result.status == 400
        assert result.json()["error"].startswith("listen address must be a loopback address")
    assert http_request(url, "GET", "/proxies").json() == {}
    body = create(url, "named", echo.address, listen="localhost:0")
    assert str(body["listen"]).startswith("127.0.0.1:")


def test_unbindable_listen_is_500(url: str, echo: TcpServer) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = http_request(
            url,
            "POST",
            "/proxies",
            {"name": "busy", "upstream": echo.address, "listen": f"127.0.0.1:{port}"},
        )
    assert result.status == 500
    assert result.json()["status"] == 500
    result = http_request(
        url, "POST", "/proxies", {"name": "bad", "upstream": echo.address, "listen": "noport"}
    )
    assert result.status == 500
    assert http_request(url, "GET", "/proxies").json() == {}


def test_unknown_proxy_is_404(url: str) -> None:
    for method, path in (
        ("GET", "/proxies/nope"),
        ("POST", "/proxies/nope"),
        ("DELETE", "/proxies/nope"),
        ("GET", "/proxies/nope/toxics"),
        ("POST", "/proxies/nope/toxics"),
        ("GET", "/proxies/nope/toxics/t"),
        ("DELETE", "/proxies/nope/toxics/t"),
    ):
        assert_error(http_request(url, method, path, {}), 404, "proxy not found")


def test_routing_errors(url: str) -> None:
    result = http_request(url, "GET", "/nowhere")
    assert result.status == 404 and result.body == b"404 page not found\n"
    assert http_request(url, "GET", "/proxies/").status == 404
    assert http_request(url, "PUT", "/proxies").status == 405
    assert http_request(url, "GET", "/reset").status == 405
    browser = http_request(url, "GET", "/proxies", headers={"User-Agent": "Mozilla/5.0"})
    assert browser.status == 403 and browser.body == b"User agent not allowed\n"


def test_update_and_delete_proxy(url: str, echo: TcpServer) -> None:
    body = create(url, "p", echo.address)
    listen = str(body["listen"])
    result = http_request(url, "POST", "/proxies/p", {"enabled": False})
    assert result.status == 200 and result.json()["enabled"] is False
    result = http_request(url, "PATCH", "/proxies/p", {"enabled": True})
    assert result.status == 200 and result.json()["listen"] == listen
    with TcpServer() as other, connect(listen) as old:
        old.sendall(b"1")
        assert recv_exactly(old, 1) == b"1"
        result = http_request(url, "POST", "/proxies/p", {"upstream": other.address})
        assert result.status == 200 and result.json()["upstream"] == other.address
        assert old.recv(10) == b""  # a changed upstream restarts the proxy
        with connect(result.json()["listen"]) as new:
            new.sendall(b"2")
            assert recv_exactly(new, 1) == b"2"
        other.next_event("accept")
    deleted = http_request(url, "DELETE", "/proxies/p")
    assert deleted.status == 204 and deleted.body == b""
    assert http_request(url, "GET", "/proxies/p").status == 404


def test_toxic_create_shape_and_errors(url: str, echo: TcpServer) -> None:
    create(url, "p", echo.address)
    result = http_request(url, "POST", "/proxies/p/toxics", {"type": "slicer"})
    assert result.status == 400  # slicer needs average_size >= 1
    result = http_request(
        url, "POST", "/proxies/p/toxics", {"type": "latency", "attributes": {"latency": 5}}
    )
    assert result.status == 200
    assert list(result.json()) == TOXIC_KEYS
    assert result.json() == {
        "attributes": {"latency": 5, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1,
    }
    assert b'"toxicity":1}' in result.body  # Go writes float32 1.0 as 1
    assert_error(
        http_request(url, "POST", "/proxies/p/toxics", {"type": "latency"}),
        409,
        "toxic already exists",
    )
    assert_error(
        http_request(url, "POST", "/proxies/p/toxics", {"type": "gremlin"}),
        400,
        "invalid toxic type",
    )
    assert_error(
        http_request(url, "POST", "/proxies/p/toxics", {"type": "latency", "stream": "both"}),
        400,
        "stream was invalid, can be either upstream or downstream",
    )
    for attributes in ({"latency": "5"}, {"latency": 1.5}, {"latency": True}, [1]):
        result = http_request(
            url,
            "POST",
            "/proxies/p/toxics",
            {"type": "latency", "name": "bad", "attributes": attributes},
        )
        assert result.status == 400, attributes
        assert result.json()["error"].startswith("bad request body: "), attributes
    assert_error(http_request(url, "GET", "/proxies/p/toxics/nope"), 404, "toxic not found")
    assert_error(http_request(url, "DELETE", "/proxies/p/toxics/nope"), 404, "toxic not found")
    assert_error(
        http_request(url, "POST", "/proxies/p/toxics/nope", {"toxicity": 0.5}),
        404,
        "toxic not found",
    )


def test_toxic_defaults_listing_and_update(url: str, echo: TcpServer) -> None:
    create(url, "p", echo.address)
    added = [
        {"type": "timeout", "attributes": {"timeout": 100}},
        {"type": "bandwidth", "stream": "UPSTREAM", "toxicity": 0.5, "attributes": {"rate": 9}},
        {"type": "limit_data", "name": "cap", "stream": "upstream", "attributes": {"bytes": 3}},
        {"type": "slow_close", "Attributes": {"Delay": 7}},  # keys match case-insensitively
        {"type": "reset_peer", "stream": "upstream"},
        {"type": "slicer", "attributes": {"average_size": 8, "size_variation": 2, "delay": 1}},
        {"type": "noop", "name": "nothing"},
    ]
    for toxic in added:
        assert http_request(url, "POST", "/proxies/p/toxics", toxic).status == 200, toxic
    listing = http_request(url, "GET", "/proxies/p/toxics").json()
    # Upstream toxics first, then downstream, each in the order added.
    assert [(t["name"], t["stream"]) for t in listing] == [
        ("bandwidth_UPSTREAM", "UPSTREAM"),
        ("cap", "upstream"),
        ("reset_peer_upstream", "upstream"),
        ("timeout_downstream", "downstream"),
        ("slow_close_downstream", "downstream"),
        ("slicer_downstream", "downstream"),
        ("nothing", "downstream"),
    ]
    by_name = {t["name"]: t for t in listing}
    assert by_name["bandwidth_UPSTREAM"]["toxicity"] == 0.5
    assert by_name["slow_close_downstream"]["attributes"] == {"delay": 7}
    assert by_name["reset_peer_upstream"]["attributes"] == {"timeout": 0}
    assert by_name["nothing"]["attributes"] == {}
    assert http_request(url, "GET", "/proxies/p").json()["toxics"] == listing
    shown = http_request(url, "GET", "/proxies/p/toxics/cap")
    assert shown.status == 200 and shown.json() == by_name["cap"]
    updated = http_request(
        url, "PATCH", "/proxies/p/toxics/cap", {"attributes": {"bytes": 30}, "toxicity": 0.25}
    )
    assert updated.status == 200
    assert updated.json()["attributes"] == {"bytes": 30} and updated.json()["toxicity"] == 0.25
    kept = http_request(url, "POST", "/proxies/p/toxics/cap", {"toxicity": 1})
    assert kept.json()["attributes"] == {"bytes": 30} and kept.json()["toxicity"] == 1
    assert http_request(url, "POST", "/proxies/p/toxics/cap", {"toxicity": "x"}).status == 400
    deleted = http_request(url, "DELETE", "/proxies/p/toxics/cap")
    assert deleted.status == 204 and deleted.body == b""
    assert "cap" not in {t["name"] for t in http_request(url, "GET", "/proxies/p/toxics").json()}


def test_populate(url: str, echo: TcpServer) -> None:
    empty = http_request(url, "POST", "/populate", [])
    assert empty.status == 201 and empty.json() == {"proxies": None}
    entries = [
        {"name": "a", "upstream": echo.address, "listen": "127.0.0.1:0"},
        {"name": "b", "upstream": echo.address, "listen": "127.0.0.1:0", "enabled": False},
    ]
    first = http_request(url, "POST", "/populate", entries)
    assert first.status == 201
    proxies = first.json()["proxies"]
    assert [p["name"] for p in proxies] == ["a", "b"]
    assert [p["enabled"] for p in proxies] == [True, False]
    assert all(list(p) == PROXY_KEYS for p in proxies)
    # Same address again: the existing proxy is kept as it is.
    again = http_request(
        url,
        "POST",
        "/populate",
        [{"name": "a", "upstream": echo.address, "listen": proxies[0]["listen"]}],
    )
    assert again.status == 201 and again.json()["proxies"][0]["listen"] == proxies[0]["listen"]
    bad = http_request(
        url, "POST", "/populate", [{"name": "c", "upstream": echo.address}, {"name": "d"}]
    )
    assert bad.status == 400
    assert bad.json() == {
        "error": "missing required field: upstream at proxy 2",
        "status": 400,
        "proxies": None,
    }
    assert sorted(http_request(url, "GET", "/proxies").json()) == ["a", "b"]
    garbage = http_request(url, "POST", "/populate", raw=b"{")
    assert garbage.status == 400 and garbage.json()["proxies"] is None


def test_reset_is_204(url: str, echo: TcpServer) -> None:
    create(url, "p", echo.address, enabled=False)
    http_request(url, "POST", "/proxies/p/toxics", {"type": "latency"})
    result = http_request(url, "POST", "/reset")
    assert result.status == 204 and result.body == b""
    shown = http_request(url, "GET", "/proxies/p").json()
    assert shown["enabled"] is True and shown["toxics"] == []


def test_keep_alive_and_chunked_body(toxiproxy_server: ThreadedToxiproxy, echo: TcpServer) -> None:
    conn = http.client.HTTPConnection(toxiproxy_server.host, toxiproxy_server.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("GET", "/proxies")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b"{}"
        body = f'{{"name": "chunky", "upstream": "{echo.address}"}}'.encode()
        conn.request("POST", "/proxies", body=iter([body[:10], body[10:]]))
        response = conn.getresponse()
        assert response.status == 201 and b'"chunky"' in response.read()
    finally:
        conn.close()
