"""Segment-store benchmark: `uv run python bench/store_bench.py [--rounds N] [--mib M]`.

Everything is measured in the same run on the same file system against a raw baseline:
- append throughput (16 KiB and 1 MiB batches) vs plain os.write of the same batch bytes, the
  same number of times, to a new O_APPEND file in the same kind of directory;
- read throughput (Log.read regions sent with os.sendfile into a socket) vs raw os.sendfile of
  the same segment file in 1 MiB chunks (the store's max_bytes) into the same kind of socket;
  the receiving end is a separate process (as a consumer is), draining into a page-aligned buffer;
  each measurement sends the segment READ_PASSES times (reads are short: this evens out noise);
- recovery time per GiB (full rescan: CRC32C of every batch, index rebuild);
- compaction MB/s (keyed records, 10 % live keys).

The machine is shared and noisy, so raw and store runs are interleaved (pairs, alternating which
goes first) and each line reports min / median / max over N rounds of both throughputs and of the
per-pair ratio store/raw; the aims are checked against the median ratio. Page cache only (no
fsync), as Kafka by default. Bounded: well under 2 minutes.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from broker.store.batch import Record, build_batch
from broker.store.cleaner import LogCleaner
from broker.store.config import LogConfig
from broker.store.log import Log

MiB = 1024 * 1024
READ_CHUNK = 1 * MiB
READ_PASSES = 4  # each read measurement sends the page-cached segment this many times
RECORD_BYTES = 1024


def produced_batch(size: int) -> bytes:
    """A producer's batch of 1 KiB records, `size` bytes or just under (header included)."""
    n = max(1, size // RECORD_BYTES)
    value = RECORD_BYTES - 16
    records = [Record(offset=i, timestamp=1_000 + i, key=None, value=b"") for i in range(n)]
    overhead = len(build_batch(records, base_offset=0))  # header and per-record framing
    value = max(1, (size - overhead) // n - 2)  # the length varint grows by up to 2 bytes
    payload = os.urandom(value)
    records = [Record(offset=i, timestamp=1_000 + i, key=None, value=payload) for i in range(n)]
    batch = build_batch(records, base_offset=0)
    assert len(batch) <= size, (len(batch), size)
    return batch


def pairs(
    rounds: int, raw: Callable[[], float], store: Callable[[], float]
) -> list[tuple[float, float]]:
    """(raw seconds, store seconds) per round, alternating which of the pair runs first."""
    out = []
    for r in range(rounds):
        if r % 2:
            s = store()
            w = raw()
        else:
            w = raw()
            s = store()
        out.append((w, s))
    return out


def summary(label: str, what: str, total: int, runs: list[tuple[float, float]], aim: float) -> str:
    raw = sorted(total / w / MiB for w, _ in runs)
    ours = sorted(total / s / MiB for _, s in runs)
    ratio = sorted(w / s for w, s in runs)

    def mmm(xs: list[float], fmt: str) -> str:
        return "/".join(format(x, fmt) for x in (xs[0], statistics.median(xs), xs[-1]))

    verdict = "meets" if statistics.median(ratio) >= aim else "MISSES"
    return (
        f"{label}: store {mmm(ours, '.0f')} MiB/s   raw {what} {mmm(raw, '.0f')} MiB/s   "
        f"ratio {mmm(ratio, '.2f')}   (aim >= {aim:.2f}: {verdict})"
    )


def bench_append(
    root: Path, batch: bytes, total_bytes: int, rounds: int
) -> list[tuple[float, float]]:
    count = total_bytes // len(batch)
    config = LogConfig(segment_bytes=1024 * MiB, max_message_bytes=2 * MiB)

    def raw() -> float:
        d = root / "raw-0"
        d.mkdir()
        path = d / "00000000000000000000.log"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        write = os.write
        t = time.perf_counter()
        for _ in range(count):
            write(fd, batch)
        elapsed = time.perf_counter() - t
        os.close(fd)
        shutil.rmtree(d)
        return elapsed

    def store() -> float:
        d = root / "append-0"
        log = Log.open(d, config)
        append = log.append_as_leader
        t = time.perf_counter()
        for _ in range(count):
            append(batch, 1)
        elapsed = time.perf_counter() - t
        log.close()
        shutil.rmtree(d)
        return elapsed

    return pairs(rounds, raw, store)


def _drain(sock: socket.socket, total: int) -> None:
    """Child process: receive `total` bytes into a page-aligned buffer, then acknowledge."""
    buf = mmap.mmap(-1, 4 * MiB)
    view = memoryview(buf)
    sock.sendall(b"r")
    got = 0
    while got < total:
        n = sock.recv_into(view)
        if not n:
            break
        got += n
    sock.sendall(b"k")


def timed_send(total: int, send: Callable[[int], None]) -> float:
    """Seconds from the first byte sent until a separate receiver process has all `total`."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the receiver
        code = 0
        try:
            a.close()
            _drain(b, total)
        except BaseException:
            code = 1
        os._exit(code)
    b.close()
    try:
        if a.recv(1) != b"r":
            raise RuntimeError("receiver did not start")
        t = time.perf_counter()
        send(a.fileno())
        if a.recv(1) != b"k":
            raise RuntimeError("receiver did not get every byte")
        elapsed = time.perf_counter() - t
    finally:
        a.close()
        _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"receiver exited with status {status}")
    return elapsed


def bench_read(
    root: Path, batch: bytes, total_bytes: int, rounds: int
) -> tuple[int, list[tuple[float, float]]]:
    d = root / "read-0"
    log = Log.open(d, LogConfig(segment_bytes=1024 * MiB, max_message_bytes=2 * MiB))
    for _ in range(total_bytes // len(batch)):
        log.append_as_leader(batch, 1)
    log.flush()
    seg_path = log.active_segment.log_path
    size = log.active_segment.size
    end = log.log_end_offset

    def raw_send(out_fd: int) -> None:
        fd = os.open(seg_path, os.O_RDONLY)
        sendfile = os.sendfile
        for _ in range(READ_PASSES):
            pos = 0
            while pos < size:
                pos += sendfile(out_fd, fd, pos, min(READ_CHUNK, size - pos))
        os.close(fd)

    def store_send(out_fd: int) -> None:
        read = log.read
        for _ in range(READ_PASSES):
            offset = 0
            while offset < end:
                region = read(offset, READ_CHUNK)
                region.sendfile(out_fd)
                offset = region.next_offset

    total = size * READ_PASSES
    runs = pairs(rounds, lambda: timed_send(total, raw_send), lambda: timed_send(total, store_send))
    log.close()
    shutil.rmtree(d)
    return total, runs


def bench_recovery(root: Path, batch: bytes, total_bytes: int, rounds: int) -> float:
    d = root / "recover-0"
    log = Log.open(d, LogConfig(segment_bytes=128 * MiB))
    for _ in range(total_bytes // len(batch)):
        log.append_as_leader(batch, 1)
    log.close()
    size = sum(p.stat().st_size for p in d.glob("*.log"))

    def recover() -> float:
        t = time.perf_counter()
        Log.open(d, LogConfig(segment_bytes=128 * MiB), recovery_point=0).close()
        return time.perf_counter() - t

    elapsed = min(recover() for _ in range(rounds))
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved raw/store pairs")
    parser.add_argument("--mib", type=int, default=256, help="MiB per measurement")
    args = parser.parse_args()
    rounds, total = args.rounds, args.mib * MiB
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="hiwater-store-bench-"))
    try:
        print(
            f"file system: {root} ; {args.mib} MiB per measurement ; {rounds} interleaved "
            f"raw/store pairs ; figures are min/median/max"
        )
        sizes = (("16 KiB", 16 * 1024), ("1 MiB", MiB))
        for label, size in sizes:
            batch = produced_batch(size)
            runs = bench_append(root, batch, total, rounds)
            nbytes = total // len(batch) * len(batch)
            print(summary(f"append {label:>6} batches", "os.write", nbytes, runs, 0.70))
        for label, size in sizes:
            batch = produced_batch(size)
            nbytes, runs = bench_read(root, batch, total, rounds)
            print(summary(f"read   {label:>6} batches", "sendfile", nbytes, runs, 0.90))
        per_gib = bench_recovery(root, produced_batch(16 * 1024), total, min(rounds, 3))
        print(f"recovery (full rescan, 16 KiB batches): {per_gib:6.2f} s per GiB (best of 3)")
        print(f"compaction: {bench_compaction(root) / MiB:6.1f} MiB/s read and cleaned")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
