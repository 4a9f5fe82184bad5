"""One small adapter per Kafka client for tests/broker/test_clients.py.

kafka-python, aiokafka, confluent-kafka and the `kcat` binary each get the same operations:
create a topic, produce (acks, idempotence, codec), read partitions from the beginning without
a group, and consume in a group with a commit. Every loop is bounded by a count and a deadline,
every subprocess by a timeout, and the only addresses used are the cluster's 127.0.0.x
brokers (the bootstrap string and the broker addresses Metadata returns).

Records are `Rec(partition, key, value)`; reads return `{partition: [(offset, key, value)]}`.
Keys and values are short ASCII without '|' or newlines so kcat's text format can carry them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.store.dump import dump_log

log = logging.getLogger(__name__)

CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")
ADMIN_CLIENTS = ("kafka-python", "aiokafka", "confluent")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KCAT = shutil.which("kcat")

Read = dict[int, list[tuple[int, bytes | None, bytes]]]


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes
    value: bytes


class ClientError(AssertionError):
    pass


def make_records(tag: str, partitions: int, per_partition: int, pad: int = 0) -> list[Rec]:
    """Records interleaved over partitions (p0, p1, p2, p0, ...). `pad` appends a compressible
    tail so that librdkafka, which sends a batch uncompressed when compression does not
    shrink it, really compresses."""
    tail = b"." * pad
    return [Rec(p, f"k{i}".encode(), f"{tag}-p{p}-{i:04d}".encode() + tail)
            for i in range(per_partition) for p in range(partitions)]


def expected(records: Iterable[Rec]) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = {}
    for r in records:
        out.setdefault(r.partition, []).append((r.key, r.value))
    return out


def counts(records: Iterable[Rec]) -> dict[int, int]:
    return {p: len(v) for p, v in expected(records).items()}


def _ck_row(m: Any) -> tuple[int, tuple[int, bytes | None, bytes]]:
    """(partition, (offset, key, value)) of a confluent-kafka Message."""
    p, o, v = m.partition(), m.offset(), m.value()
    assert p is not None and o is not None and v is not None, m
    return int(p), (int(o), m.key(), bytes(v))


def _done(got: Read, want: dict[int, int]) -> bool:
    return all(len(got.get(p, ())) >= n for p, n in want.items())


def run_async(coro: Any, timeout_s: float) -> Any:
    """Run an aiokafka coroutine on a private event loop, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


# -- topics ---------------------------------------------------------------------------------------


def create_topic(client: str, bootstrap: str, name: str, partitions: int = 3,
                 rf: int = 3, configs: dict[str, str] | None = None) -> int:
    """Create `name` with `client`'s admin API; returns the Kafka error code (0, 36, ...)."""
    configs = configs or {}
    if client == "kafka-python":
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                                 client_id="hiwater-test-admin")
        try:
            try:
                admin.create_topics({name: {"num_partitions": partitions,
                                            "replication_factor": rf, "configs": configs}},
                                    timeout_ms=10000)
            except KafkaError as e:
                return int(getattr(e, "errno", -1))
            return 0
        finally:
            admin.close()
    if client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def go() -> int:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
            await admin.start()
            try:
                resp = await admin.create_topics(
                    [NewTopic(name, partitions, rf, topic_configs=configs)], timeout_ms=10000)
                errs = [e[1] for e in resp.topic_errors if e[0] == name]
                if len(errs) != 1:
                    raise ClientError(f"aiokafka CreateTopics: unexpected reply {resp}")
                return int(errs[0])
            finally:
                await admin.close()

        return int(run_async(go(), 30))
    if client == "confluent":
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.admin import NewTopic as CNewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futs = admin.create_topics([CNewTopic(name, partitions, rf, config=configs)],
                                   operation_timeout=10, request_timeout=15)
        try:
            futs[name].result(timeout=30)
        except KafkaException as e:
            return int(e.args[0].code())
        return 0
    raise ValueError(client)


def topic_layout(cluster: Any, topic: str) -> dict[int, dict[str, Any]]:
    """partition -> the leader's admin view of it (leader, replicas, isr, offsets)."""
    out: dict[int, dict[str, Any]] = {}
    for i in sorted(cluster.nodes):
        if not cluster.nodes[i].running:
            continue
        for r in cluster.replica_states(i)["replicas"]:
            if r["topic"] == topic and r["role"] == "leader":
                out[r["partition"]] = r
    return out


