"""Bad input to every `hiwater` command (issue #16), as a user causes it: a bad
server.properties value, a port another process holds, ZooKeeper or Java missing, an
unreachable bootstrap or ZooKeeper, a bad option. Each run must exit 3 with exactly one line
on stderr (starting `hiwater <command>:`), print nothing on stdout, show no traceback (plain or
rich), start nothing (no process names the test's directory afterwards) and create nothing in
its working directory (no store/, no run or cluster directory). `hiwater campaign`'s own
option checks are in tests/campaign/test_bad_options.py; a log dir of another cluster or
broker in tests/broker/test_meta_properties.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.runtime.zkserver import free_port
from harness import cli

HIWATER = Path(sys.executable).with_name("hiwater")  # the console script of this venv
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another process (this one) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _properties(tmp: Path, **extra: str) -> Path:
    props = {"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
             "log.dirs": str(tmp / "data"), "zookeeper.connect": f"127.0.0.1:{free_port()}",
             "zookeeper.connection.timeout.ms": "1500", **extra}
    path = tmp / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _processes_mentioning(text: str) -> list[str]:
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


NO_JAVA = "no-java"  # run with a PATH that has no java (as on a machine without it)

# (id, args built from the test's directory and a busy port, what the line must say, env)
Case = tuple[str, Callable[[Path, int], list[str]], str, str]
CASES: list[Case] = [
    ("broker: no config file", lambda t, p: ["broker", "--config", str(t / "nope")],
     "cannot read", ""),
    ("broker: bad server.properties value",
     lambda t, p: ["broker", "--config", str(_properties(t, **{"num.partitions": "x"}))],
     "num.partitions", ""),
    ("broker: listener port in use",
     lambda t, p: ["broker", "--config",
                   str(_properties(t, listeners=f"PLAINTEXT://127.0.0.1:{p}"))],
     "Address already in use", ""),
    ("broker: ZooKeeper unreachable", lambda t, p: ["broker", "--config", str(_properties(t))],
     "cannot reach ZooKeeper", ""),
    ("broker: bad --override", lambda t, p: ["broker", "--config", str(_properties(t)),
                                            "--override", "novalue"], "--override", ""),
    ("broker: an unknown option", lambda t, p: ["broker", "--bogus"], "--bogus", ""),
    ("cluster up: bad server.properties value",
     lambda t, p: ["cluster", "up", "--dir", str(t / "c"), "--override", "num.partitions=x"],
     "num.partitions", ""),
    ("cluster up: a listener port set by hand",
     lambda t, p: ["cluster", "up", "--dir", str(t / "c"), "--override",
                   f"listeners=PLAINTEXT://127.0.0.1:{p}"], "--override listeners", ""),
    ("cluster up: --brokers 0", lambda t, p: ["cluster", "up", "--dir", str(t / "c"),
                                             "--brokers", "0"], "--brokers", ""),
    ("cluster up: no Java", lambda t, p: ["cluster", "up", "--dir", str(t / "c")],
     "Java is not installed", NO_JAVA),
    ("campaign: no Java", lambda t, p: ["campaign", "--store", str(t / "store")],
     "Java is not installed", NO_JAVA),
    ("campaign: a listener port set by hand",
     lambda t, p: ["campaign", "--store", str(t / "store"), "--override",
                   f"listeners=PLAINTEXT://127.0.0.1:{p}"], "--override listeners", ""),
    ("campaign: unreachable bootstrap",
     lambda t, p: ["campaign", "--store", str(t / "store"), "--bootstrap",
                   f"127.0.0.1:{free_port()}"], "no server reachable", ""),
    ("analyze: no store", lambda t, p: ["analyze", str(t / "nostore"), "--out", str(t / "a")],
     "no store directory", ""),
    ("spec check: bad strategy", lambda t, p: ["spec", "check", "--strategy", "sideways"],
     "--strategy", ""),
    ("spec check: bad bound", lambda t, p: ["spec", "check", "--brokers", "x"], "--brokers", ""),
    ("spec check: unknown bug", lambda t, p: ["spec", "check", "--bug", "bogus"], "bogus", ""),
    ("spec replay: no trace", lambda t, p: ["spec", "replay", str(t / "none.jsonl")],
     "cannot read trace", ""),
    ("check: no history", lambda t, p: ["check", str(t / "none.jsonl")], "cannot check", ""),
    ("report: not a run directory", lambda t, p: ["report", str(t)], "not a run directory",
     ""),
    ("dump-log: no file", lambda t, p: ["dump-log", str(t / "0.log")], "no file", ""),
    ("toxiproxy: port in use", lambda t, p: ["toxiproxy", "--listen", f"127.0.0.1:{p}"],
     "in use", ""),
    ("report: an unknown option", lambda t, p: ["report", "--bogus"], "--bogus", ""),
    ("an unknown command", lambda t, p: ["bogus"], "bogus", ""),
]


@pytest.mark.parametrize(("args", "says", "env"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_3(tmp_path: Path, busy_port: int,
                                          args: Callable[[Path, int], list[str]], says: str,
                                          env: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    argv = args(tmp_path, busy_port)
    before = set(tmp_path.iterdir())
    environ = {**os.environ, "COLUMNS": "100"}
    if env == NO_JAVA:
        environ["PATH"] = str(tmp_path / "bin")
    t0 = time.monotonic()
    proc = subprocess.run([str(HIWATER), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=90, env=environ)
    elapsed = time.monotonic() - t0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1, proc.stderr
    command = " ".join(a for a in argv[:2] if not a.startswith(("-", "/")))
    if command == "bogus":  # no such command: the line is the top level's
        command = ""
    assert lines[0].startswith(f"hiwater {command}".rstrip() + ": "), lines[0]
    assert says in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout and "╭" not in proc.stderr
    assert proc.stdout == ""
    # no store/, no run or cluster directory (.hypothesis is the cache of a library kio loads)
    assert [p for p in cwd.iterdir() if p.name != ".hypothesis"] == []
    assert set(tmp_path.iterdir()) - before <= {tmp_path / "data"}, sorted(tmp_path.iterdir())
    if "unreachable" in says or "reach" in says:  # not a client's 30 s time-out (+ startup)
        assert elapsed < 60, elapsed
    assert _processes_mentioning(str(tmp_path)) == []


def test_an_unexpected_error_is_one_line_and_its_traceback_needs_debug(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import harness.preflight

    def boom() -> None:
        raise RuntimeError("something nobody expected\nsecond line")

    monkeypatch.setattr(harness.preflight, "check_zookeeper", boom)
    args = ["cluster", "up", "--dir", str(tmp_path / "c")]
    assert cli._run(args) == 3
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "hiwater cluster up: RuntimeError: something nobody expected (--debug shows the "
        "traceback)"], err
    with pytest.raises(RuntimeError, match="nobody expected"):
        cli._run(args, debug=True)
    assert not (tmp_path / "c").exists()
