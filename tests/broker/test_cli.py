"""`hiwater broker` and `hiwater cluster up/down` as a user runs them: real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.runtime.cluster import _alive_with, probe_metadata
from broker.runtime.zkserver import free_port

from .conftest import _require_zookeeper

HIWATER = [str(Path(sys.executable).parent / "hiwater")]  # the installed console script
ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HIWATER, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_bad_config_exits_3_with_the_key_named(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\nnum.partitions=0\n")
    r = run(["broker", "--config", str(cfg)], 60)
    assert r.returncode == 3
    assert "num.partitions" in r.stderr


def test_missing_config_file_exits_3(tmp_path: Path) -> None:
    r = run(["broker", "--config", str(tmp_path / "nope.properties")], 60)
    assert r.returncode == 3


def test_unreachable_zookeeper_exits_3_quickly(tmp_path: Path) -> None:
    cfg = tmp_path / "server.properties"
    port = free_port()  # nobody listens there
    cfg.write_text(
        "broker.id=1\n"
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        f"zookeeper.connect=127.0.0.1:{port}\n"
        "zookeeper.connection.timeout.ms=1500\n"
    )
    start = time.monotonic()
    r = run(["broker", "--config", str(cfg)], 60)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "ZooKeeper" in r.stderr
    assert time.monotonic() - start < 30


@pytest.mark.timeout(180)
def test_cluster_up_serves_metadata_and_down_stops_everything(tmp_path: Path) -> None:
    _require_zookeeper()
    d = tmp_path / "c"
    up = run(["cluster", "up", "--brokers", "2", "--dir", str(d)], 150)
    state_file = d / "cluster.json"
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        bootstrap = up.stdout.strip().splitlines()[-1]
        hosts = [h.rsplit(":", 1) for h in bootstrap.split(",")]
        assert len(hosts) == 2
        for host, port in hosts:
            md = probe_metadata(host, int(port))
            assert md["brokers"] == [1, 2] and md["controller_id"] in (1, 2)
        again = run(["cluster", "up", "--dir", str(d)], 30)
        assert again.returncode == 3  # one cluster per directory
        state = json.loads(state_file.read_text())
    finally:
        down = run(["cluster", "down", "--dir", str(d)], 90)
    assert down.returncode == 0, down.stderr
    assert down.stdout.count("stopped") == 3
    for b in state["brokers"]:
        assert not _alive_with(b["pid"], b["config"])
    assert not _alive_with(state["zookeeper"]["pid"], state["zookeeper"]["marker"])
    assert not state_file.exists()


@pytest.mark.timeout(240)
def test_second_broker_with_the_same_id_exits_3_with_a_clear_error(tmp_path: Path) -> None:
    from .conftest import start_cluster

    c = start_cluster(tmp_path / "c", brokers=1)
    try:
        assert c.zk is not None
        cfg = tmp_path / "dup.properties"
        cfg.write_text(
            "broker.id=1\n"
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}\n"
            f"log.dirs={tmp_path / 'dup-data'}\n"
            f"zookeeper.connect={c.zk.hosts}\n"
        )
        r = run(["broker", "--config", str(cfg)], 180)
        assert r.returncode == 3, r.stderr[-2000:]
        assert "broker.id 1 is already registered" in r.stderr
        assert c.metadata(1)["brokers"] == [1]  # the first broker is untouched
    finally:
        c.stop()
