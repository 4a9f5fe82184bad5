"""A real LocalRuntime (ZooKeeper + 3 brokers) shared by this directory's tests (one per test
process); each test heals and restarts what it broke. Without the Debian `zookeeper` package
the tests skip, except under CI, where that is a failure. Network tests skip (with the reason)
when not root or without iptables/cgroup2."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.runtime.zkserver import INSTALL_HINT, zookeeper_installed
from harness.runtime.local import LocalRuntime
from harness.runtime.netfilter import cgroup_unavailable_reason, unavailable_reason
from nemesis.executor import heal_all

FAST = {
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "zookeeper.session.timeout.ms": "3000",
    # a restarted broker's first connection may take longer than the short session under a
    # loaded CI machine (3.1 s seen: the broker exited 3, "ZooKeeper not reachable")
    "zookeeper.connection.timeout.ms": "15000",
    "replica.lag.time.max.ms": "3000",
    "log.segment.bytes": "2048",
}


def require_zookeeper() -> None:
    if not zookeeper_installed():
        why = f"ZooKeeper (Debian package `zookeeper`) is not installed: {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def require_network(zookeeper: bool = False) -> None:
    why = unavailable_reason() or (cgroup_unavailable_reason() if zookeeper else None)
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    require_zookeeper()
    rt = LocalRuntime(tmp_path_factory.mktemp("rt"), 3, FAST)
    try:
        rt.start()
    except Exception:
        for n in rt.nodes:
            print(f"--- {n} log tail ---\n{rt.log_tail(n)}")
        raise
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def rt(runtime: LocalRuntime, tmp_path: Path) -> Iterator[LocalRuntime]:
    """The module's runtime, healed and with every broker registered after the test."""
    try:
        yield runtime
    finally:
        heal_all(runtime)
        try:
            runtime.wait_ready(30)
        except Exception:
            runtime.collect_logs(tmp_path / "logs")
            for n in runtime.nodes:
                print(f"--- {n} log tail ---\n{runtime.log_tail(n)}")
            raise
