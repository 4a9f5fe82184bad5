"""Campaign pieces that need no cluster: live invariant probes, run directories, options."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness.campaign import CampaignOptions, LiveProbe, new_run_dir


def sample(broker: int, *, pid: int = 100, cepoch: int = 1,
           replicas: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"broker_id": broker, "pid": pid, "controller_epoch": cepoch,
            "replicas": replicas or []}


def rep(role: str, epoch: int, leo: int = 5, hw: int = 5, store: int | None = 5,
        topic: str = "t", partition: int = 0) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "role": role, "leader_epoch": epoch,
            "log_end_offset": leo, "high_watermark": hw, "store_log_end_offset": store}


def probe() -> LiveProbe:
    return LiveProbe(runtime=None, stop=threading.Event())


def names(p: LiveProbe) -> list[str]:
    return [v["invariant"] for v in p.violations]


def test_a_consistent_cluster_has_no_violations() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 3)]))
    p.check("n2", sample(2, replicas=[rep("follower", 3, hw=4)]))
    p.check("n1", sample(1, cepoch=2, replicas=[rep("follower", 4)]))
    p.check("n2", sample(2, cepoch=2, replicas=[rep("leader", 4)]))
    assert p.violations == []


def test_two_leaders_in_one_epoch() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 3)]))
    p.check("n2", sample(2, replicas=[rep("leader", 3)]))
    assert names(p) == ["single_leader_per_epoch"]


def test_hw_beyond_leo_and_core_disagreeing_with_the_store() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 1, leo=3, hw=4, store=2)]))
    assert sorted(names(p)) == ["high_watermark_le_log_end", "log_end_matches_disk"]


def test_epochs_going_backwards_within_one_process_but_not_across_restarts() -> None:
    p = probe()
    p.check("n1", sample(1, cepoch=5, replicas=[rep("follower", 7)]))
    p.check("n1", sample(1, cepoch=4, replicas=[rep("follower", 6)]))
    assert sorted(names(p)) == ["controller_epoch_monotonic", "leader_epoch_monotonic"]
    q = probe()
    q.check("n1", sample(1, pid=1, cepoch=5, replicas=[rep("follower", 7)]))
    q.check("n1", sample(1, pid=2, cepoch=-1, replicas=[rep("follower", -1)]))  # restarted
    assert q.violations == []


def test_run_dirs_are_unique_and_latest_links_follow(tmp_path: Path) -> None:
    a = new_run_dir(tmp_path, "queue")
    b = new_run_dir(tmp_path, "queue")
    assert a != b and a.parent == b.parent == tmp_path / "queue"
    assert (tmp_path / "latest").resolve() == b.resolve()
    assert (tmp_path / "queue" / "latest").resolve() == b.resolve()


@pytest.mark.parametrize("bad", [
    {"workload": "nope"}, {"time_limit_s": 0}, {"bootstrap": "no-port"}, {"brokers": 0}])
def test_bad_options_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CampaignOptions(**bad)


def test_safe_defaults() -> None:
    o = CampaignOptions()
    props = o.server_properties()
    assert (o.acks, o.idempotence, o.replication_factor) == ("all", True, 3)
    assert props["min.insync.replicas"] == "2"
    assert props["unclean.leader.election.enable"] == "false"
    assert o.nemesis == ("standard",)
