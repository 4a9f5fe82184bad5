"""The real store on the simulated file system against a simple model (Hypothesis stateful).

After any crash the log is a prefix of what was appended and holds at least what was fsynced;
every read is CRC-checked and equal, byte for byte, to what the model says was stored."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from store_testlib import as_stored, make_batch, read_all

from broker.store.batch import Record, decode_records, iter_headers
from broker.store.cleaner import LogCleaner, cleanable_range
from broker.store.config import LogConfig
from broker.store.errors import OffsetOutOfRangeError
from broker.store.fs import SimFS
from broker.store.log import Log

DIR = Path("/data/topic-0")


def records_in(batches: list[tuple[int, int, bytes]]) -> list[Record]:
    out: list[Record] = []
    for _, _, raw in batches:
        for pos, h in iter_headers(raw):
            out.extend(decode_records(raw[pos : pos + h.size], h))
    return out


def included_end(got: bytes) -> int:
    """The offset after the last batch of `got`."""
    last = 0
    for _, h in iter_headers(got):
        last = h.next_offset
    return last


def live(records: list[Record]) -> dict[bytes | None, bytes]:
    state: dict[bytes | None, bytes | None] = {}
    for r in records:
        state[r.key] = r.value
    return {k: v for k, v in state.items() if v is not None}


class SegmentLogMachine(RuleBasedStateMachine):
    """Model: the list of stored batches (exact bytes) plus the durable offset."""

    @initialize(
        seed=st.integers(0, 2**16),
        segment_bytes=st.integers(200, 1500),
        index_interval_bytes=st.integers(0, 300),
    )
    def setup(self, seed: int, segment_bytes: int, index_interval_bytes: int) -> None:
        self.fs = SimFS(seed)
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            retention_bytes=-1,
            retention_ms=-1,
            cleanup_policy="compact,delete",
            min_cleanable_dirty_ratio=0.0,
            delete_retention_ms=500,
        )
        self.log = Log.open(DIR, self.config, self.fs)
        self.batches: list[tuple[int, int, bytes]] = []  # (base, next, stored bytes)
        self.durable = 0  # offsets below this were fsynced
        self.rp_checkpoint = 0  # as the log manager would have checkpointed it
        self.epoch = 0
        self.counter = 0
        self.now_ms = 10_000
        self.model_leo = 0
        self.log.on_truncation = self._checkpoint_after_truncation

    def _checkpoint_after_truncation(self, log: Log) -> None:
        self.rp_checkpoint = min(self.rp_checkpoint, log.recovery_point)

    @property
    def leo(self) -> int:
        return self.model_leo

    @property
    def log_start(self) -> int:
        return self.log.log_start_offset

    def _values(self, n: int, size: int) -> list[bytes]:
        self.counter += 1
        return [b"%d.%d:" % (self.counter, i) + b"x" * size for i in range(n)]

    def _keys(self, n: int) -> list[bytes | None]:
        return [b"k%d" % ((self.counter * 7 + i) % 5) for i in range(n)]

    @rule(n=st.integers(1, 5), size=st.integers(0, 120), tombstone=st.booleans())
    def append_as_leader(self, n: int, size: int, tombstone: bool) -> None:
        values: list[bytes | None] = list(self._values(n, size))
        if tombstone:
            values[-1] = None
        produced = make_batch(values, keys=self._keys(n), timestamp=self.now_ms)
        first, last = self.log.append_as_leader(produced, self.epoch, now_ms=self.now_ms)
        assert first == self.leo and last == first + n - 1
        self.batches.append((first, last + 1, as_stored(produced, first, self.epoch)))
        self.model_leo = last + 1
        self.now_ms += 7

    @rule(n=st.integers(1, 4), size=st.integers(0, 60), count=st.integers(1, 3))
    def append_as_follower(self, n: int, size: int, count: int) -> None:
        blob = []
        base = self.leo
        new = []
        for _ in range(count):
            values: list[bytes | None] = list(self._values(n, size))
            b = make_batch(values, keys=self._keys(n), base_offset=base, epoch=self.epoch)
            new.append((base, base + n, b))
            blob.append(b)
            base += n
        first, last = self.log.append_as_follower(b"".join(blob))
        assert (first, last) == (new[0][0], new[-1][1] - 1)
        self.batches.extend(new)
        self.model_leo = new[-1][1]

    @rule()
    def bump_epoch(self) -> None:
        self.epoch += 1

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now_ms)
        self.durable = max(self.durable, self.log.recovery_point)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.durable = self.leo

    @rule()
    def checkpoint_recovery_point(self) -> None:
        self.rp_checkpoint = self.log.recovery_point

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log.segments[0].base_offset, self.leo + 2))
        removed = self.log.truncate_to(target)
        gone = [b for b in self.batches if b[1] > target]
        assert removed == bool(gone)
        if gone:
            self.model_leo = gone[0][0]
        self.batches = [b for b in self.batches if b[1] <= target]
        self.durable = min(self.durable, self.leo)
        assert self.log.log_end_offset == self.leo

    @precondition(lambda self: self.leo < 10**6)
    @rule(gap=st.integers(0, 5))
    def truncate_fully(self, gap: int) -> None:
        start = self.leo + gap
        self.log.truncate_fully_and_start_at(start)
        self.batches = []
        self.durable = start
        self.model_leo = start
        assert self.log.log_start_offset == self.log.log_end_offset == start

    @rule(retention_bytes=st.integers(0, 3000), hw_back=st.integers(0, 20))
    def retention(self, retention_bytes: int, hw_back: int) -> None:
        self.log.config = self.config.with_changes(retention_bytes=retention_bytes)
        for seg in self.log.segments:
            seg.config = self.log.config
        self.log.update_high_watermark(self.leo - hw_back)
        self.log.delete_old_segments(self.now_ms)
        self.log.config = self.config
        for seg in self.log.segments:
            seg.config = self.config
        start = self.log.log_start_offset
        assert start <= self.log.high_watermark
        self.batches = [b for b in self.batches if b[0] >= start]

    @rule(advance=st.integers(0, 1000), hw_back=st.integers(0, 10))
    def compact(self, advance: int, hw_back: int) -> None:
        self.now_ms += advance
        self.log.update_high_watermark(self.leo - hw_back)
        before = records_in(self.batches)
        cleanable_end = cleanable_range(self.log, self.now_ms).first_uncleanable_offset
        LogCleaner().clean(self.log, self.now_ms)
        stored = read_all(self.log)
        after = records_in([(0, 0, stored)])
        by_offset = {r.offset: r for r in before}
        assert [r.offset for r in after] == sorted({r.offset for r in after})
        assert all(by_offset[r.offset] == r or by_offset[r.offset].value == r.value for r in after)
        assert live(after) == live(before)
        assert [r for r in after if r.offset >= cleanable_end] == [
            r for r in before if r.offset >= cleanable_end
        ]
        self.batches = [(h.base_offset, h.next_offset, stored[p : p + h.size])
                        for p, h in iter_headers(stored)]
        assert self.log.log_end_offset == self.leo

    @rule(data=st.data(), max_bytes=st.integers(1, 2000))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        got = self.log.read_bytes(offset, max_bytes)
        region = self.log.read(offset, max_bytes)
        assert region.read_bytes() == got
        following = [i for i, b in enumerate(self.batches) if b[1] > offset]
        if offset == self.leo or not following:
            assert got == b""  # nothing at or after `offset` (the end, or compacted away)
            return
        start = following[0]
        expected = b""
        for _, _, raw in self.batches[start:]:
            if expected and len(expected) + len(raw) > max_bytes:
                break
            expected += raw
        assert expected.startswith(got) and got
        included = [b for b in self.batches[start:] if b[0] <= offset or b[0] < included_end(got)]
        following_base = [b[0] for b in self.batches if b[0] >= included[-1][1]]
        assert included[-1][1] <= region.next_offset <= (following_base or [self.leo])[0]
        assert len(got) <= max_bytes or len(list(iter_headers(got))) == 1

    @rule(data=st.data())
    def read_out_of_range(self, data: st.DataObject) -> None:
        below = self.log_start - 1
        offset = data.draw(st.sampled_from([self.leo + 1, self.leo + 100] + [below] * (below >= 0)))
        try:
            self.log.read(offset, 100)
        except OffsetOutOfRangeError as e:
            assert e.log_end_offset == self.leo
        else:
            raise AssertionError(f"read at {offset} should be out of range")

    @rule(lose_unsynced=st.booleans(), torn=st.booleans())
    def crash_and_reopen(self, lose_unsynced: bool, torn: bool) -> None:
        self.log.abandon()
        self.fs.crash(lose_unsynced=lose_unsynced, torn=torn)
        self.log = Log.open(DIR, self.config, self.fs, recovery_point=self.rp_checkpoint)
        self.log.on_truncation = self._checkpoint_after_truncation
        stored = read_all(self.log)
        start = self.log.log_start_offset
        model = [b for b in self.batches if b[0] >= start]
        expected = b"".join(raw for _, _, raw in model)
        # a prefix of what was appended ...
        assert expected.startswith(stored), "after a crash the log is not a prefix of the model"
        kept = []
        size = 0
        for b in model:
            if size + len(b[2]) > len(stored):
                break
            size += len(b[2])
            kept.append(b)
        assert size == len(stored)
        # ... holding at least what was fsynced
        leo = self.log.log_end_offset
        assert (kept[-1][1] if kept else start) <= leo <= self.leo
        assert leo >= min(self.durable, self.leo), (leo, self.durable)
        if not lose_unsynced:
            assert leo == self.leo
        self.batches = kept
        self.model_leo = leo
        self.durable = self.log.recovery_point
        self.rp_checkpoint = self.log.recovery_point

    @invariant()
    def log_matches_model(self) -> None:
        if not hasattr(self, "log"):
            return
        log = self.log
        assert log.log_end_offset == self.leo
        assert log.log_start_offset <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        assert read_all(log) == b"".join(raw for _, _, raw in self.batches)
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(set(bases))
        epochs = log.leader_epoch_cache.entries
        assert [e for e, _ in epochs] == sorted({e for e, _ in epochs})
        assert [o for _, o in epochs] == sorted({o for _, o in epochs})
        # An epoch may start at the log end (a leader elected at its LEO, or retention moving
        # the start up to it), as in Kafka's LeaderEpochFileCache.
        assert all(log.log_start_offset <= o <= log.log_end_offset for _, o in epochs)


TestSegmentLog = SegmentLogMachine.TestCase
TestSegmentLog.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class _Draws:
    """`st.data()` for a rule called by hand: the given values, in order."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def draw(self, strategy: object) -> int:
        return self.values.pop(0)


