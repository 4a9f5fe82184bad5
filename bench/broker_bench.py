"""Broker benchmark: `uv run python bench/broker_bench.py [--records N] [--rounds R] [--quick]`.

confluent-kafka is the load generator. Everything is measured in the same run, on this
machine, and printed as ratios:

- baselines: (a) raw loopback TCP, a Python sendall/recv_into pair in two processes, 1 MiB
  writes; (b) raw loopback sendfile, os.sendfile of a page-cached file (8 MiB calls) into a
  TCP socket, Python receiver in another process; plus two machine properties that a broker
  pays for every byte it stores: first touch of fresh memory (us per 4 KiB page) and
  appending 1 MiB writes to a new file (page cache, no fsync);
- the load generator's own ceiling: the same confluent Producer (same config, same records)
  against a sink, a one-node fake Kafka broker in another process that answers Produce
  acks=all at once (broker.wire codecs; it keeps the batches in memory); then the same
  confluent Consumer against the sink, which serves Fetch from those in-memory batches;
- the real thing: LocalCluster with 3 brokers, min.insync.replicas=2, a topic with RF 3,
  in the steady page cache of a long-running broker (a memory cgroup of --page-cache-mib,
  full of clean page cache before the cluster starts, so new log pages reuse reclaimed ones;
  on a fresh VM a never-touched page costs ~2.5 CPU-s per GB, tripled by RF 3: see
  bench/_page_cache.py; the fill's cost is printed, and --page-cache-mib 0 measures cold),
  its log.dirs on XFS as Kafka's filesystem notes recommend (ext4's delayed allocation
  stalled appends 20-170 ms behind writeback, and ext4 mounted nodelalloc spends twice XFS's
  kernel time per record: bench/_data_fs.py; --data-fs ext4 measures that one, and
  --data-fs-mib 0 the scratch directory's filesystem);
  produce acks=all (MB/s, rec/s; p50/p99 latency from delivery callbacks, both at saturation
  and in --rounds paced runs at half the measured rate), then a caught-up consume of the same data
  (Consumer.assign from offset 0); CPU of every process per phase, as CPU-s per GB.

The sink runs first, then the cluster; each figure is min/median/max over --rounds. The
machine is shared: every run waits (bounded) for a quiet 0.5 s window and reports the CPU
used by processes that are not ours ("foreign", % of one core). CPU-s per GB is the figure
least disturbed by foreign load; "CPU-bound produce ceiling" turns it into the MB/s the two
cores would give if nothing else ran. A benchmark never fails on an aim: it reports it.

The summary prints issue #12's aims as ratios (measured / aim, and whether met): acks=all
RF=3 p50 <= 5 ms and p99 <= 20 ms at half load; produce >= 150 MB/s or >= 0.7 of the
producer's ceiling against the sink, whichever is lower; caught-up consume >= 0.8 of the
consumer's ceiling; brokers <= 6 CPU-s per GB produced.

    --profile DIR        brokers run under cProfile (slower!) during the produce and consume phases
                         (bench/_profiled_broker.py); top functions printed, .prof kept
    --compare BOOTSTRAP  the same producer and consumer against another Kafka-protocol broker
                         in the same run (127.0.0.0/8 only unless --compare-any-host)
    --curve [FRACTIONS]  also acks=all p50/p99 paced at fractions of the saturated rate
                         (default 1, 5, 10, 25, 50 %): flat as the rate falls = structural
                         waits; growing with the rate = CPU capacity
    --latency-only       only the cluster: saturated rounds, the curve, and acks=1 at the
                         lowest rate (before/after runs; with --profile: core steps, loop
                         iterations and clock handles per leader append)
    --soak [MINUTES]     soak mode only (default 10 min): acks=all at half load while the
                         leader of partition 0 is killed and restarted; p99 and every
                         broker's RSS per minute; says whether RSS stayed flat
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import mmap
import os
import resource
import shutil
import signal
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.recordbatch import HEADER, HEADER_SIZE
from broker.runtime.cluster import LocalCluster
from broker.wire import (
    Close,
    FetchPartitionResponse,
    FetchResponseBody,
    FetchTopicResponse,
    Reply,
    Request,
    api_versions_response,
    build,
    decode_request,
    encode_fetch_response,
    encode_response,
    response_class,
)
from harness.clients.logs import quiet_logger  # librdkafka's lines off stderr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data_fs import KINDS, DataFs  # bench/ is not a package
from _page_cache import SteadyPageCache

MB = 1_000_000
MiB = 1 << 20
TOPIC = "bench"
CLK = os.sysconf("SC_CLK_TCK")

# The aims of issue #12 (1 KiB records, acks=all, RF=3, min ISR 2, 3 brokers on 2 cores):
AIM_P50_MS = 5.0  # acks=all latency at half load, p50 ...
AIM_P99_MS = 20.0  # ... and p99
AIM_PRODUCE_MBS = 150.0  # produce >= 150 MB/s, or >= 0.7 of the producer's ceiling against
AIM_PRODUCE_OF_CEILING = 0.7  # the sink, whichever is lower
AIM_CONSUME_OF_CEILING = 0.8  # caught-up consume >= 0.8 of the consumer's ceiling (sink)
AIM_BROKER_CPU_S_PER_GB = 6.0  # all brokers together, per GB produced


# -- CPU accounting ---------------------------------------------------------------------------


def _proc_cpu(pid: int) -> float:
    """utime+stime of a live process in seconds (0 if gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


def _machine_cpu() -> tuple[float, float]:
    """CPU-seconds the whole machine spent not idle since boot, and idle waiting for I/O
    (iowait: a CPU had nothing to run while a task of it waited for the disk)."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    v = [int(x) for x in parts]
    idle = v[3] + v[4]  # idle + iowait
    return (sum(v[:8]) - idle) / CLK, v[4] / CLK


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


class CpuMeter:
    """CPU used during a phase: by named processes, by this process (the load generator and
    its librdkafka threads), by all our descendants, and by everything else ("foreign")."""

    def __init__(self, named: dict[str, int] | None = None) -> None:
        self.named = dict(named or {})

    def __enter__(self) -> CpuMeter:
        self.t0 = time.perf_counter()
        self.busy0, self.iowait0 = _machine_cpu()
        self.self0 = _self_cpu()
        self.kids0 = _children_cpu()
        self.tree0 = {p: _proc_cpu(p) for p in _descendants(os.getpid())}
        self.named0 = {k: _proc_cpu(p) for k, p in self.named.items()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        busy, iowait = _machine_cpu()
        busy -= self.busy0
        self.iowait_s = iowait - self.iowait0
        self.self_s = _self_cpu() - self.self0
        tree1 = {p: _proc_cpu(p) for p in _descendants(os.getpid())}
        ours = sum(v - self.tree0.get(p, 0.0) for p, v in tree1.items())
        ours += _children_cpu() - self.kids0  # children that exited and were waited for
        self.ours_s = ours
        self.foreign_s = max(0.0, busy - ours)
        self.named_s = {k: _proc_cpu(p) - self.named0[k] for k, p in self.named.items()}

    def pct(self, seconds: float) -> float:
        return 100.0 * seconds / self.wall if self.wall > 0 else 0.0


def foreign_pct(window_s: float) -> float:
    """CPU used by processes that are not ours over `window_s`, in % of one core."""
    with CpuMeter() as m:
        time.sleep(window_s)
    return m.pct(m.foreign_s)


QUIET = {"limit": 30.0, "timeout": 30.0, "waited": 0.0, "gave_up": 0, "synced": 0.0}


def wait_quiet() -> None:
    """Before a measurement: the dirty pages of the runs before it are written back first
    (`os.sync`), then wait (bounded) for a 0.5 s window in which foreign processes use at
    most QUIET["limit"] % of one core. The machine is shared; this does not make it quiet,
    it only avoids starting a run in the middle of someone else's burst. The write-back is
    there because a saturated round leaves gigabytes dirty (three replicas on one disk), and
    the kernel's writeback of them (on XFS it allocates the blocks too) ran on the two cores
    through the half-load run that followed: that run then measured the drain of an
    overload, not half load (p99 414 ms against 10 ms, 2026-11-26 23:14, bench/README.md)."""
    t = time.monotonic()
    os.sync()
    QUIET["synced"] += time.monotonic() - t
    t = time.monotonic()
    while foreign_pct(0.5) > QUIET["limit"]:
        if time.monotonic() - t > QUIET["timeout"]:
            QUIET["gave_up"] += 1
            break
    QUIET["waited"] += time.monotonic() - t


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- baselines: raw loopback ------------------------------------------------------------------


def _fork(child: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            child()
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    return pid


def _wait(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError(f"child {pid} exited with status {status}")


def _receiver(listener: socket.socket, total: int) -> None:
    """Child: accept one connection, drain `total` bytes into a page-aligned buffer, ack."""
    conn, _ = listener.accept()
    listener.close()
    buf = mmap.mmap(-1, MiB)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    conn.sendall(b"k" if got == total else b"x")
    conn.close()


def _timed_stream(total: int, send: Callable[[socket.socket], None]) -> float:
    """Seconds for `send` to deliver `total` bytes over loopback TCP to another process."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    pid = _fork(lambda: _receiver(lst, total))
    lst_addr = lst.getsockname()
    lst.close()
    s = socket.create_connection(lst_addr)
    try:
        t = time.perf_counter()
        send(s)
        if s.recv(1) != b"k":
            raise RuntimeError("receiver did not get every byte")
        elapsed = time.perf_counter() - t
    finally:
        s.close()
        _wait(pid)
    return elapsed


def loopback_tcp(total: int) -> float:
    """MB/s of sendall(1 MiB) -> recv_into(1 MiB), page-aligned buffers."""
    buf = mmap.mmap(-1, MiB)
    buf.write(os.urandom(MiB))
    chunk = memoryview(buf)
    count = total // MiB

    def send(s: socket.socket) -> None:
        for _ in range(count):
            s.sendall(chunk)

    return count * MiB / _timed_stream(count * MiB, send) / MB


def loopback_sendfile(path: Path, passes: int) -> float:
    """MB/s of os.sendfile (8 MiB calls) of a page-cached file, `passes` times."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        def send(s: socket.socket) -> None:
            out = s.fileno()
            for _ in range(passes):
                pos = 0
                while pos < size:
                    pos += os.sendfile(out, fd, pos, min(8 * MiB, size - pos))

        return size * passes / _timed_stream(size * passes, send) / MB
    finally:
        os.close(fd)


def first_touch_us(mib: int) -> float:
    """Microseconds per 4 KiB page to touch fresh anonymous memory (page fault + zeroing; on a
    VM whose balloon reports free pages to the host, also the host's fault)."""
    m = mmap.mmap(-1, mib * MiB)
    try:
        t = time.perf_counter()
        for off in range(0, mib * MiB, 4096):
            m[off] = 1
        return (time.perf_counter() - t) / (mib * MiB // 4096) * 1e6
    finally:
        m.close()


def page_cache_append(path: Path, mib: int) -> tuple[float, float]:
    """(MB/s, CPU-s per GB) of appending 1 MiB writes to a new file (page cache, no fsync),
    as a broker appends to its log."""
    buf = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        c, t = time.process_time(), time.perf_counter()
        for _ in range(mib):
            os.write(fd, buf)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        os.close(fd)
        path.unlink()
    return mib * MiB / wall / MB, cpu / (mib * MiB / 1e9)


# -- the sink: a one-node fake Kafka broker ----------------------------------------------------


class SinkLog:
    """Per-partition in-memory log of the batches produced into the sink."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.bases: list[int] = []  # base offset of each batch
        self.positions: list[int] = []  # byte position of each batch
        self.end = 0

    def append(self, records: bytes) -> int:
        base = self.end
        pos, n = 0, len(records)
        start = len(self.data)
        self.data += records
        while pos + HEADER_SIZE <= n:  # librdkafka sends one batch per partition, but be exact
            h = HEADER.unpack_from(records, pos)
            size = 12 + h[1]
            struct.pack_into(">q", self.data, start + pos, self.end)  # assign the offset
            self.bases.append(self.end)
            self.positions.append(start + pos)
            self.end += h[6] + 1
            pos += size
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        i = bisect.bisect_right(self.bases, offset) - 1
        if i < 0 or offset >= self.end:
            return b""
        start = self.positions[i]
        j = bisect.bisect_right(self.positions, start + max_bytes) - 1  # whole batches
        stop = self.positions[j] if j > i else None
        if stop is None:  # at least one batch (Kafka's min_one_message)
            stop = self.positions[i + 1] if i + 1 < len(self.positions) else len(self.data)
        return bytes(memoryview(self.data)[start:stop])


class Sink:
    """Answers ApiVersions, Metadata (one broker: itself; topic `bench` with N partitions),
    Produce (acks=all -> NONE at once, increasing base offsets; batches kept in memory) and
    Fetch (from those batches). Thread per connection; runs in its own process."""

    def __init__(self, host: str, port: int, partitions: int) -> None:
        self.host, self.port, self.partitions = host, port, partitions
        self.logs = [SinkLog() for _ in range(partitions)]
        self.lock = threading.Lock()
        self.requests = 0
        self.produced_bytes = 0
        self.produced_batches = 0

    def serve(self, lst: socket.socket) -> None:
        while True:
            conn, _ = lst.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _recv_exact(self, conn: socket.socket, buf: bytearray, n: int) -> bool:
        view = memoryview(buf)[:n]
        got = 0
        while got < n:
            k = conn.recv_into(view[got:])
            if not k:
                return False
            got += k
        return True

    def _conn(self, conn: socket.socket) -> None:
        buf = bytearray(64 * MiB)
        head = bytearray(4)
        try:
            while True:
                if not self._recv_exact(conn, head, 4):
                    return
                (size,) = struct.unpack(">i", head)
                if size > len(buf):
                    buf = bytearray(size)
                if not self._recv_exact(conn, buf, size):
                    return
                decoded = decode_request(bytes(memoryview(buf)[:size]))
                if isinstance(decoded, Close):
                    return
                if isinstance(decoded, Reply):
                    conn.sendall(decoded.frame)
                    continue
                out = self._handle(decoded)
                if len(out) == 1 or sum(map(len, out)) < 1 << 16:
                    conn.sendall(b"".join(out))
                else:
                    for c in out:
                        conn.sendall(c)
        except OSError:
            return
        finally:
            conn.close()

    def _handle(self, req: Request) -> list[bytes]:
        self.requests += 1
        key = req.api_key
        if key == 18:
            return [encode_response(req.correlation_id, api_versions_response(req.api_version))]
        if key == 3:
            return [self._metadata(req)]
        if key == 0:
            return self._produce(req)
        if key == 1:
            return self._fetch(req)
        if key == 10:  # FindCoordinator: we are it
            return [self._encode(req, {
                "error_code": 0, "error_message": None, "node_id": 1, "host": self.host,
                "port": self.port, "coordinators": []})]
        raise RuntimeError(f"the sink does not serve api key {key}")

    def _encode(self, req: Request, data: dict[str, Any]) -> bytes:
        return encode_response(req.correlation_id,
                               build(response_class(req.api_key, req.api_version), data))

    def _metadata(self, req: Request) -> bytes:
        import uuid

        parts = [{"error_code": 0, "partition_index": i, "leader_id": 1, "leader_epoch": 0,
                  "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
                 for i in range(self.partitions)]
        return self._encode(req, {
            "brokers": [{"node_id": 1, "host": self.host, "port": self.port, "rack": None}],
            "cluster_id": "sink", "controller_id": 1,
            "topics": [{"error_code": 0, "name": TOPIC, "topic_id": uuid.uuid5(
                uuid.NAMESPACE_DNS, TOPIC), "is_internal": False, "partitions": parts,
                "topic_authorized_operations": -2147483648}],
            "cluster_authorized_operations": -2147483648})

    def _produce(self, req: Request) -> list[bytes]:
        body: Any = req.body
        topics = []
        for t in body.topic_data:
            parts = []
            for p in t.partition_data:
                records = p.records or b""
                with self.lock:
                    base = self.logs[int(p.index)].append(records)
                    self.produced_bytes += len(records)
                    self.produced_batches += 1
                parts.append({"index": int(p.index), "error_code": 0, "base_offset": base,
                              "log_append_time": -1, "log_start_offset": 0,
                              "record_errors": [], "error_message": None})
            topics.append({"name": t.name, "partition_responses": parts})
        if int(body.acks) == 0:
            return []
        return [self._encode(req, {"responses": topics, "throttle_time": 0})]

    def _fetch(self, req: Request) -> list[bytes]:
        body: Any = req.body
        budget = int(body.max_bytes)
        topics = []
        total = 0
        for t in body.topics:
            parts = []
            for p in t.partitions:
                lg = self.logs[int(p.partition)]
                data = lg.read(int(p.fetch_offset), min(int(p.partition_max_bytes),
                                                        max(budget - total, 0)))
                total += len(data)
                parts.append(FetchPartitionResponse(
                    int(p.partition), lg.end, last_stable_offset=lg.end, log_start_offset=0,
                    records=(data,) if data else ()))
            topics.append(FetchTopicResponse(t.topic, tuple(parts)))
        if total == 0:  # nothing new: hold the poll a little, as a broker would
            time.sleep(min(0.1, body.max_wait.total_seconds()))
        frame = encode_fetch_response(req.api_version, req.correlation_id,
                                      FetchResponseBody(tuple(topics)))
        return [c for c in frame.chunks if isinstance(c, bytes)]


@dataclass
class SinkProcess:
    partitions: int
    host: str = "127.0.0.1"
    port: int = 0
    pid: int = 0

    def __enter__(self) -> SinkProcess:
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind((self.host, 0))
        lst.listen(64)
        self.port = lst.getsockname()[1]
        sink = Sink(self.host, self.port, self.partitions)
        self.pid = _fork(lambda: sink.serve(lst))
        lst.close()
        return self

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


# -- load generator -----------------------------------------------------------------------------


@dataclass
class ProduceResult:
    records: int
    seconds: float
    latencies_ms: list[float]
    errors: int
    cpu: CpuMeter | None = None
    # per record (sorted): produce() to the first delivery report of its batch, where known
    # (paced runs with a report per record): see `batch_acked_ms`
    acked_ms: list[float] = field(default_factory=list)

    @property
    def mbs(self) -> float:
        return self.records * VALUE_BYTES / self.seconds / MB

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def pct(self, q: float) -> float:
        return _quantile(self.latencies_ms, q)

    def pct_acked(self, q: float) -> float:
        return _quantile(self.acked_ms, q)


def _quantile(xs: list[float], q: float) -> float:
    """The q-quantile of sorted `xs` (nan when empty)."""
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def batch_acked_ms(marks: list[tuple[float, int, int, float]]) -> list[float]:
    """Latency to the first delivery report of each record's batch, from (callback time,
    partition, offset, latency s) per record in callback order. librdkafka takes a record's
    latency when the Python callback's Message is built, and a batch's reports are served
    one Python callback after another: the last of 340 records in a batch waited for the 339
    callbacks before it (0.27-0.30 ms on average at 174 MB/s, 2026-11-27), time the producer
    spends in this bench's Python, not waiting for the brokers. Every record of a batch was
    acknowledged by the same response, so the first callback of the batch bounds them all.
    A batch is a run of consecutive offsets of one partition in callback order."""
    out: list[float] = []
    first = -1.0
    part = off = -1
    for t, p, o, lat in marks:
        if p != part or o != off + 1:
            first = t
        part, off = p, o
        out.append((lat - (t - first)) * 1000)
    out.sort()
    return out


VALUE_BYTES = 1024


@dataclass
class PacedRuns:
    """The half-load measurement, repeated: each figure is the median over the runs, as
    every other figure of this bench is over --rounds. One 6 s run's p50 moved by 1 ms
    between runs at the same rate within minutes (4.3-5.5 ms at 174 MB/s, 2026-11-27,
    bench/README.md), with the state of the page cache and the disk's writeback, more than
    the changes it is meant to judge."""
    runs: list[ProduceResult]

    def pct(self, q: float) -> float:
        return med(r.pct(q) for r in self.runs)

    def span(self, q: float) -> str:
        xs = [r.pct(q) for r in self.runs]
        return f"{min(xs):.1f}-{max(xs):.1f}" if len(xs) > 1 else f"{xs[0]:.1f}"

    def pct_acked(self, q: float) -> float:
        return med(r.pct_acked(q) for r in self.runs)

    @property
    def mbs(self) -> float:
        return med(r.mbs for r in self.runs)


def paced_runs(conf: dict[str, Any], partitions: int, rate: float, value: bytes, rounds: int,
               seconds: float, label: str, named: dict[str, int] | None = None,
               every: int = 1, topic: str = TOPIC) -> PacedRuns:
    """`rounds` runs at `rate` records/s of `seconds` each; a line per run, with the foreign
    CPU and the machine's iowait (the disk's writeback stalling appends shows there)."""
    out = PacedRuns([])
    for i in range(max(1, rounds)):
        r = produce(conf, partitions, max(1000, int(rate * seconds)), value, rate=rate,
                    named=named, every=every, topic=topic)
        out.runs.append(r)
        extra = ""
        if r.cpu is not None:
            extra = (f"  foreign CPU {r.cpu.pct(r.cpu.foreign_s):.0f} %  iowait "
                     f"{r.cpu.pct(r.cpu.iowait_s):.0f} %")
        print(f"{label} produce paced at {rate:,.0f} rec/s ({r.mbs:.1f} MB/s), run {i + 1}: "
              f"p50 {r.pct(.5):.1f} ms p99 {r.pct(.99):.1f} ms (to the batch's first report: "
              f"{r.pct_acked(.5):.1f} / {r.pct_acked(.99):.1f})  errors {r.errors}{extra}")
    return out


def producer_config(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "max.in.flight.requests.per.connection": args.max_in_flight,
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.kbytes": 256 * 1024,
        "queue.buffering.max.messages": 1_000_000,
        "log.connection.close": False,
        "logger": quiet_logger(),
        **dict(kv.split("=", 1) for kv in args.producer_opt),
    }


def produce(conf: dict[str, Any], partitions: int, records: int, value: bytes,
            rate: float | None = None, named: dict[str, int] | None = None,
            every: int = 1, topic: str = TOPIC) -> ProduceResult:
    """`records` values of `value` round-robin over the partitions, as fast as possible (or at
    `rate` records/s); the latency of every `every`-th record from its delivery callback
    (librdkafka's produce()-to-acknowledged time)."""
    p = Producer(conf)
    lat: list[float] = []
    errors = [0]
    marks: list[tuple[float, int, int, float]] = []
    mark = marks.append if rate is not None and every == 1 else None
    clock = time.perf_counter

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors[0] += 1
        else:
            x = msg.latency()
            lat.append(x)
            if mark is not None:
                mark((clock(), msg.partition(), msg.offset(), x))

    deadline = time.monotonic() + 30  # every broker's metadata may not list them all yet
    while len(p.list_topics(topic, timeout=5).topics[topic].partitions) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the producer does not see {partitions} partitions")
        time.sleep(0.2)
    for i in range(min(1000, records)):  # warm up: connections, metadata
        p.produce(topic, value, partition=i % partitions)
    p.flush(60)
    produce_ = p.produce
    poll = p.poll
    burst = 100 if rate is None else max(1, int(rate / 1000))
    # A paced run serves its delivery reports on a thread of their own, blocked in poll():
    # librdkafka takes a record's latency when the Python callback's Message is built
    # (rd_kafka_message_latency: now minus the produce() time), so a report that waited for
    # the pacing loop's next poll(0) (every ~1 ms, later whenever that thread queued for a
    # CPU) counted the bench's own loop as broker latency; and the poll(0) per burst cost the
    # producer ~30 % more CPU on the 2 cores the brokers need (bench/README.md, 2026-11-26
    # 10:10). A saturated run keeps one thread: it never sleeps, and it polls every burst.
    stop = threading.Event()

    def serve_reports() -> None:
        while not stop.is_set():
            poll(0.05)

    reporter = None if rate is None else threading.Thread(target=serve_reports, daemon=True)
    wait_quiet()
    with CpuMeter(named) as cpu:
        t0 = time.perf_counter()
        if reporter is not None:
            reporter.start()
        i = 0
        while i < records:
            if rate is not None:
                ahead = i / rate - (time.perf_counter() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            for _ in range(min(burst, records - i)):
                while True:
                    try:
                        if i % every == 0:
                            produce_(topic, value, partition=i % partitions, callback=cb)
                        else:
                            produce_(topic, value, partition=i % partitions)
                        break
                    except BufferError:
                        poll(0.001)
                i += 1
            if reporter is None:
                poll(0)
        stop.set()
        if reporter is not None:
            reporter.join()
        left = p.flush(300)
        elapsed = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return ProduceResult(records, elapsed, sorted(x * 1000 for x in lat), errors[0], cpu,
                         batch_acked_ms(marks))


@dataclass
class ConsumeResult:
    records: int
    seconds: float
    cpu: CpuMeter | None = None

    @property
    def mbs(self) -> float:
        return self.records * VALUE_BYTES / self.seconds / MB


def consume(bootstrap: str, partitions: int, records: int,
            named: dict[str, int] | None = None, topic: str = TOPIC) -> ConsumeResult:
    """Caught-up read of the first `records` records from offset 0: time from the first
    record received to the last (excludes connection setup)."""
    wait_quiet()
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
        "enable.auto.commit": False, "enable.partition.eof": False,
        "log.connection.close": False, "logger": quiet_logger(),
        "fetch.max.bytes": 64 * MiB, "max.partition.fetch.bytes": 4 * MiB,
        # librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1 s) when
        # its local queue is full (64 MiB), i.e. when the brokers serve faster than this Python
        # loop drains. Three leaders fill it three times as fast as the one-node sink: with the
        # default the cluster's consume was mostly these 1 s pauses ("Fetch backoff for 1000ms:
        # Local: Queue full" in debug=fetch), 0.7 of the sink; with 10 ms it is 0.8-1.4 (lead,
        # 2026-11-26, load 3-6). The same setting for the sink, the cluster and --compare.
        "fetch.queue.backoff.ms": 10,
    })
    try:
        c.assign([CkTopicPartition(topic, i, 0) for i in range(partitions)])
        got = 0
        first = None
        deadline = time.monotonic() + 300
        with CpuMeter(named) as cpu:
            while got < records:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"consumed only {got} of {records}")
                msgs = c.consume(min(10_000, records - got + (first is None)), 1.0)
                for m in msgs:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                if msgs and first is None:
                    first = time.perf_counter()
                    got += len(msgs) - 1  # the clock starts at the first one
                else:
                    got += len(msgs)
            elapsed = time.perf_counter() - (first or time.perf_counter())
        return ConsumeResult(got, elapsed, cpu)
    finally:
        c.close()


