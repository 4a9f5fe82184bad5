"""The harness in a container (`hiwater campaign --runtime docker --harness container`,
harness/runtime/harness_container.py), through the CLI as a user runs it:

- a short safe campaign under the standard faults, run by a harness container on the run's
  network (the faults through the engine's bind-mounted socket), is VALID, its run directory
  is complete on the host, the command's exit code is the campaign's, and nothing of the run
  remains;
- Ctrl-C (SIGINT) or SIGTERM of the host command: the campaign inside stops its cluster and
  writes its results (error "interrupted"; exit 3, or 143 for SIGTERM), and nothing remains;
- SIGKILL of the host command (in either mode) leaves its cluster (and the harness container)
  running; the next start's sweep removes them all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.runtime import docker as hd
from harness.runtime.harness_container import build_harness_image
from tests.docker.conftest import record_timing

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def harness_image(node_image: str) -> str:
    t0 = time.monotonic()
    ref = build_harness_image(node_image, log=lambda m: print(f"[docker build] {m}"))
    record_timing("build_harness_image", time.monotonic() - t0)
    return ref


def _campaign(store: Path, name: str, *args: str,
              harness: str = "container") -> subprocess.Popen[bytes]:
    """The CLI, its output in store/../NAME.out and NAME.err (files, not pipes: after a
    SIGKILL the harness container's docker client still holds them)."""
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(store.parent / f"{name}.out", "wb") as out, \
            open(store.parent / f"{name}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", "from harness.cli import main; main()", "campaign",
             "--runtime", "docker", "--harness", harness, "--name", name,
             "--store", str(store), *args],
            stdout=out, stderr=err, cwd=REPO, env=dict(os.environ),
            # a Ctrl-C comes from a terminal whose SIGINT is not ignored; a suite started as a
            # background job of a non-interactive shell ignores it, and children inherit that
            preexec_fn=_sigint_default)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _output(store: Path, name: str) -> tuple[str, str]:
    return ((store.parent / f"{name}.out").read_text(errors="replace"),
            (store.parent / f"{name}.err").read_text(errors="replace"))


def _owned_by(pid: int) -> dict[str, list[str]]:
    """Containers, networks and volumes whose owner label names process `pid`."""
    return {kind: [i for i, labels in hd.labelled(kind)
                   if labels.get(hd.OWNER_LABEL, "").split(":")[0] == str(pid)]
            for kind in ("container", "network", "volume")}


