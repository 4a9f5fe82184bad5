"""Admin APIs with real clients (issue #13): DescribeConfigs, DescribeGroups, ListGroups.

Against the module's 3-broker cluster (RF 3, min.insync.replicas 2 in server.properties):

* kafka-python `KafkaAdminClient.describe_configs` (a topic with a `retention.ms` override shows
  it with source DYNAMIC_TOPIC_CONFIG, the broker's `min.insync.replicas` STATIC_BROKER_CONFIG,
  the rest DEFAULT_CONFIG; a broker resource), `describe_groups` and `list_groups` (kafka-python
  3's names for the 2.x `describe_consumer_groups` / `list_consumer_groups`);
* confluent-kafka `AdminClient.describe_configs`, `list_consumer_groups`,
  `describe_consumer_groups`;
* aiokafka `AIOKafkaAdminClient.describe_configs`, `list_consumer_groups`,
  `describe_consumer_groups`.

Versions observed: kafka-python 3.0.12 sends DescribeConfigs v4, DescribeGroups v6, ListGroups
v5; confluent-kafka 2.16.1 (librdkafka 2.16.0) v1, v5, v5; aiokafka 0.14.0 v2, v3, v1.

kcat has no mode that lists or describes groups (`kcat -L` lists brokers and topics only), so
it is not used here. Every wait is bounded; the only addresses are the cluster's 127.0.0.x.
The raw-socket sweep of every advertised version is in test_wire_live.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.runtime.cluster import LocalCluster

from .clients_lib import create_topic, wait_topic

pytestmark = pytest.mark.timeout(120)

TOPIC = "adm-topic"
ACTIVE = "adm-active"  # a group with one live confluent consumer: Stable
SIMPLE = "adm-simple"  # a group with committed offsets only: Empty, no protocol type
RETENTION = "3600000"


class Groups:
    def __init__(self, cluster: LocalCluster, consumer: Any, client_id: str) -> None:
        self.cluster = cluster
        self.consumer = consumer
        self.client_id = client_id


@pytest.fixture(scope="module")
def groups(cluster: LocalCluster) -> Iterator[Groups]:
    """TOPIC (3 partitions, retention.ms overridden), ACTIVE with a confluent consumer that
    holds all three partitions, SIMPLE with a commit and no member."""
    from confluent_kafka import Consumer, TopicPartition

    assert create_topic("confluent", cluster.bootstrap, TOPIC, 3, 3,
                        configs={"retention.ms": RETENTION}) == 0
    wait_topic(cluster, TOPIC, 3)
    simple = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": SIMPLE,
                       "enable.auto.commit": False})
    try:
        simple.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    finally:
        simple.close()
    client_id = "adm-consumer"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": ACTIVE,
                         "client.id": client_id, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10_000})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline, "the consumer never got its partitions"
            consumer.poll(0.2)
        # DescribeGroups shows metadata only once the group is Stable (after SyncGroup)
        time.sleep(1.0)
        consumer.poll(0.1)
        yield Groups(cluster, consumer, client_id)
    finally:
        consumer.close()


def kp_admin(cluster: LocalCluster) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000,
                            client_id="adm-kp")


def ck_admin(cluster: LocalCluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def until(fn: Any, timeout_s: float = 20.0) -> Any:
    """fn() until it returns something true (retrying while a coordinator moves or loads)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    for _ in range(int(timeout_s / 0.2) + 1):
        try:
            last = fn()
        except Exception as e:  # a client error while the coordinator is not ready yet
            last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    raise AssertionError(f"gave up after {timeout_s} s: {last!r}")


def field(x: Any, name: str) -> Any:
    """A field of a kafka-python struct, decoded to a dict or not."""
    return x[name] if isinstance(x, dict) else getattr(x, name)


