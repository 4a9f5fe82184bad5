"""DescribeConfigs' config model (broker/runtime/admin_handlers.py), without a broker: values,
sources, synonyms and types of topic and broker configs, as Kafka reports them."""

from __future__ import annotations

from typing import Any

from broker.config import BrokerConfig
from broker.runtime.admin_handlers import (
    BOOLEAN,
    DEFAULT_CONFIG,
    DOUBLE,
    DYNAMIC_TOPIC_CONFIG,
    INT,
    LIST,
    LONG,
    PASSWORD,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
    broker_entries,
    topic_entries,
)


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({"broker.id": "3", "zookeeper.connect": "127.0.0.1:2181",
                                         **props})


def by_name(entries: list[ConfigEntry]) -> dict[str, Any]:
    return {e.name: e for e in entries}


def test_topic_defaults_come_from_kafka_defaults() -> None:
    e = by_name(topic_entries(config(), {}))
    r = e["retention.ms"]
    assert (r.value, r.source, r.read_only, r.type) == (str(7 * 24 * 3600 * 1000), DEFAULT_CONFIG,
                                                        False, LONG)
    assert r.synonyms == (("log.retention.ms", None, DEFAULT_CONFIG),
                          ("log.retention.minutes", None, DEFAULT_CONFIG),
                          ("log.retention.hours", "168", DEFAULT_CONFIG))
    assert (e["cleanup.policy"].value, e["cleanup.policy"].type) == ("delete", LIST)
    assert (e["min.cleanable.dirty.ratio"].value, e["min.cleanable.dirty.ratio"].type) == \
        ("0.5", DOUBLE)
    assert e["unclean.leader.election.enable"].type == BOOLEAN
    assert (e["compression.type"].value, e["compression.type"].source) == ("producer",
                                                                           DEFAULT_CONFIG)
    assert e["compression.type"].synonyms == (("compression.type", "producer", DEFAULT_CONFIG),)
    assert all(x.source == DEFAULT_CONFIG for x in e.values())


def test_topic_override_then_static_broker_setting_then_default() -> None:
    c = config(**{"log.retention.hours": "24", "min.insync.replicas": "2",
                  "log.segment.bytes": "1048576"})
    e = by_name(topic_entries(c, {"retention.ms": "3600000", "cleanup.policy": "compact"}))
    r = e["retention.ms"]
    assert (r.value, r.source) == ("3600000", DYNAMIC_TOPIC_CONFIG)
    assert r.synonyms[:2] == (("retention.ms", "3600000", DYNAMIC_TOPIC_CONFIG),
                              ("log.retention.hours", "24", STATIC_BROKER_CONFIG))
    assert (e["cleanup.policy"].value, e["cleanup.policy"].source) == ("compact",
                                                                       DYNAMIC_TOPIC_CONFIG)
    m = e["min.insync.replicas"]
    assert (m.value, m.source, m.type) == ("2", STATIC_BROKER_CONFIG, INT)
    assert m.synonyms == (("min.insync.replicas", "2", STATIC_BROKER_CONFIG),
                          ("min.insync.replicas", "1", DEFAULT_CONFIG))
    s = e["segment.bytes"]
    assert (s.value, s.source) == ("1048576", STATIC_BROKER_CONFIG)
    # without the override, the broker's hours decide retention.ms
    r = by_name(topic_entries(c, {}))["retention.ms"]
    assert (r.value, r.source) == (str(24 * 3600 * 1000), STATIC_BROKER_CONFIG)


def test_broker_entries() -> None:
    c = config(**{"min.insync.replicas": "2", "log.retention.hours": "24",
                  "num.io.threads": "16", "ssl.keystore.password": "secret",
                  "hiwater.bugs": "truncate_to_hw"})
    e = by_name(broker_entries(c))
    assert (e["broker.id"].value, e["broker.id"].source) == ("3", STATIC_BROKER_CONFIG)
    m = e["min.insync.replicas"]
    assert (m.value, m.source, m.read_only, m.sensitive) == ("2", STATIC_BROKER_CONFIG, True,
                                                             False)
    n = e["num.partitions"]
    assert (n.value, n.source, n.synonyms) == ("1", DEFAULT_CONFIG,
                                               (("num.partitions", "1", DEFAULT_CONFIG),))
    # a key is not described by the synonyms above it (log.retention.ms / .minutes)
    h = e["log.retention.hours"]
    assert h.synonyms == (("log.retention.hours", "24", STATIC_BROKER_CONFIG),
                          ("log.retention.hours", "168", DEFAULT_CONFIG))
    assert e["log.retention.ms"].value is None
    assert (e["num.io.threads"].value, e["num.io.threads"].source) == ("16",
                                                                       STATIC_BROKER_CONFIG)
    p = e["ssl.keystore.password"]
    assert (p.value, p.sensitive, p.type) == (None, True, PASSWORD)
    assert all(s[1] is None for s in p.synonyms)
    assert not any(k.startswith("hiwater.") for k in e)
    assert list(e) == sorted(e)
