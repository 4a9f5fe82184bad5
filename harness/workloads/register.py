"""A register workload over a compacted topic, for per-key linearizability
(`harness.checkers.linearizable`).

Each register key k is the record key `str(k)` in partition `k % partitions` of one compacted
topic (`cleanup.policy=compact`, RF `replication_factor`):

- `write [k, v]`: produce key=k, value=v (LongSerializer) with acks=all, wait for the delivery
  report (at most `send_timeout_s`); `ok` once acknowledged;
- `read [k, null]` -> `[k, v]`: ask k's partition leader for its high watermark (ListOffsets,
  uncached), then consume the partition until the consumer's position reaches it and return
  the value of the last record for k (None if there is none). Each client keeps a running
  view of its partitions (key -> last value, partition -> next offset), so a read only
  fetches what is new since the previous one; a fresh client (a new process) starts from the
  beginning, which compaction keeps short.

A read is linearizable at the moment the high watermark is observed: every write
acknowledged before the read began is below it (acks=all), and what the read returns was
committed before it returned. Errors are classified with the queue clients' table
(`harness.clients.base.ERROR_TABLE`): a definite failure is `fail`, anything else `info`
(the worker then continues as a new process). A read that cannot reach the high watermark
within `read_timeout_s` is `info` (an indeterminate read constrains nothing).

Keys rotate (Jepsen `independent`): `key_count` keys are active; a key retires after
`ops_per_key` invocations and is replaced by `max(active) + 1`, so each key's history stays
small enough for the search. Values are per-key counters, hence unique.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from harness.clients.base import (
    Classified,
    ClientSettings,
    Completion,
    SendTimeout,
    TopicRegistry,
    decode_long,
    encode_long,
    run_bounded,
    wait_until,
)
from harness.clients.confluent import POLL_EVENT_CODES, classify, kafka_error_of
from harness.clients.logs import client_logger
from harness.history import OK
from harness.workloads.queue import OpSpec, Stagger, Worker
from harness.workloads.recorder import Recorder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegisterOpts:
    client: str = "confluent"
    concurrency: int = 3
    rate: float = 20.0
    key_count: int = 3
    ops_per_key: int = 60
    read_p: float = 0.5
    topic: str = "jepsen-register"
    partitions: int = 2
    replication_factor: int = 3
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    acks: str = "all"
    idempotence: bool = True
    retries: int = 1000
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 3_000
    send_timeout_s: float = 10.0
    read_timeout_s: float = 5.0
    isolation_level: str = "read_committed"
    seed: int | None = None
    join_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.client != "confluent":
            raise ValueError("the register workload runs on the confluent client")
        if self.concurrency < 1 or self.rate <= 0 or self.key_count < 1:
            raise ValueError("concurrency, rate and key_count must be positive")
        if self.ops_per_key < 1 or not 0 <= self.read_p <= 1:
            raise ValueError("ops_per_key >= 1 and 0 <= read_p <= 1")

    def client_settings(self, bootstrap: str) -> ClientSettings:
        return ClientSettings(
            bootstrap=bootstrap,
            replication_factor=self.replication_factor,
            topic_configs={"cleanup.policy": "compact", **self.topic_configs},
            acks=self.acks,
            idempotence=self.idempotence,
            retries=self.retries,
            delivery_timeout_ms=self.delivery_timeout_ms,
            request_timeout_ms=self.request_timeout_ms,
            send_timeout_s=self.send_timeout_s,
            isolation_level=self.isolation_level,
            client_id_prefix="jepsen-register",
        )


def create_register_topic(opts: RegisterOpts, settings: ClientSettings,
                          attempts: int = 10) -> None:
    conf: dict[str, Any] = {"bootstrap.servers": settings.bootstrap,
                            "socket.timeout.ms": int(settings.admin_timeout_s * 1000),
                            "logger": client_logger(None)}
    admin = AdminClient(conf)
    for attempt in range(attempts):
        futs = admin.create_topics(
            [NewTopic(opts.topic, opts.partitions, opts.replication_factor,
                      config=dict(settings.topic_configs))],
            operation_timeout=settings.admin_timeout_s, request_timeout=settings.admin_timeout_s)
        try:
            futs[opts.topic].result(timeout=settings.admin_timeout_s + 1)
            return
        except KafkaException as e:
            err = kafka_error_of(e)
            if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if attempt == attempts - 1:
                raise
        except TimeoutError:
            if attempt == attempts - 1:
                raise
        time.sleep(0.5)


class RegisterClient:
    """One process of the register workload: a producer and an assigned consumer."""

    def __init__(self, opts: RegisterOpts, settings: ClientSettings, process: int) -> None:
        self.opts = opts
        self.settings = settings
        self.process = process
        self.client_id = f"{settings.client_id_prefix}-{process}"
        self.closed = False
        self._fatal: KafkaError | None = None
        self._log = client_logger(process)
        s = settings
        self.producer: Producer | None = Producer({
            "bootstrap.servers": s.bootstrap,
            "client.id": self.client_id,
            "acks": s.acks,
            "enable.idempotence": s.idempotence,
            "retries": s.retries,
            "message.timeout.ms": s.delivery_timeout_ms,
            "request.timeout.ms": s.request_timeout_ms,
            "reconnect.backoff.max.ms": s.reconnect_backoff_max_ms,
            "socket.connection.setup.timeout.ms": s.socket_setup_timeout_max_ms,
            "linger.ms": 0,
            "error_cb": self._on_error,
            "logger": self._log,
        })
        self.consumer: Consumer | None = Consumer({
            "bootstrap.servers": s.bootstrap,
            "client.id": self.client_id,
            "group.id": f"{self.client_id}-reader",  # never joins: assign only, no commits
            "isolation.level": s.isolation_level,
            "enable.auto.commit": False,
            # never skip: after a reset the view is rebuilt by replaying from the start
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": s.consumer_request_timeout_ms,
            "reconnect.backoff.max.ms": s.reconnect_backoff_max_ms,
            "socket.connection.setup.timeout.ms": s.socket_setup_timeout_max_ms,
            "enable.partition.eof": False,
            "error_cb": self._on_error,
            "logger": self._log,
        })
        self.consumer.assign([TP(opts.topic, p, OFFSET_BEGINNING)
                              for p in range(opts.partitions)])
        self.latest: dict[int, Any] = {}
        self.next_offset: dict[int, int] = {}
        #: consumer events seen during the current op (offset resets, truncation, ...)
        self.notes: list[str] = []
        self.last_read: dict[str, int] = {}

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err
        self._log.error("error_cb %s: %s: %s", self.client_id, err.name(), err.str())

    def write(self, k: int, v: int) -> None:
        assert self.producer is not None
        box: list[Any] = []
        self.producer.produce(self.opts.topic, key=str(k).encode(), value=encode_long(v),
                              partition=k % self.opts.partitions,
                              on_delivery=lambda err, msg: box.append(err))
        end = time.monotonic() + self.settings.send_timeout_s
        while not box:
            left = end - time.monotonic()
            if left <= 0:
                raise SendTimeout(f"no delivery report for write {k} {v}")
            self.producer.flush(min(left, 1.0))
        if box[0] is not None:
            raise KafkaException(box[0])

    def read(self, k: int) -> Any:
        assert self.consumer is not None
        p = k % self.opts.partitions
        end = time.monotonic() + self.opts.read_timeout_s
        _low, hw = self.consumer.get_watermark_offsets(
            TP(self.opts.topic, p), timeout=self.opts.read_timeout_s, cached=False)
        self.last_read = {"partition": p, "hw": hw}
        for _ in range(100_000):
            if self.next_offset.get(p, 0) >= hw:
                self.last_read["position"] = self.next_offset.get(p, 0)
                return self.latest.get(k)
            left = end - time.monotonic()
            if left <= 0:
                raise SendTimeout(f"read of {k} did not reach the high watermark {hw} of "
                                  f"partition {p} (at {self.next_offset.get(p, 0)})")
            for m in self.consumer.consume(500, min(left, 0.2)):
                err = m.error()
                if err is not None:
                    if err.code() in POLL_EVENT_CODES or (err.retriable() and not err.fatal()):
                        if len(self.notes) < 8:
                            self.notes.append(f"{err.name()}: {err.str()}")
                        continue
                    raise KafkaException(err)
                mk = m.key()
                try:
                    key = int(mk.decode()) if mk is not None else None
                except ValueError:
                    key = None
                if key is not None:
                    self.latest[key] = decode_long(m.value())
                mp, mo = m.partition(), m.offset()
                if mp is not None and mo is not None:
                    self.next_offset[mp] = mo + 1
        raise SendTimeout("read loop bound")  # pragma: no cover

    def invoke(self, f: str, value: Any, extra: Mapping[str, Any] | None = None) -> Completion:
        k, v = value
        self.notes = []
        extra_out: dict[str, Any] = {}
        try:
            if f == "write":
                self.write(k, v)
                comp = Completion(OK, [k, v], extra_out)
            elif f == "read":
                self.last_read = {}
                comp = Completion(OK, [k, self.read(k)], extra_out)
                # where the read stopped: the high watermark it saw, the position it reached
                extra_out["read_at"] = self.last_read
            else:
                raise ValueError(f"unknown register op {f!r}")
        except Exception as e:
            c: Classified = classify(e, self._fatal)
            extra_out["error"] = c.error
            if c.end_process:
                extra_out["end_process"] = True
            comp = Completion(c.type, [k, v] if f == "write" else [k, None], extra_out)
        if self.notes:
            extra_out["client_errors"] = self.notes
        return comp

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        held: list[Any] = [self.producer]
        self.producer = None

        def close_producer() -> None:
            p = held.pop()
            p.purge()
            p.flush(0)

        run_bounded(close_producer, self.settings.close_timeout_s,
                    f"{self.client_id}-close-producer")
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            run_bounded(consumer.close, self.settings.close_timeout_s,
                        f"{self.client_id}-close-consumer")


class RegisterGen:
    """Writes and reads over rotating keys; thread-safe."""

    def __init__(self, opts: RegisterOpts, rng: random.Random) -> None:
        self.opts = opts
        self.rng = rng
        self.active = list(range(opts.key_count))
        self.count: dict[int, int] = {}
        self.next_value: dict[int, int] = {}
        self._lock = threading.Lock()

    def next_op(self) -> OpSpec:
        with self._lock:
            i = self.rng.randrange(len(self.active))
            k = self.active[i]
            n = self.count.get(k, 0) + 1
            self.count[k] = n
            if n >= self.opts.ops_per_key:
                self.active[i] = max(self.active) + 1
            if self.rng.random() < self.opts.read_p:
                return OpSpec("read", [k, None])
            v = self.next_value.get(k, 1)
            self.next_value[k] = v + 1
            return OpSpec("write", [k, v])


@dataclass
class RegisterRun:
    opts: RegisterOpts
    processes: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def run_register(bootstrap: str, opts: RegisterOpts, recorder: Recorder,
                 stop: threading.Event, deadline: float) -> RegisterRun:
    """Run the register workload until `deadline` (time.monotonic()) or `stop`."""
    if recorder.concurrency != opts.concurrency:
        raise ValueError("recorder concurrency must equal opts.concurrency")
    settings = opts.client_settings(bootstrap)
    create_register_topic(opts, settings)
    rng = random.Random(opts.seed)
    gen = RegisterGen(opts, random.Random(rng.random()))
    stagger = Stagger(1.0 / opts.rate, random.Random(rng.random()))
    run = RegisterRun(opts)

    def factory(_name: str, s: ClientSettings, process: int, _t: Any) -> Any:
        return RegisterClient(opts, s, process)

    workers = [Worker(t, opts, settings, recorder, TopicRegistry(), factory)  # type: ignore[arg-type]
               for t in range(opts.concurrency)]

    def loop(w: Worker) -> None:
        try:
            for _ in range(10**9):
                if stop.is_set() or time.monotonic() >= deadline:
                    break
                spec = gen.next_op()
                t = stagger.next_time()
                if not wait_until(min(t, deadline), stop) or time.monotonic() >= deadline:
                    break
                w.run_op(spec)
        except Exception as e:  # pragma: no cover - a harness bug
            log.exception("register worker %s", w.thread)
            run.errors.append(f"worker {w.thread}: {e!r}")
        finally:
            w.close_client()

    threads = [threading.Thread(target=loop, args=(w,), name=f"register-{w.thread}",
                                daemon=True) for w in workers]
    for t in threads:
        t.start()
    end = max(deadline, time.monotonic()) + opts.join_timeout_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
        if t.is_alive():
            run.errors.append(f"{t.name} still running")
    for w in workers:
        run.processes[w.thread] = w.process
    return run

