"""The storage fault atlas's laboratory: write real logs through the store API, stop (clean or
kill -9), damage one file, start again and classify what happened, in the vocabulary of
`broker.store.atlas.OUTCOMES`. `tests/store/test_store_fault_atlas.py` runs it for every row of
the atlas and checks the row's outcome."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.store.atlas import (
    CHECKPOINT_FILES,
    FILES,
    META_FILE,
    OFFSETS_FILE,
    OTHER_BROKER,
    OTHER_CLUSTER,
)
from broker.store.batch import Record, build_batch, decode_records, iter_headers
from broker.store.checkpoint import write_offsets
from broker.store.config import LogConfig
from broker.store.errors import CorruptRecordError, StoreError
from broker.store.fs import RealFS
from broker.store.manager import LogManager
from broker.store.meta import check_and_write, check_broker_id, read_meta, render_meta, write_meta
from broker.store.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_stem

CONFIG = LogConfig(segment_bytes=6000)
COMPACT = LogConfig(segment_bytes=6000, cleanup_policy="compact")
OFFSETS_TOPIC = "__consumer_offsets"
RECORDS = 60
T0 = 1_700_000_000_000
PAGE = 4096
BROKER_ID = 1
CLUSTER_ID = "q1Wn3bGZR5uwEXMnU3B3Ng"  # as ZooKeeper's /cluster/id holds one

Written = dict[int, bytes]  # offset -> value


def _value(topic: str, partition: int, i: int) -> bytes:
    return b"%s-%d %05d " % (topic.encode(), partition, i) + b"x" * 150


def _epoch(partition: int, i: int) -> int:
    """Partition 0 changes epoch at offset 25, partition 1 at 10 (to another epoch): their
    leader-epoch-checkpoints differ while their segments line up byte for byte in size."""
    if partition == 0:
        return 0 if i < 25 else 1
    return 0 if i < 10 else 2


def _manager(d: Path) -> LogManager:
    return LogManager([d], CONFIG, topic_configs={OFFSETS_TOPIC: COMPACT}, now_ms=T0)


def write_logs(d: Path, stop: str) -> dict[tuple[str, int], Written]:
    """t-0, t-1, __consumer_offsets-0 and -1, RECORDS one-record batches each, every one
    flushed. `stop`: "clean" (shutdown writes every checkpoint) or "kill" (the checkpoints are
    those written before the first record; unwritten index entries are lost)."""
    mgr = _manager(d)
    write_meta(RealFS(), d, BROKER_ID, CLUSTER_ID)
    tps = [("t", 0), ("t", 1), (OFFSETS_TOPIC, 0), (OFFSETS_TOPIC, 1)]
    logs = {tp: mgr.get_or_create_log(*tp, now_ms=T0) for tp in tps}
    mgr.checkpoint_all()
    written: dict[tuple[str, int], Written] = {}
    for (topic, p), log in logs.items():
        got: Written = {}
        for i in range(RECORDS):
            key = b"k%d" % (i % 5) if topic == OFFSETS_TOPIC else None
            value = _value(topic, p, i)
            batch = build_batch([Record(0, T0 + i, key, value)], base_offset=0)
            first, _ = log.append_as_leader(batch, _epoch(p, i), now_ms=T0 + i)
            got[first] = value
        log.flush()
        log.high_watermark = log.log_end_offset
        written[(topic, p)] = got
    if stop == "clean":
        mgr.shutdown()
    else:
        for log in logs.values():
            log.abandon()
    return written


def target(d: Path, file: str) -> tuple[Path, tuple[str, int]]:
    """The file a row damages and the partition whose records the row checks."""
    t0 = d / "t-0"
    segs = sorted(p.name for p in t0.iterdir() if p.name.endswith(LOG_SUFFIX))
    first, last = segs[0].removesuffix(LOG_SUFFIX), segs[-1].removesuffix(LOG_SUFFIX)
    paths = {
        "segment .log (sealed)": (t0 / (first + LOG_SUFFIX), ("t", 0)),
        "segment .log (active)": (t0 / (last + LOG_SUFFIX), ("t", 0)),
        ".index": (t0 / (first + INDEX_SUFFIX), ("t", 0)),
        ".timeindex": (t0 / (first + TIME_INDEX_SUFFIX), ("t", 0)),
        "leader-epoch-checkpoint": (t0 / "leader-epoch-checkpoint", ("t", 0)),
        OFFSETS_FILE: (
            d / f"{OFFSETS_TOPIC}-0" / (file_stem(0) + LOG_SUFFIX),
            (OFFSETS_TOPIC, 0),
        ),
    }
    for name in (*CHECKPOINT_FILES, META_FILE):
        paths[name] = (d / name, ("t", 0))
    assert set(paths) == set(FILES), sorted(set(FILES) ^ set(paths))
    return paths[file]


def _other(d: Path, path: Path) -> bytes:
    """The same file of another partition (or, for a directory checkpoint, a valid one of
    another log dir: it names only partitions this dir does not hold)."""
    if path.parent == d:
        other = d.parent / "elsewhere"
        other.mkdir(exist_ok=True)
        if path.name == META_FILE:  # another log dir of the same broker
            write_meta(RealFS(), other, BROKER_ID, CLUSTER_ID)
            return (other / path.name).read_bytes()
        write_offsets(RealFS(), other / path.name, {("elsewhere", 0): 7, ("elsewhere", 1): 3})
        return (other / path.name).read_bytes()
    topic, _, _ = path.parent.name.rpartition("-")
    return (d / f"{topic}-1" / path.name).read_bytes()


def _zero_page(b: bytes) -> bytes:
    start = (len(b) // 2) // PAGE * PAGE
    end = min(len(b), start + PAGE)
    return b[:start] + bytes(end - start) + b[end:]


def _flip(b: bytes) -> bytes:
    if not b:
        return b
    mid = _flip_at(len(b))
    return b[:mid] + bytes([b[mid] ^ 0x01]) + b[mid + 1 :]


def _flip_at(size: int) -> int:
    """Mid-file, 40 bytes on: in a segment, inside a record rather than a batch's offset
    prefix (which no CRC covers, in Kafka's format as in ours)."""
    return min(size - 1, size // 2 + 40)


DAMAGES: dict[str, Callable[[bytes], bytes | None]] = {
    "torn tail": lambda b: b[: max(0, len(b) - 7)],
    "bit flip in the middle": _flip,
    "zeroed 4 KiB page": _zero_page,
    "truncated to 0 bytes": lambda b: b"",
    "missing": lambda b: None,
    "garbage": lambda b: random.Random(len(b)).randbytes(max(len(b), 64)),
}
OTHER = "valid file of another partition"


DAMAGES[OTHER_CLUSTER] = lambda b: render_meta(BROKER_ID, "zzOtherClusterIdzzzzzz")
DAMAGES[OTHER_BROKER] = lambda b: render_meta(BROKER_ID + 1, CLUSTER_ID)


def damaged_range(fault: str, size: int) -> tuple[int, int]:
    """The byte range [start, end) of the file that the fault changes or removes."""
    if fault == "torn tail":
        return max(0, size - 7), size
    if fault == "bit flip in the middle":
        return _flip_at(size), _flip_at(size) + 1
    if fault == "zeroed 4 KiB page":
        start = (size // 2) // PAGE * PAGE
        return start, min(size, start + PAGE)
    return 0, size


def inject(d: Path, file: str, fault: str) -> tuple[Path, int | None]:
    """Damage the row's file; returns it and, for a segment, the first offset damaged."""
    path, _ = target(d, file)
    good = path.read_bytes()
    first_damaged = None
    if path.name.endswith(LOG_SUFFIX):
        start, end = damaged_range(fault, len(good))
        for pos, h in iter_headers(good):
            if pos + h.size > start and pos < end:
                first_damaged = h.base_offset
                break
    bad = _other(d, path) if fault == OTHER else DAMAGES[fault](good)
    if bad is None:
        path.unlink()
    else:
        path.write_bytes(bad)
    return path, first_damaged


@dataclass
class Observed:
    outcome: str
    detail: str
    warnings: list[str]


def read_back(mgr: LogManager, tp: tuple[str, int]) -> tuple[Written, str | None]:
    """Every record from the log start to the log end, and the error that stopped the read."""
    log = mgr.get_log(*tp)
    assert log is not None
    got: Written = {}
    offset = log.log_start_offset
    for _ in range(10 * RECORDS):
        if offset >= log.log_end_offset:
            break
        try:
            data = log.read_bytes(offset, 1 << 20)
        except CorruptRecordError as e:
            return got, str(e)
        if not data:
            break
        for pos, h in iter_headers(data):
            for r in decode_records(data[pos : pos + h.size], h):
                got[r.offset] = r.value or b""
            offset = h.next_offset
    return got, None


def observe(
    tmp: Path,
    file: str,
    fault: str,
    stop: str,
    caplog_records: Callable[[], list[logging.LogRecord]],
) -> Observed:
    """Write, stop, damage, start again; classify what the start and the reads did."""
    d = tmp / "data"
    written = write_logs(d, stop)
    _, tp = target(d, file)
    path, first_damaged = inject(d, file, fault)
    want = written[tp]
    try:
        # as the broker starts: broker.id before loading, cluster.id once ZooKeeper answered
        check_broker_id(RealFS(), [d], BROKER_ID)
        mgr = _manager(d)
        check_and_write(RealFS(), [d], BROKER_ID, CLUSTER_ID)
    except StoreError as e:
        line = str(e)
        named = path.name in line and "\n" not in line
        return Observed("refuse", line if named else f"UNNAMED: {line}", [line])
    got, error = read_back(mgr, tp)
    # the other partitions serve regardless
    for other_tp, records in written.items():
        if other_tp != tp:
            assert read_back(mgr, other_tp)[0] == records, f"{other_tp} damaged by {file}"
    mgr.shutdown()
    if file == META_FILE:  # whatever happened, the dir now names this broker and cluster
        assert read_meta(RealFS(), d) == {"version": "0", "broker.id": str(BROKER_ID),
                                          "cluster.id": CLUSTER_ID}, path.read_bytes()
    warnings = [r.getMessage() for r in caplog_records() if r.name == "hiwater.store"]
    named = any(path.name in w for w in warnings)
    if error is not None:
        cut = min(set(want) - set(got), default=None)
        ok = all(got[o] == want[o] for o in got)
        return Observed(
            "read error",
            f"reads fail from offset {cut}; earlier intact={ok}; named={path.name in error}",
            warnings,
        )
    if got == want:
        return Observed("rebuilt" if named else "intact", "", warnings)
    if set(got) <= set(want) and all(got[o] == want[o] for o in got):
        missing = sorted(set(want) - set(got))
        end = max(got, default=-1) + 1
        if missing == list(range(end, max(want) + 1)):
            at = "at the damage" if end == first_damaged else f"at {end}, damage {first_damaged}"
            return Observed("truncated" if named else "truncated silently", at, warnings)
        gap = f"missing {missing[0]}..{missing[-1]}"
        return Observed("hole" if named else "hole silently", gap, warnings)
    return Observed("substituted", "records of another partition are served", warnings)

