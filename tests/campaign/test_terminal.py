"""`hiwater campaign` as a person runs it, in a subprocess: the terminal shows hiwater's own
lines only. librdkafka's log lines (`%3|...|FAIL|...`, `%4|...|TERMINATE|...`), one per
expected disconnect under faults, go to `logs/clients.log` of the run directory, each naming
the client's process (issue #13)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign.test_campaign import _require_cluster

pytestmark = pytest.mark.slow

LIBRDKAFKA_LINE = re.compile(r"^%\d\|", re.MULTILINE)
CLIENT_LINE = re.compile(r"^\S+ \S+ p=(\S+) [A-Z]+ (\S+): ", re.MULTILINE)
REPO = Path(__file__).resolve().parents[2]
HIWATER = Path(sys.executable).with_name("hiwater")  # the console script of this venv


def test_campaign_terminal_has_no_client_library_lines(tmp_path: Path) -> None:
    _require_cluster()
    store = tmp_path / "store"
    proc = subprocess.run(
        [str(HIWATER), "campaign", "--time-limit", "12",
         "--nemesis-interval", "3", "--seed", "13", "--store", str(store)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env={**os.environ, "COLUMNS": "200"})
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1, 2), out
    assert not LIBRDKAFKA_LINE.search(out), out
    # the progress lines show the count instead
    assert "client errors" in proc.stderr, proc.stderr
    run_dir = (store / "latest").resolve()
    log = (run_dir / "logs" / "clients.log").read_text()
    lines = CLIENT_LINE.findall(log)
    assert lines, log[:2000]
    # librdkafka's own lines are there, each with the process id of its client
    rdkafka = [p for p, name in lines if name.startswith("hiwater.clients.librdkafka")]
    assert rdkafka, log[:2000]
    assert all(re.fullmatch(r"-?\d+", p) for p in rdkafka), rdkafka