# -- the real cluster -------------------------------------------------------------------------


def _profiling_python(d: Path) -> str:
    """A python that runs its module with cProfile toggled by SIGUSR2 (bench/_profiled_broker.py:
    DIR/broker-<pid>-<phase>.prof per profiled phase)."""
    d.mkdir(parents=True, exist_ok=True)
    w = d / "python-cprofile"
    script = Path(__file__).resolve().parent / "_profiled_broker.py"
    w.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "{d}" "$@"\n')
    w.chmod(0o755)
    return str(w)


def _toggle_profiles(pids: Iterable[int], enabled: bool) -> None:
    """Start or stop the brokers' profilers (--profile): SIGUSR2 to each."""
    if not enabled:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGUSR2)
    time.sleep(0.2)  # let each broker's loop take the signal before the phase starts


def create_topic(bootstrap: str, partitions: int, rf: int, topic: str = TOPIC,
                 config: dict[str, str] | None = None) -> dict[int, int]:
    """Create the topic and wait until every partition has a leader and a full ISR.
    Returns partition -> leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False,
                         "logger": quiet_logger()})
    for f in admin.create_topics([NewTopic(topic, partitions, rf,
                                           config=config or {})]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return {i: p.leader for i, p in md.partitions.items()}
        time.sleep(0.1)
    raise RuntimeError("topic not ready")


def batch_stats(data_dir: Path) -> tuple[int, int]:
    """(batches, bytes) stored in the topic's logs under one broker's data dir."""
    n = size = 0
    for log_file in data_dir.glob(f"{TOPIC}-*/*.log"):
        buf = log_file.read_bytes()
        pos = 0
        while pos + HEADER_SIZE <= len(buf):
            h = HEADER.unpack_from(buf, pos)
            n += 1
            size += 12 + h[1]
            pos += 12 + h[1]
    return n, size


CURVE_FRACTIONS = (0.01, 0.05, 0.10, 0.25, 0.50)  # --curve: of the saturated rate


@dataclass
class CurvePoint:
    fraction: float
    result: ProduceResult


def latency_curve(conf: dict[str, Any], partitions: int, saturated_rate: float, value: bytes,
                  fractions: Iterable[float], seconds: float, named: dict[str, int],
                  every: int) -> list[CurvePoint]:
    """acks=all latency paced at fractions of the saturated rate, lowest first: where the
    latency stays flat as the rate falls, it is structural (linger.ms, round trips, timers);
    where it grows with the rate, it is CPU capacity (queueing for the brokers' cores)."""
    out = []
    for f in sorted(fractions):
        rate = f * saturated_rate
        r = produce(conf, partitions, max(200, int(rate * seconds)), value, rate=rate,
                    named=named, every=every)
        out.append(CurvePoint(f, r))
        assert r.cpu is not None
        print(f"curve {f:5.0%} of saturated: {rate:8,.0f} rec/s ({r.mbs:5.1f} MB/s)  p50 "
              f"{r.pct(.5):6.1f} ms  p99 {r.pct(.99):6.1f} ms  errors {r.errors}  foreign CPU "
              f"{r.cpu.pct(r.cpu.foreign_s):.0f} %")
    return out


def print_curve(points: list[CurvePoint], linger_ms: float) -> None:
    print(f"\nacks=all latency vs rate (linger.ms={linger_ms:g}: the floor at a low rate is "
          "linger.ms plus the round trips of one replication: produce, follower fetch "
          "response, follower's next fetch, produce response)")
    print("  (brokers CPU: % of one core, all brokers together, over the point; at a fixed rate "
          "(--curve-base) it compares the brokers' cost between runs only while they are not "
          "starved: a starved broker batches more per request and spends less per record)")
    print(f"  {'of saturated':>12}  {'rec/s':>8}  {'MB/s':>6}  {'p50 ms':>7}  {'p99 ms':>7}  "
          f"{'p50 - linger':>12}  {'brokers CPU %':>13}  {'foreign %':>9}")
    for pt in points:
        r = pt.result
        cpu = r.cpu
        brokers = sum(v for k, v in cpu.named_s.items() if k.startswith("broker")) if cpu else 0
        print(f"  {pt.fraction:>12.0%}  {r.rate:>8,.0f}  {r.mbs:>6.1f}  {r.pct(.5):>7.1f}  "
              f"{r.pct(.99):>7.1f}  {r.pct(.5) - linger_ms:>12.1f}  "
              f"{cpu.pct(brokers) if cpu else 0:>13.0f}  "
              f"{cpu.pct(cpu.foreign_s) if cpu else 0:>9.0f}")


# -- report -----------------------------------------------------------------------------------


def mmm(xs: Iterable[float], fmt: str = ".0f") -> str:
    s = sorted(xs)
    return "/".join(format(x, fmt) for x in (s[0], statistics.median(s), s[-1]))


def med(xs: Iterable[float]) -> float:
    return statistics.median(list(xs))


@dataclass
class Table:
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, what: str, value: str, ratios: str = "") -> None:
        self.rows.append((what, value, ratios))

    def print(self) -> None:
        w0 = max(len(r[0]) for r in self.rows)
        w1 = max(len(r[1]) for r in self.rows)
        for a, b, c in self.rows:
            print(f"  {a:<{w0}}  {b:>{w1}}  {c}")


