"""The periodic checkpoints written off the event loop (`LogManager.checkpoint_job`): the
offsets are those of the moment the job was made, the files are written by whoever runs it
(the broker: a worker thread), and a file never goes back to an older snapshot than one
already written (a truncation's synchronous checkpoint is not undone by a late job)."""

from __future__ import annotations

import threading
from pathlib import Path

from broker.store.batch import Record, build_batch
from broker.store.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
)
from broker.store.config import LogConfig
from broker.store.manager import LogManager

T0 = 1_700_000_000_000
TP = ("t", 0)


def _manager(d: Path, records: int) -> LogManager:
    mgr = LogManager([d], LogConfig(segment_bytes=700), now_ms=T0)
    log = mgr.get_or_create_log("t", 0)
    for i in range(records):
        batch = build_batch([Record(0, T0 + i, None, b"v%05d" % i)], base_offset=0)
        log.append_as_leader(batch, 0, now_ms=T0 + i)
    return mgr


def _hw_on_disk(d: Path, mgr: LogManager) -> int:
    return read_offsets(mgr.fs, d / REPLICATION_OFFSET_CHECKPOINT)[TP]  # type: ignore[index]


def test_the_job_writes_the_offsets_of_its_snapshot_not_later_ones(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, 10)
    log = mgr.get_log("t", 0)
    assert log is not None
    log.high_watermark = 4
    job = mgr.checkpoint_job()
    log.high_watermark = 7  # after the snapshot: not in this job's files
    assert job() == 2  # the high watermarks and the recovery points of the one log dir
    assert _hw_on_disk(tmp_path, mgr) == 4
    rp = read_offsets(mgr.fs, tmp_path / RECOVERY_POINT_CHECKPOINT)
    assert rp[TP] == log.recovery_point  # type: ignore[index]


def test_a_job_older_than_a_written_checkpoint_does_not_overwrite_it(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, 10)
    log = mgr.get_log("t", 0)
    assert log is not None
    log.high_watermark = 4
    stale = mgr.checkpoint_job()
    log.high_watermark = 9
    mgr.checkpoint_high_watermarks()  # a newer snapshot, written synchronously
    assert stale() == 1  # only the recovery points: the HW file already holds a newer one
    assert _hw_on_disk(tmp_path, mgr) == 9


def test_the_job_runs_on_another_thread(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, 5)
    log = mgr.get_log("t", 0)
    assert log is not None
    log.high_watermark = 3
    job = mgr.checkpoint_job()
    wrote: list[int] = []
    t = threading.Thread(target=lambda: wrote.append(job()))
    t.start()
    t.join(10)
    assert wrote == [2]
    assert _hw_on_disk(tmp_path, mgr) == 3
