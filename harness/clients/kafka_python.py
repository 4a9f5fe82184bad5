"""The second queue client: kafka-python, with Jepsen's semantics.

kafka-python follows the Java client closely (its exception classes are Kafka's, `assign`
keeps the positions of partitions still assigned, `poll` returns as soon as records are
there), so this adapter is thin:

- `send`: `send(topic, value, partition=p)` with a null key, then `future.get(send_timeout_s)`
  (Jepsen's deref); a `KafkaTimeoutError` from the deref is the `timeout` row (info).
- `poll`: `poll(timeout_ms=poll_ms, max_records=max_poll_records)`; not being assigned or
  subscribed is an empty poll (RQ: "not subscribed to any" -> `[:poll {}]`), as is
  `InvalidTopicError`.
- `subscribe` journals the rebalance listener's callbacks into the op's `rebalance_log`.
  Switching between `assign` and `subscribe` unsubscribes first (Java and kafka-python both
  refuse the switch with IllegalStateError).
- `close` closes producer and consumer without committing, bounded by `close_timeout_s`.

kafka-python's error classes map to Jepsen's table (`base.ERROR_TABLE`) in `KIND_OF_CLASS`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Final

import kafka.errors as Errors
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness.clients.base import (
    Classified,
    ClientSettings,
    EndOffset,
    KeyMismatch,
    QueueClient,
    TopicRegistry,
    classify_common,
    classify_kind,
    decode_long,
    encode_long,
    exception_text,
    kind_of_message,
    run_bounded,
)

log = logging.getLogger(__name__)

#: exception class -> Jepsen kind; the first class in the MRO that is listed wins
KIND_OF_CLASS: Final[dict[type[BaseException], str]] = {
    Errors.AuthorizationError: "authorization",
    Errors.InvalidProducerEpochError: "invalid-producer-epoch",
    Errors.InvalidTopicError: "invalid-topic",
    Errors.InvalidReplicationFactorError: "invalid-replication-factor",
    Errors.NotControllerError: "not-controller",
    Errors.OutOfOrderSequenceNumberError: "out-of-order-sequence",
    Errors.ProducerFencedError: "producer-fenced",
    Errors.UnknownTopicOrPartitionError: "unknown-topic-or-partition",
    Errors.BrokerNotAvailableError: "broker-not-available",
    Errors.KafkaConnectionError: "disconnect",
    Errors.NetworkExceptionError: "network",
    Errors.NotLeaderForPartitionError: "not-leader-or-follower",
    Errors.UnknownError: "unknown-server-exception",
    Errors.KafkaTimeoutError: "timeout",
    Errors.RequestTimedOutError: "timeout",
}


def kind_of_exception(exc: BaseException) -> str | None:
    for cls in type(exc).__mro__:
        kind = KIND_OF_CLASS.get(cls)
        if kind is not None:
            return kind
    return kind_of_message(str(exc))


def classify(exc: BaseException) -> Classified:
    """Jepsen's `with-errors` for what kafka-python raises."""
    c = classify_common(exc)
    if c is not None:
        return c
    text = exception_text(exc) if not isinstance(exc, Errors.KafkaError) else str(exc)
    if isinstance(exc, KeyMismatch):
        return classify_kind(None, text)
    return classify_kind(kind_of_exception(exc), text)


_NO_DEFAULT: Any = object()


def _first(d: Any, *keys: str, default: Any = _NO_DEFAULT) -> Any:
    """The first of `keys` in `d`: kafka-python's admin results changed key names across
    versions (`partition` / `partition_index`, `leader` / `leader_id`, ...)."""
    for k in keys:
        if k in d:
            return d[k]
    if default is _NO_DEFAULT:
        raise KeyError(f"none of {keys} in {sorted(d)}")
    return default


