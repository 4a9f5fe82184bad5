"""Toxiproxy in front of a broker (`proxies=True`): clients go through the proxy (the broker
advertises it), and toxics added through the Toxiproxy API change the link."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from broker.runtime.cluster import ClusterError, probe_metadata
from harness.runtime.existing import ExistingClusterRuntime
from harness.runtime.local import LocalRuntime
from tests.runtime_local.conftest import FAST, require_zookeeper
from tests.runtime_local.helpers import create_topic, produce


def _timed_probe(host: str, port: int) -> float:
    t = time.monotonic()
    probe_metadata(host, port, timeout_s=10)
    return time.monotonic() - t


def test_clients_and_toxics_through_the_proxy(tmp_path: Path) -> None:
    require_zookeeper()
    with LocalRuntime(tmp_path / "p", 1, {**FAST, "min.insync.replicas": "1"},
                      proxies=True) as rt:
        assert isinstance(rt, LocalRuntime) and rt.links is not None
        host, port_s = rt.bootstrap.split(":")
        port = int(port_s)
        assert host == "127.0.0.11" and port == rt.proxy_ports[1] != rt.cluster.nodes[1].port
        admin = KafkaAdminClient(bootstrap_servers=rt.bootstrap, request_timeout_ms=10000)
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [(host, port)]  # advertised proxy

        create_topic(rt, "tox-t", rf=1)
        produce(rt, "tox-t", 10)
        consumer = KafkaConsumer(bootstrap_servers=rt.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        try:
            tp = TopicPartition("tox-t", 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got = [m.value for m in consumer]
        finally:
            consumer.close()
        assert len(got) == 10 and got[0].startswith(b"000000-")

        ex = ExistingClusterRuntime(rt.bootstrap)
        assert ex.nodes == ("n1",) and ex.leader_of("tox-t", 0) == "n1"
        assert ex.controller() == "n1"

        added = rt.add_toxic("n1", "latency", {"latency": 1000})
        saved = (APIConsumer.host, APIConsumer.port)
        try:
            assert rt.links.server is not None
            client = Toxiproxy()
            client.update_api_consumer(rt.links.server.host, rt.links.server.port)
            proxy = client.get_proxy("n1")
            assert proxy is not None and proxy.listen == f"{host}:{port}"
            assert added["toxic"] in proxy.toxics()
        finally:
            APIConsumer.host, APIConsumer.port = saved
        assert _timed_probe(host, port) >= 1.0
        assert rt.remove_toxics()["removed"] == {"n1": [added["toxic"]]}
        assert _timed_probe(host, port) < 1.0

        rt.add_toxic("n1", "reset_peer", {"timeout": 0})
        with pytest.raises((OSError, ClusterError)):
            probe_metadata(host, port, timeout_s=5)
        rt.remove_toxics("n1")
        probe_metadata(host, port, timeout_s=10)
    assert rt.links.server is None
