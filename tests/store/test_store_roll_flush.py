"""A roll's fsync off the caller's thread (`LogManager.defer_roll_flushes`, the live broker):
the roll leaves the old segment unflushed and the recovery point where it was; the job's
fsyncs (a worker thread in the broker) and then `done` move the recovery point to the rolled
segment's end, as Kafka's scheduled `flushUptoOffsetExclusive` does. A truncation in between
voids the job; a simulated FS (no descriptors) and the default keep the synchronous flush."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.store.batch import Record, build_batch
from broker.store.config import LogConfig
from broker.store.fs import SimFS
from broker.store.log import Log
from broker.store.manager import LogManager

T0 = 1_700_000_000_000


def _fill(log: Log, records: int) -> None:
    for i in range(records):
        batch = build_batch([Record(0, T0 + i, None, b"v%05d" % i)], base_offset=0)
        log.append_as_leader(batch, 0, now_ms=T0 + i)


def _manager(d: Path, *, defer: bool, fs: SimFS | None = None) -> tuple[LogManager, Log]:
    mgr = LogManager([d], LogConfig(segment_bytes=700), now_ms=T0, fs=fs)
    if defer:
        mgr.defer_roll_flushes()
    return mgr, mgr.get_or_create_log("t", 0)


def test_by_default_a_roll_flushes_at_once(tmp_path: Path) -> None:
    mgr, log = _manager(tmp_path, defer=False)
    _fill(log, 20)
    assert len(log.segments) > 1
    assert log.recovery_point == log.segments[-1].base_offset
    assert mgr.take_roll_flushes() == []


def test_a_deferred_roll_flush_moves_the_recovery_point_when_done(tmp_path: Path) -> None:
    mgr, log = _manager(tmp_path, defer=True)
    _fill(log, 20)
    assert len(log.segments) > 1
    assert log.recovery_point == 0  # nothing fsynced on the appending thread
    rolled = mgr.take_roll_flushes()
    assert len(rolled) == len(log.segments) - 1  # one per roll
    assert all(seg.durable_size != seg.size for seg in log.segments[:-1])
    for rf in rolled:
        fds = list(rf.fds)
        rf.run()
        for fd in fds:  # run closes its duplicated descriptors
            with pytest.raises(OSError):
                os.fstat(fd)
        rf.done()
    assert log.recovery_point == log.segments[-1].base_offset
    assert all(seg.durable_size == seg.size for seg in log.segments[:-1])
    assert mgr.take_roll_flushes() == []


def test_a_truncation_before_the_flush_is_done_voids_it(tmp_path: Path) -> None:
    mgr, log = _manager(tmp_path, defer=True)
    _fill(log, 20)
    rolled = mgr.take_roll_flushes()
    first_end = rolled[0].upto
    log.truncate_to(first_end - 1)  # into the first rolled segment
    _fill(log, 3)
    for rf in rolled:
        rf.run()
        rf.done()
    # the truncated segment's new tail was never fsynced: no recovery point past it
    assert log.recovery_point <= first_end - 1


def test_a_simulated_fs_keeps_the_synchronous_flush(tmp_path: Path) -> None:
    mgr, log = _manager(Path("/sim"), defer=True, fs=SimFS(3))
    _fill(log, 20)
    assert len(log.segments) > 1
    assert log.recovery_point == log.segments[-1].base_offset
    assert mgr.take_roll_flushes() == []


def test_closing_a_log_with_pending_roll_flushes_flushes_and_releases_them(
        tmp_path: Path) -> None:
    _, log = _manager(tmp_path, defer=True)
    _fill(log, 20)
    fds = [fd for rf in log.roll_flushes for fd in rf.fds]
    assert fds
    log.close()
    assert log.recovery_point == log.log_end_offset
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_a_failed_roll_fsync_leaves_the_recovery_point_and_is_reported(tmp_path: Path) -> None:
    """A worker's fsync that fails (EIO) is reported to the broker, which
    halts, as when the roll's fsync failed inside the append; the jobs that did succeed move
    the recovery point only up to what they covered, and a failed one moves nothing (a
    restart's recovery scans that segment again). `Broker._periodic` runs this function on
    its worker and halts the node on the failure it returns."""
    from broker.runtime.server import _run_roll_flushes

    mgr, log = _manager(tmp_path, defer=True)
    _fill(log, 20)
    rolled = mgr.take_roll_flushes()
    assert len(rolled) >= 2
    first, broken = rolled[0], rolled[1]
    # its first descriptor swapped for a pipe's: fdatasync fails (EINVAL) as a failing disk's
    # would (EIO), and the descriptor stays open for `run` to close
    r, w = os.pipe()
    os.close(w)
    os.close(broken.fds[0])
    broken.fds[0] = r
    synced, failed = _run_roll_flushes(rolled[:2])
    assert synced == [first] and isinstance(failed, OSError)
    assert broken.fds == []  # its other descriptors were closed all the same
    for rf in synced:
        rf.done()
    assert log.recovery_point == first.upto < broken.upto
    for rf in rolled[2:]:
        rf.discard()
