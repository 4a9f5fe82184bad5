"""The Docker runtime against a real engine: the images build (cached), faults act on the
containers, a short campaign with the standard fault mix is valid, and nothing labelled
hiwater is left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.campaign import EXIT_VALID, CampaignOptions, run_campaign
from harness.runtime import docker as hd
from tests.docker.conftest import record_timing

# the first test of a process may build the images (scripts/test builds them before pytest;
# cold, that took 12.5 min here)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

FAST = {
    "min.insync.replicas": "2",
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
}


def _leftovers() -> dict[str, list[str]]:
    """What this test process's runs left (other workers' runs may be going on)."""
    me = hd.owner_label()
    return {kind: [i for i, labels in hd.labelled(kind) if labels.get(hd.OWNER_LABEL) == me]
            for kind in ("container", "network", "volume")}


def test_images_are_cached(node_image: str) -> None:
    t0 = time.monotonic()
    assert hd.build_images() == node_image
    warm = time.monotonic() - t0
    record_timing("build_images_warm", warm)
    assert warm < 30


def test_stale_runs_are_swept(node_image: str) -> None:
    """What a run of a process that is gone left (SIGKILL) goes at the next start; what a
    live process owns stays."""
    dead = "999999999:0"  # no such pid
    for run, owner in (("stale-test-dead", dead), ("stale-test-live", hd.owner_label())):
        hd.docker("volume", "create", "--label", f"{hd.LABEL}={run}",
                  "--label", f"{hd.OWNER_LABEL}={owner}", f"hiwater-{run}-{os.getpid()}")
    try:
        removed = hd.sweep_stale()
        assert removed["volume"] >= 1
        runs = {labels.get(hd.LABEL) for _, labels in hd.labelled("volume")}
        assert "stale-test-dead" not in runs and "stale-test-live" in runs
    finally:
        hd.remove_run("stale-test-live")
    assert not any(_leftovers().values()), _leftovers()


def test_runtime_faults(node_image: str, tmp_path: Path) -> None:
    rt = hd.DockerRuntime(tmp_path / "cluster", 3, FAST, image=node_image)
    try:
        t0 = time.monotonic()
        rt.start()
        record_timing("runtime_start_warm", time.monotonic() - t0)
        assert rt.capabilities()["partition"] is None
        assert rt.controller() in rt.nodes
        # kill -9, then start again
        assert rt.kill("n3")["result"] == "killed"
        assert not rt.is_running("n3")
        assert rt.wipe("n3")["node"] == "n3"
        rt.start_node("n3")
        # pause / resume: the cgroup freezer, then SIGSTOP/SIGCONT of the broker process
        rt.pause("n2")
        assert rt.is_paused("n2")
        rt.resume("n2")
        assert not rt.is_paused("n2")
        rt.pause_mode = "sigstop"
        assert rt.pause("n2")["signal"] == "SIGSTOP"
        assert rt.is_paused("n2") and rt.broker_process_state("n2") == "T"
        assert rt.resume("n2")["signal"] == "SIGCONT"
        assert not rt.is_paused("n2") and rt.broker_process_state("n2") not in ("T", None)
        rt.pause_mode = "freeze"
        # a partition and its heal: n1 cut from the other brokers and from ZooKeeper
        out = rt.partition({"n1": {"n2", "n3", "zk"}, "n2": {"n1"}, "n3": {"n1"},
                            "zk": {"n1"}})
        assert out["rules"] == 10
        assert rt.heal()["healed"] == 10
        # a toxic on the link into n2, and one on n1's own link into n3
        rt.add_toxic("n2", "latency", {"latency": 50})
        assert rt.remove_toxics()["removed"] == {"n2": ["latency_downstream_1"]}
        out = rt.add_toxic("n3", "latency", {"latency": 50}, source="n1")
        assert out["link"] == "n1-to-n3"
        assert rt.remove_toxics("n3")["removed"] == {"n1-to-n3": ["latency_downstream_2"]}
        rt.wait_ready(60, every=True)
        logs = rt.collect_logs(tmp_path / "logs")
        assert (tmp_path / "logs" / "n1.log") in logs
        assert "zookeeper.log" in {p.name for p in logs}
    finally:
        rt.stop()
    assert not any(_leftovers().values()), _leftovers()


def test_short_docker_campaign_is_valid(node_image: str, tmp_path: Path) -> None:
    opts = CampaignOptions(name="docker", runtime="docker", time_limit_s=25.0, seed=7,
                           store=tmp_path, nemesis=("standard",), nemesis_interval_s=6.0,
                           recovery_wait_s=6.0, final_time_limit_s=60.0)
    t0 = time.monotonic()
    result = run_campaign(opts)
    record_timing("campaign_25s_main_phase", time.monotonic() - t0)
    assert result.exit_code == EXIT_VALID, (result.verdict, result.bad,
                                             result.results.get("error"))
    assert result.results["nemesis"]["package"]
    assert (result.run_dir / "report.html").exists()
    assert (result.run_dir / "logs" / "n1.log").stat().st_size > 0
    assert not any(_leftovers().values()), _leftovers()


def test_one_node_disk_wipes_in_docker_are_valid(node_image: str, tmp_path: Path) -> None:
    """Issue #9's safe configuration under one-node disk wipes, in containers: a broker whose
    volume is wiped while it is down starts empty, re-replicates from the leaders and loses
    nothing acknowledged (the two others stay in the ISR meanwhile)."""
    opts = CampaignOptions(name="docker-wipe", runtime="docker", time_limit_s=20.0, seed=11,
                           store=tmp_path, nemesis=("wipe",), nemesis_interval_s=6.0,
                           recovery_wait_s=6.0, final_time_limit_s=60.0)
    result = run_campaign(opts)
    assert result.exit_code == EXIT_VALID, (result.verdict, result.bad,
                                             result.results.get("error"))
    history = (result.run_dir / "history.jsonl").read_text()
    assert '"f": "wipe"' in history or '"f":"wipe"' in history, "no wipe ran"
    assert not any(_leftovers().values()), _leftovers()