def aim(measured: float, target: float, *, at_most: bool, unit: str = "") -> str:
    """An aim as a ratio: measured / target, and whether it is met."""
    ok = measured <= target if at_most else measured >= target
    sign = "<=" if at_most else ">="
    return (f"{measured / target:.2f} of the aim {sign} {target:.3g}{unit}: "
            f"{'meets' if ok else 'MISSES'}")


def loopback_only(bootstrap: str) -> None:
    """--compare talks only to 127.0.0.0/8 unless --compare-any-host (network safety)."""
    for hp in bootstrap.split(","):
        host = hp.rsplit(":", 1)[0].strip("[]")
        for info in socket.getaddrinfo(host, None, socket.AF_INET):
            if not str(info[4][0]).startswith("127."):
                raise SystemExit(f"--compare {hp}: {info[4][0]} is not in 127.0.0.0/8 "
                                 "(pass --compare-any-host to allow it)")


@dataclass
class CompareResult:
    produce: list[ProduceResult]
    paced: PacedRuns
    consume: list[ConsumeResult]


def compare_run(args: argparse.Namespace, bootstrap: str, value: bytes) -> CompareResult:
    """The same producer and consumer against another Kafka-protocol broker: a new topic of
    the same partitions, RF min(3, brokers), min.insync.replicas 2 when RF allows."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False,
                         "logger": quiet_logger()})
    brokers = len(admin.list_topics(timeout=10).brokers)
    rf = min(3, brokers)
    topic = f"{TOPIC}-compare-{os.getpid()}-{int(time.time())}"
    cfg = {"min.insync.replicas": "2"} if rf >= 2 else {}
    for f in admin.create_topics([NewTopic(topic, args.partitions, rf, config=cfg)]).values():
        f.result(30)
    print(f"compare {bootstrap}: {brokers} broker(s), topic {topic} RF {rf}")
    conf = producer_config(args, bootstrap)
    n, P = args.records, args.partitions
    rp = []
    for _ in range(args.rounds):
        r = produce(conf, P, n, value, every=args.latency_every, topic=topic)
        rp.append(r)
        print(f"compare produce: {r.mbs:6.1f} MB/s {r.rate:8,.0f} rec/s  p50 {r.pct(.5):.0f} ms "
              f"p99 {r.pct(.99):.0f} ms (saturated)  errors {r.errors}")
    rate = 0.5 * med(r.rate for r in rp)
    paced = paced_runs(conf, P, rate, value, args.rounds, args.paced_seconds, "compare",
                       every=args.latency_every, topic=topic)
    rc = []
    for _ in range(args.rounds):
        c = consume(bootstrap, P, n, topic=topic)
        rc.append(c)
        print(f"compare consume: {c.mbs:6.0f} MB/s")
    with contextlib.suppress(Exception):
        for f in admin.delete_topics([topic]).values():
            f.result(30)
    return CompareResult(rp, paced, rc)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _tree_bytes(root: Path) -> int:
    """Bytes of the files under root (the cluster's log dirs: retention must bound it)."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):  # a segment deleted meanwhile
                total += os.stat(os.path.join(dirpath, f)).st_size
    return total


def _disk_bytes(data_fs: DataFs, logs_root: Path) -> int:
    """Space the brokers' data takes: the used blocks of the bench's own log.dirs filesystem
    (deleted files still open count), else the files under `logs_root`."""
    if data_fs.active:
        st = os.statvfs(data_fs.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize
    return _tree_bytes(logs_root)


SOAK_RETENTION_BYTES = 256 * MB  # per partition replica: 3 x 3 x (256 MB + a segment) at most
# The soak found that a log kept its last 64 deleted segments' files open (their blocks
# allocated): 9 logs x 64 x 64 MB filled the 16 GiB log.dirs image in under a minute at
# 129 MB/s (2026-11-26 18:04, every broker halted on ENOSPC). Now only the last 2 stay
# readable (broker/store/log.py, RETIRED_OPEN_MAX); the disk column is `df` of the log.dirs
# filesystem when it is the bench's own, so blocks pinned that way show.
SOAK_SEGMENT_BYTES = 64 * MB


def soak(args: argparse.Namespace, value: bytes) -> None:
    """acks=all at half load for --soak minutes while the leader of partition 0 is killed
    (kill -9) and restarted every --soak-kill-every seconds; per minute: records, errors,
    p50/p99 and every broker's RSS; at the end, whether RSS stayed flat."""
    root = Path(tempfile.mkdtemp(prefix="hiwater-broker-soak-"))
    # Retention bounds the disk as it would in production: at half load (~50-100 MB/s, RF 3)
    # ten minutes would otherwise write 100+ GB (it filled this machine's disk once).
    stack = contextlib.ExitStack()
    try:
        data_fs = stack.enter_context(DataFs(args.data_fs_mib, root, args.data_fs))
        print(data_fs.describe())
        page_cache = stack.enter_context(SteadyPageCache(args.page_cache_mib, root))
        print(page_cache.describe())
        logs_root = data_fs.path / "cluster"  # the disk column: the brokers' data, not the image
        cluster = LocalCluster(logs_root, 3, {"min.insync.replicas": "2",
                                              "log.retention.check.interval.ms": "5000"})
        stack.callback(cluster.stop)
        cluster.start(wait=False)
        cluster.wait_ready(timeout_s=90.0)
        create_topic(cluster.bootstrap, args.partitions, 3,
                     config={"retention.bytes": str(SOAK_RETENTION_BYTES),
                             "segment.bytes": str(SOAK_SEGMENT_BYTES)})
        conf = {**producer_config(args, cluster.bootstrap), "message.timeout.ms": 120_000}
        probe = produce(conf, args.partitions, args.records, value, every=args.latency_every)
        rate = args.soak_rate or 0.5 * probe.rate
        print(f"soak: {args.soak:g} min at {rate:,.0f} rec/s ({rate * VALUE_BYTES / MB:.1f} "
              f"MB/s, half of {probe.rate:,.0f} measured), leader of partition 0 killed every "
              f"{args.soak_kill_every:g} s and restarted {args.soak_down:g} s later")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap,
                             "log.connection.close": False, "logger": quiet_logger()})
        stop = threading.Event()
        kills: list[str] = []

        def nemesis() -> None:
            while not stop.wait(args.soak_kill_every):
                try:
                    md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
                    victim = md.leader
                    if victim not in cluster.nodes:
                        continue
                    cluster.kill(victim)
                    kills.append(f"{time.strftime('%H:%M:%S')} killed {victim}")
                    if stop.wait(args.soak_down):
                        cluster.start_broker(victim)
                        return
                    cluster.start_broker(victim)
                except Exception as e:  # report, keep soaking
                    kills.append(f"{time.strftime('%H:%M:%S')} nemesis: {e}")

        p = Producer(conf)
        lat: list[float] = []
        errors = [0]

        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors[0] += 1
            else:
                lat.append(msg.latency() * 1000)

        t_nem = threading.Thread(target=nemesis, daemon=True)
        t_nem.start()
        rss: dict[int, list[tuple[float, int, float]]] = {b: [] for b in cluster.nodes}
        t0 = time.perf_counter()
        end = t0 + args.soak * 60
        i = 0
        minute = 1
        sent_at_minute = 0
        print(f"{'min':>3} {'records':>8} {'errors':>6} {'p50 ms':>7} {'p99 ms':>8} "
              f"{'disk MB':>8}  RSS MB per broker (pid)")
        while True:
            now = time.perf_counter()
            last = now >= end
            if last:
                p.flush(60)  # the last minute's records, then its row
                now = max(now, t0 + minute * 60)
            ahead = i / rate - (now - t0)
            if ahead > 0 and not last:
                time.sleep(min(ahead, 0.05))
                if ahead > 0.05:
                    continue
            for _ in range(0 if last else max(1, int(rate / 1000))):
                try:
                    p.produce(TOPIC, value, partition=i % args.partitions, callback=cb)
                except BufferError:
                    p.poll(0.01)
                    continue
                i += 1
            p.poll(0)
            if now - t0 >= minute * 60:
                lat_m, lat[:] = sorted(lat), []
                row = []
                for b, node in sorted(cluster.nodes.items()):
                    if node.pid is not None:
                        m = _rss_mb(node.pid)
                        rss[b].append((now - t0, node.pid, m))
                        row.append(f"{b}: {m:.0f} ({node.pid})")
                    else:
                        row.append(f"{b}: down")
                p50 = lat_m[len(lat_m) // 2] if lat_m else float("nan")
                p99 = lat_m[min(len(lat_m) - 1, int(0.99 * len(lat_m)))] if lat_m else float("nan")
                print(f"{minute:3d} {i - sent_at_minute:8,d} {errors[0]:6d} {p50:7.1f} "
                      f"{p99:8.1f} {_disk_bytes(data_fs, logs_root) / MB:8,.0f}  "
                      f"{', '.join(row)}")
                for k in kills:
                    print(f"    {k}")
                kills.clear()
                sent_at_minute = i
                minute += 1
            if last:
                break
        stop.set()
        left = p.flush(180)
        t_nem.join(60)
        print(f"soak done: {i:,} records sent, {left} undelivered, {errors[0]} errors")
        flat = True
        for b, samples in sorted(rss.items()):
            by_pid: dict[int, list[tuple[float, float]]] = {}
            for t, pid, m in samples:
                by_pid.setdefault(pid, []).append((t, m))
            for pid, xs in by_pid.items():
                if len(xs) < 3:
                    continue
                first = xs[1][1]  # after the first minute of its life
                last = xs[-1][1]
                grew = last - first
                ok = grew <= max(20.0, 0.2 * first)
                flat = flat and ok
                print(f"broker {b} pid {pid}: RSS {first:.0f} -> {last:.0f} MB over "
                      f"{(xs[-1][0] - xs[1][0]) / 60:.0f} min: {'flat' if ok else 'GROWS'}")
        print(f"RSS {'stayed flat' if flat else 'did NOT stay flat'} "
              "(flat: growth <= max(20 MB, 20 %) per broker process after its first minute)")
    finally:
        stack.close()  # the cluster, then the page cache, then the log.dirs filesystem
        shutil.rmtree(root, ignore_errors=True)


def latency_only(args: argparse.Namespace, value: bytes) -> None:
    """--latency-only: a cluster, its saturated produce rounds, then the latency curve
    (the default fractions unless --curve names others). The CPU of the brokers per GB is
    printed for each round so before/after runs can be compared on cost as well."""
    root = Path(tempfile.mkdtemp(prefix="hiwater-broker-bench-"))
    P, every = args.partitions, args.latency_every
    stack = contextlib.ExitStack()
    python = _profiling_python(args.profile.resolve()) if args.profile else sys.executable
    try:
        data_fs = stack.enter_context(DataFs(args.data_fs_mib, root, args.data_fs))
        print(data_fs.describe())
        page_cache = stack.enter_context(SteadyPageCache(args.page_cache_mib, root))
        print(page_cache.describe())
        cluster = LocalCluster(data_fs.path / "cluster", 3, {"min.insync.replicas": "2"},
                               python=python)
        cluster.start(wait=False)
        try:
            cluster.wait_ready(timeout_s=90.0)
            leaders = create_topic(cluster.bootstrap, P, 3)
            pids = {f"broker {i}": b.pid for i, b in cluster.nodes.items() if b.pid}
            brokers = list(pids)
            print(f"cluster {cluster.bootstrap}; partition -> leader {leaders}; load average "
                  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            time.sleep(1.0)
            conf = producer_config(args, cluster.bootstrap)
            rp = []
            for _ in range(args.rounds):
                r = produce(conf, P, args.records, value, named=pids, every=every)
                rp.append(r)
                assert r.cpu is not None
                gb = r.records * VALUE_BYTES / 1e9
                cpu_gb = sum(r.cpu.named_s[k] for k in brokers) / gb
                print(f"saturated: {r.mbs:6.1f} MB/s {r.rate:8,.0f} rec/s  p50 {r.pct(.5):.0f} "
                      f"ms p99 {r.pct(.99):.0f} ms  errors {r.errors}  brokers {cpu_gb:.1f} "
                      f"CPU-s/GB  foreign CPU {r.cpu.pct(r.cpu.foreign_s):.0f} %")
            fractions = [float(x) for x in (args.curve or ",".join(
                map(str, CURVE_FRACTIONS))).split(",")]
            _toggle_profiles(pids.values(), args.profile is not None)  # the curve only
            base = args.curve_base or med(r.rate for r in rp)
            points = latency_curve(conf, P, base, value, fractions, args.curve_seconds, pids,
                                   every)
            _toggle_profiles(pids.values(), args.profile is not None)
            # the same lowest rate with acks=1: the leader answers after its own append, so
            # the difference to acks=all is what replication adds (two hops per follower)
            low = min(fractions) * base
            one = produce(dict(conf, acks="1"), P, max(200, int(low * args.curve_seconds)),
                          value, rate=low, named=pids, every=every)
        finally:
            cluster.stop()
        print_curve(points, args.linger_ms)
        print(f"  acks=1 at {min(fractions):.0%}: p50 {one.pct(.5):.1f} ms  p99 "
              f"{one.pct(.99):.1f} ms (no replication wait: acks=all minus this is what "
              "replication adds)")
        if args.profile:
            print_step_counts(args.profile.resolve())
            print_profiles(args.profile.resolve())
        print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        stack.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per produce round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each measurement")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--linger-ms", type=float, default=5.0)
    ap.add_argument("--batch-size", type=int, default=1_000_000, help="producer batch.size")
    ap.add_argument("--max-in-flight", type=int, default=5,
                    help="max.in.flight.requests.per.connection")
    ap.add_argument("--latency-every", type=int, default=1,
                    help="delivery callback (latency sample) on every k-th record")
    ap.add_argument("--loopback-mib", type=int, default=2048, help="MiB per loopback run")
    ap.add_argument("--paced-seconds", type=float, default=6.0,
                    help="length of each half-load latency run (--rounds of them)")
    ap.add_argument("--curve", nargs="?", const=",".join(map(str, CURVE_FRACTIONS)),
                    metavar="FRACTIONS",
                    help="also measure acks=all p50/p99 paced at these fractions of the "
                         "saturated rate (default 0.01,0.05,0.1,0.25,0.5)")
    ap.add_argument("--curve-seconds", type=float, default=3.0,
                    help="length of each --curve point")
    ap.add_argument("--curve-base", type=float, default=0.0, metavar="REC_PER_S",
                    help="the rate the --curve fractions are of (default: the saturated rate "
                         "measured in this run); fix it to compare runs at equal rates")
    ap.add_argument("--latency-only", action="store_true",
                    help="only the cluster's saturated rounds and the latency curve (no "
                         "baselines, sink or consume): for before/after runs")
    ap.add_argument("--producer-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra librdkafka producer setting (repeatable), e.g. "
                         "socket.nagle.disable=true")
    ap.add_argument("--quiet-limit", type=float, default=30.0,
                    help="start a run only when foreign CPU <= this %% of a core (bounded wait)")
    ap.add_argument("--quick", action="store_true", help="smoke run, under a minute")
    ap.add_argument("--data-fs-mib", type=int, default=16384, metavar="MIB",
                    help="the brokers' log.dirs on a filesystem image of this size (needs "
                         "root; bench/_data_fs.py says why); 0: the scratch directory's own "
                         "filesystem")
    ap.add_argument("--data-fs", choices=sorted(KINDS), default="xfs",
                    help="that image's filesystem: xfs (Kafka's recommendation, the default) "
                         "or ext4 mounted nodelalloc (Kafka's ext4 notes)")
    ap.add_argument("--page-cache-mib", type=int, default=6144, metavar="MIB",
                    help="run the cluster in a memory cgroup of this size, filled with clean "
                         "page cache first, as a long-running broker's is (needs root; "
                         "bench/_page_cache.py says why); 0: fresh memory, as booted")
    ap.add_argument("--profile", type=Path, help="run the brokers under cProfile into DIR")
    ap.add_argument("--compare", metavar="BOOTSTRAP",
                    help="also run the same producer/consumer against this Kafka-protocol "
                         "broker (127.0.0.0/8 only, unless --compare-any-host)")
    ap.add_argument("--compare-any-host", action="store_true",
                    help="allow a --compare bootstrap outside 127.0.0.0/8")
    ap.add_argument("--soak", type=float, nargs="?", const=10.0, metavar="MINUTES",
                    help="soak mode only: acks=all at half load through leader kills for "
                         "MINUTES (default 10); p99 and broker RSS per minute")
    ap.add_argument("--soak-rate", type=float, default=0.0,
                    help="soak records/s (default: half of a measured saturated round)")
    ap.add_argument("--soak-kill-every", type=float, default=45.0,
                    help="seconds between leader kills in the soak")
    ap.add_argument("--soak-down", type=float, default=10.0,
                    help="seconds a killed leader stays down in the soak")
    args = ap.parse_args()
    # SIGTERM (timeout, kill) unwinds like ^C, so the cluster is stopped and the page-cache
    # cgroup, the mounted log.dirs and the scratch directory are undone
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.compare and not args.compare_any_host:
        loopback_only(args.compare)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    if args.quick:
        args.records, args.rounds, args.loopback_mib = 20_000, 1, 256
        args.page_cache_mib = min(args.page_cache_mib, 2048)
        args.data_fs_mib = min(args.data_fs_mib, 4096)
        args.paced_seconds, QUIET["timeout"] = 2.0, 5.0
    QUIET["limit"] = args.quiet_limit
    value = os.urandom(VALUE_BYTES)
    if args.soak is not None:
        soak(args, value)
        return
    if args.latency_only:
        latency_only(args, value)
        return
    n, P, every = args.records, args.partitions, args.latency_every
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="hiwater-broker-bench-"))
    print(f"{os.cpu_count()} CPUs, {args.rounds} rounds, {n:,} records of {VALUE_BYTES} B per "
          f"round, topic {P} partitions; producer acks=all linger.ms={args.linger_ms:g} "
          f"batch.size={args.batch_size} max.in.flight={args.max_in_flight}, no compression; "
          f"CPU % below are of one core, 'foreign' = processes not started by this benchmark")
    stack = contextlib.ExitStack()
    try:
        # (a), (b): raw loopback
        tcp, sf, fg = [], [], []
        sf_file = root / "sendfile.bin"
        with open(sf_file, "wb") as f:
            chunk = os.urandom(MiB)
            for _ in range(min(256, args.loopback_mib)):
                f.write(chunk)
        passes = max(1, args.loopback_mib // 256)
        for _ in range(args.rounds):
            wait_quiet()
            with CpuMeter() as m:
                tcp.append(loopback_tcp(args.loopback_mib * MiB))
            fg.append(m.pct(m.foreign_s))
            wait_quiet()
            with CpuMeter() as m:
                sf.append(loopback_sendfile(sf_file, passes))
            fg.append(m.pct(m.foreign_s))
        sf_file.unlink()
        tcp_m, sf_m = med(tcp), med(sf)
        print(f"loopback TCP sendall 1 MiB: {mmm(tcp)} MB/s; sendfile 8 MiB calls: {mmm(sf)} "
              f"MB/s (min/median/max; foreign CPU {mmm(fg)} %)")
        touch, app, app_cpu = [], [], []
        for _ in range(args.rounds):
            wait_quiet()
            touch.append(first_touch_us(256))
            a, per_gb = page_cache_append(root / "append.bin", min(512, args.loopback_mib))
            app.append(a)
            app_cpu.append(per_gb)
        print(f"machine: first touch of fresh memory {mmm(touch, '.1f')} us per 4 KiB page; "
              f"append to a new file (page cache) {mmm(app)} MB/s, {mmm(app_cpu, '.2f')} "
              f"CPU-s/GB")

        # (c): the load generator against the sink
        with SinkProcess(P) as sink:
            conf = producer_config(args, sink.bootstrap)
            sp = []
            for _ in range(args.rounds):
                r = produce(conf, P, n, value, named={"sink": sink.pid}, every=every)
                sp.append(r)
                assert r.cpu is not None
                print(f"sink produce: {r.mbs:6.0f} MB/s {r.rate:9,.0f} rec/s  "
                      f"CPU %: producer {r.cpu.pct(r.cpu.self_s):.0f}, sink "
                      f"{r.cpu.pct(r.cpu.named_s['sink']):.0f}, foreign "
                      f"{r.cpu.pct(r.cpu.foreign_s):.0f}")
            sc = []
            for _ in range(args.rounds):
                c = consume(sink.bootstrap, P, n, named={"sink": sink.pid})
                sc.append(c)
                assert c.cpu is not None
                print(f"sink consume: {c.mbs:6.0f} MB/s  CPU %: consumer "
                      f"{c.cpu.pct(c.cpu.self_s):.0f}, sink "
                      f"{c.cpu.pct(c.cpu.named_s['sink']):.0f}, foreign "
                      f"{c.cpu.pct(c.cpu.foreign_s):.0f}")
        sink_p, sink_c = med(r.mbs for r in sp), med(c.mbs for c in sc)

        # the real cluster, in a steady page cache (bench/_page_cache.py)
        data_fs = stack.enter_context(DataFs(args.data_fs_mib, root, args.data_fs))
        print(data_fs.describe())
        page_cache = stack.enter_context(SteadyPageCache(args.page_cache_mib, root))
        print(page_cache.describe())
        python = _profiling_python(args.profile.resolve()) if args.profile else sys.executable
        cluster = LocalCluster(data_fs.path / "cluster", 3, {"min.insync.replicas": "2"},
                               python=python)
        t = time.perf_counter()
        cluster.start(wait=False)
        try:
            cluster.wait_ready(timeout_s=90.0)  # a busy shared machine can take a while
        except BaseException:
            cluster.stop()
            raise
        print(f"cluster up in {time.perf_counter() - t:.1f} s: {cluster.bootstrap}")
        try:
            leaders = create_topic(cluster.bootstrap, P, 3)
            pids = {f"broker {i}": b.pid for i, b in cluster.nodes.items() if b.pid}
            brokers = [k for k in pids]
            if cluster.zk is not None and cluster.zk.pid:
                pids["zookeeper"] = cluster.zk.pid
            time.sleep(1.0)
            with CpuMeter(pids) as idle:
                time.sleep(3.0)
            idle_txt = ", ".join(f"{k} {idle.pct(v):.1f}" for k, v in idle.named_s.items())
            print(f"topic {TOPIC}: partition -> leader {leaders}; idle CPU %: {idle_txt}")
            conf = producer_config(args, cluster.bootstrap)
            broker_pids = [pids[k] for k in brokers]
            profiling = args.profile is not None
            _toggle_profiles(broker_pids, profiling)  # phase 1: saturated and paced produce
            rp = []
            for _ in range(args.rounds):
                r = produce(conf, P, n, value, named=pids, every=every)
                rp.append(r)
                assert r.cpu is not None
                bt = ", ".join(f"{r.cpu.pct(r.cpu.named_s[k]):.0f}" for k in brokers)
                print(f"cluster produce: {r.mbs:6.1f} MB/s {r.rate:8,.0f} rec/s  p50 "
                      f"{r.pct(.5):.0f} ms p99 {r.pct(.99):.0f} ms (saturated)  errors "
                      f"{r.errors}  CPU %: producer {r.cpu.pct(r.cpu.self_s):.0f}, brokers "
                      f"{bt}, foreign {r.cpu.pct(r.cpu.foreign_s):.0f}")
            real_p = med(r.mbs for r in rp)
            rate = 0.5 * med(r.rate for r in rp)
            paced = paced_runs(conf, P, rate, value, args.rounds, args.paced_seconds,
                               "cluster", named=pids, every=every)
            points = latency_curve(
                conf, P, args.curve_base or 2 * rate, value,
                [float(x) for x in args.curve.split(",")],
                args.curve_seconds, pids, every) if args.curve else []
            _toggle_profiles(broker_pids, profiling)
            _toggle_profiles(broker_pids, profiling)  # phase 2: caught-up consume
            rc = []
            for _ in range(args.rounds):
                c = consume(cluster.bootstrap, P, n, named=pids)
                rc.append(c)
                assert c.cpu is not None
                bt = ", ".join(f"{c.cpu.pct(c.cpu.named_s[k]):.0f}" for k in brokers)
                print(f"cluster consume: {c.mbs:6.0f} MB/s  CPU %: consumer "
                      f"{c.cpu.pct(c.cpu.self_s):.0f}, brokers {bt}, foreign "
                      f"{c.cpu.pct(c.cpu.foreign_s):.0f}")
            _toggle_profiles(broker_pids, profiling)
            real_c = med(c.mbs for c in rc)
            nb, sz = batch_stats(cluster.nodes[1].data_dir)
            if nb:
                print(f"stored batches on broker 1: {nb:,}, mean {sz / nb / 1024:.1f} KiB")
            gb = n * VALUE_BYTES / 1e9
            cpu_gb = {k: med(r.cpu.named_s[k] / gb for r in rp if r.cpu) for k in pids}
            prod_gb = med(r.cpu.self_s / gb for r in rp if r.cpu)
            cons_gb = {k: med(c.cpu.named_s[k] / gb for c in rc if c.cpu) for k in brokers}
        finally:
            cluster.stop()

        cmp = None
        if args.compare:
            try:
                cmp = compare_run(args, args.compare, value)
            except Exception as e:  # report hiwater's figures anyway
                print(f"compare {args.compare} failed: {type(e).__name__}: {e}")

        table = Table()
        table.add("loopback TCP (sendall 1 MiB)", f"{tcp_m:,.0f} MB/s")
        table.add("loopback sendfile (8 MiB calls)", f"{sf_m:,.0f} MB/s")
        table.add("first touch of fresh memory", f"{med(touch):.1f} us/page",
                  f"= {med(touch) / 4096 * 1e3:.1f} CPU-s per GB of new memory")
        table.add("append to page cache (new file)", f"{med(app):,.0f} MB/s",
                  f"{med(app_cpu):.2f} CPU-s/GB")
        if page_cache.active:
            table.add("  the cluster's page cache", f"{page_cache.mib:,} MiB",
                      f"full before it started; an append into it "
                      f"{page_cache.append_cpu_s_per_gb:.2f} CPU-s/GB (filling it: "
                      f"{page_cache.fill_cpu_s_per_gb:.2f} CPU-s/GB, the VM's first touch)")
        else:
            table.add("  the cluster's page cache", "unbounded",
                      page_cache.why.removeprefix("not bounded: ")
                      + "; on a fresh VM this can add ~2.5 CPU-s per GB stored")
        table.add("  the brokers' log.dirs", data_fs.kind if data_fs.active else "as is",
                  data_fs.describe().removeprefix("log.dirs: "))
        table.add("confluent producer vs sink", f"{sink_p:,.0f} MB/s",
                  f"{sink_p / tcp_m:.3f} of TCP")
        table.add("confluent consumer vs sink", f"{sink_c:,.0f} MB/s",
                  f"{sink_c / sf_m:.3f} of sendfile")
        aim_p = min(AIM_PRODUCE_MBS, AIM_PRODUCE_OF_CEILING * sink_p)
        table.add("produce acks=all RF=3, 3 brokers", f"{real_p:,.1f} MB/s",
                  f"{real_p / tcp_m:.4f} of TCP; {real_p / sink_p:.3f} of the producer ceiling; "
                  + aim(real_p, aim_p, at_most=False, unit=" MB/s")
                  + f" (min of {AIM_PRODUCE_MBS:g} and {AIM_PRODUCE_OF_CEILING:g} of the ceiling)")
        table.add("  latency p50/p99, saturated",
                  f"{med(r.pct(.5) for r in rp):.0f}/{med(r.pct(.99) for r in rp):.0f} ms",
                  "queueing in the client (up to 256 MiB buffered)")
        table.add("  latency p50 at half load", f"{paced.pct(.5):.1f} ms",
                  aim(paced.pct(.5), AIM_P50_MS, at_most=True, unit=" ms")
                  + f"; paced at {paced.mbs:.1f} MB/s, linger.ms={args.linger_ms:g} included; "
                  f"runs {paced.span(.5)} ms; to the batch's first delivery report "
                  f"{paced.pct_acked(.5):.1f} ms (the rest is this bench's callbacks)")
        table.add("  latency p99 at half load", f"{paced.pct(.99):.1f} ms",
                  aim(paced.pct(.99), AIM_P99_MS, at_most=True, unit=" ms")
                  + f"; runs {paced.span(.99)} ms")
        table.add("consume caught-up, 3 brokers", f"{real_c:,.0f} MB/s",
                  f"{real_c / sf_m:.3f} of sendfile; {real_c / sink_c:.3f} of the consumer "
                  f"ceiling: " + aim(real_c / sink_c, AIM_CONSUME_OF_CEILING, at_most=False))
        broker_gb = sum(cpu_gb[k] for k in brokers)
        table.add("CPU-s per GB produced", f"{broker_gb:.1f}",
                  aim(broker_gb, AIM_BROKER_CPU_S_PER_GB, at_most=True) + "; brokers together; "
                  + ", ".join(f"{k} {v:.1f}" for k, v in cpu_gb.items())
                  + f", producer {prod_gb:.1f}")
        need = broker_gb + prod_gb
        ceiling = (os.cpu_count() or 1) / need * 1e3
        table.add("  CPU-bound produce ceiling", f"{ceiling:,.0f} MB/s",
                  f"{os.cpu_count()} cores / {need:.1f} CPU-s per GB (brokers + producer), if "
                  f"nothing else ran; {ceiling / aim_p:.2f} of the produce aim")
        table.add("CPU-s per GB consumed", f"{sum(cons_gb.values()):.1f}",
                  "brokers together; " + ", ".join(f"{k} {v:.2f}" for k, v in cons_gb.items()))
        if cmp is not None:
            cp, cc = med(r.mbs for r in cmp.produce), med(c.mbs for c in cmp.consume)
            table.add(f"compare {args.compare}: produce", f"{cp:,.1f} MB/s",
                      f"hiwater / compare = {real_p / cp:.2f}; {cp / sink_p:.3f} of the "
                      "producer ceiling")
            table.add("  latency p50/p99 at half load",
                      f"{cmp.paced.pct(.5):.1f}/{cmp.paced.pct(.99):.1f} ms",
                      f"paced at {cmp.paced.mbs:.1f} MB/s; hiwater / compare p50 = "
                      f"{paced.pct(.5) / cmp.paced.pct(.5):.2f}, p99 = "
                      f"{paced.pct(.99) / cmp.paced.pct(.99):.2f}")
            table.add("  consume caught-up", f"{cc:,.0f} MB/s",
                      f"hiwater / compare = {real_c / cc:.2f}; {cc / sink_c:.3f} of the "
                      "consumer ceiling")
        print("\nsummary (medians over rounds; ratios to the baselines measured above)")
        table.print()
        if points:
            print_curve(points, args.linger_ms)
        if QUIET["gave_up"]:
            print(f"note: {QUIET['gave_up']} run(s) started although foreign CPU stayed above "
                  f"{QUIET['limit']:.0f} % for {QUIET['timeout']:.0f} s")
        print(f"waited {QUIET['waited']:.0f} s in total for quiet windows and "
              f"{QUIET['synced']:.0f} s for earlier runs' dirty pages to be written back")
        if args.profile:
            print_profiles(args.profile.resolve())
    finally:
        stack.close()
        shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.0f} s")