def wait_topic(cluster: Any, topic: str, partitions: int, isr: int = 3,
               timeout_s: float = 15.0) -> dict[int, dict[str, Any]]:
    """Until every partition of `topic` has a leader with a full ISR (bounded)."""
    deadline = time.monotonic() + timeout_s
    layout: dict[int, dict[str, Any]] = {}
    for _ in range(int(timeout_s / 0.1) + 1):
        if time.monotonic() > deadline:
            break
        layout = topic_layout(cluster, topic)
        if sorted(layout) == list(range(partitions)) and all(
                len(r["isr"]) >= isr for r in layout.values()):
            return layout
        time.sleep(0.1)
    raise ClientError(f"topic {topic} not ready after {timeout_s}s: {layout}")


def wait_hw(cluster: Any, topic: str, want: dict[int, int], timeout_s: float = 15.0) -> None:
    """Until each partition's high watermark reaches `want[p]` (acks=0/1 records are readable
    only once replicated to the ISR)."""
    deadline = time.monotonic() + timeout_s
    layout: dict[int, dict[str, Any]] = {}
    for _ in range(int(timeout_s / 0.1) + 1):
        if time.monotonic() > deadline:
            break
        layout = topic_layout(cluster, topic)
        if all(p in layout and layout[p]["high_watermark"] >= n for p, n in want.items()):
            return
        time.sleep(0.1)
    hws = {p: r["high_watermark"] for p, r in layout.items()}
    raise ClientError(f"{topic}: high watermarks {hws} never reached {want}")


# -- stored batches -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    codec: str
    producer_id: int
    base_sequence: int


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[StoredBatch]:
    """The batches of one replica's log, through `hiwater dump-log`'s code (DumpLogSegments)."""
    pdir = Path(data_dir) / f"{topic}-{partition}"
    out: list[StoredBatch] = []
    for seg in sorted(pdir.glob("*.log")):
        buf = io.StringIO()
        code = dump_log(seg, False, buf)
        if code != 0:
            raise ClientError(f"dump-log {seg} exited {code}:\n{buf.getvalue()}")
        for line in buf.getvalue().splitlines():
            if not line.startswith("baseOffset:"):
                continue
            f = line.split()
            kv = {f[i].rstrip(":"): f[i + 1] for i in range(0, len(f) - 1)
                  if f[i].endswith(":")}
            out.append(StoredBatch(int(kv["baseOffset"]), int(kv["lastOffset"]),
                                   kv["compresscodec"], int(kv["producerId"]),
                                   int(kv["baseSequence"])))
    return out


# -- produce --------------------------------------------------------------------------------------


@dataclass
class ProduceSpec:
    acks: str = "all"          # "0", "1", "all"
    idempotent: bool = False
    codec: str = "none"
    linger_ms: int = 5


def produce(client: str, bootstrap: str, topic: str, records: Sequence[Rec],
            spec: ProduceSpec, timeout_s: float = 30.0) -> None:
    """Produce `records` in order to their explicit partitions, flush, and check every
    acknowledged send succeeded (acks=0 sends have no acknowledgement to check)."""
    fn: Callable[..., None] = {
        "kafka-python": _produce_kp, "aiokafka": _produce_aio, "confluent": _produce_ck,
        "kcat": _produce_kcat}[client]
    fn(bootstrap, topic, records, spec, timeout_s)


def _codec_or_none(codec: str) -> str | None:
    return None if codec == "none" else codec


def _produce_kp(bootstrap: str, topic: str, records: Sequence[Rec], spec: ProduceSpec,
                timeout_s: float) -> None:
    from kafka import KafkaProducer

    acks: int | str = "all" if spec.acks == "all" else int(spec.acks)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                      enable_idempotence=spec.idempotent,
                      compression_type=_codec_or_none(spec.codec), linger_ms=spec.linger_ms,
                      request_timeout_ms=15000, max_block_ms=15000)
    try:
        futs = [p.send(topic, value=r.value, key=r.key, partition=r.partition) for r in records]
        p.flush(timeout=timeout_s)
        for f in futs:
            md = f.get(timeout=timeout_s)
            if spec.acks != "0" and md.offset < 0:
                raise ClientError(f"kafka-python: no offset for an acknowledged send: {md}")
    finally:
        p.close(timeout=10)


def _produce_aio(bootstrap: str, topic: str, records: Sequence[Rec], spec: ProduceSpec,
                 timeout_s: float) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        acks: int | str = "all" if spec.acks == "all" else int(spec.acks)
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                             enable_idempotence=spec.idempotent,
                             compression_type=_codec_or_none(spec.codec),
                             linger_ms=spec.linger_ms, request_timeout_ms=15000)
        await p.start()
        try:
            futs = [await p.send(topic, value=r.value, key=r.key, partition=r.partition)
                    for r in records]
            await p.flush()
            for f in futs:
                md = await f
                if spec.acks != "0" and md.offset < 0:
                    raise ClientError(f"aiokafka: no offset for an acknowledged send: {md}")
        finally:
            await p.stop()

    run_async(go(), timeout_s)


