"""LocalRuntime faults on a real 3-broker cluster: each effect is visible in the processes, the
files or the cluster's own view (leaders, ISR, registered brokers)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.runtime.base import NodeStateError, node_id
from harness.runtime.local import LocalRuntime
from nemesis.executor import execute
from nemesis.faults import LeaderOf, PartitionNetwork
from tests.runtime_local.conftest import require_network
from tests.runtime_local.helpers import (
    caught_up,
    create_topic,
    follower_of,
    produce,
    replica,
    wait_for,
)


def _proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_kill_reelects_and_start_rejoins(rt: LocalRuntime) -> None:
    leader = create_topic(rt, "kill-t")
    produce(rt, "kill-t", 20)
    pid = rt.pid(leader)
    assert pid is not None
    assert rt.kill(leader)["result"] == "killed"
    assert _proc_state(pid) is None and not rt.is_running(leader)
    assert rt.kill(leader)["result"] == "already-down"
    new = wait_for(lambda: (lambda n: n if n not in (None, leader) else None)(
        rt.leader_of("kill-t", 0)), 20, "a new leader after the kill")
    assert new != leader
    assert rt.start_node(leader)["result"] == "started"
    wait_for(lambda: caught_up(rt, leader, "kill-t"), 30, f"{leader} back in the ISR")


def test_pause_and_resume(rt: LocalRuntime) -> None:
    node = "n3"
    pid = rt.pid(node)
    assert pid is not None
    assert rt.pause(node)["result"] == "paused"
    # SIGSTOP is delivered asynchronously: on a loaded machine /proc may say R for a moment
    wait_for(lambda: _proc_state(pid) == "T", 5, "stopped")
    assert rt.is_paused(node)
    assert rt.resume(node)["result"] == "resumed"
    wait_for(lambda: _proc_state(pid) not in ("T", "t", None), 5, "running again")
    assert rt.replica_states(node)["broker_id"] == 3


def test_disk_faults_need_the_node_down(rt: LocalRuntime) -> None:
    with pytest.raises(NodeStateError):
        rt.wipe("n1")
    with pytest.raises(NodeStateError):
        rt.lose_unflushed("n1")


def test_wipe_comes_back_empty_and_catches_up(rt: LocalRuntime) -> None:
    create_topic(rt, "wipe-t")
    produce(rt, "wipe-t", 100)
    node = follower_of(rt, "wipe-t")
    data = rt.data_dirs(node)[0]
    assert (data / "wipe-t-0").is_dir()
    rt.kill(node)
    report = rt.wipe(node)
    assert report["files"] > 0 and not data.exists()
    rt.start_node(node)
    wait_for(lambda: caught_up(rt, node, "wipe-t"), 30, f"wiped {node} caught up")
    assert replica(rt, node, "wipe-t")["store_log_end_offset"] == 100


def test_lose_unflushed_truncates_the_active_segment(rt: LocalRuntime) -> None:
    create_topic(rt, "lose-t")
    produce(rt, "lose-t", 100)
    node = follower_of(rt, "lose-t")
    wait_for(lambda: replica(rt, node, "lose-t")["store_log_end_offset"] == 100, 10, "copied")
    rt.kill(node)
    report = rt.lose_unflushed(node)
    lost = report["lost"]["lose-t-0"]
    keep, had = lost["bytes"]
    first_lost, end = lost["offsets"]
    assert keep < had and first_lost < end == 100
    seg = rt.data_dirs(node)[0] / "lose-t-0" / lost["segment"]
    assert seg.stat().st_size == keep
    rt.start_node(node)
    wait_for(lambda: caught_up(rt, node, "lose-t"), 30, f"{node} refetched what it lost")


def test_corrupt_closed_segment_is_detected_on_restart(rt: LocalRuntime) -> None:
    create_topic(rt, "corrupt-t")
    produce(rt, "corrupt-t", 200)
    node = follower_of(rt, "corrupt-t")
    wait_for(lambda: replica(rt, node, "corrupt-t")["store_log_end_offset"] == 200, 10, "copied")
    rt.kill(node)
    report = rt.corrupt_segment(node, seed=3, kind="header", topic="corrupt-t")
    assert report["closed"] and report["kind"] == "header"
    path = rt.data_dirs(node)[0] / report["corrupted"]
    at = report["position"]
    before, after = report["byte"]
    assert path.read_bytes()[at] == after != before
    rt.start_node(node)
    wait_for(lambda: caught_up(rt, node, "corrupt-t"), 30, f"{node} recovered and caught up")
    data = path.read_bytes() if path.exists() else b""
    # recovery truncated the log at the corrupt batch; the refetched copy is intact
    assert len(data) <= at or data[at] == before


def test_isolated_leader_loses_leadership_and_rejoins_after_heal(rt: LocalRuntime) -> None:
    require_network(zookeeper=True)
    old = create_topic(rt, "part-t")
    produce(rt, "part-t", 20)
    value = execute(PartitionNetwork("isolate-leader"), rt, random.Random(0),
                    LeaderOf("part-t", 0))
    assert set(value["isolated"][old]) == {n for n in rt.nodes if n != old} | {"zk"}
    assert len(rt.net.listed()) > 0 if rt.net else False
    new = wait_for(lambda: (lambda n: n if n not in (None, old) else None)(
        rt.leader_of("part-t", 0)), 25, "the others elect a new leader")
    produce(rt, "part-t", 10)  # the majority side takes writes
    assert node_id(old) not in replica(rt, new, "part-t")["isr"]
    rt.heal()
    assert rt.net is not None and rt.net.listed() == []
    wait_for(lambda: caught_up(rt, old, "part-t"), 40, f"{old} rejoins the ISR after heal")


def test_isolate_from_zookeeper_deregisters_until_heal(rt: LocalRuntime) -> None:
    require_network(zookeeper=True)
    node = "n2"
    rt.partition({node: ["zk"], "zk": [node]})
    wait_for(lambda: 2 not in rt.cluster.metadata(1)["brokers"], 20,
             "n2's ZooKeeper session expires")
    rt.heal()
    wait_for(lambda: 2 in rt.cluster.metadata(1)["brokers"], 20, "n2 registers again")


def test_collect_logs(rt: LocalRuntime, tmp_path: Path) -> None:
    files = rt.collect_logs(tmp_path / "run")
    names = {f.name for f in files}
    assert {"n1.log", "n2.log", "n3.log", "runtime.json"} <= names