def print_step_counts(d: Path, phase: int = 1) -> None:
    """From the brokers' profiles of a phase: core steps, event-loop iterations and clock
    handles per leader append (exact call counts; cProfile slows the brokers, not the counts)."""
    import pstats

    files = sorted(str(p) for p in d.glob(f"broker-*-{phase}.prof"))
    if not files:
        print(f"no profiles in {d}")
        return
    counts: dict[str, int] = {}
    wanted = {("core/node.py", "step"): "core steps",
              ("broker/store/log.py", "append_as_leader"): "leader appends",
              ("broker/store/log.py", "append_as_follower"): "follower appends",
              ("asyncio/base_events.py", "_run_once"): "loop iterations",
              ("asyncio/base_events.py", "call_later"): "call_later",
              ("asyncio/base_events.py", "call_soon"): "call_soon"}
    stats = pstats.Stats(*files).stats  # type: ignore[attr-defined]
    for (path, _, fn), (_, ncalls, *_rest) in stats.items():
        for (suffix, name), what in wanted.items():
            if fn == name and path.endswith(suffix):
                counts[what] = counts.get(what, 0) + ncalls
    print(f"\ncall counts of the {len(files)} brokers together (profiled phase {phase}): "
          + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    # per leader append, and per follower append (one replication round on one follower: the
    # unit that stays comparable when the followers fetch several produced batches at once)
    for unit in ("leader appends", "follower appends"):
        n = counts.get(unit, 0)
        if n:
            print(f"per {unit[:-1]}: " + ", ".join(
                f"{k} {v / n:.2f}" for k, v in counts.items() if not k.endswith("appends")))


def print_profiles(d: Path) -> None:
    import pstats

    for phase, what in ((1, "produce (saturated and paced)"), (2, "caught-up consume")):
        files = sorted(str(p) for p in d.glob(f"broker-*-{phase}.prof"))
        if not files:
            print(f"no profiles of the {what} phase in {d}")
            continue
        print(f"\ncProfile of the {len(files)} brokers together, {what}, by tottime:")
        st = pstats.Stats(*files)
        st.sort_stats("tottime").print_stats(30)
        st.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