class _Journal(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, client: KafkaPythonClient) -> None:
        self.client = client

    def _log(self, kind: str, partitions: Any) -> None:
        km = self.client.keymap
        ks = sorted(k for tp in partitions
                    if (k := km.key(tp.topic, tp.partition)) is not None)
        self.client.rebalance_log.append({"type": kind, "keys": ks})

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._log("revoked", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._log("assigned", assigned)

    def on_partitions_lost(self, lost: Any) -> None:
        self._log("lost", lost)


class KafkaPythonClient(QueueClient):
    name = "kafka-python"

    def __init__(self, settings: ClientSettings, process: int,
                 topics: TopicRegistry | None = None) -> None:
        super().__init__(settings, process)
        self.topics = topics if topics is not None else TopicRegistry()
        s = settings
        acks: int | str = "all" if s.acks in ("all", "-1") else int(s.acks)
        self.producer = KafkaProducer(
            bootstrap_servers=s.bootstrap.split(","),
            client_id=self.client_id,
            acks=acks,
            enable_idempotence=s.idempotence,
            retries=s.retries,
            delivery_timeout_ms=s.delivery_timeout_ms,
            request_timeout_ms=s.request_timeout_ms,
            max_block_ms=s.max_block_ms,
            reconnect_backoff_max_ms=s.reconnect_backoff_max_ms,
            metadata_max_age_ms=s.metadata_max_age_ms,
            allow_auto_create_topics=False,
            linger_ms=0,
            bootstrap_timeout_ms=s.max_block_ms,
        )
        self._consumer: KafkaConsumer | None = None
        self._admin: KafkaAdminClient | None = None
        self._mode: str | None = None

    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            s = self.settings
            self._consumer = KafkaConsumer(
                bootstrap_servers=s.bootstrap.split(","),
                client_id=self.client_id,
                group_id=s.group_id,
                isolation_level=s.isolation_level,
                auto_offset_reset=s.auto_offset_reset,
                enable_auto_commit=s.enable_auto_commit,
                auto_commit_interval_ms=s.auto_commit_interval_ms,
                max_poll_records=s.max_poll_records,
                session_timeout_ms=s.session_timeout_ms,
                heartbeat_interval_ms=s.heartbeat_interval_ms,
                request_timeout_ms=s.consumer_request_timeout_ms,
                metadata_max_age_ms=s.metadata_max_age_ms,
                reconnect_backoff_max_ms=s.reconnect_backoff_max_ms,
                allow_auto_create_topics=False,
                bootstrap_timeout_ms=s.max_block_ms,
            )
        return self._consumer

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            s = self.settings
            self._admin = KafkaAdminClient(
                bootstrap_servers=s.bootstrap.split(","),
                client_id=f"{self.client_id}-admin",
                request_timeout_ms=int(s.admin_timeout_s * 1000),
                reconnect_backoff_max_ms=s.reconnect_backoff_max_ms,
                bootstrap_timeout_ms=s.max_block_ms,
            )
        return self._admin

    def _tp(self, k: int) -> TopicPartition:
        t, p = self.keymap.tp(k)
        return TopicPartition(t, p)

    # -- primitives ------------------------------------------------------------------------

    def ensure_topic(self, topic: str) -> None:
        if topic in self.topics:
            return
        s = self.settings
        with contextlib.suppress(Errors.TopicAlreadyExistsError):
            self.admin.create_topics(
                [NewTopic(topic, s.keymap.partitions, s.replication_factor,
                          topic_configs=dict(s.topic_configs))],
                timeout_ms=int(s.admin_timeout_s * 1000))
        self.topics.add(topic)

    def send(self, k: int, v: int) -> int | None:
        topic, partition = self.keymap.tp(k)
        self.ensure_topic(topic)
        fut = self._send(topic, partition, encode_long(v))
        md = fut.get(timeout=self.settings.send_timeout_s)
        if self.keymap.key(md.topic, md.partition) != k:
            raise KeyMismatch(f"sent {k} to {topic}/{partition}, acknowledged as "
                              f"{md.topic}/{md.partition}")
        return md.offset if md.offset is not None and md.offset >= 0 else None

    def _send(self, topic: str, partition: int, value: bytes) -> Any:
        """`send`, waiting up to `max_block_ms` for a partition missing from the producer's
        metadata (kafka-python raises ValueError at once; the Java producer blocks, then
        throws a TimeoutException, which is what escapes here too)."""
        end = time.monotonic() + self.settings.max_block_ms / 1000.0
        for _ in range(100_000):
            try:
                return self.producer.send(topic, value=value, partition=partition)
            except ValueError as e:
                if "Unrecognized partition" not in str(e):
                    raise
                if time.monotonic() >= end:
                    raise Errors.KafkaTimeoutError(
                        f"partition {partition} of {topic} not in metadata after "
                        f"{self.settings.max_block_ms} ms") from e
                md = getattr(self.producer, "_metadata", None)
                if md is not None:
                    md.request_update()
                time.sleep(0.1)
        raise Errors.KafkaTimeoutError("send loop bound")  # pragma: no cover

    def poll(self, poll_ms: int) -> dict[int, list[list[Any]]]:
        c = self.consumer
        if self._mode is None:
            return {}
        try:
            batch = c.poll(timeout_ms=poll_ms, max_records=self.settings.max_poll_records)
        except Errors.InvalidTopicError:
            return {}
        except Errors.IllegalStateError as e:
            if "not subscribed" in str(e) or "No topic" in str(e):
                return {}
            raise
        out: dict[int, list[list[Any]]] = {}
        for tp, records in sorted(batch.items(), key=lambda kv: (kv[0].topic,
                                                                 kv[0].partition)):
            k = self.keymap.key(tp.topic, tp.partition)
            if k is None:
                continue
            out.setdefault(k, []).extend([r.offset, decode_long(r.value)] for r in records)
        return out

    def assign(self, keys: Sequence[int], seek_to_beginning: bool = False) -> None:
        c = self.consumer
        if self._mode == "subscribe":
            c.unsubscribe()
        before = set(c.assignment()) if self._mode == "assign" else set()
        tps = [self._tp(k) for k in dict.fromkeys(keys)]
        c.assign(tps)
        self._mode = "assign" if tps else None
        if seek_to_beginning and tps:
            c.seek_to_beginning(*tps)
        elif not self.settings.commit_on_poll:
            # nothing commits in this run: start new partitions at the reset position
            # without a committed-offset lookup (which needs the group coordinator)
            new = [tp for tp in tps if tp not in before]
            if new and self.settings.auto_offset_reset == "earliest":
                c.seek_to_beginning(*new)
            elif new and self.settings.auto_offset_reset == "latest":
                c.seek_to_end(*new)

    def subscribe(self, keys: Sequence[int]) -> None:
        c = self.consumer
        if self._mode == "assign":
            c.unsubscribe()
        c.subscribe(topics=self.keymap.topics(keys), listener=_Journal(self))
        self._mode = "subscribe"

    def seek(self, k: int, offset: int) -> None:
        self.consumer.seek(self._tp(k), offset)

    def commit(self) -> None:
        self.consumer.commit(timeout_ms=self.settings.consumer_request_timeout_ms)

    def describe(self, keys: Sequence[int]) -> list[dict[str, Any]]:
        topics = self.keymap.topics(sorted(set(keys)))
        described = {_first(d, "topic", "name"): d for d in self.admin.describe_topics(topics)}
        out: list[dict[str, Any]] = []
        for k in sorted(set(keys)):
            t, p = self.keymap.tp(k)
            parts = {_first(q, "partition", "partition_index"): q
                     for q in described.get(t, {}).get("partitions", ())}
            q = parts.get(p)
            if q is None:
                out.append({"key": k, "topic": t, "partition": p, "error": "unknown"})
                continue
            out.append({"key": k, "topic": t, "partition": p,
                        "leader": _first(q, "leader", "leader_id", default=None),
                        "replicas": list(_first(q, "replicas", "replica_nodes", default=())),
                        "isr": list(_first(q, "isr", "isr_nodes", default=())),
                        "error": q.get("error_code") or None})
        return out

    def end_offsets(self, keys: Sequence[int]) -> dict[int, EndOffset | str]:
        """ListOffsets through the consumer: `beginning_offsets` for the log start, and the
        fetcher's `offsets_by_times` with LATEST (-1) for the end offset, which (unlike the
        public `end_offsets`) keeps the answering leader's epoch. kafka-python fails the
        whole request rather than one partition."""
        c = self.consumer
        timeout_ms = int(self.settings.admin_timeout_s * 1000)
        tps = {k: self._tp(k) for k in sorted(set(keys))}
        lows = c.beginning_offsets(list(tps.values()), timeout_ms=timeout_ms)
        highs = c._fetcher.offsets_by_times({tp: -1 for tp in tps.values()}, timeout_ms)
        out: dict[int, EndOffset | str] = {}
        for k, tp in tps.items():
            hi, lo = highs.get(tp), lows.get(tp)
            if hi is None or lo is None:
                out[k] = "no offsets"
                continue
            epoch = getattr(hi, "leader_epoch", None)
            out[k] = EndOffset(int(lo), int(hi.offset),
                               None if epoch is None or epoch < 0 else int(epoch))
        return out

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        timeout = self.settings.close_timeout_s
        producer, consumer, admin = self.producer, self._consumer, self._admin
        run_bounded(lambda: producer.close(timeout=0), timeout,
                    f"{self.client_id}-close-producer")
        if consumer is not None:
            run_bounded(lambda: consumer.close(autocommit=False, timeout_ms=0), timeout,
                        f"{self.client_id}-close-consumer")
        if admin is not None:
            run_bounded(admin.close, timeout, f"{self.client_id}-close-admin")
        self._consumer = None
        self._admin = None

    def classify_exception(self, exc: BaseException) -> Classified:
        return classify(exc)
