"""Per-topic replication settings against a real cluster, through real clients (issue #13).

The brokers' default is min.insync.replicas=1 and no unclean election. A topic created with
min.insync.replicas=3 (CreateTopics config, confluent-kafka's AdminClient) refuses acks=all
writes with NOT_ENOUGH_REPLICAS once a broker is down, while a topic on the default still
takes them; the value comes from ZooKeeper (`/config/topics/<t>`), so it holds after every
broker restarted and a new controller was elected. A topic with
unclean.leader.election.enable=true gets an unclean leader although the brokers' default
forbids it. Bad values are refused at creation with INVALID_CONFIG.

Every wait is bounded; the only addresses used are the cluster's 127.0.0.x.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.runtime.cluster import LocalCluster

from .clients_lib import create_topic
from .conftest import start_cluster

NOT_ENOUGH_REPLICAS = 19
INVALID_CONFIG = 40
STRICT = "strict-min-isr"
LENIENT = "default-min-isr"
UNCLEAN = "unclean-topic"


@pytest.fixture(scope="module")
def lenient_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("topic-config"),
        **{"min.insync.replicas": "1", "unclean.leader.election.enable": "false",
           "replica.lag.time.max.ms": "3000", "auto.leader.rebalance.enable": "false"},
    )
    try:
        yield c
    finally:
        c.stop()


def leaders(cluster: LocalCluster, topic: str) -> dict[int, dict[str, Any]]:
    """partition -> the leader's admin view of it, from the running brokers."""
    out: dict[int, dict[str, Any]] = {}
    for i in sorted(cluster.nodes):
        if not cluster.nodes[i].running:
            continue
        try:
            states = cluster.replica_states(i)["replicas"]
        except OSError:
            continue
        for r in states:
            if r["topic"] == topic and r["role"] == "leader":
                out[r["partition"]] = {**r, "broker": i}
    return out


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    for _ in range(int(timeout_s / 0.2) + 1):
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    pytest.fail(f"{what}: not reached after {timeout_s}s (last {last!r})")


def leader_with_isr(cluster: LocalCluster, topic: str, size: int) -> dict[str, Any] | None:
    found = leaders(cluster, topic).get(0)
    return found if found is not None and len(found["isr"]) == size else None


