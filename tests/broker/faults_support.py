"""Helpers for the live fault tests (tests/broker/test_faults.py): cluster views over plain
sockets and the admin endpoint, an acks=all idempotent producer in a thread that records
what was acknowledged, and a full read of a partition. Loopback only; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTp
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from broker.runtime.cluster import LocalCluster
from broker.wire import DecodedResponse, build, decode_response, encode_request

from .wire_live_support import connect, recv_frame

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.05) -> T:
    """Poll `cond` until it returns a truthy value; errors (a broker down, a socket refused)
    count as "not yet". Raises AssertionError with the last value after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            value = cond()
            last = value
        except (OSError, AssertionError, KeyError, StopIteration, ValueError) as e:
            last = e
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}: {last!r}")
        time.sleep(every_s)


@dataclass(frozen=True)
class PartitionView:
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


@dataclass(frozen=True)
class MetadataView:
    brokers: tuple[int, ...]
    controller_id: int
    partitions: dict[int, PartitionView]


def metadata(cluster: LocalCluster, broker_id: int, topic: str,
             timeout_s: float = 2.0) -> MetadataView:
    """Metadata v9 for one topic from one broker (no auto-creation)."""
    import kio.index

    cls = kio.index.load_request_schema(3, 9)
    body = build(cls, {"topics": [{"name": topic, "topic_id": None}],
                       "allow_auto_topic_creation": False,
                       "include_cluster_authorized_operations": False,
                       "include_topic_authorized_operations": False})
    b = cluster.nodes[broker_id]
    with contextlib.closing(connect(b.host, b.port, timeout_s)) as s:
        s.sendall(encode_request(body, 1, "faults"))
        resp = decode_response(recv_frame(s), 3, 9)
    assert isinstance(resp, DecodedResponse), resp
    r: Any = resp.body
    parts: dict[int, PartitionView] = {}
    for t in r.topics:
        if t.name == topic:
            for p in t.partitions:
                parts[int(p.partition_index)] = PartitionView(
                    int(p.partition_index), int(p.leader_id), int(p.leader_epoch),
                    tuple(int(x) for x in p.isr_nodes))
    return MetadataView(tuple(sorted(int(x.node_id) for x in r.brokers)),
                        int(r.controller_id), parts)


def admin(cluster: LocalCluster, broker_id: int) -> dict[str, Any]:
    return cluster.replica_states(broker_id, timeout_s=2.0)


def replica(view: dict[str, Any], topic: str, partition: int) -> dict[str, Any] | None:
    for r in view["replicas"]:
        if r["topic"] == topic and r["partition"] == partition:
            return dict(r)
    return None


def leader_replica(cluster: LocalCluster, topic: str, partition: int,
                   among: list[int] | None = None) -> dict[str, Any] | None:
    """The admin view of the replica that calls itself leader (None if none does)."""
    for i in among if among is not None else sorted(cluster.nodes):
        if not cluster.nodes[i].running:
            continue
        with contextlib.suppress(OSError):
            r = replica(admin(cluster, i), topic, partition)
            if r is not None and r["role"] == "leader":
                return {**r, "broker_id": i}
    return None


def create_topic(cluster: LocalCluster, topic: str, partitions: int, rf: int = 3,
                 timeout_s: float = 30.0) -> None:
    """Create through the admin API and wait until every partition has its full ISR."""
    a = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in a.create_topics([NewTopic(topic, partitions, rf)], request_timeout=20).values():
        f.result(timeout_s)

    def full() -> bool:
        for p in range(partitions):
            r = leader_replica(cluster, topic, p)
            if r is None or len(r["isr"]) != rf:
                return False
        return all(len(metadata(cluster, i, topic).partitions) == partitions
                   for i in sorted(cluster.nodes))

    wait_for(full, timeout_s, f"{topic}: every partition with a leader and {rf} in sync")


@dataclass
class ProducerThread:
    """acks=all, idempotent; unique values `<tag>-<n>` produced at a steady pace to the given
    partitions (round robin) until `stop()`; every delivery report is recorded."""

    bootstrap: str
    topic: str
    partitions: list[int]
    tag: str = "v"
    interval_s: float = 0.004
    max_messages: int = 100_000
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> (p, offset)
    failed: dict[bytes, str] = field(default_factory=dict)
    fatal: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 45_000, "linger.ms": 5, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "error_cb": self._on_error,
        })
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.tag}",
                                        daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                self.failed[msg.value()] = str(err)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set() and n < self.max_messages:
            value = f"{self.tag}-{n}".encode()
            p = self.partitions[n % len(self.partitions)]
            try:
                self._producer.produce(self.topic, value, partition=p,
                                       on_delivery=self._on_delivery)
            except BufferError:
                self._producer.poll(0.05)
                continue
            n += 1
            self.sent = n
            self._producer.poll(0)
            time.sleep(self.interval_s)

    def start(self) -> ProducerThread:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, n: int, timeout_s: float, what: str) -> None:
        wait_for(lambda: self.acked_count() >= n, timeout_s, f"{n} acks {what}")

    def stop(self, flush_s: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the producer thread did not stop"
        # short flushes: the interpreter (and pytest-timeout's signal) runs in between
        deadline = time.monotonic() + flush_s
        left = self._producer.flush(0.5)
        while left and time.monotonic() < deadline:
            left = self._producer.flush(0.5)
        assert left == 0, f"{left} messages neither acknowledged nor failed after {flush_s}s"

    def summary(self) -> str:
        return (f"{self.sent} sent, {len(self.acked)} acked, {len(self.failed)} failed"
                + (f" (e.g. {next(iter(self.failed.values()))})" if self.failed else "")
                + (f", fatal: {self.fatal}" if self.fatal else ""))


def read_partition(cluster: LocalCluster, topic: str, partition: int,
                   timeout_s: float = 30.0) -> list[tuple[int, bytes]]:
    """Every (offset, value) of the partition from the beginning to its high watermark."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"faults-read-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_uncommitted"})
    try:
        _, high = c.get_watermark_offsets(CkTp(topic, partition), timeout=10)
        c.assign([CkTp(topic, partition, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"reading {topic}/{partition}: {err}")
            out.append((int(m.offset() or 0), m.value() or b""))
        assert not out or out[-1][0] >= high - 1, f"read to {out[-1][0]}, high {high}"
        return out
    finally:
        c.close()


class EpochSampler:
    """Samples every listed broker's admin view in a thread: (time, broker, controller_epoch,
    is_controller), so a test can check epochs never go back."""

    def __init__(self, cluster: LocalCluster, brokers: list[int], every_s: float = 0.1) -> None:
        self.cluster, self.brokers, self.every_s = cluster, brokers, every_s
        self.samples: list[tuple[float, int, int, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="epoch-sampler", daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + 300  # bound, whatever the test does
        while not self._stop.is_set() and time.monotonic() < deadline:
            for i in self.brokers:
                with contextlib.suppress(OSError, ValueError):
                    asked = time.monotonic()  # the view is at least this recent
                    v = admin(self.cluster, i)
                    self.samples.append((asked, i, int(v["controller_epoch"]),
                                         bool(v["is_controller"])))
            self._stop.wait(self.every_s)

    def __enter__(self) -> EpochSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def regressions(self) -> list[str]:
        last: dict[int, int] = {}
        bad = []
        for t, i, epoch, _ in self.samples:
            if epoch < last.get(i, -1):
                bad.append(f"broker {i}: controller epoch {last[i]} -> {epoch} at {t:.2f}")
            last[i] = max(last.get(i, -1), epoch)
        return bad
