"""Disk faults on a stopped broker's data directory (`log.dirs`): disk loss, loss of what was
not yet fsynced, bit flips. Plain file operations, usable on any copy of a data dir.

**What `lose_unflushed` loses** (a power failure right after a `kill -9`; LazyFS's
`clear-cache` in Jepsen). The store's rules (broker/store/log.py): `Log.flush` fsyncs every
segment with unflushed bytes and their indexes and then sets the recovery point to the log end;
`roll` flushes every older segment before it creates the new active one; checkpoints (recovery
point, HW, log start, leader epochs) are written with fsync + rename. The recovery point the
broker last wrote to `recovery-point-offset-checkpoint` is the one durable record of how far
the flushes went. So, per partition directory:

- every segment that is not the last (it has a successor, so a roll flushed it) is kept whole;
- the last (active) segment keeps the batches that end at or below the checkpointed recovery
  point (all of it if the point is past its end, nothing if the partition has no entry — a
  partition created after the last checkpoint), and loses the rest of its `.log` bytes;
- its `.index` keeps the entries pointing into the kept bytes, its `.timeindex` the entries
  below the recovery point (the broker rebuilds both for the active segment anyway);
- checkpoint files, `leader-epoch-checkpoint` and other segments are untouched.

This can lose more than a real power failure: bytes the broker fsynced after it last wrote the
checkpoint (the broker rewrites it every `replica.high.watermark.checkpoint.interval.ms`, default
5 s, and after a flush by `log.flush.scheduler.interval.ms`); with `log.flush.interval.messages=1`
(fsync before each acknowledgement) an acknowledged record written within that interval is
lost here although a real disk would keep it. Lower that interval for such tests. It never
loses less than a power failure would.

**`corrupt_segment`** picks (seeded) a closed segment (one with a successor) of one partition,
else an active segment, and flips bytes in its last batch:

- `kind="header"`: the batch's magic byte (offset 16). The broker's recovery detects it on the
  next start whether or not the segment is below the recovery point (loading walks the headers
  after the last time-index entry; recovery validates every batch), truncates the log there and
  deletes the later segments; the replica then fetches the lost suffix again from the leader.
- `kind="records"`: one byte in the records (covered by the batch CRC, not by any header check).
  Below the recovery point nothing looks at it on restart (as in Kafka): only a full recovery
  scan, a follower's or a consumer's CRC check (`check.crcs`) can detect it.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import struct
from pathlib import Path
from typing import Any

from broker.recordbatch import BATCH_LENGTH_MIN, HEADER, HEADER_SIZE, MAGIC_OFFSET, BatchHeader
from broker.store.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offsets
from broker.store.fs import RealFS
from broker.store.log import parse_topic_partition
from broker.store.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_stem

OFFSET_ENTRY_SIZE = 8  # `.index`: >ii (relative offset, position)
TIME_ENTRY_SIZE = 12  # `.timeindex`: >qi (timestamp, relative offset)
CORRUPT_KINDS = ("header", "records")


def wipe_data_dir(data_dir: Path) -> dict[str, Any]:
    """Delete the whole data directory. Returns how many files and bytes went."""
    files = 0
    size = 0
    if data_dir.exists():
        for root, _dirs, names in os.walk(data_dir):
            for n in names:
                files += 1
                with contextlib.suppress(OSError):
                    size += (Path(root) / n).stat().st_size
        shutil.rmtree(data_dir)
    return {"files": files, "bytes": size}


def _partition_dirs(log_dir: Path) -> list[Path]:
    out: list[Path] = []
    if not log_dir.is_dir():
        return out
    for d in sorted(log_dir.iterdir()):
        if not d.is_dir():
            continue
        try:
            parse_topic_partition(d.name)
        except Exception:
            continue
        out.append(d)
    return out


def _segment_bases(pdir: Path) -> list[int]:
    return sorted(
        b for p in pdir.iterdir()
        if p.name.endswith(LOG_SUFFIX) and (b := parse_stem(p.name)) is not None
    )


def _stem(base: int) -> str:
    return f"{base:020d}"


def iter_batches(data: bytes) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch with a sane header, stopping at the first that is
    not (a torn tail)."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        h = BatchHeader._make(HEADER.unpack_from(data, pos))
        if h.batch_length < BATCH_LENGTH_MIN or pos + h.size > len(data):
            break
        out.append((pos, h))
        pos += h.size
    return out


def lose_unflushed_in(log_dir: Path) -> dict[str, Any]:
    """Truncate every partition's active segment in `log_dir` to its durable prefix (see the
    module docstring). Returns, per partition that lost anything, what it lost."""
    rp = read_offsets(RealFS(), log_dir / RECOVERY_POINT_CHECKPOINT)
    lost: dict[str, Any] = {}
    for pdir in _partition_dirs(log_dir):
        tp = parse_topic_partition(pdir.name)
        bases = _segment_bases(pdir)
        if not bases:
            continue
        base = bases[-1]
        point = rp.get(tp, 0)
        log_path = pdir / (_stem(base) + LOG_SUFFIX)
        data = log_path.read_bytes()
        keep = 0
        end_offset = base
        last_offset = base
        for pos, h in iter_batches(data):
            last_offset = h.next_offset
            if h.next_offset <= point:
                keep = pos + h.size
                end_offset = h.next_offset
        if keep >= len(data):
            continue
        with open(log_path, "r+b") as f:
            f.truncate(keep)
        _truncate_offset_index(pdir / (_stem(base) + INDEX_SUFFIX), keep)
        _truncate_time_index(pdir / (_stem(base) + TIME_INDEX_SUFFIX), end_offset - base)
        lost[pdir.name] = {
            "segment": log_path.name, "recovery_point": point,
            "bytes": [keep, len(data)], "offsets": [end_offset, last_offset],
        }
    return lost


def _truncate_offset_index(path: Path, keep_bytes: int) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    n = 0
    for i in range(len(data) // OFFSET_ENTRY_SIZE):
        _rel, position = struct.unpack_from(">ii", data, i * OFFSET_ENTRY_SIZE)
        if position >= keep_bytes:
            break
        n = i + 1
    with open(path, "r+b") as f:
        f.truncate(n * OFFSET_ENTRY_SIZE)


def _truncate_time_index(path: Path, keep_rel_offset: int) -> None:
    if not path.exists():
        return
    data = path.read_bytes()
    n = 0
    for i in range(len(data) // TIME_ENTRY_SIZE):
        _ts, rel = struct.unpack_from(">qi", data, i * TIME_ENTRY_SIZE)
        if rel >= keep_rel_offset:
            break
        n = i + 1
    with open(path, "r+b") as f:
        f.truncate(n * TIME_ENTRY_SIZE)


def corrupt_segment_in(
    log_dir: Path, rng: random.Random, kind: str = "header", topic: str | None = None
) -> dict[str, Any]:
    """Flip bytes in the last batch of a (seeded) closed segment; see the module docstring.
    `topic` limits the choice to that topic's partitions. Returns what was changed, or
    `{"corrupted": None, "why": ...}` when there is no batch to corrupt."""
    if kind not in CORRUPT_KINDS:
        raise ValueError(f"kind must be one of {CORRUPT_KINDS}, not {kind!r}")
    closed: list[tuple[Path, int]] = []
    active: list[tuple[Path, int]] = []
    for pdir in _partition_dirs(log_dir):
        if topic is not None and parse_topic_partition(pdir.name)[0] != topic:
            continue
        bases = _segment_bases(pdir)
        for i, b in enumerate(bases):
            size = (pdir / (_stem(b) + LOG_SUFFIX)).stat().st_size
            if size >= HEADER_SIZE:
                (closed if i + 1 < len(bases) else active).append((pdir, b))
    pool = closed or active
    if not pool:
        return {"corrupted": None, "why": f"no segment with a batch under {log_dir}"}
    pdir, base = pool[rng.randrange(len(pool))]
    path = pdir / (_stem(base) + LOG_SUFFIX)
    data = bytearray(path.read_bytes())
    batches = iter_batches(bytes(data))
    if not batches:
        return {"corrupted": None, "why": f"{path}: no whole batch"}
    pos, h = batches[-1]
    if kind == "header":
        at = pos + MAGIC_OFFSET
    else:
        first = pos + HEADER_SIZE
        end = pos + h.size
        at = first + rng.randrange(end - first) if end > first else pos + h.size - 1
    before = data[at]
    data[at] ^= 0xFF
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([data[at]]))
        f.flush()
        os.fsync(f.fileno())
    return {
        "corrupted": str(path.relative_to(log_dir)), "partition": pdir.name, "kind": kind,
        "closed": bool(closed), "position": at, "batch_position": pos,
        "batch_offsets": [h.base_offset, h.next_offset], "byte": [before, data[at]],
    }
