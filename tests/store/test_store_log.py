"""Unit tests: config validation, checkpoints, leader-epoch cache, LogManager placement and
restart, retention, rolling, flush policy, follower appends, timestamps, FS semantics, sendfile."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from store_testlib import make_batch, read_all

from broker.store.checkpoint import (
    LeaderEpochCache,
    read_offsets,
    write_offsets,
)
from broker.store.config import LogConfig
from broker.store.errors import (
    InvalidConfigError,
    NonContiguousOffsetError,
    OffsetOutOfRangeError,
    StoreError,
)
from broker.store.fs import RealFS, SimFS, read_exact, write_atomic
from broker.store.log import Log
from broker.store.manager import LogManager

DIR = Path("/data/t-0")


# ------------------------------------------------------------------ config


def test_config_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30 and c.index_interval_bytes == 4096
    assert c.retention_ms == 7 * 24 * 3600 * 1000 and c.retention_bytes == -1
    assert c.cleanup_policy == "delete" and c.min_cleanable_dirty_ratio == 0.5
    assert c.segment_index_bytes == 10 * 1024 * 1024


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"segment.bytes": "10"}, r"segment.bytes=10 must be in \[14,"),
        ({"cleanup.policy": "forever"}, "cleanup.policy='forever'"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio=1.5"),
        ({"retention.ms": "-2"}, "retention.ms=-2"),
        ({"segment.ms": "soon"}, "segment.ms='soon' is not a valid int"),
        ({"segmnt.bytes": "100"}, "unknown log config key 'segmnt.bytes'"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "max.compaction.lag.ms=5"),
    ],
)
def test_config_errors_are_clear(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        LogConfig.from_properties(props)


def test_config_from_properties() -> None:
    c = LogConfig.from_properties(
        {"segment.bytes": "2048", "log.retention.ms": 5, "cleanup.policy": "compact,delete"}
    )
    assert (c.segment_bytes, c.retention_ms) == (2048, 5)
    assert c.compact and c.delete


# ------------------------------------------------------------------ checkpoints


def test_offset_checkpoint_format_and_atomicity() -> None:
    fs = SimFS(1)
    fs.makedirs(Path("/d"))
    path = Path("/d/replication-offset-checkpoint")
    write_offsets(fs, path, {("b", 1): 7, ("a", 0): 3})
    assert fs.file_bytes(path) == b"0\n2\na 0 3\nb 1 7\n"
    fs.crash()
    assert read_offsets(fs, path) == {("a", 0): 3, ("b", 1): 7}
    fs.crash_after_ops = 2  # crash in the middle of a rewrite: the old file survives
    from broker.store.fs import SimulatedCrash

    with pytest.raises(SimulatedCrash):
        write_offsets(fs, path, {("a", 0): 100})
    fs.crash()
    assert read_offsets(fs, path) == {("a", 0): 3, ("b", 1): 7}


def test_leader_epoch_cache_semantics() -> None:
    fs = SimFS(2)
    fs.makedirs(Path("/d"))
    cache = LeaderEpochCache(fs, Path("/d/leader-epoch-checkpoint"))
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch later: no change
    cache.assign(2, 10)
    cache.assign(4, 20)
    assert cache.entries == [(0, 0), (2, 10), (4, 20)]
    assert cache.end_offset_for(4, 30) == (4, 30)
    assert cache.end_offset_for(3, 30) == (2, 20)
    assert cache.end_offset_for(2, 30) == (2, 20)
    assert cache.end_offset_for(1, 30) == (0, 10)
    cache.truncate_from_end(15)
    assert cache.entries == [(0, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12)]
    assert LeaderEpochCache(fs, Path("/d/leader-epoch-checkpoint")).entries == [(2, 12)]
    assert fs.file_bytes(Path("/d/leader-epoch-checkpoint")) == b"0\n1\n2 12\n"


# ------------------------------------------------------------------ log behaviour


def test_follower_append_keeps_offsets_and_checks_contiguity() -> None:
    log = Log.open(DIR, LogConfig(), SimFS(3))
    b0 = make_batch([b"a", b"b"], base_offset=0, epoch=4)
    b1 = make_batch([b"c"], base_offset=2, epoch=5)
    assert log.append_as_follower(b0 + b1 + b1[:30]) == (0, 2)  # trailing partial batch ignored
    assert log.leader_epoch_cache.entries == [(4, 0), (5, 2)]
    assert read_all(log) == b0 + b1
    with pytest.raises(NonContiguousOffsetError, match="does not follow"):
        log.append_as_follower(make_batch([b"x"], base_offset=7))
    with pytest.raises(NonContiguousOffsetError):
        log.append_as_follower(make_batch([b"x"], base_offset=1))


def test_out_of_range_reads_and_log_start_offset() -> None:
    log = Log.open(DIR, LogConfig(segment_bytes=300), SimFS(4))
    for i in range(10):
        log.append_as_leader(make_batch([b"value-%d" % i] * 2), 0)
    with pytest.raises(OffsetOutOfRangeError, match="log start offset 0, log end offset 20"):
        log.read(21, 100)
    assert log.read(20, 100).length == 0
    log.update_high_watermark(12)
    assert log.maybe_increment_log_start_offset(15) and log.log_start_offset == 12
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(11, 100)
    assert (e.value.offset, e.value.log_start_offset) == (11, 12)


def test_retention_by_bytes_time_and_high_watermark() -> None:
    fs = SimFS(5)
    config = LogConfig(segment_bytes=300, retention_bytes=700, retention_ms=10_000)
    log = Log.open(DIR, config, fs)
    for i in range(20):
        log.append_as_leader(make_batch([b"value-%d" % i] * 2, timestamp=1_000 + i), 0)
    assert len(log.segments) > 4
    assert log.delete_old_segments(now_ms=2_000) == 0  # high watermark is 0: nothing goes
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments(now_ms=2_000)
    assert deleted > 0 and log.size_bytes - log.active_segment.size <= 700
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert not fs.exists(DIR / "00000000000000000000.log")
    kept = len(log.segments)
    assert log.delete_old_segments(now_ms=11_050) == kept - 1  # all past retention.ms...
    assert len(log.segments) == 1  # ...but never the active segment
    assert log.read_bytes(log.log_start_offset, 1 << 20)


def test_time_based_roll_and_offset_for_timestamp() -> None:
    log = Log.open(DIR, LogConfig(segment_ms=1_000), SimFS(6), now_ms=0)
    log.append_as_leader(make_batch([b"a", b"b"], timestamp=100), 0, now_ms=100)
    log.append_as_leader(make_batch([b"c"], timestamp=500), 0, now_ms=600)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch([b"d", b"e"], timestamp=1_200), 0, now_ms=1_200)
    assert len(log.segments) == 2 and log.active_segment.base_offset == 3
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(101) == (1, 101)
    assert log.offset_for_timestamp(102) == (2, 500)
    assert log.offset_for_timestamp(1_201) == (4, 1_201)
    assert log.offset_for_timestamp(5_000) is None
    assert not log.maybe_roll(1_500) and log.maybe_roll(2_300)


def test_flush_policy_and_durable_positions() -> None:
    fs = SimFS(7)
    log = Log.open(DIR, LogConfig(flush_messages=3, flush_ms=1_000), fs, now_ms=0)
    log.append_as_leader(make_batch([b"a", b"b"]), 0)
    assert log.flushed_offset == 0
    log.append_as_leader(make_batch([b"c"]), 0)  # 3 messages: flush.messages
    assert log.flushed_offset == 3
    seg = log.active_segment.log_path
    assert log.durable_positions() == {seg: fs.durable_size(seg)}
    log.append_as_leader(make_batch([b"d"]), 0, now_ms=500)
    assert log.flushed_offset == 3
    log.append_as_leader(make_batch([b"e"]), 0, now_ms=1_000)  # flush.ms
    assert log.flushed_offset == 5
    log.append_as_leader(make_batch([b"f"]), 0)
    fs.crash()
    again = Log.open(DIR, LogConfig(), fs)
    assert again.log_end_offset == 5  # what was not fsynced is gone


def test_default_policy_relies_on_replication_not_fsync() -> None:
    fs = SimFS(8)
    log = Log.open(DIR, LogConfig(), fs)
    log.append_as_leader(make_batch([b"x"]), 0)  # the first batch of an epoch: epoch checkpoint
    fsyncs = fs.stats.fsyncs
    for _ in range(50):
        log.append_as_leader(make_batch([b"x"]), 0)
    assert fs.stats.fsyncs == fsyncs


def test_truncation_is_durable_and_reopens() -> None:
    fs = SimFS(9)
    log = Log.open(DIR, LogConfig(segment_bytes=200), fs)
    for i in range(10):
        log.append_as_leader(make_batch([b"v%d" % i] * 2), i // 3)
    log.flush()
    assert log.truncate_to(7)
    assert log.log_end_offset == 6  # the batch holding offsets 6..7 goes entirely
    assert log.leader_epoch_cache.entries == [(0, 0)]  # epoch 1 started at 6: gone
    fs.crash(torn=True)
    again = Log.open(DIR, LogConfig(segment_bytes=200), fs)
    assert again.log_end_offset == 6
    again.truncate_fully_and_start_at(100)
    assert (again.log_start_offset, again.log_end_offset) == (100, 100)
    assert again.append_as_leader(make_batch([b"z"]), 9) == (100, 100)
    fs.crash()
    third = Log.open(DIR, LogConfig(segment_bytes=200), fs)
    assert third.log_start_offset == 100 and third.log_end_offset in (100, 101)


def test_short_reads_are_handled() -> None:
    fs = SimFS(10)
    log = Log.open(DIR, LogConfig(index_interval_bytes=50), fs)
    for i in range(30):
        log.append_as_leader(make_batch([b"value-%d" % i] * 4), 0)
    expected = read_all(log)
    fs.short_reads = True
    assert read_all(log) == expected
    log.abandon()
    fs.crash(lose_unsynced=False)
    assert read_all(Log.open(DIR, LogConfig(index_interval_bytes=50), fs)) == expected


def test_sendfile_region_into_a_socket(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), RealFS())
    batches = [make_batch([b"value-%d" % i] * 5) for i in range(5)]
    for b in batches:
        log.append_as_leader(b, 0)
    region = log.read(0, 1 << 20)
    assert region.fd is not None
    a, b = socket.socketpair()
    try:
        assert region.sendfile(a.fileno()) == region.length
        got = b.recv(1 << 20)
    finally:
        a.close()
        b.close()
    assert got == region.read_bytes() == read_all(log)
    log.close()


def test_write_atomic_and_read_exact_on_real_fs(tmp_path: Path) -> None:
    fs = RealFS()
    write_atomic(fs, tmp_path / "x", b"hello")
    write_atomic(fs, tmp_path / "x", b"world!")
    handle = fs.open(tmp_path / "x")
    assert read_exact(handle, 1, 100) == b"orld!"
    handle.close()
    assert fs.listdir(tmp_path) == ["x"]


# ------------------------------------------------------------------ log manager


def test_log_dirs_placement_checkpoints_and_restart() -> None:
    fs = SimFS(11)
    dirs = [Path("/disk1"), Path("/disk2"), Path("/disk3")]
    config = LogConfig(segment_bytes=300)
    manager = LogManager(dirs, config, fs)
    fs.makedirs(Path("/disk2/existing-0"))
    placed = [manager.get_or_create_log("t", p).dir.parent for p in range(6)]
    assert placed == dirs + dirs  # fewest partitions first, first listed on ties
    log = manager.get_or_create_log("t", 0)
    for i in range(10):
        log.append_as_leader(make_batch([b"v%d" % i] * 2), 1)
    log.update_high_watermark(8)
    manager.shutdown()
    assert read_offsets(fs, Path("/disk1/replication-offset-checkpoint"))[("t", 0)] == 8
    assert read_offsets(fs, Path("/disk1/recovery-point-offset-checkpoint"))[("t", 0)] == 20
    fs.crash()
    again = LogManager(dirs, config, fs)
    reopened = again.get_log("t", 0)
    assert reopened is not None
    assert (reopened.log_end_offset, reopened.high_watermark) == (20, 8)
    assert again.log_dir_of[("t", 3)] == Path("/disk1")
    assert again.next_log_dir() == Path("/disk1")
    again.delete_log("t", 3)
    assert not fs.exists(Path("/disk1/t-3"))
    assert again.next_log_dir() == Path("/disk1")
    reopened.update_high_watermark(20)
    assert again.cleanup_logs(now_ms=10**13) > 0  # retention.ms exceeded
    assert read_offsets(fs, Path("/disk1/log-start-offset-checkpoint"))[("t", 0)] > 0


def test_sequential_reads_match_fresh_reads_and_survive_truncation(tmp_path: Path) -> None:
    """read() remembers where the next sequential read starts; the regions must be exactly
    those a log without that memory returns, across max_offset cuts, appends and truncation."""

    fs = SimFS(seed=7)
    d = Path("/data/t-0")
    cfg = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=700)
    log = Log.open(d, cfg, fs)
    for i in range(60):
        log.append_as_leader(make_batch([b"v" * (50 + 37 * (i % 9))] * (1 + i % 4)), 1)

    def fresh() -> Log:
        return Log.open(d, cfg, fs, recovery_point=log.log_end_offset)

    def walk(reader: Log, max_bytes: int, max_offset: int | None) -> list[tuple[int, int, int]]:
        out = []
        offset = reader.log_start_offset
        for _ in range(1000):
            region = reader.read(offset, max_bytes, max_offset)
            out.append((region.position, region.length, region.next_offset))
            if region.length == 0:
                break
            offset = region.next_offset
        return out

    for max_bytes in (100, 900, 5000):
        for max_offset in (None, 77):
            log.flush()
            expected = walk(fresh(), max_bytes, max_offset)
            assert walk(log, max_bytes, max_offset) == expected
            assert walk(log, max_bytes, max_offset) == expected  # now every start is remembered
    region = log.read(40, 900)
    log.truncate_to(region.next_offset - 1)  # removes the batch the remembered start points at
    log.append_as_leader(make_batch([b"after truncation"] * 3), 2)
    log.flush()
    assert walk(log, 900, None) == walk(fresh(), 900, None)


def test_fast_and_general_append_paths_reject_the_same_batches(tmp_path: Path) -> None:
    """One produced batch takes the fast path, two take the general one: same validation."""
    from broker.store.batch import MAGIC_OFFSET

    good = make_batch([b"ok"])
    log = Log.open(tmp_path / "t-0", LogConfig())
    bad_offset = bytearray(make_batch([b"x"]))
    bad_offset[0:8] = (-5).to_bytes(8, "big", signed=True)  # outside the CRC: only checks see it
    bad_magic = bytearray(make_batch([b"x"]))
    bad_magic[MAGIC_OFFSET] = 1
    bad_crc = bytearray(make_batch([b"x"]))
    bad_crc[-1] ^= 1
    for bad in (bytes(bad_offset), bytes(bad_magic), bytes(bad_crc)):
        for records in (bad, bad + good):
            with pytest.raises(StoreError):
                log.append_as_leader(records, 1)
    assert log.log_end_offset == 0
    assert log.append_as_leader(good, 1) == (0, 0)
    log.close()
