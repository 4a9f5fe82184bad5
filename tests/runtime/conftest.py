"""Fixtures for the runtime tests: one real ZooKeeper per module (127.0.0.1, private port and
data directory), and a fresh chroot per test so tests never see each other's znodes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from broker.runtime.zkserver import INSTALL_HINT, ZooKeeperServer, zookeeper_installed


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    if not zookeeper_installed():
        why = f"ZooKeeper (Debian package `zookeeper`) is not installed: {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    # tickTime 500 ms: sessions from 1 s, so expiry-driven tests stay fast.
    with ZooKeeperServer(tick_time_ms=500) as server:
        yield server


@pytest.fixture
def zk_hosts(zk_server: ZooKeeperServer) -> str:
    """`host:port/chroot` of an empty, private subtree of the module's server."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    admin = KazooClient(hosts=zk_server.hosts, timeout=4.0)
    admin.start(timeout=5)
    try:
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    return zk_server.hosts + chroot
