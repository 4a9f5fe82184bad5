"""What needs no Docker engine: the compose file, the partition rules, the CLI's refusals."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from harness.runtime.docker import DockerRuntime, render_compose

REPO = Path(__file__).resolve().parents[2]


def test_committed_compose_file_is_the_rendered_one() -> None:
    assert (REPO / "docker" / "compose.yaml").read_text() == render_compose(3)
    five = render_compose(5)
    assert "hiwater-${HIWATER_RUN}-n5" in five and "${HIWATER_NET}.25" in five


def test_partition_rules_between_brokers_and_with_zookeeper(tmp_path: Path) -> None:
    rt = DockerRuntime(tmp_path, brokers=3)
    rt.subnet = ipaddress.IPv4Network("172.30.9.0/24")
    rules = rt.partition_rules({"n1": {"n2"}, "zk": {"n3"}, "n2": {"zk"}})
    # n1 ignores n2: n2's requests to n1's proxy port, and n2's answers the proxy relays to n1
    # (by the connection's original port: the per-pair links' redirects change the port)
    assert ["-A", "INPUT", "-s", "172.30.9.22", "-p", "tcp", "-m", "conntrack",
            "--ctorigdstport", "9101", "-j", "DROP"] in rules["proxy"]
    assert ["-A", "OUTPUT", "-d", "172.30.9.21", "-p", "tcp", "-m", "conntrack",
            "--ctorigdstport", "9102", "-j", "DROP"] in rules["proxy"]
    assert len(rules["proxy"]) == 2
    assert sorted(rules["zk"]) == [["-A", "INPUT", "-s", "172.30.9.23", "-j", "DROP"],
                                   ["-A", "OUTPUT", "-d", "172.30.9.22", "-j", "DROP"]]


def _hiwater(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, **(env or {})}, check=False)


def test_unknown_runtime_is_exit_3_with_one_line(tmp_path: Path) -> None:
    r = _hiwater("campaign", "--runtime", "podman", "--store", str(tmp_path))
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "hiwater campaign: runtime must be local or docker, not 'podman'"]


def test_missing_engine_is_exit_3_with_one_line(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    r = _hiwater("campaign", "--runtime", "docker", "--store", str(tmp_path), env=env)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine" in lines[0], lines
    assert not any(tmp_path.iterdir())  # no run directory for a run that cannot start
    b = _hiwater("docker", "build", env=env)
    assert b.returncode == 3
    lines = b.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine" in lines[0], lines


def test_image_context_changes_only_with_what_a_node_runs(tmp_path: Path) -> None:
    """README, harness/ and spec/ edits keep the node image's tag (no rebuild); a broker
    edit changes it."""
    import shutil

    from harness.runtime.docker import build_context

    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    # what only the harness runs (the nemesis's faults and executors) is not in the image
    for d in ("core", "broker", "nemesis", "docker", "harness", "spec"):
        shutil.copytree(REPO / d, tmp_path / d, ignore=skip)
    for f in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copyfile(REPO / f, tmp_path / f)
    _, before = build_context(tmp_path)
    (tmp_path / "README.md").write_text("changed\n")
    (tmp_path / "harness" / "new.py").write_text("x = 1\n")
    (tmp_path / "spec" / "new.py").write_text("x = 1\n")
    (tmp_path / "nemesis" / "faults.py").write_text("x = 1\n")
    assert build_context(tmp_path)[1] == before
    (tmp_path / "nemesis" / "toxiproxy" / "new.py").write_text("x = 1\n")
    assert build_context(tmp_path)[1] != before
    before = build_context(tmp_path)[1]
    (tmp_path / "broker" / "new.py").write_text("x = 1\n")
    assert build_context(tmp_path)[1] != before
