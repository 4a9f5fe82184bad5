"""Topic deletion, quotas and the admin view on a live cluster (its own: quotas are low)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kio.schema.produce.v7 import request as produce_req
from kio.static.primitive import i16, i32

from broker.runtime.cluster import LocalCluster
from broker.store.batch import Record, build_batch
from broker.wire import decode_response, encode_request

from .conftest import start_cluster

QUOTA = 200_000  # bytes/s per client id


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("quota"), **{"quota.producer.default": str(QUOTA)})
    try:
        yield c
    finally:
        c.stop()


def _create(bootstrap: str, topic: str, partitions: int = 1, rf: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(30)


def _leader(c: LocalCluster, topic: str) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for i in sorted(c.nodes):
            for r in c.replica_states(i)["replicas"]:
                if r["topic"] == topic and r["role"] == "leader":
                    return i
        time.sleep(0.1)
    raise AssertionError(f"no leader for {topic}")


def _produce_raw(host: str, port: int, topic: str, payload: bytes, n: int) -> list[int]:
    """n Produce v7 requests (acks=1, one batch each) on one connection; their throttle times."""
    throttles = []
    with socket.create_connection((host, port), timeout=10) as s:
        for i in range(n):
            records = build_batch([Record(0, int(time.time() * 1000), b"k", payload)],
                                  base_offset=0)
            body = produce_req.ProduceRequest(
                transactional_id=None, acks=i16(1), timeout=_ms(5000),
                topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(
                    produce_req.PartitionProduceData(index=i32(0), records=records),)),))
            s.sendall(encode_request(body, i + 1, "quota-client"))
            (size,) = struct.unpack(">i", _recv(s, 4))
            resp = decode_response(_recv(s, size), 0, 7)
            assert hasattr(resp, "body"), resp
            part = resp.body.responses[0].partition_responses[0]
            assert int(part.error_code.value) == 0
            throttles.append(int(resp.body.throttle_time.total_seconds() * 1000))
    return throttles


def _ms(ms: int) -> object:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def _recv(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


@pytest.mark.timeout(120)
def test_produce_quota_throttles_and_mutes(quota_cluster: LocalCluster) -> None:
    _create(quota_cluster.bootstrap, "quota-t")
    leader = quota_cluster.nodes[_leader(quota_cluster, "quota-t")]
    start = time.monotonic()
    throttles = _produce_raw(leader.host, leader.port, "quota-t", b"x" * 100_000, 40)
    elapsed = time.monotonic() - start
    # 4 MB at a 200 kB/s quota. Kafka measures the rate over at least (samples - 1) windows
    # (10 s here), so throttling starts once more than ~2 MB went through; from then on the
    # broker reports throttle time and mutes the channel, and the client slows down.
    assert max(throttles) > 0, throttles
    assert throttles[0] == 0  # within quota at first
    assert elapsed > sum(throttles[:-1]) / 1000.0 * 0.9, (elapsed, throttles)


@pytest.mark.timeout(120)
def test_delete_topic_removes_it_everywhere(quota_cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient

    _create(quota_cluster.bootstrap, "doomed", partitions=2)
    admin = AdminClient({"bootstrap.servers": quota_cluster.bootstrap})
    # Metadata caches of the other brokers follow the controller's UpdateMetadata (as Kafka)
    deadline = time.monotonic() + 20
    while "doomed" not in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "created topic never appeared in Metadata"
        time.sleep(0.1)
    for f in admin.delete_topics(["doomed"]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hosted = [r for i in sorted(quota_cluster.nodes)
                  for r in quota_cluster.replica_states(i)["replicas"] if r["topic"] == "doomed"]
        dirs = [p for b in quota_cluster.nodes.values() for p in b.data_dir.glob("doomed-*")]
        if not hosted and not dirs and "doomed" not in admin.list_topics(timeout=10).topics:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"topic still present: {hosted} {dirs}")
    # the name is free again
    _create(quota_cluster.bootstrap, "doomed", partitions=1)


def test_admin_view_names_roles_epochs_and_offsets(quota_cluster: LocalCluster) -> None:
    _create(quota_cluster.bootstrap, "viewed")
    leader = _leader(quota_cluster, "viewed")
    view = quota_cluster.replica_states(leader)
    assert view["broker_id"] == leader and view["broker_epoch"] > 0
    r = next(r for r in view["replicas"] if r["topic"] == "viewed")
    assert r["role"] == "leader" and r["leader"] == leader and r["leader_epoch"] >= 0
    assert r["high_watermark"] <= r["log_end_offset"] == r["store_log_end_offset"]
    assert sorted(r["isr"]) == sorted(r["replicas"]) and len(r["replicas"]) == 3
