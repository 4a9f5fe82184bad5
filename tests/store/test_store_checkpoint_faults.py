"""Damaged per-directory checkpoints never keep a broker down: each is reported (naming the
file and what the fallback costs), read as empty, and rewritten from what the segments hold.

Kafka warns and recovers every log for a bad recovery-point file and falls back to the first
segment for a bad log-start-offset file, but takes the whole log dir offline for a bad
replication-offset-checkpoint; every one of these files can be rebuilt, so hiwater never
refuses to start for one of them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.store.batch import Record, build_batch
from broker.store.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
)
from broker.store.config import LogConfig
from broker.store.manager import LogManager

CONFIG = LogConfig(segment_bytes=700)
T0 = 1_700_000_000_000
CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)

# Each damage: a function of the file's good bytes.
DAMAGES = {
    "garbage line": lambda good: good + b"this is not a checkpoint row\n",
    "garbage header": lambda good: b"zero\n" + good,
    "truncated to 0 bytes": lambda good: b"",
    "torn in the middle": lambda good: good[: max(1, len(good) // 2)],
    "non-integer offset": lambda good: b"0\n1\nt 0 lots\n",
    "unsupported version": lambda good: b"7\n0\n",
    "invalid utf-8": lambda good: b"\xff\xfe\x00garbage",
}


def _fill(d: Path, n: int) -> LogManager:
    mgr = LogManager([d], CONFIG)
    log = mgr.get_or_create_log("t", 0)
    for i in range(n):
        batch = build_batch([Record(0, T0 + i, None, b"v%05d" % i)], base_offset=0)
        log.append_as_leader(batch, 0, now_ms=T0 + i)
    log.flush()
    log.high_watermark = n
    mgr.shutdown()  # a clean stop writes every checkpoint
    return mgr


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_a_damaged_directory_checkpoint_is_reported_and_rebuilt(
    tmp_path: Path, name: str, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "data"
    _fill(d, 30)
    path = d / name
    good = path.read_bytes() if path.exists() else b"0\n0\n"
    path.write_bytes(DAMAGES[damage](good))

    with caplog.at_level(logging.WARNING, logger="hiwater.store"):
        mgr = LogManager([d], CONFIG)

    log = mgr.get_log("t", 0)
    assert log is not None
    assert log.log_start_offset == 0 and log.log_end_offset == 30, "no record is lost"
    assert 0 <= log.high_watermark <= 30
    if name == REPLICATION_OFFSET_CHECKPOINT:
        assert log.high_watermark == 0, "an unknown high watermark restarts at the log start"
    # One line naming the file and what the fallback costs.
    lines = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert "ignored:" in lines[0]
    assert any(name in line for line in mgr.recovery_report)
    # The damaged file was replaced by a valid one at once.
    rewritten = read_offsets(mgr.fs, path)
    if name != CLEANER_OFFSET_CHECKPOINT:  # only compacted logs have cleaner offsets
        assert ("t", 0) in rewritten
    # ... so the next start is quiet.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hiwater.store"):
        LogManager([d], CONFIG)
    assert not [r for r in caplog.records if "ignored:" in r.getMessage()]


def test_a_valid_checkpoint_of_other_partitions_is_harmless(tmp_path: Path) -> None:
    """A well-formed file that names other partitions (copied from another broker) sets nothing
    for ours: our log recovers from 0 and keeps every record."""
    d = tmp_path / "data"
    _fill(d, 12)
    for name in CHECKPOINTS:
        (d / name).write_bytes(b"0\n2\nother 0 5000\nother 1 7\n")
    mgr = LogManager([d], CONFIG)
    log = mgr.get_log("t", 0)
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset) == (0, 12)
    assert log.high_watermark == 0


def test_checkpoint_offsets_beyond_the_log_are_clamped(tmp_path: Path) -> None:
    """A checkpoint that claims more than the segments hold (the segment was damaged or
    replaced) cannot make the log claim records it does not have."""
    d = tmp_path / "data"
    _fill(d, 10)
    for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        (d / name).write_bytes(b"0\n1\nt 0 9999\n")
    mgr = LogManager([d], CONFIG)
    log = mgr.get_log("t", 0)
    assert log is not None
    assert log.log_end_offset == 10
    assert log.high_watermark == 10
    assert log.recovery_point <= 10
