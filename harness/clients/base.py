"""What every queue client shares: the key map, the settings, Jepsen's error table, `invoke`.

A client instance is one Jepsen *process* (`jepsen.redpanda.workload.queue/Client`): one
producer, one consumer and one admin client, opened together and never reused after an
indefinite outcome. Adapters over real Kafka clients (`confluent.py`, `kafka_python.py`)
implement a handful of primitives (`send`, `poll`, `assign`, `subscribe`, `seek`, `commit`,
`ensure_topic`, `describe`, `end_offsets`, `close`) and a `classify_exception` that turns
whatever their library raises into one of the *kinds* below; `QueueClient.invoke` is
Jepsen's `invoke!` on top of them (micro-op loop, mutable value, consumer rollback,
rebalance log, errors).

**Error table** (Jepsen `with-errors`, jepsen-io/redpanda `workload/queue.clj`; reference
§1.6). Definite failure (`fail`): `authorization` (ends the process), `invalid-producer-epoch`,
`invalid-topic`, `invalid-replication-factor`, `not-controller`, `out-of-order-sequence`
(ends the process), `producer-fenced` (ends the process), `unknown-topic-or-partition`,
`broker-not-available`, `txn-in-error-state` (ends the process), `add-offsets`,
`txn-offset-commit`, and the rebalance events `partitions-assigned`, `partitions-revoked`,
`partitions-lost`. Indefinite (`info`): `disconnect`, `network`, `not-leader-or-follower`
(KAFKA-13574: not a definite failure), `unknown-server-exception`, `timeout` (a client
timeout, and a send whose delivery did not arrive within `send_timeout_s`), `end-txn`,
`illegal-transition`. Anything else is what Jepsen's interpreter does with an uncaught
exception: `info`, error `"indeterminate: ..."`.

One rule on top, from the pre-transactional RQ client (`mop-fail-type`): in a batch of
several micro-ops without a transaction, sends that completed before the failing micro-op
stay written, so a definite failure after a completed send is recorded as `info` (its error
is kept). With one micro-op per op (Jepsen's non-transactional default) this never applies.

Values are Kafka `LongSerializer` values (8 bytes, big-endian, signed) with a null record
key and an explicit partition, as Jepsen sends them.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from harness.clients.logs import bind_thread
from harness.history import END_OFFSETS_F, FAIL, INFO, OK

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------
# keys <-> topic-partitions


@dataclass(frozen=True)
class KeyMap:
    """Integer keys <-> (topic, partition), one to one (RQ `k->topic`, `k->partition`):
    key k lives in topic `prefix + str(k // partitions)`, partition `k % partitions`."""

    prefix: str = "t"
    partitions: int = 2

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ValueError("partitions per topic must be >= 1")
        if not self.prefix or self.prefix[-1].isdigit():
            raise ValueError("the topic prefix must be non-empty and not end in a digit")

    def topic(self, k: int) -> str:
        if k < 0:
            raise ValueError(f"keys are non-negative integers, not {k!r}")
        return f"{self.prefix}{k // self.partitions}"

    def partition(self, k: int) -> int:
        return k % self.partitions

    def tp(self, k: int) -> tuple[str, int]:
        return (self.topic(k), self.partition(k))

    def key(self, topic: str, partition: int) -> int | None:
        """The key of a topic-partition, or None when it is not one of ours."""
        if not topic.startswith(self.prefix):
            return None
        rest = topic[len(self.prefix):]
        if not rest.isdigit() or not 0 <= partition < self.partitions:
            return None
        return int(rest) * self.partitions + partition

    def topics(self, keys: Iterable[int]) -> list[str]:
        """The distinct topics holding these keys, in first-seen order."""
        out: dict[str, None] = {}
        for k in keys:
            out.setdefault(self.topic(k), None)
        return list(out)


# ---------------------------------------------------------------------------------------
# values


_LONG: Final = struct.Struct(">q")


def encode_long(v: int) -> bytes:
    """Kafka's LongSerializer."""
    return _LONG.pack(v)


def decode_long(b: bytes | None) -> Any:
    """Kafka's LongDeserializer; a payload that is not 8 bytes comes back as hex text so a
    foreign record shows up in the history instead of crashing the client."""
    if b is None:
        return None
    if len(b) == 8:
        return _LONG.unpack(b)[0]
    return "0x" + bytes(b).hex()


