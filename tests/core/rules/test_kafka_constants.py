"""Numbers the core shares with Kafka: error codes on the wire, sentinels, default settings.

A client reads the error code, not its name: a code moved to a neighbouring number makes a
real Kafka client retry what it should fail, or fail what it should retry. Each value here is
Kafka's (the protocol's error table, `kafka.common.errors`, `server.properties` defaults).
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from core.config import Bugs, ProtocolConfig
from core.producer import MAX_SEQUENCE
from core.rules import epochs
from core.types import NO_BROKER_EPOCH, NO_LEADER, UNDEFINED_EPOCH, Errors, FetchState, Role

# Kafka's protocol error table (kafka.apache.org/protocol#protocol_error_codes).
KAFKA_ERROR_CODES = {
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "STALE_CONTROLLER_EPOCH": 11,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46,
    "INVALID_PRODUCER_EPOCH": 47,
    "UNKNOWN_PRODUCER_ID": 59,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "STALE_BROKER_EPOCH": 77,
    "OFFSET_NOT_AVAILABLE": 78,
}


@pytest.mark.parametrize("name", sorted(KAFKA_ERROR_CODES))
def test_each_error_code_has_kafkas_protocol_number(name: str) -> None:
    """Kafka rule: error codes are the protocol's numbers (a client acts on the number)."""
    assert int(Errors[name]) == KAFKA_ERROR_CODES[name]
    # and the wire library, generated from Kafka's message definitions, agrees
    assert int(Errors[name]) == int(ErrorCode[name.lower()])


def test_the_core_produces_no_error_code_outside_kafkas_table() -> None:
    assert {e.name for e in Errors} == set(KAFKA_ERROR_CODES)
    assert len({int(e) for e in Errors}) == len(Errors)  # no two names share a number


def test_undefined_epoch_and_no_leader_are_kafkas_minus_one() -> None:
    """Kafka rule: UNDEFINED_EPOCH (RecordBatch.NO_PARTITION_LEADER_EPOCH) and
    UNDEFINED_EPOCH_OFFSET are -1 on the wire, as is "no leader" in LeaderAndIsr and the
    broker epoch of a request that carries none."""
    assert UNDEFINED_EPOCH == -1
    assert epochs.UNDEFINED_EPOCH == -1
    assert epochs.UNDEFINED_OFFSET == -1
    assert NO_LEADER == -1
    assert NO_BROKER_EPOCH == -1


def test_producer_sequences_wrap_at_int32_max() -> None:
    """Kafka rule: a producer's sequence number is an int32 that wraps at Int32.MaxValue."""
    assert MAX_SEQUENCE == 2**31 - 1 == 2_147_483_647


def test_default_protocol_settings_are_kafkas() -> None:
    """Kafka's defaults (server.properties): replica.lag.time.max.ms 30000 (KIP-537),
    replica.fetch.backoff.ms 1000, replica.fetch.wait.max.ms 500, request.timeout.ms 30000,
    auto.leader.rebalance.enable true every leader.imbalance.check.interval.seconds 300,
    unclean.leader.election.enable false, the last 5 idempotent batches kept per producer
    (ProducerStateEntry.NUM_BATCHES_TO_RETAIN). min.insync.replicas defaults to 2 here (Kafka
    ships 1; the project's durable default), and no historic bug is switched on."""
    c = ProtocolConfig()
    assert c.replica_lag_time_max_ms == 30_000
    assert c.replica_fetch_backoff_ms == 1_000
    assert c.replica_fetch_wait_max_ms == 500
    assert c.request_timeout_ms == 30_000
    assert c.auto_leader_rebalance_enable is True
    assert c.leader_imbalance_check_interval_seconds == 300
    assert c.unclean_leader_election_enable is False
    assert c.max_idempotent_batches == 5
    assert c.min_insync_replicas == 2
    assert c.bugs == Bugs() and Bugs().enabled() == ()
    assert all(not getattr(Bugs(), f) for f in Bugs.__dataclass_fields__)


def test_roles_and_fetch_states_are_distinct() -> None:
    """A replica that has accepted no LeaderAndIsr is neither leader nor follower."""
    assert len({int(r) for r in Role}) == len(Role) == 3
    assert len({int(s) for s in FetchState}) == len(FetchState) == 3


def test_every_bug_switch_can_be_named_and_only_those() -> None:
    for name in Bugs.__dataclass_fields__:
        cfg = ProtocolConfig().with_bug(name)
        assert cfg.bugs.enabled() == (name,)
    with pytest.raises(ValueError, match="unknown bug switch"):
        ProtocolConfig().with_bug("no_such_bug")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("min_insync_replicas", 0, "min.insync.replicas must be at least 1"),
        ("replica_lag_time_max_ms", 0, "replica_lag_time_max_ms must be positive"),
        ("replica_fetch_backoff_ms", 0, "replica_fetch_backoff_ms must be positive"),
        ("request_timeout_ms", 0, "request_timeout_ms must be positive"),
        ("max_idempotent_batches", 0, "max_idempotent_batches must be at least 1"),
    ],
)
def test_settings_below_their_minimum_are_refused(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProtocolConfig(**{field: value})  # type: ignore[arg-type]
    ProtocolConfig(**{field: value + 1})  # type: ignore[arg-type]  # the minimum is fine


def test_a_produce_waits_at_most_the_producers_default_request_timeout() -> None:
    """Kafka rule: a ProduceRequest carries the producer's request.timeout.ms as its
    timeout (default 30000): an acks=all produce waits that long in purgatory at most."""
    from core.events import ProduceReceived
    from core.types import TopicPartition

    assert ProduceReceived(1, TopicPartition("t", 0), -1, 1, b"x").timeout_ms == 30_000
