"""What needs no Docker engine: the compose file, the partition rules, the CLI's refusals."""

from __future__ import annotations

import ipaddress
import itertools
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    # the harness in a container: the CLI, and the standard-library launcher
    r = _hiwater("campaign", "--runtime", "docker", "--harness", "container",
                 "--store", str(tmp_path), env=env)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine" in lines[0], lines
    r = subprocess.run([sys.executable, "-S", "-m", "harness.runtime.harness_container",
                        "campaign", "--store", str(tmp_path)], capture_output=True, text=True,
                       timeout=60, cwd=REPO, env={**os.environ, **env}, check=False)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine" in lines[0], lines
    assert not any(tmp_path.iterdir())


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


def test_harness_container_needs_the_docker_runtime(tmp_path: Path) -> None:
    """`--harness container` only with `--runtime docker` (and no `--bootstrap`): one line,
    exit 3, no run directory, before any engine is asked."""
    for args, said in (
            (("--harness", "container", "--runtime", "local"),
             "hiwater campaign: --harness container needs --runtime docker (and no --bootstrap)"),
            (("--harness", "container", "--runtime", "docker", "--bootstrap", "127.0.0.1:1"),
             "hiwater campaign: --harness container needs --runtime docker (and no --bootstrap)"),
            (("--harness", "box", "--runtime", "docker"),
             "hiwater campaign: --harness must be host or container; got 'box'")):
        r = _hiwater("campaign", *args, "--store", str(tmp_path))
        assert r.returncode == 3, (args, r.stderr)
        assert r.stderr.strip().splitlines() == [said], args
        assert not any(tmp_path.iterdir())


def test_harness_container_gets_the_options_given(tmp_path: Path, monkeypatch: Any) -> None:
    """The container's campaign gets what was on the command line (paths made absolute, the
    store, the JUnit file's directory and the recipe's bind-mounted), and its exit code is
    the command's."""
    from harness import cli
    from harness.runtime import docker as hd
    from harness.runtime import harness_container as hc

    calls: list[tuple[list[str], list[Path], list[Path]]] = []

    def run_in_container(args: Sequence[str], rw: Sequence[Path], ro: Sequence[Path] = (),
                         log: Any = None) -> int:
        calls.append((list(args), list(rw), list(ro)))
        return 1

    monkeypatch.setattr(hc, "run_in_container", run_in_container)
    monkeypatch.setattr(hd, "engine_unavailable_reason", lambda: None)
    monkeypatch.chdir(tmp_path)
    recipe = REPO / "docker" / "recipes" / "hiwater.toml"
    code = cli._run(["campaign", "--runtime", "docker", "--harness", "container",
                     "--store", "st", "--junit", "out/j.xml", "--rf", "2", "--no-idempotence",
                     "--override", "a.b=1", "--override", "c=2", "--unclean", "--min-isr", "1",
                     "--recipe", str(recipe), "--time-limit", "5"])
    assert code == 1
    [(args, rw, ro)] = calls
    assert args[:2] == ["--store", str(tmp_path / "st")]
    pairs = list(itertools.pairwise(args))
    for want in (("--runtime", "docker"), ("--junit", str(tmp_path / "out" / "j.xml")),
                 ("--rf", "2"), ("--override", "a.b=1"), ("--override", "c=2"),
                 ("--min-isr", "1"), ("--recipe", str(recipe)), ("--time-limit", "5.0")):
        assert want in pairs, (want, args)
    assert "--no-idempotence" in args and "--unclean" in args and "--harness" not in args
    assert "--brokers" not in args  # defaults stay the container's own
    assert rw == [tmp_path / "st", tmp_path / "out"] and ro == [recipe.parent]


def test_harness_image_context_changes_with_the_harness(tmp_path: Path) -> None:
    import shutil

    from harness.runtime.harness_container import harness_context

    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("core", "broker", "nemesis", "docker", "harness", "spec"):
        shutil.copytree(REPO / d, tmp_path / d, ignore=skip)
    for f in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copyfile(REPO / f, tmp_path / f)
    _, before = harness_context(tmp_path)
    (tmp_path / "README.md").write_text("changed\n")
    assert harness_context(tmp_path)[1] == before
    (tmp_path / "harness" / "new.py").write_text("x = 1\n")
    assert harness_context(tmp_path)[1] != before


def test_launcher_needs_the_standard_library_alone(tmp_path: Path) -> None:
    """`python3 -m harness.runtime.harness_container` runs without the project's environment
    (-S: no site-packages): a runner with Docker and its python3 can start a campaign."""
    r = subprocess.run([sys.executable, "-S", "-m", "harness.runtime.harness_container",
                        "campaign", "--runtime", "local"], capture_output=True, text=True,
                       timeout=60, cwd=REPO, check=False)
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "hiwater campaign: --runtime local: this launcher runs --runtime docker "
        "--harness container"]
    probe = "import harness.runtime.harness_container, sys; print('lz4' in sys.modules)"
    r = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                       timeout=60, cwd=REPO, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_launcher_makes_paths_absolute(tmp_path: Path) -> None:
    from harness.runtime.harness_container import launcher_args

    args, rw, ro = launcher_args(["--time-limit", "5", "--junit=ci/j.xml", "--recipe",
                                  "r/x.toml", "--harness", "container", "--seed", "3"],
                                 tmp_path)
    assert args == ["--runtime", "docker", "--store", str(tmp_path / "store"),
                    "--junit", str(tmp_path / "ci" / "j.xml"),
                    "--recipe", str(tmp_path / "r" / "x.toml"),
                    "--time-limit", "5", "--seed", "3"]
    assert rw == [tmp_path / "store", tmp_path / "ci"] and ro == [tmp_path / "r"]
