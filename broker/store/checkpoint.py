"""Checkpoint files in Kafka's text formats, written crash-safely (temp, fsync, rename, dir fsync).

- per log dir: `replication-offset-checkpoint` (high watermarks),
  `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`:
      0\\n<count>\\n<topic> <partition> <offset>\\n...
- per partition: `leader-epoch-checkpoint`:
      0\\n<count>\\n<epoch> <start_offset>\\n...
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from broker.store.errors import StoreError
from broker.store.fs import FS, read_whole, write_atomic

CHECKPOINT_VERSION = 0
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

TopicPartition = tuple[str, int]


class CheckpointError(StoreError):
    """A checkpoint file does not parse."""


def _parse(fs: FS, path: Path, fields: int) -> list[list[str]]:
    if not fs.exists(path):
        return []
    return _parse_bytes(read_whole(fs, path), path, fields)


def _parse_bytes(data: bytes, path: Path, fields: int) -> list[list[str]]:
    lines = data.decode("utf-8", "replace").split("\n")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CheckpointError(f"{path}: malformed header {lines[:2]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported version {version}")
    rows = [line.split() for line in lines[2 : 2 + count]]
    if len(rows) != count or any(len(r) != fields for r in rows):
        raise CheckpointError(f"{path}: expected {count} rows of {fields} fields")
    if any(line.strip() for line in lines[2 + count :]):  # Kafka's reader expects EOF here too
        raise CheckpointError(f"{path}: more rows than its count of {count}")
    return rows


def _render(rows: list[str]) -> bytes:
    return (f"{CHECKPOINT_VERSION}\n{len(rows)}\n" + "".join(r + "\n" for r in rows)).encode()


def read_offsets(fs: FS, path: Path) -> dict[TopicPartition, int]:
    if not fs.exists(path):
        return {}
    return parse_offsets(read_whole(fs, path), path)


def parse_offsets(data: bytes, path: Path) -> dict[TopicPartition, int]:
    """The offsets of a directory checkpoint's bytes (`path` names it in errors)."""
    try:
        return {(t, int(p)): int(o) for t, p, o in _parse_bytes(data, path, 3)}
    except ValueError:
        raise CheckpointError(f"{path}: non-integer partition or offset") from None


def write_offsets(fs: FS, path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    rows = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomic(fs, path, _render(rows))


class LeaderEpochCache:
    """Leader epoch -> start offset of that epoch in this log (Kafka's LeaderEpochFileCache).

    Every change is written to `leader-epoch-checkpoint` crash-safely."""

    def __init__(self, fs: FS, path: Path):
        self.fs = fs
        self.path = path
        self.load_error: str | None = None  # why the file was unreadable (the log rebuilds)
        try:
            rows = _parse(fs, path, 2)
            self.entries: list[tuple[int, int]] = [(int(e), int(o)) for e, o in rows]
        except (CheckpointError, ValueError) as e:
            self.entries = []  # a broken cache is rebuilt from the batches' epochs by the log
            self.load_error = str(e) if isinstance(e, CheckpointError) else f"{path}: {e}"

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def _write(self) -> None:
        write_atomic(self.fs, self.path, _render([f"{e} {o}" for e, o in self.entries]))

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns True if the cache changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return False
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        self._write()
        return True

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Set the whole cache (the replication core's epochs are the authority: the broker
        mirrors them here so they survive a restart)."""
        self.entries = list(entries)
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after `end_offset` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch covering it starts there."""
        below = [i for i, (_, o) in enumerate(self.entries) if o <= start_offset]
        if not below:
            return
        last = below[-1]
        epoch, offset = self.entries[last]
        kept = [(epoch, max(offset, start_offset)), *self.entries[last + 1 :]]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def clear(self) -> None:
        if self.entries or not self.fs.exists(self.path):
            self.entries = []
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, end offset of that epoch), as OffsetsForLeaderEpoch
        answers; (-1, -1) when the requested epoch is older than every known epoch."""
        if not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        found: tuple[int, int] = (-1, -1)
        for i, (e, _) in enumerate(self.entries):
            if e > epoch:
                if i == 0:
                    return -1, -1
                return found[0], self.entries[i][1]
            found = (e, self.entries[i][1])
        return self.entries[-1][0], log_end_offset
