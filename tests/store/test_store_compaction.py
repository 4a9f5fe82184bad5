"""Compaction: Kafka's four log-compaction guarantees, lag settings, dirty-ratio choice, tombstone
retention, codecs, and crash-safety of the segment swap (a crash at every step)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_testlib import make_batch, read_all

from broker.store import codec
from broker.store.batch import Record, decode_records, iter_headers
from broker.store.cleaner import LogCleaner, OffsetMap, cleanable_range
from broker.store.config import LogConfig
from broker.store.errors import InvalidRecordError
from broker.store.fs import SimFS, SimulatedCrash
from broker.store.log import Log

DIR = Path("/data/compacted-0")


def compact_config(**changes: object) -> LogConfig:
    base = LogConfig(
        cleanup_policy="compact",
        segment_bytes=400,
        index_interval_bytes=64,
        min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=1_000,
    )
    return base.with_changes(**changes)


def records_of(log: Log) -> list[Record]:
    data = read_all(log)
    out: list[Record] = []
    for pos, h in iter_headers(data):
        out.extend(decode_records(data[pos : pos + h.size], h))
    return out


def kv(r: Record) -> tuple[int, bytes | None, bytes | None]:
    return r.offset, r.key, r.value


Op = tuple[bytes, bytes | None]  # (key, value or None for a tombstone)


def write(log: Log, ops: list[Op], now_ms: int, per_batch: int = 2, attributes: int = 0) -> None:
    for i in range(0, len(ops), per_batch):
        chunk = ops[i : i + per_batch]
        batch = make_batch(
            [v for _, v in chunk],  # type: ignore[misc]
            keys=[k for k, _ in chunk],
            timestamp=now_ms - 100,  # records are a little older than the cleaner's clock
            attributes=attributes,
        )
        log.append_as_leader(batch, 0, now_ms=now_ms)


def open_log(fs: SimFS, config: LogConfig) -> Log:
    return Log.open(DIR, config, fs)


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
        st.one_of(st.none(), st.binary(max_size=8)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(st.tuples(ops_strategy, st.integers(0, 3_000)), min_size=1, max_size=4),
    per_batch=st.integers(1, 4),
    head_ops=ops_strategy,
)
def test_four_compaction_guarantees(
    rounds: list[tuple[list[Op], int]], per_batch: int, head_ops: list[Op]
) -> None:
    fs = SimFS(1)
    config = compact_config()
    log = open_log(fs, config)
    cleaner = LogCleaner()
    now = 10_000
    written: list[Record] = []
    for ops, advance in rounds:
        write(log, ops, now, per_batch)
        log.roll(now)
        log.update_high_watermark(log.log_end_offset)
        before = records_of(log)
        cleaner.clean(log, now)
        after = records_of(log)
        # (2) order is kept and (3) offsets never change: `after` is a subsequence of `before`
        positions = {r.offset: r for r in before}
        assert [r.offset for r in after] == sorted(r.offset for r in after)
        assert all(kv(positions[r.offset]) == kv(r) for r in after)
        # (4) the final state of every key survives, and a delete marker first met by this
        # pass stays (its delete.retention.ms starts now)
        assert live_state(after) == live_state(before)
        assert set(latest_state(after)) <= set(latest_state(before))
        fresh_deletes = {k for k, v in latest_state(before).items() if v is None and (k, v) in ops}
        assert fresh_deletes <= {r.key for r in after if r.value is None}
        now += advance
    written = records_of(log)
    # (1) the head (not yet cleanable) is served complete with sequential offsets
    head_start = log.log_end_offset
    write(log, head_ops, now, per_batch)
    cleaner.clean(log, now)
    head = [r for r in records_of(log) if r.offset >= head_start]
    assert [r.offset for r in head] == list(range(head_start, log.log_end_offset))
    assert [(r.key, r.value) for r in head] == head_ops
    # (4) ... and delete markers are removed once their delete horizon has passed
    log.roll(now)
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean(log, now)
    later = now + config.delete_retention_ms + 1
    cleaner.clean(log, later)
    final = records_of(log)
    assert all(r.value is not None for r in final), "tombstones outlived delete.retention.ms"
    expected = {k: v for k, v in latest_state(written + head).items() if v is not None}
    assert {r.key: r.value for r in final} == expected
    assert log.log_end_offset == head_start + len(head_ops)


def live_state(records: list[Record]) -> dict[bytes | None, bytes | None]:
    return {k: v for k, v in latest_state(records).items() if v is not None}


def latest_state(records: list[Record]) -> dict[bytes | None, bytes | None]:
    state: dict[bytes | None, bytes | None] = {}
    for r in records:
        state[r.key] = r.value
    return state


def test_min_compaction_lag_protects_recent_segments() -> None:
    fs = SimFS(2)
    log = open_log(fs, compact_config(min_compaction_lag_ms=5_000))
    write(log, [(b"k", b"1"), (b"k", b"2")], now_ms=1_000)
    log.roll(1_000)
    write(log, [(b"k", b"3"), (b"k", b"4")], now_ms=4_000)
    log.roll(4_000)
    log.update_high_watermark(log.log_end_offset)
    r = cleanable_range(log, now_ms=6_500)  # first segment 5.5 s old, second 2.5 s
    assert r.first_uncleanable_offset == log.segments[1].base_offset
    LogCleaner().clean(log, 6_500)
    values = [x.value for x in records_of(log)]
    assert values == [b"2", b"3", b"4"]  # only the old segment was compacted


def test_high_watermark_bounds_cleaning() -> None:
    fs = SimFS(3)
    log = open_log(fs, compact_config())
    write(log, [(b"k", b"1"), (b"k", b"2")], now_ms=1_000)
    log.roll(1_000)
    log.update_high_watermark(0)
    assert cleanable_range(log, 2_000).first_uncleanable_offset == 0
    LogCleaner().clean(log, 2_000)
    assert [x.value for x in records_of(log)] == [b"1", b"2"]


def test_filthiest_log_first_and_max_lag() -> None:
    fs = SimFS(4)
    cleaner = LogCleaner()
    logs = []
    for name, dupes in (("low", 1), ("high", 6)):
        log = Log.open(Path(f"/data/{name}-0"), compact_config(min_cleanable_dirty_ratio=0.5), fs)
        ops = [(b"k%d" % i, b"v") for i in range(8)] + [(b"k0", b"w")] * dupes
        write(log, ops, now_ms=1_000)
        log.roll(1_000)
        log.update_high_watermark(log.log_end_offset)
        logs.append(log)
    cleaner.clean(logs[0], 1_000)  # low: everything clean now
    write(logs[0], [(b"k1", b"x")], now_ms=1_000)
    logs[0].roll(1_000)
    logs[0].update_high_watermark(logs[0].log_end_offset)
    low_ratio = cleanable_range(logs[0], 1_000).dirty_ratio
    assert 0 < low_ratio < 0.5
    assert cleaner.grab_filthiest(logs, 1_000) is logs[1]  # "high" has ratio 1.0
    cleaner.clean(logs[1], 1_000)
    assert cleaner.grab_filthiest(logs, 1_000) is None  # low is under min.cleanable.dirty.ratio
    lagged = [
        Log.open(Path("/data/lag-0"), compact_config(min_cleanable_dirty_ratio=0.9,
                                                     max_compaction_lag_ms=500), fs)
    ]
    write(lagged[0], [(b"a", b"1")], now_ms=1_000)
    lagged[0].roll(1_000)
    lagged[0].update_high_watermark(lagged[0].log_end_offset)
    cleaner.clean(lagged[0], 1_000)
    write(lagged[0], [(b"b", b"1")], now_ms=1_100)
    lagged[0].roll(1_100)
    lagged[0].update_high_watermark(lagged[0].log_end_offset)
    assert cleaner.grab_filthiest(lagged, 1_200) is None
    assert cleaner.grab_filthiest(lagged, 1_700) is lagged[0]  # past max.compaction.lag.ms


@pytest.mark.parametrize("codec_id", [codec.NONE, codec.GZIP, codec.SNAPPY, codec.LZ4, codec.ZSTD])
def test_compaction_keeps_codec_and_offsets(codec_id: int) -> None:
    fs = SimFS(5)
    log = open_log(fs, compact_config())
    ops: list[Op] = [(b"k%d" % (i % 3), b"value-%d" % i) for i in range(12)]
    write(log, ops, now_ms=1_000, per_batch=4, attributes=codec_id)
    log.roll(1_000)
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, 1_000)
    data = read_all(log)
    headers = [h for _, h in iter_headers(data)]
    assert all(h.compression == codec_id for h in headers)
    assert [(r.offset, r.value) for r in records_of(log)] == [
        (9, b"value-9"), (10, b"value-10"), (11, b"value-11")
    ]
    assert log.log_end_offset == 12


def test_compacted_topic_rejects_null_keys() -> None:
    log = open_log(SimFS(6), compact_config())
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append_as_leader(make_batch([b"v"]), 0)


def test_offset_map_bound_stops_at_segment_boundary() -> None:
    fs = SimFS(7)
    log = open_log(fs, compact_config(segment_bytes=200))
    for i in range(12):
        write(log, [(b"k%d" % i, b"v"), (b"k%d" % i, b"w")], now_ms=1_000)
    log.roll(1_000)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(offset_map_entries_max=2)
    end = cleaner.clean(log, 1_000)
    assert 0 < end < log.log_end_offset
    assert end in [s.base_offset for s in log.segments]
    for _ in range(20):
        if cleaner.clean(log, 1_000) >= log.active_segment.base_offset:
            break
    assert [r.value for r in records_of(log)] == [b"w"] * 12
    assert len(OffsetMap(3).map) == 0


def build_compactable(fs: SimFS) -> tuple[Log, list[Record]]:
    log = open_log(fs, compact_config(segment_bytes=300))
    ops: list[Op] = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(30)] + [(b"k1", None)]
    write(log, ops, now_ms=1_000, per_batch=3)
    log.roll(1_000)
    write(log, [(b"k2", b"head")], now_ms=1_000)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, records_of(log)


def test_crash_at_every_step_of_a_swap_leaves_old_or_new() -> None:
    reference_fs = SimFS(8)
    ref, old_records = build_compactable(reference_fs)
    LogCleaner().clean(ref, 2_000)
    new_records = records_of(ref)
    assert len(new_records) < len(old_records)
    outcomes = set()
    for step in range(400):
        fs = SimFS(8)
        log, before = build_compactable(fs)
        assert before == old_records
        bounds = [s.base_offset for s in log.segments] + [log.log_end_offset]
        fs.crash_after_ops = step
        try:
            LogCleaner().clean(log, 2_000)
        except SimulatedCrash:
            pass
        else:
            assert records_of(log) == new_records
            break
        finally:
            fs.crash_after_ops = None
        log.abandon()
        fs.crash(lose_unsynced=True, torn=step % 2 == 1)
        reopened = Log.open(DIR, compact_config(segment_bytes=300), fs)
        got = records_of(reopened)
        # segment by original segment range: either the old records or the cleaned ones
        for lo, hi in itertools.pairwise(bounds):
            part = [kv(r) for r in got if lo <= r.offset < hi]
            old = [kv(r) for r in old_records if lo <= r.offset < hi]
            new = [kv(r) for r in new_records if lo <= r.offset < hi]
            assert part in (old, new), (step, lo, hi)
            outcomes.add(part == new and part != old)
        assert reopened.log_end_offset == ref.log_end_offset
        assert not [n for n in fs.listdir(DIR) if n.endswith((".cleaned", ".swap", ".swap-end"))]
    else:
        raise AssertionError("cleaning never completed")
    assert outcomes == {True, False}  # crashes landed both before and after a commit