def _produce_ck(bootstrap: str, topic: str, records: Sequence[Rec], spec: ProduceSpec,
                timeout_s: float) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": spec.acks,
                  "enable.idempotence": spec.idempotent, "compression.type": spec.codec,
                  "linger.ms": spec.linger_ms, "message.timeout.ms": int(timeout_s * 1000)})
    errors: list[Any] = []
    delivered = [0]

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    for r in records:
        p.produce(topic, value=r.value, key=r.key, partition=r.partition, on_delivery=cb)
        p.poll(0)
    left = p.flush(timeout_s)
    if left or errors or delivered[0] != len(records):
        raise ClientError(f"confluent: {left} undelivered, {delivered[0]}/{len(records)} "
                          f"delivered, errors {errors[:5]}")


def kcat(args: list[str], stdin: bytes | None = None, timeout_s: float = 30.0
         ) -> subprocess.CompletedProcess[bytes]:
    if KCAT is None:
        raise ClientError("kcat is not installed")
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout_s,
                          check=False)


def _produce_kcat(bootstrap: str, topic: str, records: Sequence[Rec], spec: ProduceSpec,
                  timeout_s: float) -> None:
    by_part = expected(records)
    for part, kvs in sorted(by_part.items()):
        args = ["-P", "-b", bootstrap, "-t", topic, "-p", str(part), "-K", "|",
                "-X", f"acks={spec.acks}", "-X", f"linger.ms={spec.linger_ms}",
                "-X", f"message.timeout.ms={int(timeout_s * 1000)}"]
        if spec.idempotent:
            args += ["-X", "enable.idempotence=true"]
        if spec.codec != "none":
            args += ["-z", spec.codec]
        data = b"".join(k + b"|" + v + b"\n" for k, v in kvs)
        r = kcat(args, data, timeout_s + 10)
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0 or "fail" in err.lower() or "error" in err.lower():
            raise ClientError(f"kcat -P exited {r.returncode}: {err}")


# -- read (no group) ------------------------------------------------------------------------------


def read(client: str, bootstrap: str, topic: str, want: dict[int, int],
         timeout_s: float = 30.0) -> Read:
    """Read partitions `want` from the beginning (assigned, no group) until each has at least
    `want[p]` records or the deadline; then one more short poll to catch extras
    (duplicates)."""
    fn: Callable[..., Read] = {
        "kafka-python": _read_kp, "aiokafka": _read_aio, "confluent": _read_ck,
        "kcat": _read_kcat}[client]
    return fn(bootstrap, topic, want, timeout_s)


def _read_kp(bootstrap: str, topic: str, want: dict[int, int], timeout_s: float) -> Read:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=15000)
    got: Read = {}
    try:
        tps = [TopicPartition(topic, p) for p in sorted(want)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        extra = 2
        for _ in range(10_000):
            if time.monotonic() > deadline:
                break
            batch = c.poll(timeout_ms=300)
            for tp, msgs in batch.items():
                got.setdefault(tp.partition, []).extend(
                    (m.offset, m.key, m.value) for m in msgs)
            if _done(got, want):
                extra -= 1
                if extra < 0:
                    break
    finally:
        c.close()
    return got


def _read_aio(bootstrap: str, topic: str, want: dict[int, int], timeout_s: float) -> Read:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> Read:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             request_timeout_ms=15000)
        await c.start()
        got: Read = {}
        try:
            tps = [TopicPartition(topic, p) for p in sorted(want)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout_s
            extra = 2
            for _ in range(10_000):
                if time.monotonic() > deadline:
                    break
                batch = await c.getmany(timeout_ms=300)
                for tp, msgs in batch.items():
                    got.setdefault(tp.partition, []).extend(
                        (m.offset, m.key, m.value) for m in msgs)
                if _done(got, want):
                    extra -= 1
                    if extra < 0:
                        break
        finally:
            await c.stop()
        return got

    return dict(run_async(go(), timeout_s + 15))


def _read_ck(bootstrap: str, topic: str, want: dict[int, int], timeout_s: float) -> Read:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hiwater-unused",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": False})
    got: Read = {}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(want)])
        deadline = time.monotonic() + timeout_s
        extra = 2
        for _ in range(10_000):
            if time.monotonic() > deadline:
                break
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error():
                    raise ClientError(f"confluent consume error: {m.error()}")
                p, row = _ck_row(m)
                got.setdefault(p, []).append(row)
            if _done(got, want):
                extra -= 1
                if extra < 0:
                    break
    finally:
        c.close()
    return got


