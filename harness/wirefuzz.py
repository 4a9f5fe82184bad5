"""A live wire fuzzer (issue #16): request frames recorded from real Kafka clients, mutated,
and sent to a running broker, which must stay live and keep every acknowledged record.

- `Recorder`: a loopback TCP proxy in front of one broker whose `advertised.listeners` names
  the proxy, so every connection of a client goes through it; it keeps each client-to-broker
  request frame (bounded count and size).
- `record_clients(bootstrap, topic)`: kafka-python, confluent-kafka and kcat (when installed)
  produce, consume, join a group, commit and ask for metadata through that proxy.
- `corpus(frames)`: the recorded frames minus the requests whose *valid* form would legitimately
  change what the liveness check reads (deleting topics or records, creating or reshaping
  topics, altering configs) and minus the inter-broker APIs (4-7).
- `mutate(rng, frame, gentle)`: gentle (a few bit flips or byte sets in the body: the request
  usually still decodes and reaches its handler), or harsh: bit flips, byte sets, inserts,
  deletes, truncation, huge length and count words, unknown API versions and keys, and lies
  in the 4-byte size prefix.
- `fuzz(host, port, corpus, frames, seconds)`: asyncio connections, each 1-32 mutated frames
  (all gentle or all harsh) sent one at a time as a client does, each after the broker's
  answer to the one before (or a second of silence), until the broker closes the connection;
  a frame counts as sent once written to an open connection. Returns counts and the rate.
  Every loop is bounded in frames and seconds; traffic goes to the given loopback address
  only.

Case k of a run is reproducible from `random.Random(seed * 1_000_003 + k)` and the corpus.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MAX_FRAME = 1 << 20  # frames above this are not kept (a recording, not a bulk store)
MAX_RECORDED = 20_000
# Kafka API keys whose valid form changes what the liveness check reads back: CreateTopics 19,
# DeleteTopics 20, DeleteRecords 21, AlterConfigs 33, CreatePartitions 37,
# IncrementalAlterConfigs 44; and the ZooKeeper-era inter-broker APIs 4-7 (LeaderAndIsr,
# StopReplica, UpdateMetadata, ControlledShutdown), which no client sends.
EXCLUDED_KEYS = frozenset({4, 5, 6, 7, 19, 20, 21, 33, 37, 44})
# Length and count words that once made kio's reader abort the process (an overflowing
# uvarint, large signed counts), plus a negative length and a 2-byte -1.
HUGE = (b"\xff\xff\xff\xff\x7f", b"\xe8\xff\xff\xff\x7f", b"\x7f\xff\xff\xff",
        b"\xff\xff\xff\x0f", b"\x80\x00\x00\x00", b"\xff\xff")
UNKNOWN_KEYS = (-1, 99, 1000, 32767, -32768, 68, 75)
VERSIONS = (-1, 0, 1, 3, 7, 12, 13, 17, 99, 32767)
LIE_SIZES = (-1, 0, 1, 3, 2 ** 31 - 1, 100 << 20)


def _loopback(host: str) -> None:
    if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
        raise ValueError(f"the wire fuzzer only targets 127.0.0.0/8, not {host}")


# ---------------------------------------------------------------------------------------
# recording


class Recorder:
    """A loopback proxy `listen_host:port` -> `upstream`; keeps client-to-broker frames."""

    def __init__(self, listen_host: str, port: int = 0,
                 upstream: tuple[str, int] | None = None) -> None:
        _loopback(listen_host)
        self.upstream = upstream  # set before the first client connects
        self.frames: list[bytes] = []
        self.recording = True  # False: a plain pass-through proxy
        self._lock = threading.Lock()
        self._server = socket.create_server((listen_host, port))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self.port = int(self._server.getsockname()[1])

    def start(self) -> Recorder:
        t = threading.Thread(target=self._accept, daemon=True, name="recorder")
        t.start()
        self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._server.close()
        for s in list(self._sockets):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                if self.upstream is None:
                    raise OSError("no upstream yet")
                _loopback(self.upstream[0])
                up = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, up]
            for src, dst, keep in ((client, up, True), (up, client, False)):
                t = threading.Thread(target=self._pump, args=(src, dst, keep), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, keep: bool) -> None:
        buf = bytearray()
        src.settimeout(None)
        try:
            while not self._stop.is_set():
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
                if keep:
                    buf += data
                    self._split(buf)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def _split(self, buf: bytearray) -> None:
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if size < 0 or size > MAX_FRAME:
                buf.clear()  # not a frame we can keep apart from the rest: stop keeping it
                return
            if len(buf) < 4 + size:
                return
            with self._lock:
                if self.recording and len(self.frames) < MAX_RECORDED:
                    self.frames.append(bytes(buf[:4 + size]))
            del buf[:4 + size]


def record_clients(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[str]:
    """Real clients produce, consume, join a group and commit on `topic` (which exists)
    through `bootstrap`; returns the names of the clients that ran."""
    ran = []
    _confluent(bootstrap, topic, timeout_s)
    ran.append("confluent-kafka")
    _kafka_python(bootstrap, topic, timeout_s)
    ran.append("kafka-python")
    if shutil.which("kcat"):
        _kcat(bootstrap, topic, timeout_s)
        ran.append("kcat")
    return ran


def _confluent(bootstrap: str, topic: str, timeout_s: float) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": int(timeout_s * 1000),
                  "log_level": 0})
    for i in range(20):
        p.produce(topic, f"rec-ck-{i}".encode(), key=f"k{i % 3}".encode(), partition=0)
    p.flush(timeout_s)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wirefuzz-ck",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "log_level": 0})
    try:
        c.subscribe([topic])
        got, deadline = 0, time.monotonic() + timeout_s
        while got < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        with contextlib.suppress(Exception):
            c.commit(asynchronous=False)
        c.list_topics(timeout=5)
        c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        c.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=5)
    finally:
        c.close()


def _kafka_python(bootstrap: str, topic: str, timeout_s: float) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                      request_timeout_ms=int(timeout_s * 1000))
    for i in range(20):
        p.send(topic, value=f"rec-kp-{i}".encode(), key=b"kp", partition=0)
    p.flush(timeout_s)
    p.close(5)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id="wirefuzz-kp",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=int(timeout_s * 1000))
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.poll(timeout_ms=3000, max_records=10)
        with contextlib.suppress(Exception):
            c.commit()
        c.end_offsets([tp])
        c.beginning_offsets([tp])
        c.committed(tp)
    finally:
        c.close()


def _kcat(bootstrap: str, topic: str, timeout_s: float) -> None:
    base = ["kcat", "-b", bootstrap, "-m", "10"]
    subprocess.run([*base, "-L"], capture_output=True, timeout=timeout_s, check=False)
    subprocess.run([*base, "-P", "-t", topic, "-p", "0", "-K", ":"],
                   input=b"kc:rec-kcat-1\nkc:rec-kcat-2\n", capture_output=True,
                   timeout=timeout_s, check=False)
    subprocess.run([*base, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-c", "5"],
                   capture_output=True, timeout=timeout_s, check=False)
    subprocess.run([*base, "-G", "wirefuzz-kcat", topic, "-e", "-c", "3"],
                   capture_output=True, timeout=min(timeout_s, 20), check=False)


def api_key_of(frame: bytes) -> int:
    if len(frame) < 6:
        return -1
    (key,) = struct.unpack_from(">h", frame, 4)
    return int(key)


def corpus(frames: Iterable[bytes]) -> list[bytes]:
    """The recorded frames the fuzzer starts from (one of each distinct frame)."""
    seen: dict[bytes, None] = {}
    for f in frames:
        if len(f) >= 12 and api_key_of(f) not in EXCLUDED_KEYS:
            seen.setdefault(f, None)
    return list(seen)


# ---------------------------------------------------------------------------------------
# mutation


def _body_start(data: bytes | bytearray) -> int:
    """Where the request body starts: after api key, version, correlation id, client id."""
    if len(data) < 10:
        return len(data)
    (n,) = struct.unpack_from(">h", data, 8)
    return min(len(data), 10 + max(0, int(n)))


def mutate(rng: random.Random, frame: bytes, gentle: bool | None = None) -> bytes:
    """`gentle` (by default half the time): one to three bit flips or byte sets in the body,
    the header and size prefix kept, so the request usually decodes and reaches its handler);
    else one to six of every kind, and the size prefix then tells the truth or, now and
    then, lies."""
    if gentle if gentle is not None else rng.random() < 0.5:
        data = bytearray(frame[4:])
        start = _body_start(data)
        for _ in range(rng.randint(1, 3)):
            if start >= len(data):
                break
            i = rng.randrange(start, len(data))
            if rng.random() < 0.7:
                data[i] ^= 1 << rng.randrange(8)
            else:
                data[i] = rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        return struct.pack(">i", len(data)) + bytes(data)
    data = bytearray(frame[4:])
    for _ in range(rng.choice((1, 1, 1, 2, 3, 6))):
        if not data:
            break
        i = rng.randrange(len(data))
        op = rng.choice(("flip", "flip", "set", "insert", "delete", "truncate", "huge",
                         "version", "key", "count"))
        if op == "flip":
            data[i] ^= 1 << rng.randrange(8)
        elif op == "set":
            data[i] = rng.randrange(256)
        elif op == "insert":
            data[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == "delete":
            del data[i:i + rng.randint(1, 8)]
        elif op == "truncate":
            del data[i:]
        elif op == "huge":
            w = rng.choice(HUGE)
            data[i:i + len(w)] = w
        elif op == "version" and len(data) >= 4:
            data[2:4] = struct.pack(">h", rng.choice(VERSIONS))
        elif op == "key" and len(data) >= 2:
            data[0:2] = struct.pack(">h", rng.choice(UNKNOWN_KEYS))
        elif op == "count" and len(data) >= 12:
            # a 4-byte count or length past the header: the biggest array a frame can claim
            j = rng.randrange(8, len(data) - 3)
            data[j:j + 4] = struct.pack(">i", rng.choice((2 ** 31 - 1, 2 ** 24, -2, 65536)))
    if len(data) >= 2 and int(struct.unpack_from(">h", data)[0]) in EXCLUDED_KEYS:
        data[0:2] = struct.pack(">h", 99)  # a flip made an excluded API: make it unknown
    size = len(data)
    r = rng.random()
    if r < 0.04:
        size = rng.choice(LIE_SIZES)
    elif r < 0.12:
        size = max(0, size + rng.randint(-8, 8))
    return struct.pack(">i", size) + bytes(data)


# ---------------------------------------------------------------------------------------
# sending


@dataclass
class FuzzResult:
    frames: int = 0
    connections: int = 0
    bytes_sent: int = 0
    responses: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def read_at_least(self) -> int:
        """Frames the broker surely read: each answer, and the frame each close is for."""
        return self.responses + self.outcomes.get("closed", 0)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"frames": self.frames, "connections": self.connections,
                "bytes_sent": self.bytes_sent, "responses": self.responses,
                "read_at_least": self.read_at_least,
                "outcomes": dict(self.outcomes), "seconds": round(self.seconds, 2),
                "frames_per_s": round(self.frames_per_s, 1)}


async def _read_frame(reader: asyncio.StreamReader, timeout_s: float) -> bytes | None:
    """One response frame; None when the broker closed the connection."""
    try:
        head = await asyncio.wait_for(reader.readexactly(4), timeout_s)
        (size,) = struct.unpack(">i", head)
        if not 0 <= size <= 1 << 26:
            raise ValueError(f"response size {size}")
        return await asyncio.wait_for(reader.readexactly(size), timeout_s)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _one_connection(host: str, port: int, frames: list[bytes], reset: bool,
                          read_s: float, result: FuzzResult) -> str:
    """Send `frames` one at a time, as a client does, each after the broker answered the one
    before (or kept silent for `read_s`: acks=0, a length that promises more bytes); stop at
    the first close. A frame is counted once it is written, so every counted frame reached
    the broker while the connection was open. `reset`: the last frame ends in an RST."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
    except (OSError, TimeoutError):
        return "refused"
    outcome = "answered"
    try:
        for n, frame in enumerate(frames):
            writer.write(frame)
            await writer.drain()
            result.frames += 1
            result.bytes_sent += len(frame)
            if reset and n == len(frames) - 1:
                sock = writer.get_extra_info("socket")
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                return "reset"
            try:
                answer = await _read_frame(reader, read_s)
            except TimeoutError:
                outcome = "silent"
                continue
            if answer is None:
                return "closed"
            result.responses += 1
        return outcome
    except (ConnectionError, OSError):
        return "closed"
    finally:
        writer.transport.abort()


