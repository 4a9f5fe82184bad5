"""One log segment: `<base>.log` (batches verbatim) with its `.index` and `.timeindex`."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from broker.store.batch import (
    HEADER,
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    check_crc,
    check_header,
    header_of,
)
from broker.store.config import LogConfig
from broker.store.errors import CorruptIndexError, CorruptRecordError, StoreError
from broker.store.fs import FS, Buf, FileHandle, read_exact
from broker.store.index import OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

SCAN_WINDOW = 4 * 1024 * 1024  # bytes read at a time when scanning a segment
HEADER_WINDOW = 16 * 1024  # bytes read at a time when walking headers
READ_MEMO_MAX = 256  # answers kept per kind of lookup (see LogSegment._found)

_logger = logging.getLogger("hiwater.store")


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_stem(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class LogSegment:
    """Appends batches, maps offsets to positions, recovers and truncates itself.

    Positions and sizes are tracked in memory; the file handle is written with appends only."""

    def __init__(
        self,
        fs: FS,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        suffix: str = "",
    ):
        self.fs = fs
        self.dir = directory
        self.base_offset = base_offset
        self.config = config  # a property: caches the fields the append path reads
        self.created_ms = created_ms
        stem = file_stem(base_offset)
        self.log_path = directory / (stem + LOG_SUFFIX + suffix)
        self.index_path = directory / (stem + INDEX_SUFFIX + suffix)
        self.time_index_path = directory / (stem + TIME_INDEX_SUFFIX + suffix)
        self.file: FileHandle = fs.open(self.log_path, create=True)
        self.size = self.file.size()
        self.durable_size = 0
        entries_max = config.index_entries_max
        self.index = OffsetIndex(fs, self.index_path, base_offset, entries_max)
        self.time_index = TimeIndex(fs, self.time_index_path, base_offset, entries_max // 2 + 1)
        self._index_max = self.index.max_entries
        self._time_max = self.time_index.max_entries
        self.fast_appends_left = 0  # refreshed by should_roll; zeroed by any other index change
        self.roll_at_ms = 0
        # where the read after the last one starts: (offset, position, its header if known)
        self._next_read: tuple[int, int, BatchHeader | None] | None = None
        # Answers of the read path's lookups, kept while the bytes they read cannot change
        # (an open segment's bytes below `size` change only by truncation or recovery, which
        # forget them; appends add bytes after them): several readers at different offsets
        # (the follower's fetches, consumers, a mirror) each find theirs. See `_forget`.
        self._found: dict[int, tuple[int, BatchHeader]] = {}  # translate_offset
        self._headers: dict[int, BatchHeader] = {}  # header_at
        self._ends: dict[tuple[int, int], tuple[int, int, BatchHeader | None]] = {}  # scans
        # every header below `size` passed check_header while this segment was open (it
        # started empty, or a scan or recovery walked it from position 0): a read that ends
        # at `size` needs no scan to find that it ends there
        self._checked = self.size == 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_ms: int | None = None  # max timestamp of the first batch
        self.bytes_since_last_index_entry = 0
        self.rebuilt_index_reason: str | None = None
        # (offset, position) of an index entry past the end of the file found by `load`
        self.index_claims: tuple[int, int] | None = None
        self.closed = False

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self.segment_bytes = config.segment_bytes
        self.fast_appends_left = 0  # see should_roll
        self._index_interval = config.index_interval_bytes

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next={self.next_offset})"

    # ------------------------------------------------------------------ append

    def append(self, headers: Sequence[BatchHeader], pieces: Sequence[Buf], nbytes: int) -> None:
        """Append already-validated batches (offsets assigned) given as write pieces."""
        position = self.size
        interval = self.config.index_interval_bytes
        for h in headers:
            if self.bytes_since_last_index_entry > interval:
                self.index.append(h.last_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            position += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.last_offset
            if self.rolling_base_ms is None:
                self.rolling_base_ms = h.max_timestamp
        self.fast_appends_left = 0
        self.size = self.file.append(pieces)
        if self.size != position:
            raise StoreError(f"{self.log_path}: size {self.size} after append, expected {position}")
        self.next_offset = headers[-1].next_offset

    def append_one(
        self, last_offset: int, max_timestamp: int, size: int, head: Buf, body: Buf
    ) -> None:
        """Append one validated batch of `size` bytes whose offsets the leader just assigned
        from `next_offset`, written as `head` (the patched prefix) then `body` (the rest,
        verbatim). Index entries go straight into the arrays: the position (the segment size)
        and the last offset (above `next_offset`) both ascend by construction."""
        position = self.size
        since = self.bytes_since_last_index_entry
        if since > self._index_interval:
            index = self.index
            index.keys.append(last_offset)
            index.values.append(position)
            time_keys = self.time_index.keys
            max_ts = self.max_timestamp
            if not time_keys or max_ts > time_keys[-1]:
                self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp)
            since = 0
        self.bytes_since_last_index_entry = since + size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.rolling_base_ms is None:
            self.rolling_base_ms = max_timestamp
            self.fast_appends_left = 0  # roll_at_ms depends on the first batch's timestamp
        self.size = self.file.append_batch(head, body, size)
        self.next_offset = last_offset + 1
        self.fast_appends_left -= 1

    def should_roll(self, nbytes: int, last_offset: int, now_ms: int | None) -> bool:
        """Whether appending `nbytes` ending at `last_offset` needs a new segment first.

        Also refreshes what lets the leader's hot path (`Log`) skip this call: it may append
        without asking while `fast_appends_left` > 0 (each single-batch append adds at most one
        entry to each index, so none can fill), the bytes fit in `segment_bytes`, the offsets
        fit in the index's 32 bits and `now_ms` is not past `roll_at_ms`."""
        self.fast_appends_left = min(
            self._index_max - len(self.index.keys), self._time_max - len(self.time_index.keys)
        )
        self.roll_at_ms = self.roll_base_ms() + self._config.segment_ms
        size = self.size
        if size == 0:
            return False
        if size + nbytes > self.segment_bytes:
            return True
        if self.fast_appends_left <= 0:
            return True
        if last_offset - self.base_offset > 2**31 - 1:
            return True
        return now_ms is not None and now_ms > self.roll_at_ms

    def roll_base_ms(self) -> int:
        base = self.rolling_base_ms
        return base if base is not None and base >= 0 else self.created_ms

    # ------------------------------------------------------------------ headers

    def _forget(self) -> None:
        """The bytes below `size` may change (truncation, recovery): what reads learnt goes."""
        self._next_read = None
        self._found.clear()
        self._headers.clear()
        self._ends.clear()

    def header_at(self, position: int) -> BatchHeader:
        header = self._headers.get(position)
        if header is not None:
            return header
        data = read_exact(self.file, position, HEADER_SIZE)
        if len(data) < HEADER_SIZE:
            raise CorruptRecordError(
                f"{self.log_path}: truncated batch header at position {position}"
            )
        header = header_of(HEADER.unpack_from(data))
        check_header(header, position, where=f"{self.log_path}: ")
        if len(self._headers) >= READ_MEMO_MAX:
            self._headers.clear()
        self._headers[position] = header
        return header

    def headers_from(
        self, position: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` (a batch start) up to `end`."""
        end = self.size if end is None else min(end, self.size)
        where = f"{self.log_path}: "
        window = b""
        window_start = position
        while position < end:
            rel = position - window_start
            if rel < 0 or rel + HEADER_SIZE > len(window):
                window_start = position
                want = min(HEADER_WINDOW, min(end + HEADER_SIZE, self.size) - position)
                window = read_exact(self.file, position, want)
                rel = 0
                if len(window) < HEADER_SIZE:
                    raise CorruptRecordError(
                        f"{where}truncated batch header at position {position}"
                    )
            header = header_of(HEADER.unpack_from(window, rel))
            check_header(header, position, where=where)
            if position + header.size > self.size:
                raise CorruptRecordError(
                    f"{where}batch at position {position} needs {header.size} bytes; the segment "
                    f"ends at {self.size}"
                )
            yield position, header
            position += header.size

    def batches(self, *, validate: bool = True) -> Iterator[tuple[int, BatchHeader, bytes]]:
        """(position, header, batch bytes) of every batch, CRC-checked by default."""
        where = f"{self.log_path}: "
        position = 0
        size = self.size
        while position < size:
            want = min(max(SCAN_WINDOW, HEADER_SIZE), size - position)
            window = read_exact(self.file, position, want)
            rel = 0
            progressed = False
            while len(window) - rel >= HEADER_SIZE:
                header = header_of(HEADER.unpack_from(window, rel))
                check_header(header, position + rel, where=where)
                if rel + header.size > len(window):
                    if position + rel + header.size > size:
                        raise CorruptRecordError(
                            f"{where}batch at position {position + rel} needs {header.size} "
                            f"bytes; the segment ends at {size}"
                        )
                    if rel == 0:  # one batch larger than the window: read it whole
                        window = read_exact(self.file, position, header.size)
                        continue
                    break
                if validate:
                    check_crc(window, rel, header, where=f"{where}position {position + rel}: ")
                yield position + rel, header, window[rel : rel + header.size]
                rel += header.size
                progressed = True
            if not progressed and rel == 0:
                raise CorruptRecordError(f"{where}truncated batch at position {position}")
            position += rel

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset >= `offset`, as (position, header). An index
        entry found pointing at the wrong batch (damage the load-time checks cannot see) is
        reported and both indexes rebuilt from the segment; the lookup is then served (Kafka
        fails the read instead)."""
        found = self._found.get(offset)
        if found is not None:  # (the same index entry and batches answer it again)
            return found
        try:
            found = self._translate_offset(offset)
        except CorruptIndexError as e:
            self.rebuild_indexes(str(e))
            found = self._translate_offset(offset)
        if found is not None:
            if len(self._found) >= READ_MEMO_MAX:
                self._found.clear()
            self._found[offset] = found
        return found

    def rebuild_indexes(self, reason: str) -> None:
        _logger.warning("%s: rebuilt %s and %s from the segment; nothing is lost", reason,
                        self.index_path.name, self.time_index_path.name)
        self.rebuilt_index_reason = reason
        self.index.reset()
        self.time_index.reset()
        self._scan(from_index=False)
        self.index.write_pending()
        self.time_index.write_pending()

    def _translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        indexed, start = self.index.lookup(offset)
        batches = self.headers_from(start)
        if start > 0:
            try:
                position, header = next(batches)
            except (CorruptRecordError, StopIteration):
                header = None
            if header is None or header.last_offset != indexed:
                raise CorruptIndexError(
                    f"{self.index_path}: entry for offset {indexed} points at position {start}, "
                    f"which holds no batch ending at that offset"
                )
            if header.last_offset >= offset:
                return position, header
        for position, header in batches:
            if header.last_offset >= offset:
                return position, header
        return None

    def region_end(
        self,
        start: int,
        max_bytes: int,
        max_offset: int | None,
        min_one: bool,
        first: BatchHeader | None = None,
    ) -> tuple[int, int | None]:
        """(end position, next offset) of a read starting at batch position `start`, cut at
        batch boundaries: at most `max_bytes` (but one whole batch if `min_one`), only batches
        entirely below `max_offset`. The next offset is where the following read starts (None
        when the region is empty)."""
        end, next_offset, _ = self._region_end(start, max_bytes, max_offset, min_one, first)
        return end, next_offset

    def _region_end(
        self,
        start: int,
        max_bytes: int,
        max_offset: int | None,
        min_one: bool,
        first: BatchHeader | None,
    ) -> tuple[int, int | None, BatchHeader | None]:
        """`region_end`, plus the header of the batch at the end position when it was read on
        the way (the start of the following read)."""
        limit = self.size
        if max_offset is not None and max_offset < self.next_offset:
            found = self.translate_offset(max_offset)
            if found is not None:
                limit = found[0]
        if limit <= start:
            return start, None, None
        if first is None:
            first = self.header_at(start)
        if first.size > max_bytes:
            if min_one and start + first.size <= limit:
                return start + first.size, first.next_offset, None
            return start, None, None
        byte_limit = min(limit, start + max_bytes)
        scan_from = max(start, self.index.lookup_position(byte_limit))
        if scan_from < byte_limit:
            if byte_limit == self.size and self._checked:
                # every batch up to the end fits: the scan would walk to `size` (a batch
                # boundary) and end with the last batch's next offset
                return byte_limit, self.next_offset, None
            known = self._ends.get((scan_from, byte_limit))
            if known is not None:
                return known
        end = scan_from
        next_offset = None
        following = None
        for position, header in self.headers_from(scan_from, byte_limit):
            if position + header.size > byte_limit:
                following = header
                break
            end = position + header.size
            next_offset = header.next_offset
        if next_offset is None:  # the batch at scan_from does not fit: the region ends there
            if following is None and end < self.size:
                following = self.header_at(end)
            next_offset = following.base_offset if following is not None else self.next_offset
        elif byte_limit <= self.size:  # (found from batches below `size` alone)
            if len(self._ends) >= READ_MEMO_MAX:
                self._ends.clear()
            self._ends[(scan_from, byte_limit)] = (end, next_offset, following)
        return end, next_offset, following

    def read_region(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool
    ) -> tuple[int, int, int] | None:
        """(position, end, next offset) of the whole batches to return for a read from `offset`
        (see `region_end`), or None if no batch here holds an offset >= `offset`.

        One index lookup and one bounded scan at most. A sequential reader asks next for the
        offset this read returned as next: that read's (offset, position, header) is kept, so
        it needs neither the lookup nor the scan to find where it starts. Truncation and
        recovery forget it; appends cannot invalidate it (they only add bytes after it)."""
        cached = self._next_read
        found: tuple[int, BatchHeader] | None = None
        if cached is not None and cached[0] == offset and cached[1] < self.size:
            header = cached[2] if cached[2] is not None else self.header_at(cached[1])
            if header.last_offset >= offset:
                found = cached[1], header
        if found is None:
            found = self.translate_offset(offset)
            if found is None:
                return None
        position, first = found
        end, next_offset, following = self._region_end(
            position, max_bytes, max_offset, min_one, first
        )
        if next_offset is None:
            self._next_read = (offset, position, first)
            return position, position, offset
        self._next_read = (next_offset, end, following)
        return position, end, next_offset

    # ------------------------------------------------------------------ open / recover

    def load(self) -> None:
        """Open an existing, previously flushed segment: load its indexes (rebuilding them if
        missing or corrupt), then walk the headers after the last time-index entry to find the
        end offset and the largest timestamp. Raises CorruptRecordError if a header is bad."""
        try:
            if not (self.fs.exists(self.index_path) and self.fs.exists(self.time_index_path)):
                raise CorruptIndexError(f"{self.index_path}: missing")
            self.index.load()
            self.time_index.load()
            self.index.sanity_check(max(self.size, 1), 2**63 - 1)
            self._scan(from_index=True)
            self.time_index.sanity_check(self.next_offset)
            self.index.sanity_check(max(self.size, 1), self.next_offset)
        except CorruptIndexError as e:
            self.rebuilt_index_reason = str(e)
            index = self.index
            if len(index) and index.values[-1] >= self.size:  # the segment lost bytes?
                self.index_claims = (index.keys[-1], index.values[-1])
            self.index.reset()
            self.time_index.reset()
            self._scan(from_index=False)
            self.index.write_pending()
            self.time_index.write_pending()

    def _scan(self, *, from_index: bool) -> None:
        """Walk headers to set next_offset and timestamps; rebuild the indexes unless from_index
        (then start at the batch holding the last time-index entry: everything before it is
        already summarised by that entry)."""
        start = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        if from_index and len(self.time_index):
            self.max_timestamp = self.time_index.keys[-1]
            self.offset_of_max_timestamp = self.time_index.values[-1]
            start = self.index.lookup(self.offset_of_max_timestamp)[1]
        self.next_offset = self.base_offset
        self.rolling_base_ms = self.header_at(0).max_timestamp if self.size else None
        self.bytes_since_last_index_entry = 0
        interval = self.config.index_interval_bytes
        for position, h in self.headers_from(start):
            self._account(position, h, interval, index=not from_index)
            self.next_offset = h.next_offset
        last_indexed = self.index.values[-1] if len(self.index) else 0
        self.bytes_since_last_index_entry = self.size - last_indexed
        self.fast_appends_left = 0
        self._forget()
        if start == 0:
            self._checked = True

    def _account(self, position: int, h: BatchHeader, interval: int, *, index: bool = True) -> None:
        """Fold the batch at `position` into the index cadence (adding an entry to both indexes
        if `index` and `interval` bytes passed since the last) and the max timestamp. `append`
        and `append_one` keep this inline: they are the hot path."""
        if index and self.bytes_since_last_index_entry > interval:
            self.index.append(h.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += h.size
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset

    def recover(self, next_expected: int) -> int:
        """Validate every batch (header, CRC, offsets ascending from `next_expected`), rebuild
        both indexes, truncate at the first bad byte. Returns the number of bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_base_ms = None
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        valid_end = 0
        expected = max(next_expected, self.base_offset)
        interval = self.config.index_interval_bytes
        try:
            for position, h, _ in self.batches(validate=True):
                if h.base_offset < expected:
                    raise CorruptRecordError(
                        f"{self.log_path}: batch at position {position} has baseOffset "
                        f"{h.base_offset} below the expected {expected}"
                    )
                self._account(position, h, interval)
                if self.rolling_base_ms is None:
                    self.rolling_base_ms = h.max_timestamp
                expected = self.next_offset = h.next_offset
                valid_end = position + h.size
        except CorruptRecordError:
            pass
        truncated = self.size - valid_end
        if truncated:
            self.file.truncate(valid_end)
            self.size = valid_end
        self.durable_size = min(self.durable_size, self.size)
        self.index.write_pending()
        self.time_index.write_pending()
        self.fast_appends_left = 0
        self._forget()
        self._checked = True  # every batch kept passed validation
        return truncated

    # ------------------------------------------------------------------ truncate / flush / close

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= `offset`. Returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self._forget()
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.file.truncate(position)
        self.size = position
        self.durable_size = min(self.durable_size, position)
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        if position == 0:
            self.rolling_base_ms = None
        self._scan(from_index=True)
        return removed

    def flush(self) -> None:
        self.index.flush()
        self.time_index.flush()
        self.file.fsync()
        self.durable_size = self.size

    def close(self) -> None:
        if not self.closed:
            self.index.write_pending()
            self.time_index.write_pending()
            self.file.close()
            self.closed = True

    def close_handle_only(self) -> None:
        if not self.closed:
            self.file.close()
            self.closed = True

    def paths(self) -> tuple[Path, Path, Path]:
        return self.log_path, self.index_path, self.time_index_path

    def delete_files(self) -> None:
        # indexes first: a crash in between leaves a .log whose indexes are rebuilt, never an
        # index without its .log (which recovery reports as a lost segment)
        for path in (self.index_path, self.time_index_path, self.log_path):
            if self.fs.exists(path):
                self.fs.remove(path)
