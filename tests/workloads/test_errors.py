"""Jepsen's error table, row by row, with the client libraries' own exception objects; and
`invoke`'s discipline around it (mutable value, rollback, commit errors, batch rule)."""

from __future__ import annotations

from typing import Any

import kafka.errors as KE
import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.clients import base
from harness.clients import confluent as ck
from harness.clients import kafka_python as kp
from harness.clients.base import (
    ERROR_TABLE,
    ClientSettings,
    PartialPoll,
    QueueClient,
    RebalanceEvent,
    SendTimeout,
)
from harness.history import FAIL, INFO, OK

#: Jepsen's rows (reference §1.6): kind -> (type, end_process)
JEPSEN = {
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
    "disconnect": (INFO, False),
    "network": (INFO, False),
    "not-leader-or-follower": (INFO, False),
    "unknown-server-exception": (INFO, False),
    "timeout": (INFO, False),
    "end-txn": (INFO, False),
    "illegal-transition": (INFO, False),
}


def test_table_is_jepsens() -> None:
    assert ERROR_TABLE == JEPSEN


def _kind(c: base.Classified) -> str:
    e = c.error
    if isinstance(e, list):
        return str(e[0])
    if isinstance(e, dict):
        return str(e["type"])
    return str(e)


def _ck(code: int, reason: str | None = None, fatal: bool = False) -> KafkaException:
    err = KafkaError(code, reason, fatal=fatal) if reason else KafkaError(code, fatal=fatal)
    return KafkaException(err)


E = KafkaError

