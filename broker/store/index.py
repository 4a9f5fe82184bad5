"""Sparse indexes of a segment, in Kafka's file formats, held in memory.

- `.index`: 8-byte entries `>ii` (offset - base_offset, file position of the batch whose last
  offset that is). Lookup: greatest entry with offset <= target, by binary search.
- `.timeindex`: 12-byte entries `>qi` (max timestamp so far, offset - base_offset).

Entries are kept in two arrays; new entries are buffered and written to the file when the segment
is flushed or closed. That is safe because an index only has to be durable up to the recovery
point, and every segment beyond it is rescanned (and its indexes rebuilt) on open.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right
from pathlib import Path

from broker.store.errors import CorruptIndexError
from broker.store.fs import FS, read_whole

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class _Index(ABC):
    entry: struct.Struct = OFFSET_ENTRY

    def __init__(self, fs: FS, path: Path, base_offset: int, max_entries: int):
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.keys: array[int] = array("q")
        self.values: array[int] = array("q")
        self._written = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    @abstractmethod
    def _pack(self, i: int) -> bytes:
        """Entry i as stored in the file."""

    @abstractmethod
    def _unpack(self, data: bytes) -> None:
        """Load the entries from the file's bytes."""

    def load(self) -> None:
        """Read the file; raises CorruptIndexError if it is not a valid index (caller rebuilds)."""
        data = read_whole(self.fs, self.path)
        size = self.entry.size
        if len(data) % size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of the {size}-byte entry"
            )
        self.keys = array("q")
        self.values = array("q")
        self._unpack(data)
        self._written = len(self.keys)
        self._check_monotonic()

    def _check_monotonic(self) -> None:
        keys = self.keys
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                raise CorruptIndexError(
                    f"{self.path}: entry {i} key {keys[i]} is not above entry {i - 1} key "
                    f"{keys[i - 1]}"
                )

    def reset(self) -> None:
        self.keys = array("q")
        self.values = array("q")
        self._written = 0

    def write_pending(self) -> None:
        """Write buffered entries to the file (rewriting it if it is out of step)."""
        if self._written == len(self.keys) and self.fs.exists(self.path):
            return
        handle = self.fs.open(self.path, create=True)
        try:
            if handle.size() != self._written * self.entry.size:
                handle.truncate(0)
                self._written = 0
            pieces = [self._pack(i) for i in range(self._written, len(self.keys))]
            if pieces:
                handle.append([b"".join(pieces)])
            self._written = len(self.keys)
        finally:
            handle.close()

    def flush(self) -> None:
        self.write_pending()
        handle = self.fs.open(self.path, create=True)
        try:
            handle.fsync()
        finally:
            handle.close()

    def truncate_entries(self, count: int) -> None:
        if count >= len(self.keys):
            return
        del self.keys[count:]
        del self.values[count:]
        if self._written > count:
            if self.fs.exists(self.path):
                handle = self.fs.open(self.path)
                try:
                    handle.truncate(count * self.entry.size)
                finally:
                    handle.close()
            self._written = count


class OffsetIndex(_Index):
    """keys: absolute offsets (last offset of the indexed batch); values: file positions."""

    entry = OFFSET_ENTRY

    def _pack(self, i: int) -> bytes:
        return OFFSET_ENTRY.pack(self.keys[i] - self.base_offset, self.values[i])

    def _unpack(self, data: bytes) -> None:
        base = self.base_offset
        for rel, pos in OFFSET_ENTRY.iter_unpack(data):
            if rel < 0 or pos < 0:
                raise CorruptIndexError(f"{self.path}: negative entry ({rel}, {pos})")
            self.keys.append(base + rel)
            self.values.append(pos)

    def _check_monotonic(self) -> None:
        super()._check_monotonic()
        values = self.values
        for i in range(1, len(values)):
            if values[i] <= values[i - 1]:
                raise CorruptIndexError(
                    f"{self.path}: entry {i} position {values[i]} is not above entry {i - 1} "
                    f"position {values[i - 1]}"
                )

    def sanity_check(self, log_size: int, next_offset: int) -> None:
        if self.values and self.values[-1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last entry points at position {self.values[-1]} but the log "
                f"segment has {log_size} bytes"
            )
        if self.keys and (self.keys[0] < self.base_offset or self.keys[-1] >= next_offset):
            raise CorruptIndexError(
                f"{self.path}: entries cover offsets {self.keys[0]}..{self.keys[-1]} outside "
                f"the segment's [{self.base_offset}, {next_offset})"
            )

    def append(self, last_offset: int, position: int) -> None:
        if self.keys and (last_offset <= self.keys[-1] or position <= self.values[-1]):
            raise CorruptIndexError(
                f"{self.path}: appending ({last_offset}, {position}) after "
                f"({self.keys[-1]}, {self.values[-1]}) breaks the index order"
            )
        self.keys.append(last_offset)
        self.values.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= target, else (base, 0)."""
        i = bisect_right(self.keys, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def lookup_position(self, position: int) -> int:
        """The greatest indexed position <= `position` (0 if none)."""
        i = bisect_right(self.values, position) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        self.truncate_entries(bisect_right(self.keys, offset - 1))


class TimeIndex(_Index):
    """keys: timestamps (max timestamp so far); values: absolute offsets."""

    entry = TIME_ENTRY

    def _pack(self, i: int) -> bytes:
        return TIME_ENTRY.pack(self.keys[i], self.values[i] - self.base_offset)

    def _unpack(self, data: bytes) -> None:
        base = self.base_offset
        for ts, rel in TIME_ENTRY.iter_unpack(data):
            if rel < 0:
                raise CorruptIndexError(f"{self.path}: negative relative offset {rel}")
            self.keys.append(ts)
            self.values.append(base + rel)

    def _check_monotonic(self) -> None:
        super()._check_monotonic()
        values = self.values
        for i in range(1, len(values)):
            if values[i] < values[i - 1]:
                raise CorruptIndexError(f"{self.path}: offsets go backwards at entry {i}")

    def sanity_check(self, next_offset: int) -> None:
        if self.values and self.values[-1] >= next_offset:
            raise CorruptIndexError(
                f"{self.path}: last entry names offset {self.values[-1]} but the segment ends "
                f"at {next_offset}"
            )

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        if self.values and offset < self.values[-1]:
            return
        self.keys.append(timestamp)
        self.values.append(offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the greatest entry with timestamp <= target, else the base offset."""
        i = bisect_right(self.keys, timestamp) - 1
        return self.values[i] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries naming offsets >= `offset`."""
        count = 0
        for count in range(len(self.values), -1, -1):
            if count == 0 or self.values[count - 1] < offset:
                break
        self.truncate_entries(count)
