"""A store of hand-made runs, rendered once per test module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.report import render
from tests.report.runs import linearizability_run, lost_write_run, unknown_run, valid_run

#: run name -> the verdict its report must show
RUNS = {"valid": "valid", "lost": "invalid", "lin": "invalid", "unknown": "unknown",
        "crashed": "unknown"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    s = tmp_path_factory.mktemp("store")
    valid_run(s / "valid" / "20260101T120000.000+0000")
    lost_write_run(s / "lost" / "20260102T120000.000+0000")
    linearizability_run(s / "lin" / "20260103T120000.000+0000")
    unknown_run(s / "unknown" / "20260104T120000.000+0000")
    crashed = s / "crashed" / "20260105T120000.000+0000"
    crashed.mkdir(parents=True)
    (crashed / "history.jsonl").write_text(
        '{"index":0,"time_ns":0,"process":0,"type":"invoke","f":"send","value":[["send",0,1]]}'
        "\n")
    for d in sorted(p.parent for p in s.rglob("history.jsonl")):
        render(d)
    os.symlink(s / "lost" / "20260102T120000.000+0000", s / "latest")
    return s


def report_path(store: Path, name: str) -> Path:
    (d,) = (store / name).iterdir()
    return d / "report.html"