def test_a_torn_segment_after_a_compacted_one_keeps_the_log_end() -> None:
    """Found by the machine above (2026-11-27): offset 0 alone in the first segment, offsets
    1-4 in the second, a roll, a compaction that removes offset 0's record (the first segment
    is now empty, its base 0), a truncation to offset 1 (the log end stays 1), an append of
    offset 1 that a crash tears. Recovery emptied the second segment and deleted it, so the
    log ended at the first, empty segment: offset 0, below the durable end 1, and the next
    append would have reused offset 0. A segment that recovery empties now stays when the
    segments before it end below its base offset (as Kafka keeps a truncated segment)."""
    m = SegmentLogMachine()
    m.setup(seed=0, segment_bytes=200, index_interval_bytes=0)
    m.append_as_follower(n=1, size=0, count=1)
    m.append_as_follower(n=2, size=0, count=2)
    m.roll()
    m.compact(advance=0, hw_back=0)
    assert m.log.segments[0].size == 0  # the compaction emptied the first segment
    m.truncate_to(_Draws(0))  # type: ignore[arg-type]
    m.append_as_follower(n=1, size=0, count=1)
    m.crash_and_reopen(lose_unsynced=True, torn=True)  # asserts the log end >= durable
    assert m.log.log_end_offset == 1
    assert [(s.base_offset, s.size) for s in m.log.segments] == [(0, 0), (1, 0)]
    m.log_matches_model()
