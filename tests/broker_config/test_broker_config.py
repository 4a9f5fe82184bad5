"""`BrokerConfig`: Kafka's server.properties keys, defaults, validation and views."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import (
    LONG_MAX,
    BrokerConfig,
    ConfigError,
    Listener,
    ZooKeeperConnect,
)
from broker.quotas import QuotaConfig
from broker.store.config import LogConfig
from core.config import Bugs

BASE = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181"}


def cfg(**props: str) -> BrokerConfig:
    """A config from BASE plus Kafka keys given with underscores for dots."""
    return BrokerConfig.from_properties(
        {**BASE, **{k.replace("_", "."): v for k, v in props.items()}}
    )


def props(extra: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_properties({**BASE, **extra})


def error(extra: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        props(extra)
    return info.value


SERVER_PROPERTIES = r"""
# A typical Kafka 2.x server.properties
broker.id=2
listeners=PLAINTEXT://10.0.0.2:9092
advertised.listeners = PLAINTEXT://kafka-2.example:9092

num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400

log.dirs=/var/lib/kafka/a,\
         /var/lib/kafka/b
num.partitions=3
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=zk1:2181,zk2:2181,zk3:2181/kafka
zookeeper.connection.timeout.ms=6000
group.initial.rebalance.delay.ms=0
min.insync.replicas: 2
unclean.leader.election.enable TRUE
"""


def test_typical_server_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES)
    c = BrokerConfig.from_file(path)
    assert c.broker_id == 2
    assert c.listeners == Listener(host="10.0.0.2", port=9092)
    assert c.listeners.address == ("10.0.0.2", 9092)
    assert c.effective_advertised_listeners == Listener(host="kafka-2.example", port=9092)
    assert c.log_dirs == ("/var/lib/kafka/a", "/var/lib/kafka/b")
    assert c.num_partitions == 3
    assert c.zookeeper_connect == ZooKeeperConnect(
        hosts=(("zk1", 2181), ("zk2", 2181), ("zk3", 2181)), chroot="/kafka"
    )
    assert c.effective_zookeeper_connection_timeout_ms == 6000
    assert c.group_initial_rebalance_delay_ms == 0
    assert c.min_insync_replicas == 2
    assert c.unclean_leader_election_enable is True
    assert set(c.ignored_keys) == {
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "transaction.state.log.replication.factor",
    }
    assert c.unknown_keys == ()


def test_kafka_defaults() -> None:
    c = props({})
    assert c.listeners == Listener(host="127.0.0.1", port=9092)
    assert c.advertised_listeners is None
    assert c.effective_advertised_listeners == c.listeners
    assert c.log_dirs == ("/tmp/kafka-logs",)
    assert c.zookeeper_session_timeout_ms == 18_000
    assert c.effective_zookeeper_connection_timeout_ms == 18_000
    assert (c.num_partitions, c.default_replication_factor, c.min_insync_replicas) == (1, 1, 1)
    assert c.unclean_leader_election_enable is False
    assert c.replica_lag_time_max_ms == 30_000
    assert c.replica_fetch_wait_max_ms == 500
    assert c.replica_fetch_min_bytes == 1
    assert c.replica_fetch_max_bytes == 1_048_576
    assert c.replica_fetch_backoff_ms == 1_000
    assert c.replica_socket_timeout_ms == 30_000
    assert c.controller_socket_timeout_ms == 30_000
    assert c.request_timeout_ms == 30_000
    assert c.auto_create_topics_enable and c.auto_leader_rebalance_enable and c.delete_topic_enable
    assert c.leader_imbalance_check_interval_seconds == 300
    assert c.socket_request_max_bytes == 104_857_600
    assert c.message_max_bytes == 1_048_588
    assert c.offsets_topic_num_partitions == 50
    assert c.offsets_topic_replication_factor == 3
    assert c.offsets_commit_required_acks == -1
    assert c.offsets_commit_timeout_ms == 5_000
    assert c.group_initial_rebalance_delay_ms == 3_000
    assert c.group_min_session_timeout_ms == 6_000
    assert c.group_max_session_timeout_ms == 1_800_000
    assert c.group_max_size == 2**31 - 1
    assert c.quota_producer_default == c.quota_consumer_default == LONG_MAX
    assert (c.quota_window_num, c.quota_window_size_seconds) == (11, 1)
    assert c.queued_max_requests == 500
    assert c.connections_max_idle_ms == 600_000
    assert c.max_connections == 2**31 - 1
    assert c.log_segment_bytes == 1024**3
    assert c.effective_log_roll_ms == 7 * 24 * 3600 * 1000
    assert c.effective_log_retention_ms == 7 * 24 * 3600 * 1000
    assert c.log_retention_bytes == -1
    assert c.log_cleanup_policy == ("delete",)
    assert c.log_cleaner_enable is True
    assert c.log_flush_interval_messages == LONG_MAX
    assert c.effective_log_flush_interval_ms == LONG_MAX
    assert c.log_index_size_max_bytes == 10 * 1024 * 1024
    assert c.log_index_interval_bytes == 4096
    assert c.log_cleaner_delete_retention_ms == 86_400_000
    assert c.log_cleaner_min_compaction_lag_ms == 0
    assert c.log_cleaner_min_cleanable_ratio == 0.5
    assert c.log_retention_check_interval_ms == 300_000
    assert c.log_flush_offset_checkpoint_interval_ms == 60_000
    assert c.replica_high_watermark_checkpoint_interval_ms == 5_000
    assert c.hiwater_bugs == ()


# --- required keys and value syntax


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match=r"broker\.id is required: an integer >= 0") as info:
        BrokerConfig.from_properties({"zookeeper.connect": "h:2181"})
    assert info.value.key == "broker.id" and info.value.value is None
    with pytest.raises(ConfigError, match=r"zookeeper\.connect is required: host:port"):
        BrokerConfig.from_properties({"broker.id": "1"})


@pytest.mark.parametrize("raw", ["-1", "x", "1.0", "1_000", "", "99999999999"])
def test_broker_id_must_be_a_non_negative_int(raw: str) -> None:
    e = error({"broker.id": raw})
    assert e.key == "broker.id" and e.value == raw
    assert "integer in [0, 2147483647]" in str(e)


@pytest.mark.parametrize(("raw", "value"), [(" 42 ", 42), ("+7", 7), ("007", 7)])
def test_integers_are_trimmed_and_parsed_like_java(raw: str, value: int) -> None:
    assert props({"num.partitions": raw}).num_partitions == value


def test_int_keys_are_32_bit_and_long_keys_64_bit() -> None:
    assert "2147483647" in str(error({"num.partitions": str(2**31)}))
    big = props({"log.retention.bytes": str(2**40)})
    assert big.log_retention_bytes == 2**40


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("TRUE", True), (" False ", False)])
def test_booleans(raw: str, value: bool) -> None:
    assert props({"auto.create.topics.enable": raw}).auto_create_topics_enable is value


def test_bad_boolean_names_key_value_and_choices() -> None:
    e = error({"delete.topic.enable": "yes"})
    assert str(e) == "invalid delete.topic.enable='yes': expected true or false"


@pytest.mark.parametrize(
    ("key", "raw", "allowed"),
    [
        ("num.partitions", "0", "[1, 2147483647]"),
        ("min.insync.replicas", "0", "[1, 2147483647]"),
        ("message.max.bytes", "-1", "[0, 2147483647]"),
        ("log.segment.bytes", "13", "[14, 2147483647]"),
        ("quota.window.num", "0", "[1, 2147483647]"),
        ("quota.producer.default", "0", "[1, 9223372036854775807]"),
        ("offsets.topic.replication.factor", "40000", "[1, 32767]"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "[0.0, 1.0]"),
        ("log.cleaner.min.cleanable.ratio", "nan", "[0.0, 1.0]"),
        ("leader.imbalance.per.broker.percentage", "101", "[0, 100]"),
        ("replica.fetch.backoff.ms", "0", "[1, 2147483647]"),
        ("fetch.max.bytes", "1023", "[1024, 2147483647]"),
    ],
)
def test_ranges(key: str, raw: str, allowed: str) -> None:
    e = error({key: raw})
    assert e.key == key and e.value == raw and allowed in str(e)


# --- listeners


@pytest.mark.parametrize(
    ("raw", "listener"),
    [
        ("PLAINTEXT://127.0.0.1:9092", Listener(host="127.0.0.1", port=9092)),
        ("plaintext://broker-1.local:19092", Listener(host="broker-1.local", port=19092)),
        ("PLAINTEXT://[::1]:9092", Listener(host="::1", port=9092)),
        ("PLAINTEXT://127.0.0.1:0", Listener(host="127.0.0.1", port=0)),
        ("  PLAINTEXT://h:1  ", Listener(host="h", port=1)),
    ],
)
def test_listeners(raw: str, listener: Listener) -> None:
    c = props({"listeners": raw})
    assert c.listeners == listener
    assert Listener.parse("listeners", str(listener)) == listener


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("SSL://h:9093", "only PLAINTEXT listeners"),
        ("SASL_PLAINTEXT://h:9093", "only PLAINTEXT listeners"),
        ("INTERNAL://h:9093", "only PLAINTEXT listeners"),
        ("PLAINTEXT://:9092", "a host must be given"),
        ("PLAINTEXT://h:9092,PLAINTEXT://g:9093", "exactly one listener"),
        ("PLAINTEXT://h:9092,SSL://h:9093", "exactly one listener"),
        ("h:9092", "expected PLAINTEXT://host:port"),
        ("PLAINTEXT://h", "expected PLAINTEXT://host:port"),
        ("PLAINTEXT://h:65536", "[0, 65535]"),
        ("PLAINTEXT://h:-1", "[0, 65535]"),
        ("PLAINTEXT://h*st:1", "the host may contain only"),
    ],
)
def test_bad_listeners(raw: str, message: str) -> None:
    e = error({"listeners": raw})
    assert e.key == "listeners" and e.value == raw and message in str(e)


def test_advertised_listeners_default_to_listeners_and_port_0_is_resolved_at_bind() -> None:
    c = props({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert c.effective_advertised_listeners.port == 0
    assert c.advertised_listener_for(40123) == Listener(host="127.0.0.1", port=40123)
    fixed = props({"listeners": "PLAINTEXT://0.0.0.0:0", "advertised.listeners": "PLAINTEXT://h:9"})
    assert fixed.advertised_listener_for(40123) == Listener(host="h", port=9)


def test_advertised_listeners_cannot_be_0000_or_port_0() -> None:
    assert "0.0.0.0" in str(error({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}))
    e = error({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    assert e.key == "advertised.listeners" and "routable" in str(e)
    assert "[1, 65535]" in str(error({"advertised.listeners": "PLAINTEXT://h:0"}))


@pytest.mark.parametrize(
    ("key", "replacement"),
    [("port", "listeners"), ("advertised.host.name", "advertised.listeners")],
)
def test_deprecated_listener_keys_are_refused_with_the_replacement(
    key: str, replacement: str
) -> None:
    e = error({key: "9092"})
    assert e.key == key and f"use {replacement}=PLAINTEXT://host:port" in str(e)


def test_inter_broker_security_must_be_plaintext() -> None:
    assert props({"security.inter.broker.protocol": "PLAINTEXT"}).ignored_keys == (
        "security.inter.broker.protocol",
    )
    e = error({"security.inter.broker.protocol": "SSL"})
    assert "only PLAINTEXT" in str(e)


# --- log.dirs and zookeeper.connect


def test_log_dirs_precedence_over_log_dir() -> None:
    assert props({"log.dir": "/one"}).log_dirs == ("/one",)
    assert props({"log.dir": "/one", "log.dirs": "/a , /b,"}).log_dirs == ("/a", "/b")
    assert "at least one entry" in str(error({"log.dirs": " , "}))


@pytest.mark.parametrize(
    ("raw", "hosts", "chroot"),
    [
        ("h:2181", (("h", 2181),), None),
        ("h", (("h", 2181),), None),
        ("a:1,b:2,c:3", (("a", 1), ("b", 2), ("c", 3)), None),
        ("a:1,b:2/kafka/cluster-1", (("a", 1), ("b", 2)), "/kafka/cluster-1"),
        ("[::1]:2181/k", (("::1", 2181),), "/k"),
        ("h:2181/", (("h", 2181),), None),
    ],
)
def test_zookeeper_connect(
    raw: str, hosts: tuple[tuple[str, int], ...], chroot: str | None
) -> None:
    zk = props({"zookeeper.connect": raw}).zookeeper_connect
    assert zk == ZooKeeperConnect(hosts=hosts, chroot=chroot)
    assert ZooKeeperConnect.parse("zookeeper.connect", str(zk)) == zk


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "empty host"),
        ("a:1,,b:2", "empty host"),
        ("h:0", "[1, 65535]"),
        ("h:x", "integer"),
        ("h:1/k/", "bad chroot"),
        ("h:1/a//b", "bad chroot"),
        ("h:1/a/../b", "bad chroot"),
        ("::1:2181", "brackets"),
    ],
)
def test_bad_zookeeper_connect(raw: str, message: str) -> None:
    e = error({"zookeeper.connect": raw})
    assert e.key == "zookeeper.connect" and message in str(e)


# --- Kafka's precedence rules between keys


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert cfg(log_retention_hours="2").effective_log_retention_ms == 2 * 3_600_000
    assert (
        cfg(log_retention_hours="2", log_retention_minutes="3").effective_log_retention_ms
        == 180_000
    )
    both = cfg(log_retention_hours="2", log_retention_minutes="3", log_retention_ms="1234")
    assert both.effective_log_retention_ms == 1234


@pytest.mark.parametrize(
    "key", ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
)
def test_negative_retention_means_unlimited(key: str) -> None:
    c = props({key: "-5"})
    assert c.effective_log_retention_ms == -1
    assert c.log_config().retention_ms == -1


@pytest.mark.parametrize(
    "key", ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
)
def test_zero_retention_is_an_error_naming_the_key_that_set_it(key: str) -> None:
    e = error({key: "0"})
    assert e.key == key and "unlimited (-1) or >= 1" in str(e)


def test_roll_ms_over_hours_and_flush_ms_over_scheduler_interval() -> None:
    assert cfg(log_roll_hours="1").effective_log_roll_ms == 3_600_000
    assert cfg(log_roll_hours="1", log_roll_ms="10").effective_log_roll_ms == 10
    assert cfg(log_flush_scheduler_interval_ms="7").effective_log_flush_interval_ms == 7
    c = cfg(log_flush_scheduler_interval_ms="7", log_flush_interval_ms="3")
    assert c.effective_log_flush_interval_ms == 3


def test_zookeeper_connection_timeout_defaults_to_session_timeout() -> None:
    assert (
        cfg(zookeeper_session_timeout_ms="6000").effective_zookeeper_connection_timeout_ms == 6000
    )


def test_kafka_cross_key_requirements() -> None:
    e = error({"replica.fetch.wait.max.ms": "31000"})
    assert "replica.socket.timeout.ms" in str(e)
    e = error({"replica.fetch.wait.max.ms": "600", "replica.lag.time.max.ms": "500"})
    assert "replica.lag.time.max.ms" in str(e)
    e = error({"offsets.commit.required.acks": "2", "offsets.topic.replication.factor": "1"})
    assert e.key == "offsets.commit.required.acks"
    assert props({"offsets.commit.required.acks": "1"}).offsets_commit_required_acks == 1


# --- unknown and ignored keys


def test_unknown_keys_are_a_warning_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="broker.config"):
        c = props(
            {"lgo.retention.hours": "1", "num.io.threads": "8", "ssl.keystore.location": "/k"}
        )
    assert c.unknown_keys == ("lgo.retention.hours",)
    assert set(c.ignored_keys) == {"num.io.threads", "ssl.keystore.location"}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "lgo.retention.hours" in warnings[0].getMessage()
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1 and "num.io.threads" in infos[0].getMessage()


# --- hiwater.bugs and the protocol config


def test_protocol_config() -> None:
    c = cfg(
        min_insync_replicas="2",
        unclean_leader_election_enable="true",
        replica_lag_time_max_ms="10000",
        replica_fetch_backoff_ms="50",
        replica_fetch_wait_max_ms="250",
        request_timeout_ms="4000",
        auto_leader_rebalance_enable="false",
        leader_imbalance_check_interval_seconds="30",
    )
    p = c.protocol_config()
    assert p.min_insync_replicas == 2
    assert p.unclean_leader_election_enable is True
    assert p.replica_lag_time_max_ms == 10_000
    assert p.replica_fetch_backoff_ms == 50
    assert p.request_timeout_ms == 4000
    assert p.auto_leader_rebalance_enable is False
    assert p.leader_imbalance_check_interval_seconds == 30
    assert p.bugs == Bugs()
    # The leader's DelayedFetch holds an empty follower fetch for up to replica.fetch.wait.max.ms
    # in the live broker, so the core's follower-side wait is 0; the real value stays here.
    assert p.replica_fetch_wait_max_ms == 0
    assert c.replica_fetch_wait_max_ms == 250


def test_hiwater_bugs() -> None:
    c = props({"hiwater.bugs": "truncate_to_hw, no_controller_epoch_check"})
    assert c.hiwater_bugs == ("truncate_to_hw", "no_controller_epoch_check")
    assert c.protocol_config().bugs.enabled() == ("truncate_to_hw", "no_controller_epoch_check")
    assert props({"hiwater.bugs": ""}).protocol_config().bugs == Bugs()


def test_unknown_bug_lists_the_valid_ones() -> None:
    e = error({"hiwater.bugs": "truncate_to_hw,typo"})
    assert e.key == "hiwater.bugs" and "'typo' is not a bug switch" in str(e)
    for f in dataclasses.fields(Bugs):
        assert f.name in str(e)


def test_quota_config() -> None:
    c = cfg(quota_producer_default="1000", quota_consumer_default="2000", quota_window_num="5")
    assert c.quota_config() == QuotaConfig(
        quota_producer_default=1000,
        quota_consumer_default=2000,
        quota_window_num=5,
        quota_window_size_seconds=1,
    )


# --- log configs


def test_default_log_config_is_kafkas_topic_default() -> None:
    assert props({}).log_config() == LogConfig()


def test_log_config_maps_broker_keys_to_topic_keys() -> None:
    c = props(
        {
            "log.segment.bytes": "1000",
            "log.roll.ms": "2000",
            "log.index.size.max.bytes": "4096",
            "log.index.interval.bytes": "100",
            "message.max.bytes": "5000",
            "log.retention.minutes": "3",
            "log.retention.bytes": "123456",
            "log.cleanup.policy": "delete,compact",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.delete.retention.ms": "10",
            "log.cleaner.min.compaction.lag.ms": "20",
            "log.cleaner.max.compaction.lag.ms": "30",
            "log.flush.interval.messages": "40",
            "log.flush.interval.ms": "50",
        }
    )
    assert c.log_config() == LogConfig(
        segment_bytes=1000,
        segment_ms=2000,
        segment_index_bytes=4096,
        index_interval_bytes=100,
        max_message_bytes=5000,
        retention_ms=180_000,
        retention_bytes=123456,
        cleanup_policy="compact,delete",
        min_cleanable_dirty_ratio=0.25,
        delete_retention_ms=10,
        min_compaction_lag_ms=20,
        max_compaction_lag_ms=30,
        flush_messages=40,
        flush_ms=50,
    )


@pytest.mark.parametrize(
    ("raw", "policy"),
    [("delete", "delete"), ("compact", "compact"), ("compact, delete", "compact,delete")],
)
def test_cleanup_policy(raw: str, policy: str) -> None:
    assert props({"log.cleanup.policy": raw}).log_config().cleanup_policy == policy


def test_inconsistent_log_settings_name_the_broker_key() -> None:
    e = error(
        {"log.cleaner.min.compaction.lag.ms": "100", "log.cleaner.max.compaction.lag.ms": "10"}
    )
    assert e.key == "log.cleaner.max.compaction.lag.ms" and "min.compaction.lag.ms" in str(e)


def test_topic_overrides_on_top_of_broker_defaults() -> None:
    c = props({"log.retention.ms": "1000", "log.segment.bytes": "5000"})
    t = c.topic_log_config({"retention.ms": "99", "cleanup.policy": "compact"})
    assert (t.retention_ms, t.cleanup_policy, t.segment_bytes) == (99, "compact", 5000)
    # Topic keys that are not log settings are skipped here.
    assert c.topic_log_config({"min.insync.replicas": "2"}) == c.log_config()


def test_offsets_topic_log_config() -> None:
    c = props({})
    t = c.topic_log_config(c.offsets_topic_overrides())
    assert t.cleanup_policy == "compact" and t.compact and not t.delete
    assert t.segment_bytes == 104_857_600
    small = props({"offsets.topic.segment.bytes": "1048576"})
    assert small.topic_log_config(small.offsets_topic_overrides()).segment_bytes == 1_048_576


def test_bad_topic_overrides() -> None:
    c = props({})
    with pytest.raises(ConfigError, match="unknown topic config") as info:
        c.topic_log_config({"retention.hours": "1"})
    assert info.value.key == "retention.hours"
    with pytest.raises(ConfigError, match=r"segment\.bytes") as info:
        c.topic_log_config({"segment.bytes": "1"})
    assert info.value.key == "segment.bytes" and info.value.value == "1"


# --- construction, overrides and round trips


def test_other_properties_cannot_shadow_modelled_keys() -> None:
    with pytest.raises(ConfigError, match="a modelled key"):
        props({}).with_overrides(other_properties=(("num.partitions", "3"),))


def test_frozen() -> None:
    c = props({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.broker_id = 3  # type: ignore[misc]


def test_with_overrides() -> None:
    c = props({"listeners": "PLAINTEXT://127.0.0.1:9092"})
    d = c.with_overrides(broker_id=3, num_partitions="4", listeners="PLAINTEXT://127.0.0.2:9093")
    assert (d.broker_id, d.num_partitions) == (3, 4)
    assert d.effective_advertised_listeners == Listener(host="127.0.0.2", port=9093)
    e = c.with_overrides(**{"log.retention.ms": "77", "hiwater.bugs": ["truncate_to_hw"]})
    assert e.effective_log_retention_ms == 77 and e.hiwater_bugs == ("truncate_to_hw",)
    assert c.with_overrides(log_cleanup_policy="compact").log_config().compact


def test_with_overrides_validates() -> None:
    c = props({})
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        c.with_overrides(num_partitions=0)
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        c.with_overrides(num_partitions="zero")
    with pytest.raises(ConfigError, match="expected an integer"):
        c.with_overrides(num_partitions=True)
    with pytest.raises(ConfigError, match="not a BrokerConfig key"):
        c.with_overrides(num_partition=2)
    with pytest.raises(ConfigError, match=r"replica\.socket\.timeout\.ms"):
        c.with_overrides(replica_fetch_wait_max_ms=40_000)


def test_round_trip_through_properties_and_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES)
    c = BrokerConfig.from_file(path)
    assert BrokerConfig.from_properties(c.to_properties()) == c
    out = tmp_path / "out.properties"
    c.to_file(out)
    assert BrokerConfig.from_file(out) == c


def test_to_properties_lists_every_key_with_kafka_text() -> None:
    p = props({"broker.rack": "r1"}).to_properties()
    assert p["broker.id"] == "0"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert p["broker.rack"] == "r1"
    assert p["unclean.leader.election.enable"] == "false"
    assert p["log.cleanup.policy"] == "delete"
    assert "advertised.listeners" not in p  # null in Kafka: it follows listeners
    assert "log.retention.ms" not in p and p["log.retention.hours"] == "168"


RESERVED = {*props({}).to_properties(), "log.dir", "host.name", "advertised.listeners"}
_host = st.sampled_from(["127.0.0.1", "::1", "broker-1.example", "10.1.2.3"])
_overrides = st.fixed_dictionaries(
    {},
    optional={
        "broker_id": st.integers(0, 2**31 - 1),
        "listeners": st.builds(Listener, host=_host, port=st.integers(0, 65535)),
        "advertised_listeners": st.builds(Listener, host=_host, port=st.integers(1, 65535)),
        "broker_rack": st.text(st.characters(codec="latin-1"), max_size=10).map(str.strip),
        "log_dirs": st.lists(
            st.text("abc/_-é ", min_size=1, max_size=8).map(str.strip).filter(bool), min_size=1
        ).map(tuple),
        "zookeeper_connect": st.builds(
            ZooKeeperConnect,
            hosts=st.lists(st.tuples(_host, st.integers(1, 65535)), min_size=1, max_size=3).map(
                tuple
            ),
            chroot=st.sampled_from([None, "/kafka", "/a/b"]),
        ),
        "log_retention_ms": st.none() | st.integers(1, 2**63 - 1),
        "log_retention_minutes": st.none() | st.integers(1, 2**31 - 1),
        "log_cleanup_policy": st.sampled_from([("delete",), ("compact",), ("compact", "delete")]),
        "log_cleaner_min_cleanable_ratio": st.floats(0.0, 1.0),
        "unclean_leader_election_enable": st.booleans(),
        "hiwater_bugs": st.lists(
            st.sampled_from([f.name for f in dataclasses.fields(Bugs)]), unique=True
        ).map(tuple),
        "other_properties": st.dictionaries(
            st.from_regex(r"[a-z]{1,5}\.[a-z]{1,5}", fullmatch=True).filter(
                lambda k: k not in RESERVED
            ),
            st.text(max_size=10).map(str.strip),
            max_size=3,
        ).map(lambda d: tuple(sorted(d.items()))),
    },
)


@settings(max_examples=200)
@given(_overrides)
def test_round_trip_property(changes: dict[str, object]) -> None:
    c = props({}).with_overrides(**changes)
    again = BrokerConfig.from_properties(c.to_properties())
    assert again == c