KCAT_FMT = "%p|%o|%k|%s\\n"


def _parse_kcat(out: bytes) -> list[tuple[int, int, bytes, bytes]]:
    rows = []
    for line in out.splitlines():
        p, o, k, v = line.split(b"|", 3)
        rows.append((int(p), int(o), k, v))
    return rows


def _read_kcat(bootstrap: str, topic: str, want: dict[int, int], timeout_s: float) -> Read:
    """`kcat -C -e` per partition (it exits at the end of the partition); rerun from the
    beginning, bounded, while the high watermark has not yet reached the wanted count."""
    got: Read = {}
    deadline = time.monotonic() + timeout_s
    for p, n in sorted(want.items()):
        rows: Read = {}
        for _ in range(20):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r = kcat(["-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "beginning",
                      "-e", "-q", "-f", KCAT_FMT], timeout_s=max(5.0, left))
            if r.returncode != 0:
                raise ClientError(f"kcat -C exited {r.returncode}: {r.stderr.decode()}")
            rows = {}
            for part, off, k, v in _parse_kcat(r.stdout):
                rows.setdefault(part, []).append((off, k, v))
            if len(rows.get(p, ())) >= n:
                break
            time.sleep(0.2)
        got.update(rows)
    return got


def check_read(got: Read, records: Sequence[Rec], who: str, first_offset: int = 0) -> None:
    """Exactly the records, in produce order per partition, at consecutive offsets."""
    want = expected(records)
    for p, kvs in sorted(want.items()):
        rows = got.get(p, [])
        vals = [(k, v) for _, k, v in rows]
        if vals != kvs:
            missing = [v for _, v in kvs if v not in {x for _, x in vals}]
            raise ClientError(
                f"{who}: partition {p}: got {len(vals)} records, want {len(kvs)}; "
                f"missing {len(missing)} (first {missing[:3]}), "
                f"first rows {rows[:3]}, duplicates {len(vals) - len(set(vals))}")
        offsets = [o for o, _, _ in rows]
        if offsets != list(range(first_offset, first_offset + len(kvs))):
            raise ClientError(f"{who}: partition {p}: offsets {offsets[:10]}... not consecutive "
                              f"from {first_offset}")
    extra = set(got) - set(want)
    if any(got[p] for p in extra):
        raise ClientError(f"{who}: records from unexpected partitions {sorted(extra)}")


# -- groups ---------------------------------------------------------------------------------------


def group_consume(client: str, bootstrap: str, topic: str, group: str, n: int,
                  timeout_s: float = 40.0, quiet_s: float = 1.5) -> Read:
    """Join `group`, consume until `n` records (then `quiet_s` more to catch extras), commit
    synchronously, leave. Starts from the committed offsets, else from the beginning."""
    fn: Callable[..., Read] = {
        "kafka-python": _group_kp, "aiokafka": _group_aio, "confluent": _group_ck,
        "kcat": _group_kcat}[client]
    return fn(bootstrap, topic, group, n, timeout_s, quiet_s)


def _total(got: Read) -> int:
    return sum(len(v) for v in got.values())


def _group_kp(bootstrap: str, topic: str, group: str, n: int, timeout_s: float,
              quiet_s: float) -> Read:
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=6000, heartbeat_interval_ms=1000,
                      request_timeout_ms=15000)
    got: Read = {}
    try:
        deadline = time.monotonic() + timeout_s
        quiet_until: float | None = None
        for _ in range(10_000):
            now = time.monotonic()
            if now > deadline or (quiet_until is not None and now > quiet_until):
                break
            for tp, msgs in c.poll(timeout_ms=300).items():
                got.setdefault(tp.partition, []).extend(
                    (m.offset, m.key, m.value) for m in msgs)
            if quiet_until is None and _total(got) >= n:
                quiet_until = time.monotonic() + quiet_s
        c.commit()
    finally:
        c.close()
    return got


def _group_aio(bootstrap: str, topic: str, group: str, n: int, timeout_s: float,
               quiet_s: float) -> Read:
    from aiokafka import AIOKafkaConsumer

    async def go() -> Read:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             request_timeout_ms=15000)
        await c.start()
        got: Read = {}
        try:
            deadline = time.monotonic() + timeout_s
            quiet_until: float | None = None
            for _ in range(10_000):
                now = time.monotonic()
                if now > deadline or (quiet_until is not None and now > quiet_until):
                    break
                for tp, msgs in (await c.getmany(timeout_ms=300)).items():
                    got.setdefault(tp.partition, []).extend(
                        (m.offset, m.key, m.value) for m in msgs)
                if quiet_until is None and _total(got) >= n:
                    quiet_until = time.monotonic() + quiet_s
            await c.commit()
        finally:
            await c.stop()
        return got

    return dict(run_async(go(), timeout_s + 20))