# ---------------------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class ClientSettings:
    """Producer, consumer and admin settings (RC `producer-config`, `consumer-config`,
    `admin-config`; `-s/--safe` values as defaults). Times are Jepsen's."""

    bootstrap: str = ""
    keymap: KeyMap = field(default_factory=KeyMap)
    replication_factor: int = 3
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    # producer
    acks: str = "all"
    idempotence: bool = True
    retries: int = 1000
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 3_000  # below delivery so there is room to retry
    max_block_ms: int = 10_000
    reconnect_backoff_max_ms: int = 1_000
    socket_setup_timeout_ms: int = 500
    socket_setup_timeout_max_ms: int = 1_000
    send_timeout_s: float = 10.0  # the deref of the send future
    # consumer
    group_id: str = "jepsen-group"
    isolation_level: str = "read_committed"
    auto_offset_reset: str = "earliest"
    enable_auto_commit: bool = False
    auto_commit_interval_ms: int = 5_000
    max_poll_records: int = 500
    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int = 300
    consumer_request_timeout_ms: int = 10_000
    metadata_max_age_ms: int = 60_000
    #: subscribe among the test's --sub-via: non-transactional polls commitSync
    commit_on_poll: bool = False
    #: a poll micro-op's bound unless the op carries `poll_ms` (RQ `poll-ms`)
    poll_ms: int = 100
    # admin
    admin_timeout_s: float = 3.0
    # closing a client never waits longer than this
    close_timeout_s: float = 2.0
    client_id_prefix: str = "jepsen"

    def __post_init__(self) -> None:
        if self.acks not in ("0", "1", "all", "-1"):
            raise ValueError(f"acks must be 0, 1 or all, not {self.acks!r}")
        if self.isolation_level not in ("read_committed", "read_uncommitted"):
            raise ValueError(f"bad isolation level {self.isolation_level!r}")
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"bad auto.offset.reset {self.auto_offset_reset!r}")
        if self.idempotence and self.acks not in ("all", "-1"):
            # the Java client refuses this combination (ConfigException), as librdkafka does
            raise ValueError("idempotence needs acks=all")

    def with_bootstrap(self, bootstrap: str) -> ClientSettings:
        return replace(self, bootstrap=bootstrap)


# ---------------------------------------------------------------------------------------
# errors


@dataclass(frozen=True)
class Classified:
    """How an exception ends an op: `type` (fail or info), the history `error`, and whether
    the process must end (Jepsen `:end-process?`)."""

    type: str
    error: Any
    end_process: bool = False


#: kind -> (type, ends the process?): Jepsen's `with-errors`, row by row
ERROR_TABLE: Final[dict[str, tuple[str, bool]]] = {
    # definite failures
    "authorization": (FAIL, True),
    "invalid-producer-epoch": (FAIL, False),
    "invalid-topic": (FAIL, False),
    "invalid-replication-factor": (FAIL, False),
    "not-controller": (FAIL, False),
    "out-of-order-sequence": (FAIL, True),
    "producer-fenced": (FAIL, True),
    "unknown-topic-or-partition": (FAIL, False),
    "broker-not-available": (FAIL, False),
    "txn-in-error-state": (FAIL, True),
    "add-offsets": (FAIL, False),
    "txn-offset-commit": (FAIL, False),
    "partitions-assigned": (FAIL, False),
    "partitions-revoked": (FAIL, False),
    "partitions-lost": (FAIL, False),
    # indefinite outcomes
    "disconnect": (INFO, False),
    "network": (INFO, False),
    "not-leader-or-follower": (INFO, False),
    "unknown-server-exception": (INFO, False),
    "timeout": (INFO, False),
    "end-txn": (INFO, False),
    "illegal-transition": (INFO, False),
}
DEFINITE_KINDS: Final = frozenset(k for k, (t, _) in ERROR_TABLE.items() if t == FAIL)
INDEFINITE_KINDS: Final = frozenset(k for k, (t, _) in ERROR_TABLE.items() if t == INFO)

