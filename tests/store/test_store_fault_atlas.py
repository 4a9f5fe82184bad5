"""The storage fault atlas (issue #16): every row of `broker.store.atlas.ROWS` is injected into
a real log dir, after a clean stop and after a kill -9, and the outcome checked; the document
`docs/storage-faults.md` is generated from the same rows and must be current."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from atlas_lab import observe

from broker.store.atlas import ROWS, STOPS, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "storage-faults.md"


def test_the_document_is_generated_from_the_rows() -> None:
    assert DOC.read_text() == render(), (
        "docs/storage-faults.md is stale: uv run python -m broker.store.atlas > "
        "docs/storage-faults.md"
    )


CASES = [
    pytest.param(file, fault, stop, clean if stop == "clean" else kill, id=f"{file}|{fault}|{stop}")
    for file, fault, clean, kill, _note, _kafka in ROWS
    for stop in STOPS
]


@pytest.mark.parametrize(("file", "fault", "stop", "outcome"), CASES)
def test_fault_atlas_row(
    file: str, fault: str, stop: str, outcome: str, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="hiwater.store")
    seen = observe(tmp_path, file, fault, stop, lambda: caplog.records)
    assert seen.outcome == outcome, (seen.outcome, seen.detail, seen.warnings)
    if outcome.startswith("truncated"):
        assert seen.detail == "at the damage", seen.detail
    if outcome == "read error":
        assert seen.detail.endswith("earlier intact=True; named=True"), seen.detail
    for line in seen.warnings:
        assert "\n" not in line and "Traceback" not in line


def test_an_unusable_log_dir_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    """A compaction swap file without its .swap-end record (no crash leaves one: the record is
    written first) cannot be completed safely: the broker refuses to start with one line
    naming the file and what to do, exit code 5, no traceback."""
    data = tmp_path / "data"
    (data / "t-0").mkdir(parents=True)
    swap = data / "t-0" / "00000000000000000000.log.swap"
    swap.write_bytes(b"x")
    props = tmp_path / "server.properties"
    props.write_text(
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={data}\n"
        "zookeeper.connect=127.0.0.1:1\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "broker.runtime.main", "--config", str(props)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 5, run
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(swap) in lines[0] and "Traceback" not in run.stderr, lines


def test_a_missing_partition_directory_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A partition directory removed while the broker was down: the checkpoints still list it,
    so the start names it (Kafka says nothing); the other partitions serve."""
    import shutil

    from atlas_lab import read_back, write_logs

    from broker.store.manager import LogManager

    caplog.set_level(logging.WARNING, logger="hiwater.store")
    d = tmp_path / "data"
    written = write_logs(d, "clean")
    shutil.rmtree(d / "t-1")
    mgr = LogManager([d], topic_configs={})
    assert mgr.get_log("t", 1) is None
    assert read_back(mgr, ("t", 0))[0] == written[("t", 0)]
    lines = [r.getMessage() for r in caplog.records if "t-1" in r.getMessage()]
    assert lines and all("lost" in line and "\n" not in line for line in lines), lines
    mgr.shutdown()
    caplog.clear()
    LogManager([d], topic_configs={}).shutdown()  # the checkpoints were rewritten
    assert not [r for r in caplog.records if "t-1" in r.getMessage()]


def test_committed_offsets_missing_after_a_crash_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The high-watermark checkpoint is written periodically, the recovery point only after a
    flush: after a crash the log may end below a checkpointed high watermark (unflushed or
    damaged). Kafka says nothing; hiwater names the offsets a follower must fetch again."""
    from broker.store.batch import Record, build_batch
    from broker.store.manager import LogManager

    caplog.set_level(logging.WARNING, logger="hiwater.store")
    d = tmp_path / "data"
    mgr = LogManager([d])
    log = mgr.get_or_create_log("t", 0)
    mgr.checkpoint_all()  # recovery point 0
    for i in range(10):
        log.append_as_leader(build_batch([Record(0, i, None, b"v%d" % i)], base_offset=0), 0)
    log.high_watermark = 10
    mgr.checkpoint_high_watermarks()
    log.abandon()  # kill -9 before any flush; then the page cache is lost too
    segment = d / "t-0" / "00000000000000000000.log"
    segment.write_bytes(b"")
    again = LogManager([d])
    lines = [r.getMessage() for r in caplog.records if segment.name in r.getMessage()]
    assert any("committed offsets 0 to 9" in line for line in lines), lines
    again.shutdown()
