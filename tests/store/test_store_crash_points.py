"""A crash at every mutating file-system operation of a scripted scenario (issue #16, crash
points): appends across segment rolls and index entries, flushes, every checkpoint replace
(temp file, fsync, rename, directory fsync), retention deleting segments and a compaction swap.

For each N, SimFS raises a crash at the N-th operation, the machine "loses power" (unsynced
bytes and directory entries are lost), and the broker's LogManager starts again on what is left.
Every start must succeed and lose no record that was flushed before the crash: in the delete
log every flushed record at or after the log start is read back unchanged, and the log start
never moves past where retention had taken it; in the compacted log each key's latest value
is at least as new as its last flushed one."""

from __future__ import annotations

from pathlib import Path

import pytest
from atlas_lab import read_back

from broker.store.batch import Record, build_batch
from broker.store.config import LogConfig
from broker.store.fs import SimFS, SimulatedCrash
from broker.store.manager import LogManager

D = Path("/data")
T0 = 1_700_000_000_000
DELETE = LogConfig(segment_bytes=900, index_interval_bytes=100, retention_bytes=2500)
COMPACT = LogConfig(
    segment_bytes=900, index_interval_bytes=100, cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.01, delete_retention_ms=0,
)
KEYS = 4
ROUNDS = 6
PER_ROUND = 5


class Progress:
    """What the scenario had made durable when it crashed."""

    def __init__(self) -> None:
        self.flushed: dict[int, bytes] = {}  # delete log: offset -> value
        self.log_start = 0  # delete log: the furthest retention may have got
        self.latest: dict[bytes, int] = {}  # compacted log: key -> last flushed version


def manager(fs: SimFS) -> LogManager:
    return LogManager([D], DELETE, fs, topic_configs={"c": COMPACT}, now_ms=T0)


def scenario(fs: SimFS, p: Progress) -> None:
    mgr = manager(fs)
    log = mgr.get_or_create_log("t", 0, now_ms=T0)
    clog = mgr.get_or_create_log("c", 0, now_ms=T0)
    mgr.checkpoint_all()
    version = 0
    for r in range(ROUNDS):
        now = T0 + r * 1000
        pending: dict[int, bytes] = {}
        versions: dict[bytes, int] = {}
        for i in range(PER_ROUND):
            value = b"t %d %d " % (r, i) + b"v" * 60
            first, _ = log.append_as_leader(
                build_batch([Record(0, now + i, None, value)], base_offset=0), 0, now_ms=now + i)
            pending[first] = value
            version += 1
            key = b"k%d" % (version % KEYS)
            clog.append_as_leader(build_batch(
                [Record(0, now + i, key, b"%d" % version + b"c" * 60)], base_offset=0), 0,
                now_ms=now + i)
            versions[key] = version
        log.flush(now)
        clog.flush(now)
        p.flushed.update(pending)  # acknowledged and flushed: must survive any crash
        p.latest.update(versions)
        log.high_watermark = log.log_end_offset
        clog.high_watermark = clog.log_end_offset
        mgr.checkpoint_recovery_points()
        mgr.checkpoint_high_watermarks()
        # retention never deletes the active segment: a crash inside it may leave the log
        # starting anywhere up to there
        p.log_start = log.active_segment.base_offset
        mgr.cleanup_logs(now)  # retention: deletes old segments, checkpoints log starts
        mgr.clean_logs(now)  # compaction: .cleaned, .swap, swap-end, rename, delete old
    mgr.shutdown()


def count_ops() -> int:
    fs = SimFS(0)
    fs.crash_after_ops = 10**9
    scenario(fs, Progress())
    assert fs.crash_after_ops is not None
    return 10**9 - fs.crash_after_ops


def check_restart(n: int) -> None:
    fs = SimFS(n)
    fs.crash_after_ops = n
    p = Progress()
    with pytest.raises(SimulatedCrash):
        scenario(fs, p)
    fs.crash_after_ops = None
    fs.crash(lose_unsynced=True, torn=n % 2 == 1)  # odd N: unsynced tails torn, not lost
    mgr = manager(fs)  # must start
    log, clog = mgr.get_log("t", 0), mgr.get_log("c", 0)
    if log is None or clog is None:  # the crash came before the logs' directories were durable
        assert not p.flushed, f"crash at op {n}: a log with flushed records is gone"
        return
    assert log.log_start_offset <= p.log_start, (n, log.log_start_offset, p.log_start)
    got, error = read_back(mgr, ("t", 0))
    assert error is None, (n, error)
    for offset, value in p.flushed.items():
        if offset >= log.log_start_offset:
            assert got.get(offset) == value, f"crash at op {n}: flushed offset {offset} lost"
    cgot, error = read_back(mgr, ("c", 0))
    assert error is None, (n, error)
    last: dict[bytes, int] = {}
    for value in cgot.values():
        v = int(value.rstrip(b"c"))
        last[b"k%d" % (v % KEYS)] = v
    for key, v in p.latest.items():
        assert last.get(key, -1) >= v, f"crash at op {n}: key {key!r} went back to {last.get(key)}"
    mgr.shutdown()


def test_the_scenario_covers_every_kind_of_write() -> None:
    fs = SimFS(0)
    p = Progress()
    scenario(fs, p)
    mgr = manager(fs)
    log, clog = mgr.get_log("t", 0), mgr.get_log("c", 0)
    assert log is not None and clog is not None
    assert log.log_start_offset > 0  # retention deleted segments
    assert clog.log_end_offset - len(read_back(mgr, ("c", 0))[0]) > 0  # compaction removed some
    assert len(log.segments) > 1 and fs.stats.dir_fsyncs > 10
    assert OPS > 300


OPS = count_ops()


@pytest.mark.parametrize("chunk", range(4))
def test_a_crash_at_every_operation_loses_no_flushed_record(chunk: int) -> None:
    for n in range(chunk, OPS, 4):
        check_restart(n)