def _group_ck(bootstrap: str, topic: str, group: str, n: int, timeout_s: float,
              quiet_s: float) -> Read:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    got: Read = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        quiet_until: float | None = None
        for _ in range(10_000):
            now = time.monotonic()
            if now > deadline or (quiet_until is not None and now > quiet_until):
                break
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error():
                    raise ClientError(f"confluent consume error: {m.error()}")
                p, row = _ck_row(m)
                got.setdefault(p, []).append(row)
            if quiet_until is None and _total(got) >= n:
                quiet_until = time.monotonic() + quiet_s
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def _group_kcat(bootstrap: str, topic: str, group: str, n: int, timeout_s: float,
                quiet_s: float) -> Read:
    """kcat's balanced consumer (-G). With -e it exits once every assigned partition is at
    its end; it commits (auto commit of the stored offsets) when it closes. The count `n` is
    checked by the caller; a run that stopped early (partitions assigned late) is rerun, and
    the reruns start from the committed offsets."""
    got: Read = {}
    deadline = time.monotonic() + timeout_s
    for _ in range(10):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        # no -o: in -G mode kcat would seek every assigned partition there, ignoring the
        # committed offsets; auto.offset.reset covers a group without commits
        r = kcat(["-b", bootstrap, "-G", group, "-e", "-q",
                  "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
                  "-f", KCAT_FMT, topic], timeout_s=max(5.0, left))
        if r.returncode != 0:
            raise ClientError(f"kcat -G exited {r.returncode}: {r.stderr.decode()}")
        for part, off, k, v in _parse_kcat(r.stdout):
            got.setdefault(part, []).append((off, k, v))
        if _total(got) >= n:
            break
    return got


def committed_offsets(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (confluent's OffsetFetch)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


# -- a member of a long-running group (mixed-group test) ------------------------------------------


@dataclass
class Member:
    """One consumer in its own thread: it polls, records its latest assignment and what it
    read, until `stop` is set or its deadline passes."""

    client: str
    bootstrap: str
    topic: str
    group: str
    deadline_s: float = 60.0
    assignment: frozenset[int] = frozenset()
    got: Read = field(default_factory=dict)
    error: BaseException | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Member:
        self.thread = threading.Thread(target=self._run, name=f"member-{self.client}",
                                       daemon=True)
        self.thread.start()
        return self

    def join(self, timeout_s: float) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _add(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        self.got.setdefault(partition, []).append((offset, key, value))

    def _run(self) -> None:
        try:
            {"kafka-python": self._run_kp, "aiokafka": self._run_aio,
             "confluent": self._run_ck}[self.client]()
        except BaseException as e:
            self.error = e

    def _bounded(self) -> Iterable[int]:
        end = time.monotonic() + self.deadline_s
        for i in range(100_000):
            if self.stop.is_set() or time.monotonic() > end:
                return
            yield i

    def _run_kp(self) -> None:
        from kafka import KafkaConsumer

        c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                          auto_offset_reset="earliest", session_timeout_ms=6000,
                          heartbeat_interval_ms=500, client_id="mixed-kafka-python")
        try:
            for _ in self._bounded():
                for tp, msgs in c.poll(timeout_ms=200).items():
                    for m in msgs:
                        self._add(tp.partition, m.offset, m.key, m.value)
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            c.close()

    def _run_aio(self) -> None:
        from aiokafka import AIOKafkaConsumer

        async def go() -> None:
            c = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap,
                                 group_id=self.group, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=500,
                                 client_id="mixed-aiokafka")
            await c.start()
            try:
                for _ in self._bounded():
                    for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                        for m in msgs:
                            self._add(tp.partition, m.offset, m.key, m.value)
                    self.assignment = frozenset(tp.partition for tp in c.assignment())
            finally:
                await c.stop()

        run_async(go(), self.deadline_s + 20)

    def _run_ck(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500, "client.id": "mixed-confluent"})
        try:
            c.subscribe([self.topic])
            for _ in self._bounded():
                for m in c.consume(num_messages=500, timeout=0.2):
                    if m.error():
                        raise ClientError(f"confluent consume error: {m.error()}")
                    p, (o, k, v) = _ck_row(m)
                    self._add(p, o, k, v)
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            with contextlib.suppress(Exception):
                c.close()
