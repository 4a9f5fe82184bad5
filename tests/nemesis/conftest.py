"""Fixtures for the Toxiproxy tests: a server on an ephemeral loopback port, the unmodified
``toxiproxy-python`` client pointed at it, and loopback echo servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy_testlib import TcpServer

from nemesis.toxiproxy import ThreadedToxiproxy


@pytest.fixture
def toxiproxy_server() -> Iterator[ThreadedToxiproxy]:
    with ThreadedToxiproxy(port=0, seed=20261121) as server:
        yield server


@pytest.fixture
def client(
    toxiproxy_server: ThreadedToxiproxy, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Toxiproxy]:
    # requests would route through an HTTP proxy from the environment; keep it on loopback.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    saved = (APIConsumer.host, APIConsumer.port)
    toxiproxy = Toxiproxy()
    toxiproxy.update_api_consumer(toxiproxy_server.host, toxiproxy_server.port)
    yield toxiproxy
    APIConsumer.host, APIConsumer.port = saved


@pytest.fixture
def echo() -> Iterator[TcpServer]:
    with TcpServer(echo=True) as server:
        yield server
