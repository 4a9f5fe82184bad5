"""The primary queue client: confluent-kafka (librdkafka), with Jepsen's semantics.

One `ConfluentClient` is one Jepsen process: a `Producer`, a `Consumer` (group
`jepsen-group`, created on first use) and an `AdminClient` (created on first use).

- `send`: `produce(topic, value=LongSerializer(v), partition=p)` with a null key, then wait
  for the delivery report for at most `send_timeout_s` (Jepsen's `(deref 10000)`); the report's
  topic-partition must be the key's.
- `poll`: Java's `poll(Duration)` returns as soon as records are there; librdkafka's
  `consume(n, timeout)` waits for n records or the whole timeout. So a poll is one
  `poll(poll_ms)` (the first record, or nothing when the bound passes) followed by
  `consume(max_poll_records - 1, 0)` (whatever else is already fetched).
  Consumer *events* that the Java client only logs (transport errors, all brokers down,
  unknown topic or partition, offset resets, leader changes, retriable errors) do not fail
  the poll; they are listed in the op's `client_errors`. Other errors raise, with the
  records already consumed kept in the op's value (`PartialPoll`).
- `assign` replaces the assignment and keeps the position of every partition still assigned
  (the Java client does; librdkafka's `assign` would restart them from the committed offset
  or `auto.offset.reset`): kept partitions are not touched, only the dropped and the new
  ones change (`incremental_unassign` / `incremental_assign`). `seek_to_beginning` puts
  every partition at its beginning. A run
  that never commits starts new partitions at the `auto.offset.reset` position directly
  (there is no committed offset to look up, and the lookup needs the group coordinator).
  Switching between `assign` and `subscribe` drops the other first (the Java client throws
  IllegalStateException there).
- `subscribe` subscribes to the keys' topics with a rebalance listener that journals
  `assigned` / `revoked` / `lost` events into the op's `rebalance_log`.
- `close` purges the producer and closes the consumer without committing, each bounded by
  `close_timeout_s` on a helper thread.

librdkafka error codes map to Jepsen's table (`base.ERROR_TABLE`) in `kind_of_code`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    OffsetSpec,
)

from harness.clients.base import (
    Classified,
    ClientSettings,
    EndOffset,
    KeyMismatch,
    PartialPoll,
    QueueClient,
    SendTimeout,
    TopicRegistry,
    classify_common,
    classify_kind,
    decode_long,
    encode_long,
    exception_text,
    kind_of_message,
    run_bounded,
)
from harness.clients.logs import client_logger

log = logging.getLogger(__name__)

E = KafkaError
LATEST: Final = OffsetSpec.latest()  # type: ignore[no-untyped-call]
EARLIEST: Final = OffsetSpec.earliest()  # type: ignore[no-untyped-call]

#: librdkafka / Kafka error code -> Jepsen error kind
CODE_KINDS: Final[dict[int, str]] = {
    E.TOPIC_AUTHORIZATION_FAILED: "authorization",
    E.GROUP_AUTHORIZATION_FAILED: "authorization",
    E.CLUSTER_AUTHORIZATION_FAILED: "authorization",
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "authorization",
    E.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "authorization",
    E.INVALID_PRODUCER_EPOCH: "invalid-producer-epoch",
    E.TOPIC_EXCEPTION: "invalid-topic",
    E.INVALID_REPLICATION_FACTOR: "invalid-replication-factor",
    E.NOT_CONTROLLER: "not-controller",
    E.OUT_OF_ORDER_SEQUENCE_NUMBER: "out-of-order-sequence",
    E.PRODUCER_FENCED: "producer-fenced",
    E._FENCED: "producer-fenced",
    E.UNKNOWN_TOPIC_OR_PART: "unknown-topic-or-partition",
    E._UNKNOWN_TOPIC: "unknown-topic-or-partition",
    E._UNKNOWN_PARTITION: "unknown-topic-or-partition",
    E.BROKER_NOT_AVAILABLE: "broker-not-available",
    E._TRANSPORT: "disconnect",
    E.NETWORK_EXCEPTION: "network",
    E.NOT_LEADER_FOR_PARTITION: "not-leader-or-follower",
    E.UNKNOWN: "unknown-server-exception",
    E.REQUEST_TIMED_OUT: "timeout",
    E._MSG_TIMED_OUT: "timeout",
    E._TIMED_OUT: "timeout",
    E._TIMED_OUT_QUEUE: "timeout",
}

#: consumer events the Java consumer logs rather than throws from poll()
POLL_EVENT_CODES: Final = frozenset({
    E._PARTITION_EOF,
    E._TRANSPORT,
    E._ALL_BROKERS_DOWN,
    E._RESOLVE,
    E._AUTO_OFFSET_RESET,
    E._LOG_TRUNCATION,
    E._UNKNOWN_TOPIC,
    E._UNKNOWN_PARTITION,
    E.UNKNOWN_TOPIC_OR_PART,
    E.TOPIC_EXCEPTION,  # RQ: InvalidTopicException -> an empty poll
    E.NOT_LEADER_FOR_PARTITION,
    E.LEADER_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT,
    E.NETWORK_EXCEPTION,
    E._TIMED_OUT,
    E._MSG_TIMED_OUT,
    E._NO_OFFSET,
    E.OFFSET_NOT_AVAILABLE,
    E.FENCED_LEADER_EPOCH,
    E.UNKNOWN_LEADER_EPOCH,
})


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):  # pragma: no cover - KafkaError is not an exception
        return exc
    return None


def kind_of_code(code: int, text: str = "") -> str | None:
    """The Jepsen kind of a librdkafka error code (message patterns for generic errors)."""
    kind = CODE_KINDS.get(code)
    if kind is not None:
        return kind
    return kind_of_message(text)


def classify(exc: BaseException, fatal: KafkaError | None = None) -> Classified:
    """Jepsen's `with-errors` for what confluent-kafka raises. `fatal` is the producer's
    underlying fatal error, which a `_FATAL` delivery failure stands for."""
    c = classify_common(exc)
    if c is not None:
        return c
    if isinstance(exc, KeyMismatch):
        return classify_kind(None, exception_text(exc))
    err = kafka_error_of(exc)
    if err is None:
        text = exception_text(exc)
        return classify_kind(kind_of_message(text), text)
    code = err.code()
    if code == E._FATAL and fatal is not None:
        err = fatal
        code = fatal.code()
    text = f"{err.name()}: {err.str()}"
    kind = kind_of_code(code, err.str())
    if kind is None:
        return classify_kind(None, text)
    return classify_kind(kind, text)


def _check_partitions(tps: Sequence[TopicPartition] | None) -> None:
    for tp in tps or ():
        if tp.error is not None:
            raise KafkaException(tp.error)


class ConfluentClient(QueueClient):
    name = "confluent"

    def __init__(self, settings: ClientSettings, process: int,
                 topics: TopicRegistry | None = None) -> None:
        super().__init__(settings, process)
        self.topics = topics if topics is not None else TopicRegistry()
        self._fatal: KafkaError | None = None
        #: librdkafka's log lines and errors go here, not to stderr (harness.clients.logs)
        self._log = client_logger(process)
        s = settings
        conf: dict[str, Any] = {
            "bootstrap.servers": s.bootstrap,
            "client.id": self.client_id,
            "acks": s.acks,
            "enable.idempotence": s.idempotence,
            "retries": s.retries,
            "message.timeout.ms": s.delivery_timeout_ms,
            "request.timeout.ms": s.request_timeout_ms,
            "reconnect.backoff.max.ms": s.reconnect_backoff_max_ms,
            "socket.connection.setup.timeout.ms": s.socket_setup_timeout_max_ms,
            "metadata.max.age.ms": s.metadata_max_age_ms,
            "linger.ms": 0,
            "error_cb": self._on_error,
            "logger": self._log,
        }
        self.producer = Producer(conf)
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None
        self._mode: str | None = None  # "assign" | "subscribe"
        self._assigned: list[int] = []
        #: next offset to read per key, as far as this client knows
        self._next: dict[int, int] = {}

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err
        self._log.error("error_cb %s: %s: %s", self.client_id, err.name(), err.str())

    # -- lazily opened consumer and admin --------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            s = self.settings
            self._consumer = Consumer({
                "bootstrap.servers": s.bootstrap,
                "client.id": self.client_id,
                "group.id": s.group_id,
                "isolation.level": s.isolation_level,
                "auto.offset.reset": s.auto_offset_reset,
                "enable.auto.commit": s.enable_auto_commit,
                "auto.commit.interval.ms": s.auto_commit_interval_ms,
                "session.timeout.ms": s.session_timeout_ms,
                "heartbeat.interval.ms": s.heartbeat_interval_ms,
                "socket.timeout.ms": s.consumer_request_timeout_ms,
                "metadata.max.age.ms": s.metadata_max_age_ms,
                "reconnect.backoff.max.ms": s.reconnect_backoff_max_ms,
                "socket.connection.setup.timeout.ms": s.socket_setup_timeout_max_ms,
                "enable.partition.eof": False,
                "allow.auto.create.topics": False,
                "error_cb": self._on_error,
                "logger": self._log,
            })
        return self._consumer

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            s = self.settings
            conf: dict[str, Any] = {
                "bootstrap.servers": s.bootstrap,
                "client.id": f"{self.client_id}-admin",
                "socket.timeout.ms": int(s.admin_timeout_s * 1000),
                "reconnect.backoff.max.ms": s.reconnect_backoff_max_ms,
                "socket.connection.setup.timeout.ms": s.socket_setup_timeout_max_ms,
                "logger": self._log,
            }
            self._admin = AdminClient(conf)
        return self._admin

    def _tp(self, k: int, offset: int = OFFSET_INVALID) -> TopicPartition:
        t, p = self.keymap.tp(k)
        return TopicPartition(t, p, offset)

    # -- primitives ------------------------------------------------------------------------

    def ensure_topic(self, topic: str) -> None:
        if topic in self.topics:
            return
        s = self.settings
        futs = self.admin.create_topics(
            [NewTopic(topic, s.keymap.partitions, s.replication_factor,
                      config=dict(s.topic_configs))],
            operation_timeout=s.admin_timeout_s, request_timeout=s.admin_timeout_s)
        try:
            futs[topic].result(timeout=s.admin_timeout_s + 1.0)
        except KafkaException as e:
            err = kafka_error_of(e)
            if err is None or err.code() != E.TOPIC_ALREADY_EXISTS:
                raise
        except TimeoutError as e:  # concurrent.futures.TimeoutError since 3.11
            raise SendTimeout(f"CreateTopics {topic}") from e
        self.topics.add(topic)

    def send(self, k: int, v: int) -> int | None:
        topic, partition = self.keymap.tp(k)
        self.ensure_topic(topic)
        box: list[tuple[KafkaError | None, Any]] = []

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            box.append((err, msg))

        self._produce(topic, partition, encode_long(v), on_delivery)
        deadline = time.monotonic() + self.settings.send_timeout_s
        while not box:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SendTimeout(f"no delivery report for {k} {v} in "
                                  f"{self.settings.send_timeout_s}s")
            self.producer.flush(min(left, 1.0))
        err, msg = box[0]
        if err is not None:
            raise KafkaException(err)
        if self.keymap.key(msg.topic(), msg.partition()) != k:
            raise KeyMismatch(f"sent {k} to {topic}/{partition}, acknowledged as "
                              f"{msg.topic()}/{msg.partition()}")
        offset = msg.offset()
        return offset if offset is not None and offset >= 0 else None

    def _produce(self, topic: str, partition: int, value: bytes, on_delivery: Any) -> None:
        """`produce`, blocking up to `max_block_ms` while the partition is missing from the
        producer's metadata or its queue is full, as the Java producer's `send` does
        (librdkafka fails at once). A produce that raised enqueued nothing, so the error
        that finally escapes is a definite failure of the send."""
        p = self.producer
        end = time.monotonic() + self.settings.max_block_ms / 1000.0
        for _ in range(100_000):
            try:
                p.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
                return
            except BufferError:
                if time.monotonic() >= end:
                    raise
                p.poll(0.05)
            except KafkaException as e:
                err = kafka_error_of(e)
                left = end - time.monotonic()
                if err is None or err.code() not in (E._UNKNOWN_PARTITION, E._UNKNOWN_TOPIC) \
                        or left <= 0:
                    raise
                # a fresh metadata request for the topic, then try again
                try:
                    p.list_topics(topic, timeout=max(0.1, min(1.0, left)))
                except KafkaException as me:
                    log.debug("metadata %s: %s", topic, me)
                time.sleep(min(0.05, max(0.0, left)))
        raise SendTimeout(f"produce to {topic}/{partition} never accepted")  # pragma: no cover

    def poll(self, poll_ms: int) -> dict[int, list[list[Any]]]:
        if self._mode is None:
            # neither assigned nor subscribed: the Java consumer throws at once and Jepsen
            # records an empty poll ("not subscribed to any")
            return {}
        c = self.consumer
        first = c.poll(poll_ms / 1000.0)
        msgs = [] if first is None else [first]
        if first is not None and self.settings.max_poll_records > 1:
            msgs.extend(c.consume(self.settings.max_poll_records - 1, 0))
        out: dict[int, list[list[Any]]] = {}
        failure: KafkaException | None = None
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() in POLL_EVENT_CODES or (err.retriable() and not err.fatal()):
                    self.note(f"{err.name()}: {err.str()}")
                    continue
                if failure is None:
                    failure = KafkaException(err)
                continue
            topic, partition, o = m.topic(), m.partition(), m.offset()
            if topic is None or partition is None or o is None:
                continue
            k = self.keymap.key(topic, partition)
            if k is None:
                continue
            out.setdefault(k, []).append([o, decode_long(m.value())])
            self._next[k] = o + 1
        if failure is not None:
            raise PartialPoll(failure, out)
        return out

    def assign(self, keys: Sequence[int], seek_to_beginning: bool = False) -> None:
        c = self.consumer
        if self._mode == "subscribe":
            c.unsubscribe()
            self._next.clear()
        keys = list(dict.fromkeys(keys))
        kept = set(self._assigned) & set(keys)
        if seek_to_beginning:
            for k in keys:
                self._next.pop(k, None)
        else:
            for k in list(self._next):
                if k not in kept:
                    del self._next[k]
        if self._mode == "assign" and not seek_to_beginning:
            # Kept partitions are left alone. Assigning them again would restart their
            # fetch: at `_next`, or, with nothing read yet, at a logical offset whose
            # look-up librdkafka answers asynchronously, and a late answer to an earlier
            # look-up could then move the position back under the new one.
            dropped = [self._tp(k) for k in self._assigned if k not in kept]
            added = [self._tp(k, self._start_offset()) for k in keys if k not in kept]
            if dropped:
                c.incremental_unassign(dropped)
            if added:
                c.incremental_assign(added)
        else:
            c.assign([self._tp(k, OFFSET_BEGINNING if seek_to_beginning
                               else self._next.get(k, self._start_offset())) for k in keys])
        self._mode = "assign"
        self._assigned = keys

    def _start_offset(self) -> int:
        """Where a newly assigned partition starts: its committed offset, else
        `auto.offset.reset`. When this run never commits (no `subscribe` in `sub_via`) there is
        no committed offset to find, so the reset position is used directly and assign-mode
        consumers never wait on a group coordinator."""
        if self.settings.commit_on_poll:
            return OFFSET_INVALID
        return {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}.get(
            self.settings.auto_offset_reset, OFFSET_INVALID)

    def subscribe(self, keys: Sequence[int]) -> None:
        c = self.consumer
        if self._mode == "assign":
            c.unassign()
        self._assigned = []
        self._next.clear()
        km = self.keymap

        def journal(kind: str) -> Any:
            def cb(_consumer: Any, partitions: list[TopicPartition]) -> None:
                ks = [k for tp in partitions
                      if (k := km.key(tp.topic, tp.partition)) is not None]
                self.rebalance_log.append({"type": kind, "keys": sorted(ks)})
                if kind != "assigned":
                    for k in ks:
                        self._next.pop(k, None)
            return cb

        c.subscribe(km.topics(keys), on_assign=journal("assigned"),
                    on_revoke=journal("revoked"), on_lost=journal("lost"))
        self._mode = "subscribe"

    def seek(self, k: int, offset: int) -> None:
        self._next[k] = offset
        try:
            self.consumer.seek(self._tp(k, offset))
        except KafkaException:
            if self._mode != "assign" or k not in self._assigned:
                raise
            # not fetching yet: assign this partition again at the offset; the others
            # are left alone (see `assign`)
            self.consumer.incremental_unassign([self._tp(k)])
            self.consumer.incremental_assign([self._tp(k, offset)])

    def commit(self) -> None:
        c = self.consumer
        box: list[Any] = []

        def go() -> None:
            try:
                box.append(c.commit(asynchronous=False))
            except KafkaException as e:
                err = kafka_error_of(e)
                if err is not None and err.code() == E._NO_OFFSET:
                    box.append(None)  # nothing consumed since the last commit
                else:
                    box.append(e)

        t = threading.Thread(target=go, name=f"{self.client_id}-commit", daemon=True)
        t.start()
        t.join(self.settings.consumer_request_timeout_ms / 1000.0 + 1.0)
        if not box:
            raise SendTimeout("commitSync did not return")
        r = box[0]
        if isinstance(r, BaseException):
            raise r
        _check_partitions(r)

    def describe(self, keys: Sequence[int]) -> list[dict[str, Any]]:
        md = self.admin.list_topics(timeout=self.settings.admin_timeout_s)
        out: list[dict[str, Any]] = []
        for k in sorted(set(keys)):
            t, p = self.keymap.tp(k)
            tmd = md.topics.get(t)
            pmd = tmd.partitions.get(p) if tmd is not None else None
            if pmd is None:
                out.append({"key": k, "topic": t, "partition": p, "error": "unknown"})
                continue
            out.append({"key": k, "topic": t, "partition": p, "leader": pmd.leader,
                        "replicas": list(pmd.replicas), "isr": list(pmd.isrs),
                        "error": None if pmd.error is None else str(pmd.error)})
        return out

    def end_offsets(self, keys: Sequence[int]) -> dict[int, EndOffset | str]:
        """Admin ListOffsets (earliest and latest) at the partitions' leaders; the latest
        answer carries the leader's epoch (ListOffsets v4+)."""
        s = self.settings
        iso = (IsolationLevel.READ_COMMITTED if s.isolation_level == "read_committed"
               else IsolationLevel.READ_UNCOMMITTED)
        tps = {k: self._tp(k) for k in sorted(set(keys))}
        t = s.admin_timeout_s
        latest = self.admin.list_offsets({tp: LATEST for tp in tps.values()},
                                         isolation_level=iso, request_timeout=t)
        earliest = self.admin.list_offsets({tp: EARLIEST for tp in tps.values()},
                                           isolation_level=iso, request_timeout=t)
        out: dict[int, EndOffset | str] = {}
        for k, tp in tps.items():
            try:
                hi = latest[tp].result(timeout=t + 1.0)
                lo = earliest[tp].result(timeout=t + 1.0)
            except (KafkaException, TimeoutError) as e:  # concurrent.futures' since 3.11
                out[k] = exception_text(e)
                continue
            out[k] = EndOffset(int(lo.offset), int(hi.offset), hi.leader_epoch)
        return out

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        timeout = self.settings.close_timeout_s
        # the helper thread holds the last references, so librdkafka's destroy (which joins
        # its threads) happens there, bounded, and not on the worker
        held: list[Any] = [self.producer]
        self.producer = None  # type: ignore[assignment]

        def close_producer() -> None:
            p = held.pop()
            p.purge()
            p.flush(0)

        run_bounded(close_producer, timeout, f"{self.client_id}-close-producer")
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            run_bounded(consumer.close, timeout, f"{self.client_id}-close-consumer")
        self._admin = None

    def classify_exception(self, exc: BaseException) -> Classified:
        return classify(exc, self._fatal)
