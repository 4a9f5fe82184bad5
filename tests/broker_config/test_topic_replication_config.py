"""A topic's replication settings (`min.insync.replicas`, `unclean.leader.election.enable`):
parsed and validated as Kafka's LogConfig does, handed to the core as a `TopicConfig`."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError, topic_replication_config
from core.config import TopicConfig

BASE = {"broker.id": "0", "zookeeper.connect": "127.0.0.1:2181"}


def test_unset_keys_leave_the_broker_default() -> None:
    assert topic_replication_config({}) == TopicConfig()
    assert topic_replication_config({"retention.ms": "5"}) == TopicConfig()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"min.insync.replicas": "3"}, TopicConfig(min_insync_replicas=3)),
        ({"min.insync.replicas": " 2 "}, TopicConfig(min_insync_replicas=2)),
        ({"unclean.leader.election.enable": "TRUE"},
         TopicConfig(unclean_leader_election_enable=True)),
        ({"unclean.leader.election.enable": "false", "min.insync.replicas": "1"},
         TopicConfig(min_insync_replicas=1, unclean_leader_election_enable=False)),
    ],
)
def test_values_are_parsed(overrides: dict[str, str], expected: TopicConfig) -> None:
    assert topic_replication_config(overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min.insync.replicas": "0"}, "min.insync.replicas='0': Value must be at least 1"),
        ({"min.insync.replicas": "-1"}, "Value must be at least 1"),
        ({"min.insync.replicas": "two"}, "min.insync.replicas='two': Not a number of type INT"),
        ({"min.insync.replicas": "1.5"}, "Not a number of type INT"),
        ({"min.insync.replicas": "1_000"}, "Not a number of type INT"),
        ({"min.insync.replicas": "99999999999"}, "Not a number of type INT"),
        ({"unclean.leader.election.enable": "yes"}, "either true or false"),
    ],
)
def test_bad_values_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        topic_replication_config(overrides)
    # CreateTopics validates a topic's config through topic_log_config: refused there too
    broker = BrokerConfig.from_properties(BASE)
    with pytest.raises(ConfigError, match=message):
        broker.topic_log_config(overrides)


def test_a_valid_topic_min_isr_does_not_change_the_log_config() -> None:
    broker = BrokerConfig.from_properties(BASE)
    assert broker.topic_log_config({"min.insync.replicas": "3"}) == broker.log_config()