def produce_acks_all(bootstrap: str, topic: str, value: bytes) -> int:
    """One acks=all record with confluent-kafka (librdkafka), no retries: the delivery
    report's error code (0 when written)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                  "enable.idempotence": False, "message.timeout.ms": 15000,
                  "request.timeout.ms": 10000})
    result: list[int] = []

    def cb(err: Any, _msg: Any) -> None:
        result.append(0 if err is None else int(err.code()))

    p.produce(topic, value=value, partition=0, on_delivery=cb)
    left = p.flush(30)
    assert left == 0 and len(result) == 1, f"no delivery report ({left} left)"
    return result[0]


def produce_until(bootstrap: str, topic: str, want: int, timeout_s: float = 20.0) -> int:
    """Produce until the outcome is `want` (a client's metadata may lag a leader move)."""
    deadline = time.monotonic() + timeout_s
    code = -1
    for i in range(50):
        code = produce_acks_all(bootstrap, topic, f"v{i}".encode())
        if code == want or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    return code


@pytest.mark.timeout(240)
def test_topic_min_isr_is_obeyed_and_survives_restarts(lenient_cluster: LocalCluster) -> None:
    c = lenient_cluster
    assert create_topic("confluent", c.bootstrap, STRICT, partitions=1, rf=3,
                        configs={"min.insync.replicas": "3"}) == 0
    assert create_topic("confluent", c.bootstrap, LENIENT, partitions=1, rf=3) == 0
    strict = wait_for("strict topic with a full ISR", lambda: leader_with_isr(c, STRICT, 3))
    lenient = wait_for("default topic with a full ISR", lambda: leader_with_isr(c, LENIENT, 3))
    # the admin view shows what the partitions obey: the topic's value, else the broker's
    assert strict["min_insync_replicas"] == 3, strict
    assert strict["topic_config"] == {"min.insync.replicas": 3}, strict
    assert lenient["min_insync_replicas"] == 1 and lenient["topic_config"] == {}, lenient
    assert strict["unclean_leader_election_enable"] is False
    # every replica, not only the leader, knows the topic's value
    for i in sorted(c.nodes):
        for r in c.replica_states(i)["replicas"]:
            if r["topic"] == STRICT:
                assert r["min_insync_replicas"] == 3, (i, r)
    assert produce_acks_all(c.bootstrap, STRICT, b"full-isr") == 0

    def one_broker_down() -> None:
        layout = leaders(c, STRICT)[0]
        victim = next(b for b in sorted(c.nodes) if b != layout["broker"])
        c.stop_broker(victim)
        wait_for("strict ISR shrunk to 2", lambda: leader_with_isr(c, STRICT, 2))
        code = produce_until(c.bootstrap, STRICT, NOT_ENOUGH_REPLICAS)
        assert code == NOT_ENOUGH_REPLICAS, code
        wait_for("default ISR shrunk to 2", lambda: leader_with_isr(c, LENIENT, 2))
        assert produce_until(c.bootstrap, LENIENT, 0) == 0
        c.start_broker(victim)
        c.wait_ready()
        wait_for("strict ISR back to 3", lambda: leader_with_isr(c, STRICT, 3))

    one_broker_down()
    # Every broker restarts (so every process, the controller included, has only ZooKeeper
    # to learn the topic's value from), then the controller moves.
    for i in sorted(c.nodes):
        c.stop_broker(i)
    for i in sorted(c.nodes):
        c.start_broker(i)
    c.wait_ready()
    wait_for("strict topic back", lambda: leader_with_isr(c, STRICT, 3), 60)
    old_controller = c.controller()
    c.stop_broker(old_controller)
    wait_for("a new controller", lambda: _other_controller(c, old_controller))
    c.start_broker(old_controller)
    c.wait_ready()
    wait_for("strict ISR back to 3", lambda: leader_with_isr(c, STRICT, 3), 60)
    for i in sorted(c.nodes):
        for r in c.replica_states(i)["replicas"]:
            if r["topic"] == STRICT:
                assert r["min_insync_replicas"] == 3, (i, r)
    assert produce_acks_all(c.bootstrap, STRICT, b"after-restarts") == 0
    one_broker_down()


def _other_controller(c: LocalCluster, old: int) -> bool:
    try:
        cid = c.controller()
    except Exception:
        return False
    return cid not in (old, -1)


@pytest.mark.timeout(180)
def test_topic_unclean_election_overrides_the_broker_default(
    lenient_cluster: LocalCluster,
) -> None:
    """Replicas {a, b}: b stops (ISR {a}), then a stops (no leader, ISR {a}); b comes back.
    The brokers forbid unclean election, the topic allows it: b leads, ISR {b}."""
    c = lenient_cluster
    a, b = sorted(c.nodes)[:2]
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    topic = NewTopic(UNCLEAN, num_partitions=1, replica_assignment=[[a, b]],
                     config={"unclean.leader.election.enable": "true"})
    admin.create_topics([topic], operation_timeout=10, request_timeout=15)[UNCLEAN].result(30)
    first = wait_for("unclean topic ready", lambda: leader_with_isr(c, UNCLEAN, 2))
    assert first["broker"] == a and first["unclean_leader_election_enable"] is True, first
    assert first["min_insync_replicas"] == 1
    try:
        c.stop_broker(b)
        wait_for("ISR {a}", lambda: leader_with_isr(c, UNCLEAN, 1))
        c.stop_broker(a)
        c.start_broker(b)
        led = wait_for("b elected uncleanly", lambda: leader_with_isr(c, UNCLEAN, 1), 60)
        assert led["broker"] == b and led["isr"] == [b], led
    finally:
        for i in (a, b):
            c.start_broker(i)
        c.wait_ready()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_topic_min_isr_is_invalid_config(lenient_cluster: LocalCluster, value: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": lenient_cluster.bootstrap})
    name = f"bad-min-isr-{abs(hash(value)) % 1000}"
    fut = admin.create_topics([NewTopic(name, 1, 1, config={"min.insync.replicas": value})],
                              operation_timeout=10, request_timeout=15)[name]
    with pytest.raises(KafkaException) as info:
        fut.result(timeout=30)
    err = info.value.args[0]
    assert err.code() == INVALID_CONFIG, err
    assert "min.insync.replicas" in err.str(), err.str()


SEGMENTED = "small-segments"


@pytest.mark.timeout(120)
def test_topic_log_config_reaches_every_replica_controller_included(
        lenient_cluster: LocalCluster) -> None:
    """A topic's own log config (here `segment.bytes=16384`) rolls segments on every replica,
    the controller's own included. Found by review: the controller delivered its LeaderAndIsr
    to its own broker in process, without the ZooKeeper read of `/config/topics/<t>` a peer's
    request gets, so its replicas ran with the broker's default log config (one 1 GiB
    segment)."""
    from confluent_kafka import Producer

    c = lenient_cluster
    assert create_topic("confluent", c.bootstrap, SEGMENTED, 1, 3,
                        configs={"segment.bytes": "16384"}) == 0
    wait_for("a leader with 3 in-sync replicas",
             lambda: leader_with_isr(c, SEGMENTED, 3))
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
    for _ in range(80):  # 80 one-record batches of ~1 KiB: > 4 segments of 16 KiB
        p.produce(SEGMENTED, value=b"x" * 1000, partition=0)
        assert p.flush(15) == 0
    controller = c.controller()
    for b in c.nodes:
        def segments(b: int = b) -> list[str] | None:
            found = sorted(f.name for f in (c.base_dir / f"broker-{b}").rglob(
                f"{SEGMENTED}-0/*.log"))
            return found if len(found) >= 4 else None
        got = wait_for(f"broker {b} (controller {controller}) rolling 16 KiB segments",
                       segments, timeout_s=20)
        assert got[0] == "00000000000000000000.log"
