"""The log cleaner: compaction for cleanup.policy=compact (Kafka's LogCleaner).

A pass over one log:

1. The cleanable range: [first_dirty_offset, first_uncleanable_offset) where the upper bound is
   the least of the active segment's base offset, the base offset of the segment holding the high
   watermark, and the base offset of the first dirty segment still within min.compaction.lag.ms.
   Records at or above it are never touched.
2. The offset map: key hash (MD5, as Kafka) -> last offset of that key in the dirty range; bounded
   (`offset_map_entries_max`); when full, the range stops at a segment boundary.
3. Every segment below the range end is recopied, in groups whose total size fits in
   segment.bytes: a record survives unless a later offset for its key is in the map; tombstones
   (null value) survive until their batch's delete horizon (KIP-534: stamped as
   now + delete.retention.ms the first time the cleaner keeps them) has passed. Batches keep
   their base offset and last offset delta, so offsets never change and order is preserved;
   intact batches are copied byte for byte.
4. Swap, crash-safely: the group is written to `<base>.log.cleaned` (+ indexes) and fsynced; the
   end offset of the replaced range is written to `<base>.swap-end`; the rename to
   `<base>.log.swap` is the commit point; then the old segments are removed and the swap file
   renamed into place. Recovery on open completes a committed swap and discards an uncommitted
   one, so a crash at any step leaves either the old segments or the new one, never neither.

`now_ms` is always passed in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.store.batch import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    parse_header,
)
from broker.store.errors import StoreError
from broker.store.fs import write_atomic
from broker.store.log import SWAP_END_SUFFIX, Log, replace_swapped
from broker.store.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_stem,
)

OFFSET_MAP_ENTRIES_MAX = 1_000_000


@dataclass
class CleanerStats:
    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_copied_verbatim: int = 0
    batches_rewritten: int = 0


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool  # max.compaction.lag.ms exceeded

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


class OffsetMap:
    """Key hash -> latest offset, bounded."""

    def __init__(self, entries_max: int = OFFSET_MAP_ENTRIES_MAX):
        self.entries_max = entries_max
        self.map: dict[bytes, int] = {}

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def full(self) -> bool:
        return len(self.map) >= self.entries_max

    def put(self, key: bytes, offset: int) -> None:
        self.map[self.digest(key)] = offset

    def get(self, key: bytes) -> int | None:
        return self.map.get(self.digest(key))


def cleanable_range(log: Log, now_ms: int) -> CleanableRange:
    cfg = log.config
    first_dirty = min(max(log.first_dirty_offset, log.log_start_offset), log.log_end_offset)
    end = min(log.active_segment.base_offset, log.high_watermark)
    for seg in log.segments[:-1]:
        if seg.next_offset <= first_dirty or seg.size == 0:
            continue
        if now_ms - seg.max_timestamp < cfg.min_compaction_lag_ms:
            end = min(end, seg.base_offset)
            break
    for seg in log.segments[:-1]:
        if seg.base_offset < end < seg.next_offset:
            end = seg.base_offset  # never clean the segment holding the high watermark
            break
    end = max(end, first_dirty)
    clean = dirty = 0
    must_clean = False
    for seg in log.segments[:-1]:
        if seg.next_offset <= first_dirty:
            clean += seg.size
        elif seg.base_offset < end:
            dirty += seg.size
            first_ts = seg.rolling_base_ms if seg.rolling_base_ms is not None else seg.created_ms
            if now_ms - first_ts > cfg.max_compaction_lag_ms:
                must_clean = True
    return CleanableRange(first_dirty, end, clean, dirty, must_clean)


class LogCleaner:
    def __init__(self, offset_map_entries_max: int = OFFSET_MAP_ENTRIES_MAX):
        self.offset_map_entries_max = offset_map_entries_max
        self.stats = CleanerStats()

    # ------------------------------------------------------------------ choosing a log

    def grab_filthiest(self, logs: Iterable[Log], now_ms: int) -> Log | None:
        """The compacted log most in need of cleaning: one past max.compaction.lag.ms, else the
        highest dirty ratio at or above min.cleanable.dirty.ratio, else one whose tombstones'
        delete horizon has passed."""
        best: tuple[int, float, Log] | None = None
        for log in logs:
            if log.closed or not log.config.compact:
                continue
            r = cleanable_range(log, now_ms)
            has_dirty = r.first_uncleanable_offset > r.first_dirty_offset
            horizon = log.next_delete_horizon_ms
            if r.must_clean and has_dirty:
                rank = (2, r.dirty_ratio)
            elif has_dirty and r.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
                rank = (1, r.dirty_ratio)
            elif horizon is not None and horizon <= now_ms:
                rank = (0, 0.0)
            else:
                continue
            if best is None or rank > best[:2]:
                best = (rank[0], rank[1], log)
        return best[2] if best else None

    def clean_filthiest(self, logs: Iterable[Log], now_ms: int) -> Log | None:
        log = self.grab_filthiest(logs, now_ms)
        if log is not None:
            self.clean(log, now_ms)
        return log

    # ------------------------------------------------------------------ one pass

    def clean(self, log: Log, now_ms: int) -> int:
        """Compact `log` once. Returns the new first dirty offset."""
        r = cleanable_range(log, now_ms)
        start, end = r.first_dirty_offset, r.first_uncleanable_offset
        offset_map, end = self._build_offset_map(log, start, end)
        to_clean = [s for s in log.segments[:-1] if s.base_offset < end]
        horizons: list[int] = []
        for group in group_segments(to_clean, log.config.segment_bytes):
            self._clean_group(log, group, offset_map, now_ms, horizons)
        log.first_dirty_offset = max(end, log.first_dirty_offset)
        log.next_delete_horizon_ms = min(horizons) if horizons else None
        return log.first_dirty_offset

    def _build_offset_map(self, log: Log, start: int, end: int) -> tuple[OffsetMap, int]:
        offset_map = OffsetMap(self.offset_map_entries_max)
        for seg in log.segments[:-1]:
            if seg.next_offset <= start or seg.base_offset >= end:
                continue
            if offset_map.full:
                return offset_map, max(start, seg.base_offset)
            for _, header, data in seg.batches():
                if header.is_control or header.last_offset < start or header.base_offset >= end:
                    continue
                for record in decode_records(data, header):
                    if record.key is not None and start <= record.offset < end:
                        offset_map.put(record.key, record.offset)
        return offset_map, end

    def _clean_group(
        self,
        log: Log,
        group: Sequence[LogSegment],
        offset_map: OffsetMap,
        now_ms: int,
        horizons: list[int],
    ) -> None:
        fs, d = log.fs, log.dir
        base = group[0].base_offset
        stem = file_stem(base)
        cleaned = LogSegment(
            fs, d, base, log.config, created_ms=group[0].created_ms, suffix=CLEANED_SUFFIX
        )
        if cleaned.size:
            cleaned.file.truncate(0)
            cleaned.size = 0
        new_horizon = now_ms + log.config.delete_retention_ms
        for seg in group:
            self.stats.segments_cleaned += 1
            for _, header, data in seg.batches():
                self.stats.bytes_read += header.size
                out = self._filter_batch(header, data, offset_map, now_ms, new_horizon, horizons)
                if out is not None:
                    h = parse_header(out)
                    cleaned.append([h], [out], len(out))
                    self.stats.bytes_written += len(out)
        cleaned.flush()
        end = group[-1].next_offset
        following = [s for s in log.segments if s.base_offset > group[-1].base_offset]
        if following:
            end = following[0].base_offset
        cleaned.close()
        # commit: the swap-end record, then the rename to .log.swap
        write_atomic(fs, d / (stem + SWAP_END_SUFFIX), f"{end}\n".encode())
        fs.rename(d / (stem + LOG_SUFFIX + CLEANED_SUFFIX), d / (stem + LOG_SUFFIX + SWAP_SUFFIX))
        fs.fsync_dir(d)
        for seg in group:
            seg.close_handle_only()
        replace_swapped(fs, d, base, end)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            fs.rename(d / (stem + suffix + CLEANED_SUFFIX), d / (stem + suffix))
        fs.fsync_dir(d)
        new = LogSegment(fs, d, base, log.config, created_ms=group[0].created_ms)
        new.load()
        new.durable_size = new.size
        log.replace_segments(group, new)

    def _filter_batch(
        self,
        header: BatchHeader,
        data: bytes,
        offset_map: OffsetMap,
        now_ms: int,
        new_horizon: int,
        horizons: list[int],
    ) -> bytes | None:
        if header.is_control:
            self.stats.batches_copied_verbatim += 1
            return data
        records = decode_records(data, header)
        self.stats.records_read += len(records)
        horizon = header.delete_horizon_ms
        kept: list[Record] = []
        has_tombstone = False
        for r in records:
            if r.key is not None:
                latest = offset_map.get(r.key)
                if latest is not None and latest > r.offset:
                    continue
            if r.value is None:
                if horizon is not None and horizon <= now_ms:
                    self.stats.tombstones_removed += 1
                    continue
                has_tombstone = True
            kept.append(r)
        self.stats.records_removed += len(records) - len(kept)
        if not kept:
            return None
        set_horizon = has_tombstone and horizon is None
        if has_tombstone:
            horizons.append(new_horizon if set_horizon else horizon or new_horizon)
        if len(kept) == len(records) and not set_horizon:
            self.stats.batches_copied_verbatim += 1
            return data
        self.stats.batches_rewritten += 1
        attributes = header.attributes
        base_timestamp = None if horizon is None else horizon
        if set_horizon:
            attributes |= ATTR_DELETE_HORIZON
            base_timestamp = new_horizon
        return build_batch(
            kept,
            base_offset=header.base_offset,
            last_offset_delta=header.last_offset_delta,
            partition_leader_epoch=header.partition_leader_epoch,
            attributes=attributes,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            base_timestamp=base_timestamp,
            max_timestamp=header.max_timestamp if header.is_log_append_time else None,
        )


def group_segments(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose combined size fits in one segment (Kafka's
    groupSegmentsBySize); offsets in a group span less than 2^31."""
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = 0
    for seg in segments:
        fits = size + seg.size <= max_bytes and (
            not current or seg.next_offset - current[0].base_offset < 2**31 - 1
        )
        if current and not fits:
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    for group in groups:
        if any(s.closed for s in group):
            raise StoreError("cannot clean a closed segment")
    return groups