def _await_ops(store: Path, name: str, timeout_s: float = 600.0) -> Path:
    """The run directory, once its history has ops (the cluster is up, the faults started)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        history = store / name / "latest" / "history.jsonl"
        if history.exists() and history.stat().st_size > 2000:
            return history.parent.resolve()
        time.sleep(1.0)
    raise AssertionError(f"no ops in {store / name} after {timeout_s:.0f} s")


def test_safe_campaign_with_the_harness_in_a_container(harness_image: str,
                                                       tmp_path: Path) -> None:
    store, junit = tmp_path / "store", tmp_path / "ci" / "results.xml"
    t0 = time.monotonic()
    p = _campaign(store, "in-container", "--time-limit", "20", "--seed", "5",
                  "--nemesis", "standard", "--nemesis-interval", "5", "--junit", str(junit))
    p.wait(timeout=900)
    out, err = _output(store, "in-container")
    record_timing("harness_container_campaign_20s", time.monotonic() - t0)
    assert p.returncode == 0, (out[-2000:], err[-2000:])
    run = (store / "in-container" / "latest").resolve()
    assert f"VALID: {run / 'report.html'}" in out
    # the run directory, on the host, as the host mode writes it
    assert (run / "campaign.log").is_file()
    for f in ("options.json", "history.jsonl", "history.parquet", "results.json",
              "report.html", "logs/zookeeper.log", "logs/proxy.log", "logs/n1.log",
              "logs/n3.log", "logs/runtime.json"):
        assert (run / f).is_file() and (run / f).stat().st_size > 0, f
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "valid" and results["exit_code"] == 0, results.get("bad")
    # the faults were the Docker runtime's, driven from inside the harness container
    history = (run / "history.jsonl").read_text()
    assert re.search(r'"f": ?"(kill|partition|pause)"', history), "no fault ran"
    runtime = json.loads((run / "logs" / "runtime.json").read_text())
    assert runtime["runtime"] == "docker"
    harness_run = re.fullmatch(r"hiwater-(\d+-\d+-[0-9a-f]{4})-harness",
                               runtime["harness_container"])
    assert harness_run is not None, runtime["harness_container"]
    assert runtime["run_id"].startswith(f"{harness_run[1]}-")  # the host's run id, not pid 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("errors") == "0"
    # nothing of the run remains: the harness container, the nodes, the network
    assert not any(_owned_by(p.pid).values()), _owned_by(p.pid)
    assert not hd.labelled("network", runtime["run_id"])
    assert hd.docker("container", "inspect", runtime["harness_container"],
                     check=False).returncode != 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_the_campaign_in_the_container(harness_image: str,
                                                               tmp_path: Path,
                                                               sig: signal.Signals) -> None:
    """SIGTERM regression: the host's handler waited on the `docker run` process whose wait
    it had interrupted (the Popen's lock held): 120 s of spinning, and a SIGKILL then left
    the harness container behind."""
    store = tmp_path / "store"
    p = _campaign(store, "interrupted", "--time-limit", "300", "--nemesis", "kill",
                  "--nemesis-interval", "5")
    try:
        run = _await_ops(store, "interrupted")
        assert any(_owned_by(p.pid).values())
        t0 = time.monotonic()
        p.send_signal(sig)
        p.wait(timeout=300)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    out, err = _output(store, "interrupted")
    assert "the harness container stops its run" in err
    # the campaign inside stopped as on a Ctrl-C in host mode: error "interrupted", exit 3
    # (SIGTERM: the host command's own 128 + 15)
    assert p.returncode == (3 if sig == signal.SIGINT else 143), (out[-2000:], err[-2000:])
    assert took < 100, took
    results = json.loads((run / "results.json").read_text())
    assert results["error"] == "interrupted" and results["verdict"] == "unknown"
    assert (run / "logs" / "n1.log").stat().st_size > 0
    assert not any(_owned_by(p.pid).values()), _owned_by(p.pid)


@pytest.mark.parametrize("harness", ["host", "container"])
def test_sigkill_in_the_middle_is_swept_at_the_next_start(harness_image: str, tmp_path: Path,
                                                          harness: str) -> None:
    """A campaign killed with SIGKILL while its ops run (no cleanup can run) leaves its
    containers and network; the next start's sweep removes them (the harness container
    first, which would otherwise go on with its run)."""
    store = tmp_path / "store"
    p = _campaign(store, "killed", "--time-limit", "300", "--nemesis", "partition",
                  "--nemesis-interval", "4", harness=harness)
    try:
        _await_ops(store, "killed")
    finally:
        p.kill()
        p.wait(timeout=60)
    left = _owned_by(p.pid)
    # ZooKeeper, the proxy and 3 brokers (and the harness container), the run's network
    nodes = 5 + (harness == "container")
    assert len(left["container"]) == nodes and len(left["network"]) == 1, left
    swept = hd.sweep_stale()  # what the next run does first
    assert swept["container"] >= nodes and swept["network"] >= 1, swept
    assert not any(_owned_by(p.pid).values()), _owned_by(p.pid)


def test_launcher_without_the_project_environment(harness_image: str, tmp_path: Path) -> None:
    """docs/ci.md's runner with only Docker and python3: the standard-library launcher (-S:
    no site-packages) runs the campaign in a harness container; relative paths land in the
    working directory."""
    p = subprocess.run(
        [sys.executable, "-S", "-m", "harness.runtime.harness_container", "campaign",
         "--time-limit", "10", "--seed", "3", "--nemesis", "kill", "--nemesis-interval", "4",
         "--name", "launcher", "--store", str(tmp_path / "store"), "--junit", "ci/j.xml"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    run = (tmp_path / "store" / "launcher" / "latest").resolve()
    assert f"VALID: {run / 'report.html'}" in p.stdout
    assert json.loads((run / "results.json").read_text())["verdict"] == "valid"
    assert (run / "report.html").stat().st_size > 0
    assert ET.parse(tmp_path / "ci" / "j.xml").getroot().find("testsuite") is not None
    assert "what the harness container left" not in p.stderr  # its campaign cleaned up
    info = json.loads((run / "logs" / "runtime.json").read_text())
    assert not any(hd.labelled(k, info["run_id"]) for k in ("container", "network", "volume"))
    assert hd.docker("container", "inspect", info["harness_container"],
                     check=False).returncode != 0