async def _one_connection_pipelined(host: str, port: int, frames: list[bytes], reset: bool,
                                    read_s: float, result: FuzzResult) -> str:
    """Write every frame at once, then EOF (or an RST), and read the answers until the broker
    closes (bounded by `read_s`). The broker reads frames in order and closes the connection
    at the first it cannot decode: the frames after that one were sent but never read."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5.0)
    except (OSError, TimeoutError):
        return "refused"
    payload = b"".join(frames)
    try:
        writer.write(payload)
        await writer.drain()
        result.frames += len(frames)
        result.bytes_sent += len(payload)
        if reset:
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return "reset"
        if writer.can_write_eof():
            writer.write_eof()
        end = asyncio.get_running_loop().time() + read_s
        while True:
            left = end - asyncio.get_running_loop().time()
            if left <= 0:
                return "silent"
            try:
                answer = await _read_frame(reader, left)
            except TimeoutError:
                return "silent"
            if answer is None:
                return "closed"
            result.responses += 1
    except (ConnectionError, OSError):
        return "closed"
    finally:
        writer.transport.abort()


async def _fuzz(host: str, port: int, seeds: list[bytes], frames: int, seconds: float,
                seed: int, burst: int, concurrency: int, read_s: float,
                progress: Any, pipeline: bool) -> FuzzResult:
    result = FuzzResult()
    start = time.monotonic()
    next_case = 0
    planned = 0
    last_report = start

    async def worker() -> None:
        nonlocal next_case, planned, last_report
        # planned: frames of connections in flight; result.frames: frames written
        while result.frames + planned < frames and time.monotonic() - start < seconds:
            case = next_case
            next_case += 1
            rng = random.Random(seed * 1_000_003 + case)
            n = min(rng.randint(1, burst), frames - result.frames - planned)
            planned += n
            # a connection is all gentle (deep: most frames reach a handler) or all harsh
            gentle = rng.random() < 0.5
            batch = [mutate(rng, rng.choice(seeds), gentle) for _ in range(n)]
            send = _one_connection_pipelined if pipeline else _one_connection
            outcome = await send(host, port, batch, rng.random() < 0.05, read_s, result)
            planned -= n  # the frames not written (after a close) are planned again
            result.connections += 1
            result.outcomes[outcome] = result.outcomes.get(outcome, 0) + 1
            now = time.monotonic()
            if progress is not None and now - last_report >= 10:
                last_report = now
                progress(result, now - start)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.monotonic() - start
    return result


def fuzz(host: str, port: int, seeds: list[bytes], *, frames: int, seconds: float,
         seed: int = 16, burst: int = 32, concurrency: int = 16, read_s: float = 1.0,
         progress: Any = None, pipeline: bool = False) -> FuzzResult:
    """Send up to `frames` mutated frames within `seconds` to host:port (loopback only):
    one at a time, each after the answer to the one before, or (`pipeline`) each
    connection's frames at once."""
    _loopback(host)
    if not seeds:
        raise ValueError("an empty corpus: nothing was recorded")
    return asyncio.run(_fuzz(host, port, seeds, frames, seconds, seed, burst, concurrency,
                             read_s, progress, pipeline))