#: Jepsen matches these on the messages of generic KafkaExceptions
MESSAGE_KINDS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"broker is not available", re.I), "broker-not-available"),
    (re.compile(r"Cannot execute transactional method because we are in an error state"),
     "txn-in-error-state"),
    (re.compile(r"Topic or Partition .+? does not exist"), "unknown-topic-or-partition"),
    (re.compile(r"Unexpected error in AddOffsetsToTxnResponse"), "add-offsets"),
    (re.compile(r"Unexpected error in TxnOffsetCommitResponse"), "txn-offset-commit"),
    (re.compile(r"Unhandled error in EndTxnResponse"), "end-txn"),
    (re.compile(r"Invalid transition attempted"), "illegal-transition"),
)


def kind_of_message(msg: str) -> str | None:
    for rx, kind in MESSAGE_KINDS:
        if rx.search(msg):
            return kind
    return None


def classify_kind(kind: str | None, detail: str | None = None,
                  extra: Mapping[str, Any] | None = None) -> Classified:
    """The table row for `kind`; None (or an unknown kind) is the interpreter's default,
    an indeterminate `info`. `detail` (the exception's text) joins the error when the row
    carries one, as Jepsen's `[:network (.getMessage e)]` does."""
    if kind is None or kind not in ERROR_TABLE:
        return Classified(INFO, f"indeterminate: {detail or kind or 'unknown error'}")
    typ, end = ERROR_TABLE[kind]
    if extra:
        return Classified(typ, {"type": kind, **extra}, end)
    error: Any = [kind, detail] if detail else kind
    return Classified(typ, error, end)


class SendTimeout(Exception):
    """The send's delivery report did not arrive in time (RQ: `(deref 10000 nil)` then
    `(throw+ {:type :timeout})`)."""


class RebalanceEvent(Exception):
    """A rebalance listener that refuses rebalances during an op (RC
    `panicky-rebalance-listener`) raises this: a definite failure of the op."""

    def __init__(self, kind: str, keys: Sequence[int]) -> None:
        if kind not in ("partitions-assigned", "partitions-revoked", "partitions-lost"):
            raise ValueError(kind)
        super().__init__(f"{kind}: {list(keys)}")
        self.kind = kind
        self.keys = list(keys)


