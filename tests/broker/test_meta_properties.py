"""A data dir of another cluster or broker (issue #16), with real brokers and ZooKeeper: every
log dir gets Kafka's `meta.properties` (version=0, broker.id, cluster.id from ZooKeeper's
`/cluster/id`); a dir whose file names another cluster or broker refuses the start with one
line naming the file and what to do, exit code 3, no traceback; a dir without the file gets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.runtime.cluster import LocalCluster
from broker.runtime.zkserver import ZooKeeperServer, free_port
from broker.store.fs import RealFS
from broker.store.meta import META_PROPERTIES, read_meta

from .conftest import _require_zookeeper

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


def _cluster_id(zk_hosts: str) -> str:
    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=20)
    try:
        data, _ = zk.get("/cluster/id")
    finally:
        zk.stop()
        zk.close()
    return str(json.loads(data)["id"])


def _broker(tmp: Path, broker_id: int, data: Path, zk_hosts: str) -> subprocess.Popen[str]:
    props = tmp / f"server-{broker_id}-{os.urandom(3).hex()}.properties"
    props.write_text(f"broker.id={broker_id}\nlisteners=PLAINTEXT://127.0.0.1:{free_port()}\n"
                     f"log.dirs={data}\nzookeeper.connect={zk_hosts}\n"
                     "offsets.topic.replication.factor=1\n")
    return subprocess.Popen([sys.executable, "-m", "broker.runtime.main", "--config",
                             str(props)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _refused(proc: subprocess.Popen[str], path: Path, *says: str) -> None:
    out, err = proc.communicate(timeout=90)
    lines = [ln for ln in err.splitlines() if ln.strip() and " INFO " not in ln
             and " WARNING " not in ln]
    assert proc.returncode == 3, (proc.returncode, err[-3000:])
    assert "Traceback" not in err + out, err[-3000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("hiwater broker: ") and str(path) in lines[0], lines[0]
    for s in says:
        assert s in lines[0], lines[0]


def test_a_data_dir_of_another_cluster_or_broker_refuses_to_start(tmp_path: Path) -> None:
    _require_zookeeper()
    a = LocalCluster(tmp_path / "a", 1, {"offsets.topic.replication.factor": "1"})
    a.start()
    try:
        data = a.nodes[1].data_dir
        assert a.zk is not None
        cluster_a = _cluster_id(a.zk.hosts)
        meta = read_meta(RealFS(), data)
        assert meta == {"version": "0", "broker.id": "1", "cluster.id": cluster_a}
    finally:
        a.stop()
    path = data / META_PROPERTIES
    b = ZooKeeperServer(tmp_path / "zk-b")
    b.start()
    try:
        # another ZooKeeper is another cluster: its /cluster/id is new
        _refused(_broker(tmp_path, 1, data, b.hosts), path, cluster_a, "zookeeper.connect")
        assert _cluster_id(b.hosts) != cluster_a
        # another broker.id: refused before the dir's logs are loaded
        _refused(_broker(tmp_path, 2, data, b.hosts), path, "broker.id 2", "broker.id=1")
        assert read_meta(RealFS(), data) == meta  # refusing changes nothing
        # without the file (a dir from before it existed) the start writes it
        path.unlink()
        proc = _broker(tmp_path, 1, data, b.hosts)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "serving" in line, (line, proc.stderr.read() if proc.poll() else "")
            assert read_meta(RealFS(), data) == {"version": "0", "broker.id": "1",
                                                 "cluster.id": _cluster_id(b.hosts)}
        finally:
            proc.terminate()
            proc.communicate(timeout=60)
    finally:
        b.stop()
