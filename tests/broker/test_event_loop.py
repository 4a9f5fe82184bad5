"""The broker's event loop (`hiwater.event.loop`): uvloop by default when importable, asyncio
on request, a clear error when uvloop is asked for and missing; a cluster on either loop
serves produce (acks=all, RF 3) and fetch; file regions reach the socket on either loop,
also when the socket buffer is full (uvloop has no `loop.sendfile`: the broker falls back to
pread chunks through the transport)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.runtime.frames import FrameProtocol
from broker.runtime.main import event_loop_factory
from broker.runtime.server import _sendfile
from broker.wire.chunks import FileRegion

from .clients_lib import ProduceSpec, check_read, create_topic, make_records, produce, read
from .clients_lib import wait_topic as wait_topic_ready
from .conftest import start_cluster

uvloop = pytest.importorskip("uvloop")
LOOPS = ("asyncio", "uvloop")


def _props(**extra: str) -> dict[str, str]:
    return {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", **extra}


def test_config_key() -> None:
    assert BrokerConfig.from_properties(_props()).hiwater_event_loop is None
    for name in LOOPS:
        cfg = BrokerConfig.from_properties(_props(**{"hiwater.event.loop": name}))
        assert cfg.hiwater_event_loop == name
    with pytest.raises(ConfigError, match=r"hiwater\.event\.loop.*asyncio, uvloop"):
        BrokerConfig.from_properties(_props(**{"hiwater.event.loop": "trio"}))


def test_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIWATER_LOOPSTATS", raising=False)
    assert event_loop_factory("asyncio") is None  # asyncio.Runner's default loop
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    assert event_loop_factory(None) is uvloop.new_event_loop  # the default when importable
    monkeypatch.setenv("HIWATER_LOOPSTATS", "/tmp")  # diagnostics that need asyncio's loop
    assert event_loop_factory(None) is None
    assert event_loop_factory("uvloop") is uvloop.new_event_loop
    monkeypatch.delenv("HIWATER_LOOPSTATS")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert event_loop_factory(None) is None  # unset: falls back to asyncio
    with pytest.raises(ConfigError, match=r"hiwater\.event\.loop.*uvloop cannot be imported"):
        event_loop_factory("uvloop")


def _new_loop(name: str) -> asyncio.AbstractEventLoop:
    factory: Callable[[], asyncio.AbstractEventLoop] | None = event_loop_factory(name)
    return asyncio.new_event_loop() if factory is None else factory()


@pytest.mark.parametrize("name", LOOPS)
@pytest.mark.parametrize("size", [100_000, 16 * 1024 * 1024])
def test_sendfile_on_each_loop(tmp_path: Path, name: str, size: int,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A file region through `_sendfile` arrives whole and in order after the bytes written
    before it, on either loop. 16 MiB is more than a socket buffer takes while the peer does
    not read yet: the rest goes by loop.sendfile (asyncio) or pread chunks (uvloop)."""
    data = os.urandom(size)
    preads: list[int] = []
    pread = os.pread

    def spy(fd: int, n: int, offset: int) -> bytes:
        preads.append(n)
        return pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", spy)
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 1000 + data + b"y" * 1000)
    a, b = socket.socketpair()
    got = bytearray()
    want = len(b"head") + size + len(b"tail")

    def reader() -> None:
        threading.Event().wait(0.2)  # let the socket buffer fill first
        while len(got) < want:
            chunk = b.recv(1 << 20)
            if not chunk:
                break
            got.extend(chunk)

    async def send() -> None:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: FrameProtocol(1 << 20), sock=a)
        conn.write(b"head")
        await _sendfile(conn, FileRegion(str(path), 1000, size))
        conn.write(b"tail")
        await conn.drain()
        assert conn.transport is not None
        while conn.transport.get_write_buffer_size():  # below the high mark: not drained
            await asyncio.sleep(0.01)
        conn.close()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    loop = _new_loop(name)
    try:
        loop.run_until_complete(asyncio.wait_for(send(), 30))
    finally:
        loop.close()
    t.join(30)
    b.close()
    assert len(got) == want
    assert bytes(got) == b"head" + data + b"tail"
    # the fallback ran only where it must: uvloop, a region larger than the socket takes
    assert bool(preads) == (name == "uvloop" and size > 1 << 20), preads[:5]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", LOOPS)
def test_cluster_serves_on_each_loop(tmp_path: Path, name: str) -> None:
    """Three brokers on the loop: acks=all produce with RF 3, a read back from offset 0 (fetch
    served with sendfile), and every broker says which loop it runs."""
    cluster = start_cluster(tmp_path / "cluster", **{"hiwater.event.loop": name})
    try:
        topic = f"loop-{name}"
        assert create_topic("confluent", cluster.bootstrap, topic, 3, 3) == 0
        wait_topic_ready(cluster, topic, 3)
        records = make_records(name, 3, 200, pad=2000)
        produce("confluent", cluster.bootstrap, topic, records, ProduceSpec(acks="all"))
        got: Any = read("confluent", cluster.bootstrap, topic, {p: 200 for p in range(3)})
        check_read(got, records, f"confluent on {name}")
        for i, b in cluster.nodes.items():
            assert f"({name} event loop)" in b.log_path.read_text(), cluster.log_tail(i)
    finally:
        cluster.stop()