class PartialPoll(Exception):
    """A poll that raised after it had consumed records: `records` are what it read (the
    consumer's position moved past them), `cause` is what it raised."""

    def __init__(self, cause: BaseException, records: dict[int, list[list[Any]]]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.records = records


class KeyMismatch(AssertionError):
    """A send's metadata names another topic-partition than the key's (RQ asserts)."""


def classify_common(exc: BaseException) -> Classified | None:
    """Rows that do not depend on the client library."""
    if isinstance(exc, SendTimeout):
        return classify_kind("timeout")
    if isinstance(exc, RebalanceEvent):
        return classify_kind(exc.kind, extra={"keys": exc.keys})
    return None


def exception_text(exc: BaseException) -> str:
    s = str(exc)
    return f"{type(exc).__name__}: {s}" if s else type(exc).__name__


# ---------------------------------------------------------------------------------------
# end offsets


@dataclass(frozen=True)
class EndOffset:
    """One partition's offsets as its leader answered ListOffsets: `low` the log start offset
    (earliest), `high` the end offset (latest: the high watermark, or the last stable offset
    under read_committed, the same without transactions) and `leader_epoch` the answering
    leader's epoch (None when the client cannot tell)."""

    low: int
    high: int
    leader_epoch: int | None


# ---------------------------------------------------------------------------------------
# completions


@dataclass
class Completion:
    """What `invoke` returns: the completion's type, value and extra keys."""

    type: str
    value: Any
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ends_process(self) -> bool:
        return self.type == INFO or bool(self.extra.get("end_process"))


#: value -> the history value of a completed micro-op
Mop = list[Any]


def run_bounded(fn: Callable[[], Any], timeout_s: float, name: str) -> bool:
    """Run `fn` on a daemon thread and wait at most `timeout_s`; True when it returned.
    Used to close library clients, whose close can block on an unreachable broker."""
    done = threading.Event()

    def target() -> None:
        try:
            fn()
        except Exception as e:  # a failing close is only worth a log line
            log.debug("%s: %s", name, e)
        finally:
            done.set()

    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return done.wait(timeout_s)


class QueueClient:
    """One Jepsen process over a real Kafka client. Subclasses provide the primitives and
    `classify_exception`; `invoke` is Jepsen's `invoke!`."""

    name: str = "abstract"

    def __init__(self, settings: ClientSettings, process: int) -> None:
        self.settings = settings
        self.keymap = settings.keymap
        self.process = process
        self.client_id = f"{settings.client_id_prefix}-{process}"
        bind_thread(process)  # kafka-python's records from this thread name the process
        #: rebalance events since the op began: {"type": "assigned", "keys": [...]}
        self.rebalance_log: list[dict[str, Any]] = []
        #: errors the client logged but did not raise during the op (capped), e.g. an
        #: offset reset or a log truncation the consumer detected
        self.notes: list[str] = []
        self.closed = False

    MAX_NOTES: Final = 8

    def note(self, text: str) -> None:
        if len(self.notes) < self.MAX_NOTES:
            self.notes.append(text)

    # -- primitives (subclasses) ---------------------------------------------------------

    def send(self, k: int, v: int) -> int | None:
        """Produce v to k's topic-partition and wait for delivery; the offset (None if the
        acknowledgement carried none). Raises on error or after `send_timeout_s`."""
        raise NotImplementedError

    def poll(self, poll_ms: int) -> dict[int, list[list[Any]]]:
        """One consumer poll bounded by `poll_ms`: {k: [[offset, v], ...]}."""
        raise NotImplementedError

    def assign(self, keys: Sequence[int], seek_to_beginning: bool = False) -> None:
        raise NotImplementedError

    def subscribe(self, keys: Sequence[int]) -> None:
        raise NotImplementedError

    def seek(self, k: int, offset: int) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        """commitSync of the consumer's positions; nothing to commit is not an error."""
        raise NotImplementedError

    def ensure_topic(self, topic: str) -> None:
        """Create `topic` with the settings' partitions and RF; existing is fine."""
        raise NotImplementedError

    def describe(self, keys: Sequence[int]) -> list[dict[str, Any]]:
        """Admin view of the keys' partitions (leader, replicas, isr), for the final phase."""
        raise NotImplementedError

    def end_offsets(self, keys: Sequence[int]) -> dict[int, EndOffset | str]:
        """Each key's partition offsets as its leader answers ListOffsets (earliest, and
        latest at the consumer's isolation level: the high watermark here, without
        transactions), with the answering leader's epoch; an error text for a key whose
        partition did not answer. Raises when the request as a whole failed."""
        raise NotImplementedError

    def close(self) -> None:
        """Close producer, consumer and admin without committing, bounded in time."""
        raise NotImplementedError

    def classify_exception(self, exc: BaseException) -> Classified:
        raise NotImplementedError

    # -- Jepsen's invoke! ----------------------------------------------------------------

    def invoke(self, f: str, value: Any, extra: Mapping[str, Any] | None = None) -> Completion:
        extra = extra or {}
        try:
            if f == "crash":
                return Completion(INFO, value)
            if f == "assign":
                self.assign(list(value), bool(extra.get("seek_to_beginning")))
                return Completion(OK, value)
            if f == "subscribe":
                self.rebalance_log = []
                self.subscribe(list(value))
                return Completion(OK, value)
            if f == "debug-topic-partitions":
                return self._debug(value)
            if f == END_OFFSETS_F:
                return self._end_offsets(value)
            if f in ("send", "poll", "txn"):
                return self._txn(f, value, int(extra.get("poll_ms", 0)) or None)
        except Exception as e:
            c = self.classify_exception(e)
            return self._completion(c, value)
        raise ValueError(f"unknown op f {f!r}")

    def _debug(self, keys: Any) -> Completion:
        try:
            parts = self.describe(list(keys))
        except Exception as e:
            return Completion(FAIL, keys, {"error": exception_text(e)})
        return Completion(OK, {"node": self.settings.bootstrap, "partitions": parts})

    def _end_offsets(self, keys: Any) -> Completion:
        """`end-offsets [k...]` -> `[[k, low, high, leader_epoch], ...]` for the keys whose
        leader answered (`errors` names the others). A query changes nothing, so a failure is
        a plain `fail` and never ends the process."""
        try:
            got = self.end_offsets(list(keys))
        except Exception as e:
            return Completion(FAIL, keys, {"error": exception_text(e)})
        rows = [[k, e.low, e.high, e.leader_epoch] for k, e in sorted(got.items())
                if isinstance(e, EndOffset)]
        errors = [[k, e] for k, e in sorted(got.items()) if isinstance(e, str)]
        if not rows:
            return Completion(FAIL, keys, {"error": errors or "no partition answered"})
        return Completion(OK, rows, {"errors": errors} if errors else {})

    @staticmethod
    def _completion(c: Classified, value: Any, extra: dict[str, Any] | None = None
                    ) -> Completion:
        out = dict(extra or {})
        out["error"] = c.error
        if c.end_process:
            out["end_process"] = True
        return Completion(c.type, value, out)

    def _txn(self, f: str, mops: Sequence[Sequence[Any]], poll_ms: int | None) -> Completion:
        value: list[Mop] = [list(m) for m in mops]
        self.rebalance_log = []
        self.notes = []
        sent_any = False
        completion: Completion | None = None
        try:
            for i, mop in enumerate(value):
                if mop[0] == "send":
                    _, k, v = mop
                    # everything before the deref may have reached the broker
                    offset = self.send(k, v)
                    value[i] = ["send", k, [offset, v]]
                    sent_any = True
                elif mop[0] == "poll":
                    try:
                        value[i] = ["poll", self.poll(poll_ms or self.settings.poll_ms)]
                    except PartialPoll as pp:
                        if pp.records:
                            value[i] = ["poll", pp.records]
                        raise pp.cause from None
                else:
                    raise ValueError(f"unknown micro-op {mop!r}")
            extra: dict[str, Any] = {}
            if f in ("poll", "txn") and self.settings.commit_on_poll:
                try:
                    self.commit()
                except Exception as e:  # the reads happened: ok, with the commit error
                    extra["error"] = ["consumer-commit", exception_text(e)]
            completion = Completion(OK, value, extra)
        except Exception as e:
            c = self.classify_exception(e)
            if c.type == FAIL and sent_any:
                c = Classified(INFO, c.error, c.end_process)
            completion = self._completion(c, value)
        finally:
            if completion is None or completion.type != OK:
                self._rollback(value)
        if self.rebalance_log:
            completion.extra["rebalance_log"] = self.rebalance_log
            self.rebalance_log = []
        if self.notes:
            completion.extra["client_errors"] = self.notes
            self.notes = []
        return completion

    def _rollback(self, value: Sequence[Mop]) -> None:
        """Seek back to the first offset this op read of each key (`with-consumer-rollback`),
        so the next poll re-reads them; seeks on unassigned partitions are ignored."""
        first: dict[int, int] = {}
        for mop in value:
            if mop[0] == "poll" and len(mop) > 1 and isinstance(mop[1], dict):
                for k, pairs in mop[1].items():
                    if pairs and k not in first and pairs[0][0] is not None:
                        first[k] = pairs[0][0]
        for k, o in first.items():
            try:
                self.seek(k, o)
            except Exception as e:
                log.debug("rollback seek %s@%s: %s", k, o, e)


def wait_until(deadline: float, stop: threading.Event | None = None) -> bool:
    """Sleep until `deadline` (time.monotonic) unless `stop` is set; True if not stopped."""
    while True:
        left = deadline - time.monotonic()
        if stop is not None and stop.is_set():
            return False
        if left <= 0:
            return True
        if stop is None:
            time.sleep(left)
        elif stop.wait(min(left, 0.5)):
            return False


class TopicRegistry:
    """Topics known to exist, shared by every client of a run (Jepsen keeps this per
    client in `extant-topics`; sharing it spares each fresh client a CreateTopics)."""

    def __init__(self, topics: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._known: set[str] = set(topics)

    def __contains__(self, topic: object) -> bool:
        with self._lock:
            return topic in self._known

    def add(self, topic: str) -> None:
        with self._lock:
            self._known.add(topic)

    def snapshot(self) -> set[str]:
        with self._lock:
            return set(self._known)
