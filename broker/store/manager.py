"""`LogManager`: the logs of one broker across `log.dirs`, with the per-directory checkpoints.

- A new partition goes to the log dir holding the fewest partitions (ties: the first listed).
- Per log dir, crash-safely: `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
  `replication-offset-checkpoint` (high watermarks), `cleaner-offset-checkpoint`.
- Periodic work is driven by the caller with an explicit `now_ms`: `flush_dirty_logs`,
  `cleanup_logs` (retention), `clean_logs` (compaction), `checkpoint_*`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from broker.store.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    read_offsets,
    write_offsets,
)
from broker.store.cleaner import LogCleaner
from broker.store.config import LogConfig
from broker.store.errors import StoreError
from broker.store.fs import FS, RealFS
from broker.store.log import Log, RollFlush, parse_topic_partition

LOGS_MAX = 100_000

_logger = logging.getLogger("hiwater.store")

# What a damaged per-directory checkpoint costs, and why each fallback is safe. Every one of
# these files can be rebuilt from the segments, so a broker never stays down for one (Kafka
# does for a bad replication-offset-checkpoint: KafkaStorageException, the dir goes offline).
_CHECKPOINT_FALLBACKS: Mapping[str, str] = {
    RECOVERY_POINT_CHECKPOINT: "every log in the directory is recovered from its first segment "
    "(as Kafka does); nothing is lost",
    LOG_START_OFFSET_CHECKPOINT: "each log starts at its first segment's base offset (as Kafka "
    "does); records below an earlier DeleteRecords point may be served again",
    REPLICATION_OFFSET_CHECKPOINT: "each high watermark restarts at its log start offset and is "
    "learnt again from the leader (a lower high watermark only delays reads); nothing is lost",
    CLEANER_OFFSET_CHECKPOINT: "the log cleaner starts again from each log's start; nothing is "
    "lost",
}


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        default_config: LogConfig | None = None,
        fs: FS | None = None,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        now_ms: int = 0,
        cleaner: LogCleaner | None = None,
    ):
        if not log_dirs:
            raise StoreError("log.dirs is empty: at least one log directory is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.topic_configs = dict(topic_configs or {})
        self.fs = fs or RealFS()
        self.cleaner = cleaner or LogCleaner()
        self.logs: dict[TopicPartition, Log] = {}
        self.log_dir_of: dict[TopicPartition, Path] = {}
        self.defer_roll_flush = False  # see `defer_roll_flushes`
        self.high_watermarks: dict[Path, dict[TopicPartition, int]] = {}
        # What loading found and repaired, one line each, naming the file (also logged).
        self.recovery_report: list[str] = []
        self._checkpoint_lock = threading.Lock()  # see `checkpoint_job`
        self._checkpoint_seq = itertools.count()
        self._checkpoint_written: dict[Path, int] = {}
        for d in self.log_dirs:
            self.fs.makedirs(d)
            self._load_dir(d, now_ms)

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def _load_dir(self, d: Path, now_ms: int) -> None:
        fs = self.fs
        damaged: list[str] = []
        recovery = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT, damaged)
        starts = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT, damaged)
        hws = self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT, damaged)
        cleaner = self._read_checkpoint(d, CLEANER_OFFSET_CHECKPOINT, damaged)
        self.high_watermarks[d] = dict(hws)
        for name in fs.listdir(d):
            path = d / name
            if not fs.is_dir(path):
                continue
            try:
                tp = parse_topic_partition(name)
            except StoreError:
                continue
            if tp in self.logs:
                raise StoreError(
                    f"partition {tp[0]}-{tp[1]} is in two log dirs: {self.log_dir_of[tp]} and {d}"
                )
            log = Log.open(
                path,
                self.config_for(tp[0]),
                fs,
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=hws.get(tp),
                now_ms=now_ms,
            )
            if tp in cleaner:
                log.first_dirty_offset = max(cleaner[tp], log.log_start_offset)
            self._register(tp, d, log)
            for line in log.recovery_report:
                self._report(f"{path}: {line}")
        here = {tp for tp, ld in self.log_dir_of.items() if ld == d}
        for name, listed in (
            (RECOVERY_POINT_CHECKPOINT, recovery),
            (REPLICATION_OFFSET_CHECKPOINT, hws),
        ):
            gone = sorted(set(listed) - here)
            if gone:
                damaged.append(name)
                shown = ", ".join(f"{t}-{p}" for t, p in gone[:5])
                more = f" and {len(gone) - 5} more" if len(gone) > 5 else ""
                self._report(
                    f"{d / name} lists partitions with no directory here: {shown}{more}: their "
                    f"records on this broker are lost (a replica is created again empty when "
                    f"the controller assigns it, and fetches everything from the leader)"
                )
        if damaged:
            self.checkpoint_all_in(d)  # replace the damaged files now, from what was loaded

    def _read_checkpoint(self, d: Path, name: str, damaged: list[str]) -> dict[TopicPartition, int]:
        """A directory checkpoint; a damaged one is reported and read as empty."""
        try:
            return read_offsets(self.fs, d / name)
        except (CheckpointError, UnicodeError) as e:
            damaged.append(name)
            self._report(f"{e}: ignored: {_CHECKPOINT_FALLBACKS[name]}")
            return {}

    def _report(self, line: str) -> None:
        self.recovery_report.append(line)
        _logger.warning("%s", line)

    def _register(self, tp: TopicPartition, d: Path, log: Log) -> None:
        if len(self.logs) >= LOGS_MAX:
            raise StoreError(f"more than {LOGS_MAX} logs on one broker")
        log.on_truncation = lambda _log: self.checkpoint_recovery_points(d)
        log.defer_roll_flush = self.defer_roll_flush
        self.logs[tp] = log
        self.log_dir_of[tp] = d

    # ------------------------------------------------------------------ partitions

    def next_log_dir(self) -> Path:
        """The log dir with the fewest partitions (Kafka's nextLogDirs, first on ties)."""
        counts = {d: 0 for d in self.log_dirs}
        for d in self.log_dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, *, now_ms: int = 0) -> Log:
        tp = (topic, partition)
        log = self.logs.get(tp)
        if log is not None:
            return log
        if not topic or "/" in topic or topic in (".", ".."):
            raise StoreError(f"invalid topic name {topic!r}")
        if partition < 0:
            raise StoreError(f"invalid partition {partition}")
        d = self.next_log_dir()
        log = Log.open(d / f"{topic}-{partition}", self.config_for(topic), self.fs, now_ms=now_ms)
        self.fs.fsync_dir(d)
        self._register(tp, d, log)
        return log

    def delete_log(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        if log is None:
            return
        d = self.log_dir_of.pop(tp)
        log.close()
        for name in self.fs.listdir(log.dir):
            self.fs.remove(log.dir / name)
        self.fs.rmdir(log.dir)
        self.fs.fsync_dir(d)
        self.high_watermarks.get(d, {}).pop(tp, None)
        self.checkpoint_all()

    # ------------------------------------------------------------------ checkpoints

    def _logs_in(self, d: Path) -> Iterable[tuple[TopicPartition, Log]]:
        return ((tp, log) for tp, log in sorted(self.logs.items()) if self.log_dir_of[tp] == d)

    def _dirs(self, d: Path | None) -> list[Path]:
        return self.log_dirs if d is None else [d]

    # Checkpoint files may be written off the caller's thread (`checkpoint_job`): the broker
    # writes its periodic high-watermark and recovery-point checkpoints on a worker thread, as
    # Kafka does on its scheduler thread, because write + fsync + rename + directory fsync
    # took 4-146 ms (median ~16 ms) per call under load and stalled the event loop serving
    # produce and fetch every 5 s on every broker (issue #12: the acks=all p99). The offsets
    # are always snapshotted on the caller's thread; every write of a file is serialized by
    # one lock and carries the sequence number of its snapshot, so a file never goes back to
    # an older snapshot than one already written (a truncation's synchronous recovery-point
    # checkpoint is not undone by a periodic job that snapshotted before it).

    def _snapshot(self, path: Path, offsets: dict[TopicPartition, int]
                  ) -> tuple[Path, dict[TopicPartition, int], int]:
        return path, offsets, next(self._checkpoint_seq)

    def _write_snapshot(self, path: Path, offsets: Mapping[TopicPartition, int], seq: int
                        ) -> bool:
        """Write one snapshot unless a newer one of the same file is already written."""
        with self._checkpoint_lock:
            if self._checkpoint_written.get(path, -1) > seq:
                return False
            write_offsets(self.fs, path, offsets)
            self._checkpoint_written[path] = seq
            return True

    def _recovery_points(self, ld: Path) -> dict[TopicPartition, int]:
        return {tp: log.recovery_point for tp, log in self._logs_in(ld)}

    def _high_watermarks(self, ld: Path) -> dict[TopicPartition, int]:
        return {tp: log.high_watermark for tp, log in self._logs_in(ld)}

    def checkpoint_recovery_points(self, d: Path | None = None) -> None:
        for ld in self._dirs(d):
            self._write_snapshot(*self._snapshot(ld / RECOVERY_POINT_CHECKPOINT,
                                                 self._recovery_points(ld)))

    def checkpoint_log_start_offsets(self, d: Path | None = None) -> None:
        for ld in self._dirs(d):
            offsets = {tp: log.log_start_offset for tp, log in self._logs_in(ld)}
            self._write_snapshot(*self._snapshot(ld / LOG_START_OFFSET_CHECKPOINT, offsets))

    def checkpoint_high_watermarks(self, d: Path | None = None) -> None:
        for ld in self._dirs(d):
            self._write_snapshot(*self._snapshot(ld / REPLICATION_OFFSET_CHECKPOINT,
                                                 self._high_watermarks(ld)))

    def checkpoint_cleaner_offsets(self, d: Path | None = None) -> None:
        for ld in self._dirs(d):
            offsets = {
                tp: log.first_dirty_offset for tp, log in self._logs_in(ld) if log.config.compact
            }
            self._write_snapshot(*self._snapshot(ld / CLEANER_OFFSET_CHECKPOINT, offsets))

    def checkpoint_job(self) -> Callable[[], int]:
        """The periodic high-watermark and recovery-point checkpoints, snapshotted now (on
        this thread); the returned function writes them, on any thread, and returns how many
        files it wrote (a snapshot older than what a file already holds is skipped)."""
        snaps = []
        for ld in self.log_dirs:
            snaps.append(self._snapshot(ld / REPLICATION_OFFSET_CHECKPOINT,
                                        self._high_watermarks(ld)))
            snaps.append(self._snapshot(ld / RECOVERY_POINT_CHECKPOINT,
                                        self._recovery_points(ld)))
        return lambda: sum(self._write_snapshot(*s) for s in snaps)

    def checkpoint_all(self) -> None:
        self.checkpoint_all_in(None)

    def checkpoint_all_in(self, d: Path | None) -> None:
        self.checkpoint_recovery_points(d)
        self.checkpoint_log_start_offsets(d)
        self.checkpoint_high_watermarks(d)
        self.checkpoint_cleaner_offsets(d)

    # ------------------------------------------------------------------ periodic work

    def defer_roll_flushes(self) -> None:
        """From now on a roll leaves the old segment's fsync to `take_roll_flushes` (the live
        broker runs them on a worker thread, see `Log._defer_flush`); the simulator and the
        tools keep the synchronous flush."""
        self.defer_roll_flush = True
        for log in self.logs.values():
            log.defer_roll_flush = True

    def take_roll_flushes(self) -> list[RollFlush]:
        return [rf for _, log in sorted(self.logs.items()) for rf in log.take_roll_flushes()]

    def flush_dirty_logs(self, now_ms: int) -> int:
        """Apply flush.ms to every log; checkpoint recovery points if any flushed."""
        flushed = sum(log.maybe_flush(now_ms) for _, log in sorted(self.logs.items()))
        if flushed:
            self.checkpoint_recovery_points()
        return flushed

    def cleanup_logs(self, now_ms: int) -> int:
        """Retention on every log; returns segments deleted."""
        deleted = sum(log.delete_old_segments(now_ms) for _, log in sorted(self.logs.items()))
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def clean_logs(self, now_ms: int) -> Log | None:
        """One compaction pass over the filthiest compacted log."""
        logs = [log for _, log in sorted(self.logs.items())]
        cleaned = self.cleaner.clean_filthiest(logs, now_ms)
        if cleaned is not None:
            self.checkpoint_cleaner_offsets()
        return cleaned

    def shutdown(self) -> None:
        """Flush and close every log, then write every checkpoint."""
        for _, log in sorted(self.logs.items()):
            log.close()
        self.checkpoint_all()
