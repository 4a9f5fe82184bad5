"""Segment-store benchmark: `uv run python bench/store_bench.py`.

Everything is measured in the same run on the same file system against a raw baseline:
- append throughput (16 KiB and 1 MiB batches) vs plain os.write of the same bytes;
- read throughput (Log.read regions sent with os.sendfile into a socket) vs raw os.sendfile of
  the same file in the same chunk size;
- recovery time per GiB (full rescan: CRC32C of every batch, index rebuild);
- compaction MB/s (keyed records, 10 % live keys).
Page cache only (no fsync), as Kafka by default. Best of several rounds. Bounded: < 2 minutes.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.store.batch import Record, build_batch
from broker.store.cleaner import LogCleaner
from broker.store.config import LogConfig
from broker.store.log import Log

MiB = 1024 * 1024
APPEND_BYTES = 256 * MiB
ROUNDS = 3
READ_CHUNK = 1 * MiB


def produced_batch(size: int) -> bytes:
    record_value = 1024 - 16
    n = max(1, size // 1024)
    payload = os.urandom(record_value)
    records = [Record(offset=i, timestamp=1_000 + i, key=None, value=payload) for i in range(n)]
    return build_batch(records, base_offset=0)


def best(fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(ROUNDS))


def bench_append(root: Path, batch: bytes) -> tuple[float, float]:
    count = APPEND_BYTES // len(batch)
    config = LogConfig(segment_bytes=1024 * MiB, max_message_bytes=2 * MiB)

    def raw() -> float:
        path = root / "raw.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        t = time.perf_counter()
        for _ in range(count):
            os.write(fd, batch)
        elapsed = time.perf_counter() - t
        os.close(fd)
        path.unlink()
        return elapsed

    def store() -> float:
        d = root / "append-0"
        shutil.rmtree(d, ignore_errors=True)
        log = Log.open(d, config)
        append = log.append_as_leader
        t = time.perf_counter()
        for _ in range(count):
            append(batch, 1)
        elapsed = time.perf_counter() - t
        log.close()
        shutil.rmtree(d)
        return elapsed

    total = count * len(batch)
    return total / best(raw), total / best(store)


def drain(sock: socket.socket, total: int, done: threading.Event) -> None:
    buf = bytearray(4 * MiB)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = sock.recv_into(view)
        if not n:
            break
        got += n
    done.set()


def timed_send(total: int, send: Callable[[int], None]) -> float:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    done = threading.Event()
    reader = threading.Thread(target=drain, args=(b, total, done), daemon=True)
    reader.start()
    t = time.perf_counter()
    send(a.fileno())
    done.wait(60)
    elapsed = time.perf_counter() - t
    reader.join(5)
    a.close()
    b.close()
    return elapsed


def bench_read(root: Path, batch: bytes) -> tuple[float, float]:
    d = root / "read-0"
    log = Log.open(d, LogConfig(segment_bytes=1024 * MiB))
    for _ in range(APPEND_BYTES // len(batch)):
        log.append_as_leader(batch, 1)
    log.flush()
    seg_path = log.active_segment.log_path
    size = log.active_segment.size
    end = log.log_end_offset

    def raw_send(out_fd: int) -> None:
        fd = os.open(seg_path, os.O_RDONLY)
        pos = 0
        while pos < size:
            pos += os.sendfile(out_fd, fd, pos, min(READ_CHUNK, size - pos))
        os.close(fd)

    def store_send(out_fd: int) -> None:
        offset = 0
        read = log.read
        while offset < end:
            region = read(offset, READ_CHUNK)
            region.sendfile(out_fd)
            offset = region.next_offset

    raw = size / best(lambda: timed_send(size, raw_send))
    ours = size / best(lambda: timed_send(size, store_send))
    log.close()
    shutil.rmtree(d)
    return raw, ours


def bench_recovery(root: Path, batch: bytes) -> float:
    d = root / "recover-0"
    log = Log.open(d, LogConfig(segment_bytes=128 * MiB))
    for _ in range(APPEND_BYTES // len(batch)):
        log.append_as_leader(batch, 1)
    log.close()
    size = sum(p.stat().st_size for p in d.glob("*.log"))

    def recover() -> float:
        t = time.perf_counter()
        Log.open(d, LogConfig(segment_bytes=128 * MiB), recovery_point=0).close()
        return time.perf_counter() - t

    elapsed = best(recover)
    shutil.rmtree(d)
    return elapsed * (1024 * MiB) / size


def bench_compaction(root: Path) -> float:
    d = root / "compact-0"
    config = LogConfig(
        cleanup_policy="compact", segment_bytes=8 * MiB, min_cleanable_dirty_ratio=0.0
    )
    log = Log.open(d, config)
    value = os.urandom(1000)
    keys = 2_000
    offset = 0
    for b in range(32 * MiB // (16 * 1024)):
        records = [
            Record(offset=i, timestamp=1_000, key=b"key-%d" % ((offset + i) % keys), value=value)
            for i in range(16)
        ]
        log.append_as_leader(build_batch(records, base_offset=0), 1, now_ms=1_000 + b)
        offset += 16
    log.roll(10_000)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner()
    t = time.perf_counter()
    cleaner.clean(log, 20_000)
    elapsed = time.perf_counter() - t
    log.close()
    shutil.rmtree(d)
    return cleaner.stats.bytes_read / elapsed


def main() -> None:
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="hiwater-store-bench-"))
    try:
        print(f"file system: {root} ; {APPEND_BYTES // MiB} MiB per measurement, best of {ROUNDS}")
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", MiB)):
            batch = produced_batch(size)
            raw, ours = bench_append(root, batch)
            print(
                f"append {label:>6} batches: store {ours / MiB:8.0f} MiB/s   raw os.write "
                f"{raw / MiB:8.0f} MiB/s   ratio {ours / raw:5.2f}   (aim >= 0.70)"
            )
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", MiB)):
            batch = produced_batch(size)
            raw, ours = bench_read(root, batch)
            print(
                f"read   {label:>6} batches: store {ours / MiB:8.0f} MiB/s   raw sendfile "
                f"{raw / MiB:8.0f} MiB/s   ratio {ours / raw:5.2f}   (aim >= 0.90)"
            )
        per_gib = bench_recovery(root, produced_batch(16 * 1024))
        print(f"recovery (full rescan, 16 KiB batches): {per_gib:6.2f} s per GiB")
        print(f"compaction: {bench_compaction(root) / MiB:6.1f} MiB/s read and cleaned")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
