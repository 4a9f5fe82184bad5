"""The disk faults on a real store (broker.store), no processes: what `lose_unflushed` keeps is
exactly what the store made durable and checkpointed, and corruption is found (or, for a body
byte below the recovery point, not found) by the store's own recovery on open."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from broker.store.batch import Record, build_batch, validate_batch
from broker.store.config import LogConfig
from broker.store.errors import CorruptRecordError
from broker.store.manager import LogManager
from harness.runtime.disk import corrupt_segment_in, lose_unflushed_in, wipe_data_dir

CONFIG = LogConfig(segment_bytes=700)


def _append(mgr: LogManager, n: int, start: int = 0) -> None:
    log = mgr.get_or_create_log("t", 0)
    for i in range(start, start + n):
        batch = build_batch([Record(0, 1_700_000_000_000 + i, None, b"v%05d" % i + b"." * 30)],
                            base_offset=0)
        log.append_as_leader(batch, 0, now_ms=1_700_000_000_000 + i)


def _values(mgr: LogManager) -> list[int]:
    log = mgr.get_or_create_log("t", 0)
    out = []
    for seg in log.segments:
        for _pos, _h, data in seg.batches():
            m = re.search(rb"v(\d{5})\.", bytes(data))
            assert m is not None
            out.append(int(m.group(1)))
    return out


def test_lose_unflushed_keeps_the_checkpointed_durable_prefix(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 40)
    log = mgr.get_or_create_log("t", 0)
    assert len(log.segments) > 2  # rolls flushed the older segments
    mgr.checkpoint_recovery_points()
    durable = log.recovery_point
    assert 0 < durable < 40 and durable == log.active_segment.base_offset
    _append(mgr, 5, start=40)  # a roll flushes the older segment; the rest is never flushed
    assert log.log_end_offset == 45
    fsynced = log.recovery_point  # what the store really made durable (after the last roll)
    assert fsynced > durable  # ...which the checkpoint on disk does not know yet
    # the process dies here (no close, no flush)
    report = lose_unflushed_in(d)
    lost = report["t-0"]
    assert lost["recovery_point"] == durable and lost["offsets"] == [fsynced, 45]
    reopened = LogManager([d], CONFIG)
    assert reopened.get_or_create_log("t", 0).log_end_offset == fsynced
    assert _values(reopened) == list(range(fsynced))


def test_lose_unflushed_without_checkpoint_loses_the_active_segment(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 3)  # no roll, no checkpoint yet
    lost = lose_unflushed_in(d)["t-0"]
    assert lost["bytes"][0] == 0 and lost["offsets"] == [0, 3]
    assert LogManager([d], CONFIG).get_or_create_log("t", 0).log_end_offset == 0


def test_lose_unflushed_after_clean_shutdown_loses_nothing(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 20)
    mgr.shutdown()
    assert lose_unflushed_in(d) == {}


def test_header_corruption_is_found_by_recovery(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 40)
    mgr.shutdown()  # clean: every segment is below the recovery point
    report = corrupt_segment_in(d, random.Random(1), "header")
    assert report["closed"] and report["kind"] == "header"
    bad_base = report["batch_offsets"][0]
    reopened = LogManager([d], CONFIG)
    log = reopened.get_or_create_log("t", 0)
    assert any("truncated" in line for line in log.recovery_report), log.recovery_report
    assert log.log_end_offset == bad_base  # cut at the corrupt batch, later segments deleted
    assert _values(reopened) == list(range(bad_base))


def test_records_corruption_below_recovery_point_needs_a_crc_check(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 40)
    mgr.shutdown()
    report = corrupt_segment_in(d, random.Random(2), "records")
    assert report["closed"]
    reopened = LogManager([d], CONFIG)
    assert reopened.get_or_create_log("t", 0).log_end_offset == 40  # not seen on open
    data = (d / report["corrupted"]).read_bytes()
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(data, report["batch_position"])


def test_wipe(tmp_path: Path) -> None:
    d = tmp_path / "data"
    mgr = LogManager([d], CONFIG)
    _append(mgr, 5)
    mgr.shutdown()
    r = wipe_data_dir(d)
    assert r["files"] >= 3 and r["bytes"] > 0 and not d.exists()
    assert wipe_data_dir(d) == {"files": 0, "bytes": 0}
    assert corrupt_segment_in(tmp_path / "none", random.Random(0))["corrupted"] is None