# -- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_describe_configs_topic(groups: Groups) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kp_admin(groups.cluster)
    try:
        got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)],
                                     include_synonyms=True, config_filter="all")
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    finally:
        admin.close()
    configs = got["topic"][TOPIC]
    r = configs["retention.ms"]
    assert r["value"] == RETENTION and r["config_source"] == "DYNAMIC_TOPIC_CONFIG", r
    assert r["read_only"] is False and r["is_sensitive"] is False, r
    assert r["synonyms"][0] == {"name": "retention.ms", "value": RETENTION,
                                "source": "DYNAMIC_TOPIC_CONFIG"}, r
    assert {"name": "log.retention.hours", "value": "168",
            "source": "DEFAULT_CONFIG"} in r["synonyms"], r
    m = configs["min.insync.replicas"]
    assert (m["value"], m["config_source"]) == ("2", "STATIC_BROKER_CONFIG"), m
    s = configs["segment.bytes"]
    assert (s["value"], s["config_source"]) == (str(1 << 30), "DEFAULT_CONFIG"), s
    assert configs["cleanup.policy"]["value"] == "delete"
    # kafka-python's default filter ("modified") keeps the topic's own overrides
    assert set(modified["topic"][TOPIC]) == {"retention.ms"}


def test_kafka_python_describe_configs_broker(groups: Groups) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kp_admin(groups.cluster)
    try:
        got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "2")],
                                     config_filter="all")
    finally:
        admin.close()
    configs = got["broker"]["2"]
    assert configs["broker.id"]["value"] == "2"
    m = configs["min.insync.replicas"]
    assert (m["value"], m["config_source"], m["read_only"]) == ("2", "STATIC_BROKER_CONFIG",
                                                                True), m
    n = configs["num.partitions"]
    assert (n["value"], n["config_source"]) == ("1", "DEFAULT_CONFIG"), n
    assert configs["log.retention.hours"]["value"] == "168"
    assert not any(k.startswith("hiwater.") for k in configs)


def test_kafka_python_describe_and_list_groups(groups: Groups) -> None:
    admin = kp_admin(groups.cluster)
    try:
        described = until(lambda: (lambda d: d if d[ACTIVE]["group_state"] == "Stable" else None)(
            admin.describe_groups([ACTIVE, SIMPLE, "adm-nobody"])))
        listed = until(lambda: (lambda gs: gs if {ACTIVE, SIMPLE} <= {
            g["group_id"] for g in gs} else None)(admin.list_groups()))
    finally:
        admin.close()
    active = described[ACTIVE]
    assert active["error"] is None and active["protocol_type"] == "consumer", active
    assert active["protocol_data"] in ("range", "roundrobin"), active
    (member,) = active["members"]
    assert member["client_id"] == groups.client_id, member
    assert member["client_host"] == "/127.0.0.1", member
    assert list(field(member["member_metadata"], "topics")) == [TOPIC], member
    assigned = {(field(a, "topic"), p)
                for a in field(member["member_assignment"], "assigned_partitions")
                for p in field(a, "partitions")}
    assert assigned == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}, member
    simple = described[SIMPLE]
    assert (simple["group_state"], simple["protocol_type"], simple["members"]) == \
        ("Empty", "", []), simple
    # DescribeGroups v6: a group nobody has is GROUP_ID_NOT_FOUND, with a message
    assert "GroupIdNotFound" in described["adm-nobody"]["error"], described["adm-nobody"]
    by_id = {g["group_id"]: g for g in listed}
    assert by_id[ACTIVE]["protocol_type"] == "consumer"
    assert by_id[ACTIVE]["group_state"] == "Stable"
    assert by_id[SIMPLE]["group_state"] == "Empty"
    assert by_id[ACTIVE]["group_type"] == "classic"


def test_kafka_python_list_groups_filters(groups: Groups) -> None:
    admin = kp_admin(groups.cluster)
    try:
        empty = admin.list_groups(states_filter=["Empty"])
        classic = admin.list_groups(types_filter=["classic"])
        consumer = admin.list_groups(types_filter=["consumer"])
    finally:
        admin.close()
    assert SIMPLE in {g["group_id"] for g in empty}
    assert ACTIVE not in {g["group_id"] for g in empty}
    assert {ACTIVE, SIMPLE} <= {g["group_id"] for g in classic}
    assert consumer == []  # no KIP-848 groups here


# -- confluent-kafka ----------------------------------------------------------------------------