#: (exception, expected kind) for confluent-kafka: every row
CONFLUENT_ROWS: list[tuple[BaseException, str]] = [
    (_ck(E.TOPIC_AUTHORIZATION_FAILED), "authorization"),
    (_ck(E.GROUP_AUTHORIZATION_FAILED), "authorization"),
    (_ck(E.CLUSTER_AUTHORIZATION_FAILED), "authorization"),
    (_ck(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "authorization"),
    (_ck(E.INVALID_PRODUCER_EPOCH), "invalid-producer-epoch"),
    (_ck(E.TOPIC_EXCEPTION), "invalid-topic"),
    (_ck(E.INVALID_REPLICATION_FACTOR), "invalid-replication-factor"),
    (_ck(E.NOT_CONTROLLER), "not-controller"),
    (_ck(E.OUT_OF_ORDER_SEQUENCE_NUMBER), "out-of-order-sequence"),
    (_ck(E.PRODUCER_FENCED), "producer-fenced"),
    (_ck(E._FENCED), "producer-fenced"),
    (_ck(E.UNKNOWN_TOPIC_OR_PART), "unknown-topic-or-partition"),
    (_ck(E._UNKNOWN_TOPIC), "unknown-topic-or-partition"),
    (_ck(E._UNKNOWN_PARTITION), "unknown-topic-or-partition"),
    (_ck(E.BROKER_NOT_AVAILABLE), "broker-not-available"),
    (_ck(E._FAIL, "Cannot execute transactional method because we are in an error state"),
     "txn-in-error-state"),
    (_ck(E._FAIL, "Unexpected error in AddOffsetsToTxnResponse: x"), "add-offsets"),
    (_ck(E._FAIL, "Unexpected error in TxnOffsetCommitResponse: x"), "txn-offset-commit"),
    (RebalanceEvent("partitions-assigned", [1]), "partitions-assigned"),
    (RebalanceEvent("partitions-revoked", [1]), "partitions-revoked"),
    (RebalanceEvent("partitions-lost", [1]), "partitions-lost"),
    (_ck(E._TRANSPORT), "disconnect"),
    (_ck(E.NETWORK_EXCEPTION), "network"),
    (_ck(E.NOT_LEADER_FOR_PARTITION), "not-leader-or-follower"),
    (_ck(E.UNKNOWN), "unknown-server-exception"),
    (_ck(E.REQUEST_TIMED_OUT), "timeout"),
    (_ck(E._MSG_TIMED_OUT), "timeout"),
    (_ck(E._TIMED_OUT), "timeout"),
    (SendTimeout("no delivery report"), "timeout"),
    (_ck(E._FAIL, "Unhandled error in EndTxnResponse: x"), "end-txn"),
    (_ck(E._STATE, "Invalid transition attempted from state X to state Y"),
     "illegal-transition"),
]

#: the same for kafka-python
KAFKA_PYTHON_ROWS: list[tuple[BaseException, str]] = [
    (KE.TopicAuthorizationFailedError(), "authorization"),
    (KE.GroupAuthorizationFailedError(), "authorization"),
    (KE.ClusterAuthorizationFailedError(), "authorization"),
    (KE.TransactionalIdAuthorizationFailedError(), "authorization"),
    (KE.InvalidProducerEpochError(), "invalid-producer-epoch"),
    (KE.InvalidTopicError(), "invalid-topic"),
    (KE.InvalidReplicationFactorError(), "invalid-replication-factor"),
    (KE.NotControllerError(), "not-controller"),
    (KE.OutOfOrderSequenceNumberError(), "out-of-order-sequence"),
    (KE.ProducerFencedError(), "producer-fenced"),
    (KE.UnknownTopicOrPartitionError(), "unknown-topic-or-partition"),
    (KE.KafkaError("Topic or Partition t0-1 does not exist"), "unknown-topic-or-partition"),
    (KE.BrokerNotAvailableError(), "broker-not-available"),
    (KE.KafkaError("the broker is not available"), "broker-not-available"),
    (KE.KafkaError("Cannot execute transactional method because we are in an error state"),
     "txn-in-error-state"),
    (KE.KafkaError("Unexpected error in AddOffsetsToTxnResponse"), "add-offsets"),
    (KE.KafkaError("Unexpected error in TxnOffsetCommitResponse"), "txn-offset-commit"),
    (RebalanceEvent("partitions-assigned", [1]), "partitions-assigned"),
    (RebalanceEvent("partitions-revoked", [1]), "partitions-revoked"),
    (RebalanceEvent("partitions-lost", [1]), "partitions-lost"),
    (KE.KafkaConnectionError("socket disconnected"), "disconnect"),
    (KE.NetworkExceptionError(), "network"),
    (KE.NotLeaderForPartitionError(), "not-leader-or-follower"),
    (KE.UnknownError(), "unknown-server-exception"),
    (KE.KafkaTimeoutError("Timeout after waiting for 10 secs."), "timeout"),
    (KE.RequestTimedOutError(), "timeout"),
    (SendTimeout("x"), "timeout"),
    (KE.KafkaError("Unhandled error in EndTxnResponse: x"), "end-txn"),
    (KE.IllegalStateError("Invalid transition attempted from state A to state B"),
     "illegal-transition"),
]


@pytest.mark.parametrize(("exc", "kind"), CONFLUENT_ROWS, ids=lambda x: repr(x)[:60])
def test_confluent_rows(exc: BaseException, kind: str) -> None:
    c = ck.classify(exc)
    assert _kind(c) == kind
    assert (c.type, c.end_process) == JEPSEN[kind]


@pytest.mark.parametrize(("exc", "kind"), KAFKA_PYTHON_ROWS, ids=lambda x: repr(x)[:60])
def test_kafka_python_rows(exc: BaseException, kind: str) -> None:
    c = kp.classify(exc)
    assert _kind(c) == kind
    assert (c.type, c.end_process) == JEPSEN[kind]


def test_every_row_is_exercised_for_both_libraries() -> None:
    assert {k for _, k in CONFLUENT_ROWS} == set(JEPSEN)
    assert {k for _, k in KAFKA_PYTHON_ROWS} == set(JEPSEN)


@pytest.mark.parametrize("exc", [
    _ck(E._BAD_MSG),
    _ck(E.OFFSET_OUT_OF_RANGE),
    _ck(E._ALL_BROKERS_DOWN),
    BufferError("Local: Queue full"),
    RuntimeError("boom"),
    base.KeyMismatch("sent 3 to t1/1, acknowledged as t1/0"),
])
def test_confluent_unknown_is_indeterminate(exc: BaseException) -> None:
    c = ck.classify(exc)
    assert c.type == INFO and not c.end_process
    assert str(c.error).startswith("indeterminate: ")


@pytest.mark.parametrize("exc", [
    KE.NodeNotReadyError(), KE.CorruptRecordError(), KE.IllegalStateError("other"),
    KE.UnrecognizedBrokerVersion(), ValueError("x"), base.KeyMismatch("x"),
])
def test_kafka_python_unknown_is_indeterminate(exc: BaseException) -> None:
    c = kp.classify(exc)
    assert c.type == INFO
    assert str(c.error).startswith("indeterminate: ")


def test_confluent_fatal_stands_for_its_underlying_error() -> None:
    fatal = KafkaError(E.OUT_OF_ORDER_SEQUENCE_NUMBER, "broker said so", fatal=True)
    c = ck.classify(_ck(E._FATAL, "fatal idempotent producer error"), fatal)
    assert _kind(c) == "out-of-order-sequence" and c.type == FAIL and c.end_process
    # without the underlying error, a fatal error is indeterminate
    assert ck.classify(_ck(E._FATAL)).type == INFO


def test_error_texts_ride_along() -> None:
    c = ck.classify(_ck(E.NETWORK_EXCEPTION, "broken pipe"))
    assert c.error[0] == "network" and "broken pipe" in c.error[1]
    c = kp.classify(KE.KafkaConnectionError("reset by peer"))
    assert c.error[0] == "disconnect" and "reset by peer" in c.error[1]
    c = ck.classify(RebalanceEvent("partitions-revoked", [4, 5]))
    assert c.error == {"type": "partitions-revoked", "keys": [4, 5]}


# ---------------------------------------------------------------------------------------
# invoke: a scripted client


class Scripted(QueueClient):
    """Primitives driven by a script: `sends` maps values to offsets or exceptions."""

    name = "scripted"

    def __init__(self, sends: dict[int, Any] | None = None,
                 polls: list[Any] | None = None, commit_error: Exception | None = None,
                 commit_on_poll: bool = False) -> None:
        super().__init__(ClientSettings(commit_on_poll=commit_on_poll), 0)
        self.sends = sends or {}
        self.polls = list(polls or [])
        self.commit_error = commit_error
        self.seeks: list[tuple[int, int]] = []
        self.assigned: list[Any] = []

    def send(self, k: int, v: int) -> int | None:
        r = self.sends[v]
        if isinstance(r, BaseException):
            raise r
        return r  # type: ignore[no-any-return]

    def poll(self, poll_ms: int) -> dict[int, list[list[Any]]]:
        r = self.polls.pop(0)
        if isinstance(r, BaseException):
            raise r
        return r  # type: ignore[no-any-return]

    def assign(self, keys: Any, seek_to_beginning: bool = False) -> None:
        self.assigned.append((list(keys), seek_to_beginning))

    def subscribe(self, keys: Any) -> None:
        self.rebalance_log.append({"type": "assigned", "keys": list(keys)})

    def seek(self, k: int, offset: int) -> None:
        self.seeks.append((k, offset))

    def commit(self) -> None:
        if self.commit_error is not None:
            raise self.commit_error

    def close(self) -> None:
        self.closed = True

    def classify_exception(self, exc: BaseException) -> base.Classified:
        return ck.classify(exc)


def test_invoke_ok_send_and_poll() -> None:
    c = Scripted({1: 10, 2: 11}, [{3: [[0, 1], [1, 2]]}])
    r = c.invoke("txn", [["poll"], ["send", 3, 1], ["send", 3, 2]])
    assert r.type == OK
    assert r.value == [["poll", {3: [[0, 1], [1, 2]]}], ["send", 3, [10, 1]],
                       ["send", 3, [11, 2]]]
    assert c.seeks == []


def test_single_send_definite_failure_is_fail() -> None:
    c = Scripted({1: _ck(E.UNKNOWN_TOPIC_OR_PART)})
    r = c.invoke("send", [["send", 3, 1]])
    assert r.type == FAIL and r.value == [["send", 3, 1]]
    assert r.extra["error"][0] == "unknown-topic-or-partition"


def test_definite_failure_after_a_completed_send_is_info() -> None:
    """Non-transactional batch: the first send stays written, so the op is indefinite."""
    c = Scripted({1: 5, 2: _ck(E.UNKNOWN_TOPIC_OR_PART)})
    r = c.invoke("send", [["send", 3, 1], ["send", 4, 2]])
    assert r.type == INFO
    assert r.value == [["send", 3, [5, 1]], ["send", 4, 2]]  # the offset learned is kept
    assert r.ends_process


def test_end_process_rows() -> None:
    c = Scripted({1: _ck(E.OUT_OF_ORDER_SEQUENCE_NUMBER)})
    r = c.invoke("send", [["send", 3, 1]])
    assert r.type == FAIL and r.extra["end_process"] is True and r.ends_process


def test_timeout_keeps_partial_value_and_rolls_back() -> None:
    c = Scripted({7: SendTimeout("x")}, [{2: [[4, 9], [5, 10]], 3: [[0, 1]]}])
    r = c.invoke("txn", [["poll"], ["send", 2, 7]])
    assert r.type == INFO and r.extra["error"] == "timeout"
    assert r.value == [["poll", {2: [[4, 9], [5, 10]], 3: [[0, 1]]}], ["send", 2, 7]]
    assert sorted(c.seeks) == [(2, 4), (3, 0)]  # back to the first offsets read


def test_partial_poll_keeps_what_was_read() -> None:
    c = Scripted(polls=[PartialPoll(_ck(E.TOPIC_AUTHORIZATION_FAILED), {1: [[3, 4]]})])
    r = c.invoke("poll", [["poll"]])
    assert r.type == FAIL and r.extra["end_process"] is True
    assert r.value == [["poll", {1: [[3, 4]]}]]
    assert c.seeks == [(1, 3)]


def test_commit_failure_keeps_the_reads_ok() -> None:
    c = Scripted(polls=[{1: [[0, 1]]}], commit_error=_ck(E.REBALANCE_IN_PROGRESS),
                 commit_on_poll=True)
    r = c.invoke("poll", [["poll"]])
    assert r.type == OK and r.extra["error"][0] == "consumer-commit"
    assert c.seeks == []


def test_crash_assign_subscribe() -> None:
    c = Scripted()
    assert c.invoke("crash", None).type == INFO
    r = c.invoke("assign", [1, 2], {"seek_to_beginning": True})
    assert r.type == OK and c.assigned == [([1, 2], True)]
    assert c.invoke("subscribe", [4]).type == OK


def test_uncaught_exception_in_poll_is_indeterminate() -> None:
    c = Scripted(polls=[ZeroDivisionError("bug")])
    r = c.invoke("poll", [["poll"]])
    assert r.type == INFO and r.extra["error"].startswith("indeterminate: ZeroDivisionError")


def test_rebalance_log_attached() -> None:
    class Rebalancing(Scripted):
        def poll(self, poll_ms: int) -> dict[int, list[list[Any]]]:
            self.rebalance_log.append({"type": "revoked", "keys": [1]})
            return {}

    r = Rebalancing().invoke("poll", [["poll"]])
    assert r.type == OK and r.extra["rebalance_log"] == [{"type": "revoked", "keys": [1]}]
