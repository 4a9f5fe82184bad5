"""Bad input to `hiwater campaign` (issue #16), as a user types it: exit 3 with one clear line
on stderr, no traceback, nothing started (no ZooKeeper or broker process), no run directory;
an unreachable `--bootstrap` is reported within 10 s. And `hiwater cluster up` without
Java (ZooKeeper's) says so in one line. Every other command: tests/cli/test_bad_input.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.preflight import check_bootstrap_reachable

HIWATER = Path(sys.executable).with_name("hiwater")  # the console script of this venv
REPO = Path(__file__).resolve().parents[2]

BAD = [
    (["--acks", "7"], "--acks"),
    (["--acks", "1"], "--no-idempotence"),
    (["--nemesis", "bogus"], "--nemesis"),
    (["--workload", "bogus"], "--workload"),
    (["--rf", "4"], "--rf 4 is above --brokers 3"),
    (["--min-isr", "4"], "--min-isr"),
    (["--bootstrap", "nohost"], "--bootstrap"),
    (["--bootstrap", "127.0.0.1:1"], "no server reachable"),
    (["--bug", "bogus"], "--bug"),
    (["--override", "min.insync.replicas=x"], "--override"),
    (["--override", "novalue"], "--override"),
    (["--scenario", "bogus"], "--scenario"),
    (["--nemesis-targets", "nobody"], "--nemesis-targets"),
    (["--nemesis-targets", "leader"], "--target-leader"),
    (["--sub-via", "sideways"], "--sub-via"),
    (["--concurrency", "0"], "--concurrency"),
    (["--name", "latest"], "--name"),
    (["--rf", "x"], "--rf"),  # the command line's own errors: the same one line
    (["--no-such-option"], "--no-such-option"),
]


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of processes that name `text` (a ZooKeeper or broker of this test would:
    their data directories are under the store)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append(f"{d.name}: {cmd}")
    return found


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_campaign_option_exits_3_with_one_line(tmp_path: Path, args: list[str],
                                                   says: str) -> None:
    store = tmp_path / "store"
    t0 = time.monotonic()
    proc = subprocess.run([str(HIWATER), "campaign", *args, "--store", str(store)],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "100"})
    elapsed = time.monotonic() - t0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("hiwater campaign: ") and says in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""
    assert not store.exists()
    if "127.0.0.1:1" in args:  # refused before a client's 30 s time-out (startup included)
        assert elapsed < 30, elapsed
    assert _processes_mentioning(str(tmp_path)) == []


def test_unreachable_bootstrap_is_found_within_10_s() -> None:
    for bootstrap in ("127.0.0.1:1", "127.0.0.1:1,127.0.0.1:2"):
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="no server reachable"):
            check_bootstrap_reachable(bootstrap)
        assert time.monotonic() - t0 < 10


def test_cluster_up_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    # java out of reach, as on a machine without it (ZooKeeper needs it)
    directory = tmp_path / "cluster"
    proc = subprocess.run([str(HIWATER), "cluster", "up", "--dir", str(directory)],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": str(tmp_path)})
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert len(lines) == 1 and "Java is not installed" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "╭" not in proc.stderr
    assert not directory.exists()
    assert _processes_mentioning(str(tmp_path)) == []