def test_confluent_describe_configs(groups: Groups) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ConfigSource

    admin = ck_admin(groups.cluster)
    topic_res = ConfigResource("topic", TOPIC)
    broker_res = ConfigResource("broker", "1")
    missing = ConfigResource("topic", "adm-no-such-topic")
    offsets = ConfigResource("topic", "__consumer_offsets")
    futures = admin.describe_configs([topic_res, broker_res, missing, offsets],
                                     request_timeout=15)
    topic = futures[topic_res].result(timeout=30)
    r = topic["retention.ms"]
    assert r.value == RETENTION and r.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, r
    assert not r.is_read_only and not r.is_sensitive
    assert topic["min.insync.replicas"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert topic["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    broker = futures[broker_res].result(timeout=30)
    assert broker["broker.id"].value == "1"
    assert broker["min.insync.replicas"].value == "2"
    assert broker["min.insync.replicas"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert broker["num.partitions"].is_read_only
    # the internal topic shows the configs Kafka creates it with
    internal = futures[offsets].result(timeout=30)
    assert internal["cleanup.policy"].value == "compact"
    assert internal["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    with pytest.raises(KafkaException) as e:
        futures[missing].result(timeout=30)
    assert "UNKNOWN_TOPIC_OR_PART" in str(e.value), e.value


def test_confluent_list_and_describe_consumer_groups(groups: Groups) -> None:
    from confluent_kafka import ConsumerGroupState

    admin = ck_admin(groups.cluster)

    def listed() -> Any:
        result = admin.list_consumer_groups(request_timeout=15).result(timeout=30)
        ids = {g.group_id: g for g in result.valid}
        return ids if {ACTIVE, SIMPLE} <= set(ids) and not result.errors else None

    ids = until(listed)
    assert ids[ACTIVE].state == ConsumerGroupState.STABLE
    assert not ids[ACTIVE].is_simple_consumer_group
    assert ids[SIMPLE].state == ConsumerGroupState.EMPTY
    assert ids[SIMPLE].is_simple_consumer_group

    def described() -> Any:
        futures = admin.describe_consumer_groups([ACTIVE, SIMPLE], request_timeout=15)
        got = {g: f.result(timeout=30) for g, f in futures.items()}
        return got if got[ACTIVE].state == ConsumerGroupState.STABLE else None

    got = until(described)
    active = got[ACTIVE]
    assert active.partition_assignor in ("range", "roundrobin"), active
    (member,) = active.members
    assert member.client_id == groups.client_id and member.host == "/127.0.0.1", member
    assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == \
        [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)], member
    assert active.coordinator.id in groups.cluster.nodes
    simple = got[SIMPLE]
    assert simple.state == ConsumerGroupState.EMPTY and not simple.members
    assert simple.is_simple_consumer_group


# -- aiokafka -----------------------------------------------------------------------------------


def test_aiokafka_admin_apis(groups: Groups) -> None:
    """aiokafka's admin client (observed: DescribeConfigs v2, DescribeGroups v3, ListGroups v1,
    the highest it implements within the advertised ranges)."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def go() -> tuple[Any, Any, Any]:
        admin = AIOKafkaAdminClient(bootstrap_servers=groups.cluster.bootstrap,
                                    request_timeout_ms=15000)
        await admin.start()
        try:
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, TOPIC),
                 ConfigResource(ConfigResourceType.BROKER, "3")], include_synonyms=True)
            listed = await admin.list_consumer_groups()
            described = await admin.describe_consumer_groups([ACTIVE])
            return configs, listed, described
        finally:
            await admin.close()

    configs, listed, described = asyncio.run(asyncio.wait_for(go(), 60))
    results = {(r[2], r[3]): r for resp in configs for r in resp.resources}
    topic = results[(2, TOPIC)]
    assert topic[0] == 0, topic
    entries = {e[0]: e for e in topic[4]}
    _, value, read_only, source, sensitive, synonyms = entries["retention.ms"]
    assert (value, read_only, source, sensitive) == (RETENTION, False, 1, False)
    assert synonyms[0] == ("retention.ms", RETENTION, 1), synonyms
    broker = results[(4, "3")]
    assert broker[0] == 0, broker
    assert {e[0]: e[1] for e in broker[4]}["broker.id"] == "3"
    assert (ACTIVE, "consumer") in listed and (SIMPLE, "") in listed, listed
    (resp,) = described
    (group,) = resp.groups
    assert group[0] == 0 and group[1] == ACTIVE and group[3] == "consumer", group
    assert group[2] in ("Stable", "CompletingRebalance", "PreparingRebalance"), group