# ---------------------------------------------------------------------------------------
# a whole session on a live one-broker cluster (the benchmark and the suite's short run)

TOPIC = "wirefuzz"
BEFORE_RECORDS = 200


@dataclass
class SessionReport:
    clients: list[str]
    recorded: int
    corpus_by_key: dict[int, int]
    fuzz: FuzzResult
    acked_before: int
    read_back: int
    missing: int
    probes: int
    probe_failures: list[str]
    slowest_probe_s: float
    pid_kept: bool
    after_ok: bool
    tracebacks: list[str]
    broker_log: str

    @property
    def live(self) -> bool:
        return (self.pid_kept and self.after_ok and not self.probe_failures
                and self.missing == 0 and not self.tracebacks)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "fuzz"}
        d["fuzz"] = self.fuzz.as_dict()
        d["live"] = self.live
        return d


def _produce(bootstrap: str, values: list[bytes], timeout_s: float = 30.0) -> list[bytes]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": int(timeout_s * 1000), "log_level": 0})
    acked: list[bytes] = []

    def cb(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    for v in values:
        p.produce(TOPIC, v, partition=0, on_delivery=cb)
    p.flush(timeout_s)
    return acked


def _read_all(bootstrap: str, want: int, timeout_s: float = 60.0) -> list[bytes]:
    """Every record of partition 0 from offset 0 (up to the end seen at the start)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wirefuzz-check",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "check.crcs": True, "log_level": 0})
    got: list[bytes] = []
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout_s
        seen = 0
        while seen < max(high, want) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen = int(m.offset() or 0) + 1
                got.append(m.value() or b"")
    finally:
        c.close()
    return got


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for f in a.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=20).values():
        f.result(30)


def live_session(base_dir: Any, *, frames: int, seconds: float, seed: int = 16,
                 concurrency: int = 16, progress: Any = None,
                 pipeline: bool = False) -> SessionReport:
    """Start ZooKeeper and one broker under `base_dir`, record real clients through a proxy,
    write BEFORE_RECORDS acknowledged records, fuzz, then check the broker: same process,
    Metadata answered within 5 s throughout (probed every 2 s), every acknowledged record
    read back with CRC checks, a new produce and consume, no traceback in its log."""
    from broker.runtime.cluster import LocalCluster, probe_metadata

    rec = Recorder("127.0.0.1").start()
    cluster = LocalCluster(base_dir, 1, {
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{rec.port}",
        "auto.create.topics.enable": "false", "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "100", "group.min.session.timeout.ms": "1000",
        "socket.request.max.bytes": str(2 << 20)})
    try:
        cluster.start()
        node = cluster.nodes[1]
        rec.upstream = (node.host, node.port)
        pid = node.pid
        _create_topic(rec_bootstrap := f"127.0.0.1:{rec.port}")
        acked = _produce(rec_bootstrap, [f"before-{i}".encode() for i in range(BEFORE_RECORDS)])
        clients = record_clients(rec_bootstrap, TOPIC)
        rec.recording = False  # the broker advertises the proxy: it stays, passing through
        seeds = corpus(rec.frames)
        by_key: dict[int, int] = {}
        for f in seeds:
            by_key[api_key_of(f)] = by_key.get(api_key_of(f), 0) + 1
        # every request a client recorded was acknowledged, so it must be read back too
        acked_all = _read_all(rec_bootstrap, len(acked))
        if len(acked) < BEFORE_RECORDS or not set(acked) <= set(acked_all):
            raise RuntimeError(f"before the fuzz: {len(acked)} of {BEFORE_RECORDS} records "
                               f"acknowledged, {len(acked_all)} read back")
        probes, failures, slowest = 0, [], 0.0
        stop = threading.Event()

        def probe() -> None:  # at once, then every 2 s until the fuzz ends
            nonlocal probes, slowest
            while not stop.is_set():
                t0 = time.monotonic()
                try:
                    probe_metadata(node.host, node.port, 5.0)
                except Exception as e:  # any failure is the finding
                    failures.append(f"{time.monotonic() - t0:.1f}s: {e}")
                probes += 1
                slowest = max(slowest, time.monotonic() - t0)
                stop.wait(2.0)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        try:
            result = fuzz(node.host, node.port, seeds, frames=frames, seconds=seconds,
                          seed=seed, concurrency=concurrency, progress=progress,
                          pipeline=pipeline)
        finally:
            stop.set()
            prober.join(10)
        pid_kept = node.running and node.pid == pid
        after = _read_all(rec_bootstrap, len(acked_all)) if pid_kept else []
        after_set = set(after)
        missing = sum(1 for v in acked_all if v not in after_set)
        after_ok = False
        if pid_kept:
            new = _produce(rec_bootstrap, [f"after-{i}".encode() for i in range(50)])
            again = _read_all(rec_bootstrap, len(after) + 50)
            after_ok = len(new) == 50 and again[-50:] == new
        text = node.log_path.read_text(errors="replace")
        tracebacks = [text[i:i + 2000] for i in _find_all(text, "Traceback")][:3]
        return SessionReport(
            clients=clients, recorded=len(rec.frames), corpus_by_key=by_key, fuzz=result,
            acked_before=len(acked_all), read_back=len(after), missing=missing,
            probes=probes, probe_failures=failures, slowest_probe_s=round(slowest, 2),
            pid_kept=pid_kept, after_ok=after_ok, tracebacks=tracebacks,
            broker_log=str(node.log_path))
    finally:
        rec.stop()
        cluster.stop()


def _find_all(text: str, needle: str) -> list[int]:
    out: list[int] = []
    at = text.find(needle)
    while at >= 0 and len(out) < 100:
        out.append(at)
        at = text.find(needle, at + 1)
    return out


__all__ = ["EXCLUDED_KEYS", "FuzzResult", "Recorder", "SessionReport", "api_key_of", "corpus",
           "fuzz", "live_session", "mutate", "record_clients"]
