"""`Log`: one partition's log, a directory `<topic>-<partition>/` of segments.

Vocabulary (Kafka's): `log_start_offset` (first offset readable), `log_end_offset` (next offset to
be written), `high_watermark` (set by the replication layer), `recovery_point` (everything below it
is durable: also `flushed_offset`), `leader_epoch_cache` (epoch -> start offset).

Time is an input: methods that need the clock take `now_ms`. Nothing here reads a clock.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from broker.store import codec
from broker.store.batch import (
    ATTR_CODEC_MASK,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    check_crc,
    crc32c,
    decode_records,
    iter_headers,
    parse_header,
    validate_batch,
    validate_produced,
)
from broker.store.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from broker.store.config import LogConfig
from broker.store.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogClosedError,
    NonContiguousOffsetError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StoreError,
)
from broker.store.fs import FS, Buf, FileHandle, RealFS, read_exact, read_whole
from broker.store.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_stem,
    parse_stem,
)

PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: the patched part
PREFIX_END = 16  # the magic byte (offset 16) onwards is written verbatim
_pack_prefix = PREFIX.pack
INT32_MAX = 2**31 - 1
_unpack_header = HEADER.unpack_from
# A deleted segment's file stays readable for sendfiles in flight (a fetch response is sent
# after the read that chose the region, by descriptor number) while it is one of the last
# RETIRED_OPEN_MAX deleted; older ones are released (`FileHandle.release`: the blocks are
# freed, the number stays reserved and reads an early end) and closed beyond
# RETIRED_HANDLES_MAX. Keeping 64 open pinned 64 segments' blocks per log on disk: the soak
# filled 16 GiB in under a minute with retention at 256 MB a partition (bench/README.md).
RETIRED_OPEN_MAX = 2
RETIRED_HANDLES_MAX = 64
SWAP_END_SUFFIX = ".swap-end"
TEMP_SUFFIXES = (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    ".tmp",
    INDEX_SUFFIX + SWAP_SUFFIX,
    TIME_INDEX_SUFFIX + SWAP_SUFFIX,
)


def rescan_start(bases: Sequence[int], recovery_point: int) -> int:
    """The index, in `bases` (a log's segment base offsets, ascending), of the first segment
    a restart rescans batch by batch, CRCs included: the first that holds offsets at or past
    the recovery point (the last one always; Kafka's `LogLoader.recoverLog`). The segments
    before it are flushed and only their batch headers are walked."""
    for i in range(len(bases) - 1):
        if bases[i + 1] > recovery_point:
            return i
    return max(len(bases) - 1, 0)


def segment_bases(fs: FS, d: Path) -> list[int]:
    """The base offsets of the segment files (`.log`) in a partition directory, ascending."""
    return sorted(b for name in fs.listdir(d)
                  if name.endswith(LOG_SUFFIX) and (b := parse_stem(name)) is not None)


def parse_topic_partition(name: str) -> tuple[str, int]:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise StoreError(f"log directory name {name!r} is not <topic>-<partition>")
    return topic, int(partition)


@dataclass(frozen=True, slots=True)
class FileRegion:
    """A byte range of one segment file, whole batches only, ready for os.sendfile."""

    path: Path
    handle: FileHandle
    position: int
    length: int
    next_offset: int  # where the next read should start (the requested offset if empty)

    @property
    def fd(self) -> int | None:
        return self.handle.fileno()

    def read_bytes(self) -> bytes:
        data = read_exact(self.handle, self.position, self.length)
        if len(data) != self.length:
            raise CorruptRecordError(
                f"{self.path}: short read of {len(data)}/{self.length} bytes at {self.position}"
            )
        return data

    def sendfile(self, out_fd: int) -> int:
        """Send the region to a socket/file descriptor (real files only). Returns bytes sent."""
        fd = self.fd
        if fd is None:
            data = self.read_bytes()
            return os.write(out_fd, data) if data else 0
        sent = 0
        while sent < self.length:
            n = os.sendfile(out_fd, fd, self.position + sent, self.length - sent)
            if n == 0:
                break
            sent += n
        return sent


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    bytes: int
    batches: int


class Log:
    """A partition log. Open with `Log.open(dir, config, fs=...)`."""

    def __init__(self, directory: Path, config: LogConfig, fs: FS):
        self.dir = directory
        self.config = config  # a property: caches the fields the append path reads
        self.fs = fs
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.leader_epoch_cache = LeaderEpochCache(fs, directory / LEADER_EPOCH_CHECKPOINT)
        self.recovery_report: list[str] = []
        self.unflushed_messages = 0
        self.last_flush_ms: int | None = None
        self.dir_dirty = False  # directory entries changed since the last dir fsync
        self.closed = False
        self.first_dirty_offset = 0  # the log cleaner's position (cleaner-offset-checkpoint)
        self.next_delete_horizon_ms: int | None = None  # earliest tombstone horizon (cleaner)
        self.on_truncation: Callable[[Log], None] | None = None  # checkpoints recovery points
        self._retired: deque[FileHandle] = deque()  # deleted, still readable
        self._released: deque[FileHandle] = deque()  # deleted, number reserved (reads /dev/null)
        # The live broker sets this (LogManager.defer_roll_flush): a roll then leaves the old
        # segment's fsync to a worker thread (`take_roll_flushes`) instead of the caller's.
        self.defer_roll_flush = False
        self.roll_flushes: list[RollFlush] = []
        self.truncations = 0  # a deferred flush applies only if none happened since

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._compact = config.compact
        self._max_message_bytes = config.max_message_bytes
        self._flush_messages = config.flush_messages

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig | None = None,
        fs: FS | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        now_ms: int = 0,
    ) -> Log:
        """Open (creating if needed) and recover a log directory.

        Segments at or after `recovery_point` are rescanned: every batch is validated and a
        torn or corrupt tail is truncated; indexes missing or corrupt anywhere are rebuilt."""
        log = cls(directory, config or LogConfig(), fs or RealFS())
        log.fs.makedirs(directory)
        log._load(recovery_point, log_start_offset, now_ms)
        hw = log.log_start_offset if high_watermark is None else high_watermark
        if hw > log.log_end_offset >= recovery_point:  # (else reported with the recovery point)
            log.recovery_report.append(
                f"{log.active_segment.log_path}: the high watermark checkpoint says {hw} but the "
                f"log ends at {log.log_end_offset}: committed offsets {log.log_end_offset} to "
                f"{hw - 1} are not on this broker (unflushed when it crashed, or damaged); a "
                f"follower fetches them again from the leader"
            )
        log.high_watermark = min(max(hw, log.log_start_offset), log.log_end_offset)
        log.last_flush_ms = now_ms
        return log

    def _load(self, recovery_point: int, log_start_offset: int, now_ms: int) -> None:
        fs, d = self.fs, self.dir
        self._remove_temp_files()
        self._complete_swaps()
        bases = segment_bases(fs, d)
        for name in fs.listdir(d):
            base = parse_stem(name)
            if base is not None and base not in bases and not name.endswith(SWAP_END_SUFFIX):
                fs.remove(d / name)  # an index without its log: deleting indexes is safe
                if not bases or base > bases[-1]:  # below: retention was deleting it
                    self.recovery_report.append(
                        f"{file_stem(base)}{LOG_SUFFIX} is missing but its {name} is not: "
                        f"offsets from {base} are lost; the index was deleted"
                    )
        recovered = False
        expected = 0
        rescan = rescan_start(bases, recovery_point)
        for i, base in enumerate(bases):
            if self.segments and base > expected and not self.config.compact:
                # A hole: a segment before this one is missing or lost its tail. Serving the
                # hole would let replicas diverge silently (Kafka serves it); truncating here
                # lets a follower fetch everything from `expected` again.
                for later in bases[i:]:
                    self._delete_segment_files(later)
                prev = self.segments[-1]
                self.recovery_report.append(
                    f"{prev.log_path}: ends at offset {expected} but the next segment starts at "
                    f"{base}: offsets {expected} to {base - 1} are missing (lost tail or missing "
                    f"segment file): the log is truncated at offset {expected} (deleted "
                    f"{len(bases) - i} segments from {file_stem(base)}); a follower fetches "
                    f"them again from the leader"
                )
                break
            seg = LogSegment(fs, d, base, self.config, created_ms=now_ms)
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            needs_recovery = recovered or i >= rescan
            if not needs_recovery:
                seg.durable_size = seg.size
                try:
                    seg.load()
                    if seg.rebuilt_index_reason:
                        self.recovery_report.append(f"rebuilt index: {seg.rebuilt_index_reason}")
                    claims = seg.index_claims
                    if (
                        claims is not None
                        and seg.next_offset <= claims[0] < (next_base or 2**63)
                        and claims[1] < self.config.segment_bytes
                    ):  # a plausible entry, not garbage: the segment lost its end
                        self.recovery_report.append(
                            f"{seg.log_path}: shorter than its index, which names offset "
                            f"{claims[0]} at position {claims[1]} (the file has {seg.size} "
                            f"bytes): records from offset {seg.next_offset} to at least "
                            f"{claims[0]} are lost"
                        )
                except CorruptRecordError as e:
                    self.recovery_report.append(f"segment below the recovery point is bad: {e}")
                    needs_recovery = True
            bad_tail = False
            if needs_recovery:
                before = seg.size
                truncated = seg.recover(expected)
                recovered = True
                if truncated:
                    bad_tail = True
                    self.recovery_report.append(
                        f"{seg.log_path.name}: truncated {truncated} of {before} bytes at "
                        f"position {seg.size} (torn or corrupt tail)"
                    )
            # A segment that recovery emptied goes, unless the segments before it end below
            # its base offset (compaction removed their last records): the log end would move
            # back below offsets already given out, so the next append would reuse them (as
            # Kafka, which keeps a truncated segment; tests/store/test_store_stateful.py).
            if (bad_tail and seg.size == 0 and self.segments
                    and self.segments[-1].next_offset >= base):
                seg.close()
                self._delete_segment_files(base)
            else:
                self._add_segment(seg)
                expected = seg.next_offset
            if bad_tail:
                for later in bases[i + 1 :]:
                    self._delete_segment_files(later)
                    self.recovery_report.append(f"deleted segment {file_stem(later)} after it")
                break
        if not self.segments:
            start = max(log_start_offset, 0)
            self._add_segment(self._new_segment(start, now_ms))
            self.dir_dirty = True
        first_base = self.segments[0].base_offset
        epochs = self.leader_epoch_cache.entries
        if epochs and max(epochs[0][1], log_start_offset) < first_base:
            # Retention updates the epoch cache and the log start when it deletes segments, so
            # offsets both still name below the first segment were in segments now missing.
            lost = max(epochs[0][1], log_start_offset)
            self.recovery_report.append(
                f"{d / (file_stem(lost) + LOG_SUFFIX)}: missing: offsets {lost} to "
                f"{first_base - 1} are lost; the log starts at {first_base} (a follower's "
                f"log start follows the leader's)"
            )
        self.log_start_offset = max(log_start_offset, first_base)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.first_dirty_offset = self.log_start_offset
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._check_epoch_cache()
        if recovery_point > self.log_end_offset:
            self.recovery_report.append(
                f"{self.active_segment.log_path}: the log ends at offset {self.log_end_offset} "
                f"but offsets up to the recovery point {recovery_point} were flushed: offsets "
                f"{self.log_end_offset} to {recovery_point - 1} are lost"
            )
        self.recovery_point = min(recovery_point, self.log_end_offset)
        if recovered or self.dir_dirty:
            self.dir_dirty = True  # after a crash, which directory entries are durable is unknown
            self.flush()

    def _batch_at(self, offset: int) -> BatchHeader | None:
        seg = self.segments[max(0, bisect_right(self._bases, offset) - 1)]
        found = seg.translate_offset(offset)
        return None if found is None else found[1]

    def _epoch_cache_problem(self) -> str | None:
        """Why the leader-epoch cache disagrees with the batches, or None. Cheap: one header
        read per epoch. Kafka trusts the file; a cache from another partition or a damaged one
        would answer OffsetsForLeaderEpoch wrongly and make a follower truncate wrongly."""
        cache = self.leader_epoch_cache
        if cache.load_error is not None:
            return cache.load_error
        entries = cache.entries
        for (e1, o1), (e2, o2) in pairwise(entries):
            if e2 <= e1 or o2 <= o1:
                return f"{cache.path}: epochs or offsets do not ascend ({e1} {o1}, {e2} {o2})"
        leo = self.log_end_offset
        if leo <= self.log_start_offset:
            return None
        try:
            last = self._batch_at(leo - 1)
            if last is not None and last.partition_leader_epoch >= 0 and (
                not entries or entries[-1][0] != last.partition_leader_epoch
            ):
                latest = entries[-1][0] if entries else None
                return (
                    f"{cache.path}: latest epoch {latest}, but the last batch has epoch "
                    f"{last.partition_leader_epoch}"
                )
            if self.config.compact:
                return None  # the cleaner removes batches: an epoch's first may be gone
            for epoch, offset in entries:
                if offset >= leo or offset < self.log_start_offset:
                    continue
                h = self._batch_at(offset)
                if h is None or h.partition_leader_epoch != epoch or (
                    h.base_offset != offset and offset != self.log_start_offset
                ):
                    return f"{cache.path}: no batch of epoch {epoch} starts at offset {offset}"
        except StoreError:
            return None  # a corrupt batch: reads report it; the cache cannot be checked
        return None

    def _check_epoch_cache(self) -> None:
        problem = self._epoch_cache_problem()
        if problem is None:
            return
        entries: list[tuple[int, int]] = []
        try:
            for seg in self.segments:
                for _, h in seg.headers_from(0):
                    epoch = h.partition_leader_epoch
                    if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                        entries.append((epoch, max(h.base_offset, self.log_start_offset)))
        except StoreError:
            return  # a corrupt header: reads report it
        self.leader_epoch_cache.replace(entries)
        self.leader_epoch_cache.load_error = None
        self.recovery_report.append(
            f"{problem}: rebuilt from the batches' leader epochs ({len(entries)} epochs); "
            f"nothing is lost"
        )

    def _remove_temp_files(self) -> None:
        for name in self.fs.listdir(self.dir):
            if name.endswith(TEMP_SUFFIXES):
                self.fs.remove(self.dir / name)
                self.dir_dirty = True

    def _complete_swaps(self) -> None:
        """Finish a compaction swap interrupted by a crash (see `cleaner`): a `.log.swap` is
        complete by construction; the `.swap-end` file says which old segments it replaces."""
        fs, d = self.fs, self.dir
        for name in fs.listdir(d):
            if name.endswith(SWAP_END_SUFFIX) and not fs.exists(
                d / name.replace(SWAP_END_SUFFIX, LOG_SUFFIX + SWAP_SUFFIX)
            ):
                fs.remove(d / name)
        for name in fs.listdir(d):
            if not name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                continue
            base = parse_stem(name)
            end_path = d / (file_stem(base or 0) + SWAP_END_SUFFIX)
            if base is None or not fs.exists(end_path):
                raise StoreError(f"{d / name}: swap file without its {SWAP_END_SUFFIX} record")
            end = int(read_whole(fs, end_path).decode().strip())
            replace_swapped(fs, d, base, end)
            self.recovery_report.append(f"completed compaction swap of {file_stem(base)}")

    def _delete_segment_files(self, base: int) -> None:
        stem = file_stem(base)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):  # see delete_files
            path = self.dir / (stem + suffix)
            if self.fs.exists(path):
                self.fs.remove(path)
        self.dir_dirty = True

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        stem = file_stem(base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = self.dir / (stem + suffix)
            if self.fs.exists(path):
                self.fs.remove(path)
        return LogSegment(self.fs, self.dir, base_offset, self.config, created_ms=now_ms)

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    # ------------------------------------------------------------------ properties

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this one is on stable storage."""
        return self.recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def durable_positions(self) -> dict[Path, int]:
        """For each segment file, how many of its bytes were fsynced: a nemesis may truncate the
        files to these sizes to simulate losing the page cache."""
        return {s.log_path: s.durable_size for s in self.segments}

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError(f"log {self.dir} is closed")

    # ------------------------------------------------------------------ append

    def append_as_leader(
        self, records: Buf, leader_epoch: int, *, now_ms: int | None = None
    ) -> tuple[int, int]:
        """Validate the produced batch(es), assign offsets from the log end offset and stamp
        `leader_epoch`; write the bytes verbatim otherwise. Returns (first, last) offset."""
        if self.closed:
            self._check_open()
        size = len(records)
        if size >= HEADER_SIZE and not self._compact:
            fields = _unpack_header(records)
            if fields[1] + LOG_OVERHEAD == size:  # one batch, as Produce v3+ always sends
                return self._append_one_produced(records, fields, size, leader_epoch, now_ms)
        headers = validate_produced(records, self.config.max_message_bytes)
        if self.config.compact:
            self._require_keys(records, headers)
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise StoreError(
                f"append with leader epoch {leader_epoch} below the log's latest epoch {latest}"
            )
        offset = first = self.log_end_offset
        mv = memoryview(records)
        pieces: list[Buf] = []
        assigned: list[BatchHeader] = []
        pos = 0
        for h in headers:
            pieces.append(PREFIX.pack(offset, h.batch_length, leader_epoch))
            pieces.append(mv[pos + PREFIX_END : pos + h.size])
            assigned.append(h._replace(base_offset=offset, partition_leader_epoch=leader_epoch))
            offset += h.last_offset_delta + 1
            pos += h.size
        self._append(assigned, pieces, pos, now_ms)
        return first, offset - 1

    def _append_one_produced(
        self,
        records: Buf,
        fields: tuple[int, ...],
        size: int,
        leader_epoch: int,
        now_ms: int | None,
    ) -> tuple[int, int]:
        """The hot path: one batch, checked field by field (the same checks `validate_produced`
        makes), CRC32C over what it covers, then one gathering write of the patched 16-byte
        prefix and the rest of the batch, uncopied."""
        base, length, _, magic, crc, attributes, delta, _, max_ts, _, _, _, count = fields
        mv = memoryview(records)
        if (
            magic != MAGIC_V2
            or base < 0
            or delta < 0
            or count != delta + 1
            or attributes & ATTR_CODEC_MASK > codec.ZSTD
            or size > self._max_message_bytes
            or crc32c(mv[CRC_START:]) != crc
        ):
            validate_produced(records, self._max_message_bytes)  # raises the precise error
            raise InvalidRecordError("batch rejected")  # unreachable: validate_produced raised
        cache = self.leader_epoch_cache
        epochs = cache.entries
        latest = epochs[-1][0] if epochs else None  # cache.latest_epoch, without the call
        if latest is not None and leader_epoch < latest:
            raise StoreError(
                f"append with leader epoch {leader_epoch} below the log's latest epoch {latest}"
            )
        seg = self.segments[-1]
        offset = seg.next_offset
        last = offset + delta
        if (  # the cheap test first (see LogSegment.should_roll)
            seg.fast_appends_left <= 0
            or seg.size + size > seg.segment_bytes
            or last - seg.base_offset > INT32_MAX
            or (now_ms is not None and now_ms > seg.roll_at_ms)
        ) and seg.should_roll(size, last, now_ms):
            seg = self.roll(now_ms if now_ms is not None else seg.created_ms)
        if leader_epoch != latest and leader_epoch >= 0:
            cache.assign(leader_epoch, offset)
        seg.append_one(last, max_ts, size, _pack_prefix(offset, length, leader_epoch), mv[16:])
        unflushed = self.unflushed_messages + count
        self.unflushed_messages = unflushed
        if unflushed >= self._flush_messages:
            self.flush()
        elif now_ms is not None:
            self.maybe_flush(now_ms)
        return offset, last

    def _require_keys(self, records: Buf, headers: Sequence[BatchHeader]) -> None:
        pos = 0
        for h in headers:
            if not h.is_control:
                for r in decode_records(memoryview(records)[pos : pos + h.size], h):
                    if r.key is None:
                        raise InvalidRecordError(
                            f"compacted topic {self.topic} cannot accept a record without a key "
                            f"(offset delta {r.offset - h.base_offset})"
                        )
            pos += h.size

    def append_as_follower(self, records: Buf, *, now_ms: int | None = None) -> tuple[int, int]:
        """Append replicated batches keeping their offsets and epochs. The first batch must start
        at the log end offset; offsets must ascend. A trailing partial batch (a fetch cut by
        max bytes) is ignored, as Kafka does. Returns (first, last) offset; last < first when no
        complete batch was given."""
        self._check_open()
        if not records:
            raise NonContiguousOffsetError("empty records in a follower append")
        headers: list[BatchHeader] = []
        expected = self.log_end_offset
        total = 0
        for pos, h in iter_headers(records, validate=True):
            if (not headers and h.base_offset != expected) or h.base_offset < expected:
                raise NonContiguousOffsetError(
                    f"follower batch at offset {h.base_offset} does not follow offset {expected} "
                    f"(log end offset {self.log_end_offset})"
                )
            if h.size > max(self.config.max_message_bytes, self.config.segment_bytes):
                raise RecordTooLargeError(f"replicated batch of {h.size} bytes is too large")
            headers.append(h)
            expected = h.next_offset
            total = pos + h.size
        if len(records) - total >= HEADER_SIZE:
            parse_header(records, total)  # a trailing partial batch is fine, a bad header is not
        if not headers:
            return self.log_end_offset, self.log_end_offset - 1
        if total != len(records):
            records = memoryview(records)[:total]
        self._append(headers, [records], total, now_ms)
        return headers[0].base_offset, headers[-1].last_offset

    def _append(
        self, headers: Sequence[BatchHeader], pieces: Sequence[Buf], nbytes: int, now_ms: int | None
    ) -> None:
        if self.active_segment.should_roll(nbytes, headers[-1].last_offset, now_ms):
            self.roll(now_ms if now_ms is not None else self.active_segment.created_ms)
        cache = self.leader_epoch_cache
        for h in headers:
            if h.partition_leader_epoch >= 0 and h.partition_leader_epoch != cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)
        self.active_segment.append(headers, pieces, nbytes)
        self.unflushed_messages += sum(h.records_count for h in headers)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        elif now_ms is not None:
            self.maybe_flush(now_ms)

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty).

        As Kafka does after a roll, the old segment is flushed, so every inactive segment is
        durable and the recovery point is at least the new segment's base offset."""
        self._check_open()
        active = self.active_segment
        if active.size == 0:
            return active
        if not (self.defer_roll_flush and self._defer_flush(active.next_offset)):
            for seg in self.segments:
                if seg.durable_size != seg.size or seg.next_offset > self.recovery_point:
                    seg.flush()
            if self.dir_dirty:
                self.fs.fsync_dir(self.dir)
            self.recovery_point = max(self.recovery_point, active.next_offset)
        seg = self._new_segment(self.log_end_offset, now_ms)
        self._add_segment(seg)
        self.dir_dirty = True
        return seg

    # Kafka's roll schedules the old segment's flush on the scheduler thread
    # (`flushUptoOffsetExclusive`) and moves the recovery point when it is done. Here the
    # fsync of a rolled 256 MiB to 1 GiB segment took 170-580 ms on the event loop, on all
    # three replicas of a partition at once, and every request those brokers held waited
    # (issue #12: produce p99 16 ms -> 790-870 ms at 72 MB/s in the points with a roll).
    # Deferred, the index entries are written at once (no fsync), the files' descriptors are
    # duplicated (a later close or retention does not pull them from under the thread), and
    # the recovery point moves only when the fsyncs are done and no truncation came between.

    def _defer_flush(self, upto: int) -> bool:
        """Prepare the roll's flush for a worker thread (False: this FS cannot, flush now)."""
        segs = [seg for seg in self.segments
                if seg.durable_size != seg.size or seg.next_offset > self.recovery_point]
        fds: list[int] = []
        try:
            for seg in segs:
                fd = seg.file.fileno()
                if fd is None:
                    raise _NoDescriptor
                fds.append(os.dup(fd))
                for index in (seg.index, seg.time_index):
                    index.write_pending()
                    fds.append(os.open(index.path, os.O_RDONLY))
        except BaseException as e:
            for fd in fds:
                os.close(fd)
            if isinstance(e, _NoDescriptor):
                return False
            raise
        self.roll_flushes.append(RollFlush(
            self, fds, self.dir if self.dir_dirty else None, upto, self.truncations,
            [(seg, seg.size) for seg in segs]))
        return True

    def take_roll_flushes(self) -> list[RollFlush]:
        out, self.roll_flushes = self.roll_flushes, []
        return out

    def roll_flushed(self, rf: RollFlush) -> None:
        """A deferred roll flush is on stable storage: the recovery point may move, unless
        the log was truncated (or closed) in the meantime."""
        if self.closed or rf.truncations != self.truncations:
            return
        for seg, size in rf.sizes:
            if not seg.closed and seg.size == size:
                seg.durable_size = max(seg.durable_size, size)
        self.recovery_point = max(self.recovery_point, min(rf.upto, self.log_end_offset))

    def maybe_roll(self, now_ms: int) -> bool:
        """Roll the active segment if segment.ms has passed (call periodically)."""
        if self.active_segment.should_roll(0, self.log_end_offset, now_ms):
            self.roll(now_ms)
            return True
        return False

    # ------------------------------------------------------------------ flush

    def flush(self, now_ms: int | None = None) -> None:
        """fsync every segment with unflushed bytes, their indexes and (if entries changed) the
        directory; then the recovery point is the log end offset."""
        self._check_open()
        for seg in self.segments:
            if seg.durable_size != seg.size or seg.next_offset > self.recovery_point:
                seg.flush()
        if self.dir_dirty:
            self.fs.fsync_dir(self.dir)
            self.dir_dirty = False
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        if now_ms is not None:
            self.last_flush_ms = now_ms

    def maybe_flush(self, now_ms: int) -> bool:
        """Apply flush.ms: flush if that long has passed since the last flush."""
        if self.last_flush_ms is None:
            self.last_flush_ms = now_ms
        if self.recovery_point < self.log_end_offset and (
            now_ms - self.last_flush_ms >= self.config.flush_ms
        ):
            self.flush(now_ms)
            return True
        return False

    # ------------------------------------------------------------------ read

    def _out_of_range(self, what: str, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"{what} offset {offset} is out of range for {self.dir.name}: log start offset "
            f"{self.log_start_offset}, log end offset {self.log_end_offset}",
            offset=offset,
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
        )

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> FileRegion:
        """Whole batches from the batch holding `start_offset`, from one segment: at most
        `max_bytes` (at least one batch if `min_one_message`), only batches entirely below
        `max_offset` (the high watermark for consumers, None for followers)."""
        if self.closed:
            self._check_open()
        segments = self.segments
        leo = segments[-1].next_offset
        if start_offset < self.log_start_offset or start_offset > leo:
            raise self._out_of_range("read", start_offset)
        if start_offset < leo and (max_offset is None or start_offset < max_offset):
            for i in range(max(0, bisect_right(self._bases, start_offset) - 1), len(segments)):
                seg = segments[i]
                found = seg.read_region(start_offset, max_bytes, max_offset, min_one_message)
                if found is None:
                    continue
                position, end, next_offset = found
                if end == position:
                    break
                return FileRegion(seg.log_path, seg.file, position, end - position, next_offset)
        active = self.active_segment
        return FileRegion(active.log_path, active.file, active.size, 0, start_offset)

    def read_bytes(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        verify: bool = True,
        min_one_message: bool = True,
    ) -> bytes:
        """`read` into memory; with `verify`, every batch's CRC is checked again (pair check)."""
        region = self.read(start_offset, max_bytes, max_offset, min_one_message=min_one_message)
        data = region.read_bytes()
        if verify:
            for pos, header in iter_headers(data, validate=False):
                try:
                    check_crc(data, pos, header)
                except CorruptRecordError as e:  # where: built only when it is needed
                    raise CorruptRecordError(
                        f"{region.path}: position {region.position + pos}: {e}") from None
        return data

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp_ms`, or None
        (ListOffsets by timestamp)."""
        self._check_open()
        for seg in self.segments:
            if seg.max_timestamp < timestamp_ms or seg.size == 0:
                continue
            start_offset = max(seg.time_index.lookup(timestamp_ms), self.log_start_offset)
            start = seg.index.lookup(start_offset)[1]
            for position, header in seg.headers_from(start):
                if header.max_timestamp < timestamp_ms or header.last_offset < start_offset:
                    continue
                data = read_exact(seg.file, position, header.size)
                for record in decode_records(data, validate_batch(data)):
                    if record.timestamp >= timestamp_ms and record.offset >= self.log_start_offset:
                        return record.offset, record.timestamp
        return None

    # ------------------------------------------------------------------ high watermark, epochs

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark (clamped to [log_start_offset, log_end_offset])."""
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords / retention: raise the log start offset (never above the HW)."""
        self._check_open()
        offset = min(offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.first_dirty_offset = max(self.first_dirty_offset, offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove every batch that holds an offset >= `offset` (a batch
        straddling `offset` goes entirely); the log end offset becomes the base offset of the
        first batch removed. Durable before it returns. True if anything was removed."""
        self._check_open()
        if offset < 0:
            raise self._out_of_range("truncation", offset)
        if offset >= self.log_end_offset:
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        found = None
        for seg in self.segments[max(0, bisect_right(self._bases, offset) - 1) :]:
            found = seg.translate_offset(offset)
            if found is not None:
                break
        if found is None:
            return False  # no batch holds an offset >= `offset` (compacted away)
        new_end = found[1].base_offset
        while len(self.segments) > 1 and self.active_segment.base_offset > new_end:
            self._retire(self.segments.pop())
            self._bases.pop()
        active = self.active_segment
        active.truncate_to(offset)
        active.flush()
        if active.next_offset < new_end:
            # the batches before `new_end` were compacted away: keep offsets from being reused
            self._add_segment(self._new_segment(new_end, active.created_ms))
            self.active_segment.flush()
        self.fs.fsync_dir(self.dir)
        self.dir_dirty = False
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset` (a follower far behind the leader's
        log start offset)."""
        self._check_open()
        if offset < 0:
            raise self._out_of_range("truncation", offset)
        for seg in self.segments:
            self._retire(seg)
        self.segments.clear()
        self._bases.clear()
        self._add_segment(self._new_segment(offset, self._now_hint()))
        self.active_segment.flush()
        self.fs.fsync_dir(self.dir)
        self.dir_dirty = False
        self.log_start_offset = offset
        self.first_dirty_offset = offset
        self.leader_epoch_cache.clear()
        self._after_truncation()

    def _now_hint(self) -> int:
        return self.active_segment.created_ms if self.segments else 0

    def _after_truncation(self) -> None:
        self.truncations += 1
        leo = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, leo)
        self.recovery_point = min(self.recovery_point, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.first_dirty_offset = min(max(self.first_dirty_offset, self.log_start_offset), leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        if self.on_truncation is not None:
            self.on_truncation(self)

    def _retire(self, seg: LogSegment) -> None:
        """Delete a segment's files; keep its handle open a while for in-flight reads."""
        seg.delete_files()
        seg.closed = True
        self._keep_retired(seg.file)
        self.dir_dirty = True

    def _keep_retired(self, handle: FileHandle) -> None:
        self._retired.append(handle)
        while len(self._retired) > RETIRED_OPEN_MAX:
            old = self._retired.popleft()
            old.release()
            self._released.append(old)
        while len(self._released) > RETIRED_HANDLES_MAX:
            self._released.popleft().close()

    # ------------------------------------------------------------------ retention

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete the oldest inactive segments that are entirely below the high
        watermark and are past retention.ms, over retention.bytes, or below the log start
        offset. Advances the log start offset. Returns the number of segments deleted."""
        self._check_open()
        cfg = self.config
        size = self.size_bytes
        deletable = 0
        for i, seg in enumerate(self.segments[:-1]):
            upper = self.segments[i + 1].base_offset
            if upper > self.high_watermark:
                break
            by_start = upper <= self.log_start_offset
            by_time = cfg.delete and cfg.retention_ms >= 0 and (
                now_ms - seg.max_timestamp > cfg.retention_ms
            )
            by_size = cfg.delete and cfg.retention_bytes >= 0 and (
                size - seg.size >= cfg.retention_bytes
            )
            if not (by_start or by_time or by_size):
                break
            size -= seg.size
            deletable += 1
        if deletable:
            self.delete_segments(deletable)
        return deletable

    def delete_segments(self, count: int) -> None:
        """Delete the `count` oldest segments (never the active one)."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return
        new_start = self.segments[count].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
        for seg in self.segments[:count]:
            self._retire(seg)
        del self.segments[:count]
        del self._bases[:count]
        self.first_dirty_offset = max(self.first_dirty_offset, self.log_start_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.fs.fsync_dir(self.dir)
        self.dir_dirty = False

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Swap in a cleaned segment for consecutive old ones (files already swapped on disk)."""
        i = self.segments.index(old[0])
        j = i + len(old)
        if self.segments[i:j] != list(old):
            raise StoreError("segments to replace are not consecutive in the log")
        for seg in old:
            seg.close_handle_only()
            self._keep_retired(seg.file)
        self.segments[i:j] = [new]
        self._bases[i:j] = [new.base_offset]

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Flush and release every handle."""
        if self.closed:
            return
        self.flush()  # covers every deferred roll flush too
        for rf in self.take_roll_flushes():
            rf.discard()
        for seg in self.segments:
            seg.close()
        for handle in (*self._retired, *self._released):
            handle.close()
        self._retired.clear()
        self._released.clear()
        self.closed = True

    def abandon(self) -> None:
        """Drop the in-memory log without writing anything (after a simulated crash)."""
        self.closed = True

    def max_timestamp(self) -> int:
        return max((s.max_timestamp for s in self.segments), default=NO_TIMESTAMP)


def replace_swapped(fs: FS, directory: Path, base: int, end: int) -> None:
    """Commit a compaction swap: remove the old segments in [base, end), then move the swap
    file into place. Idempotent: safe to rerun after a crash at any step."""
    for name in fs.listdir(directory):
        b = parse_stem(name)
        if b is None or not base <= b < end:
            continue
        if name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and not (
            b == base and name.endswith(LOG_SUFFIX)
        ):
            fs.remove(directory / name)
    stem = file_stem(base)
    fs.rename(directory / (stem + LOG_SUFFIX + SWAP_SUFFIX), directory / (stem + LOG_SUFFIX))
    fs.fsync_dir(directory)
    fs.remove(directory / (stem + SWAP_END_SUFFIX))
    fs.fsync_dir(directory)


class _NoDescriptor(Exception):
    """A file of a simulated FS: its roll flush cannot leave the caller's thread."""


@dataclass
class RollFlush:
    """A rolled segment's fsyncs, for a worker thread: `run` there, then `done` on the
    log's own thread. Owns its duplicated descriptors (closed by `run`)."""

    log: Log
    fds: list[int]
    directory: Path | None  # fsynced too when entries changed (the old segment's creation)
    upto: int  # the recovery point once done: the rolled segment's next offset
    truncations: int
    sizes: list[tuple[LogSegment, int]]

    def run(self) -> None:
        try:
            for fd in self.fds:
                os.fdatasync(fd)
            if self.directory is not None:
                fd = os.open(self.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        finally:
            for fd in self.fds:
                os.close(fd)
            self.fds = []

    def done(self) -> None:
        self.log.roll_flushed(self)

    def discard(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
