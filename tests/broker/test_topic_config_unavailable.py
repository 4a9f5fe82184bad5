"""A broker never acts on a topic with the broker defaults in place of the topic's own config.

Found by review: when ZooKeeper could not give `/config/topics/<t>`, the LeaderAndIsr was
applied anyway with the broker-wide `min.insync.replicas`, so a topic demanding 3 in-sync
replicas could acknowledge acks=all writes with 1. Now the request is not applied and its
connection closed (the controller resends it, peers.py), and the log config read later
replaces the defaults that logs found on disk were opened with."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.runtime.node import Node
from broker.runtime.server import Broker, TopicConfigUnavailable
from broker.store.manager import LogManager
from core import events as ev
from core.types import TopicPartition


class FakeZkDriver:
    def __init__(self, answer: Callable[[], Any]) -> None:
        self.answer = answer

    async def call(self, fn: Callable[[], Any]) -> Any:
        return self.answer()


class FakeZk:
    def __init__(self, configs: dict[str, dict[str, str]] | None) -> None:
        self.configs = configs

    def topic_config(self, topic: str) -> dict[str, str]:
        if self.configs is None:
            raise ConnectionError("ZooKeeper connection lost")
        return self.configs.get(topic, {})


def broker_with(tmp: Path, configs: dict[str, dict[str, str]] | None) -> Broker:
    b = Broker(BrokerConfig.from_properties({
        "broker.id": "1", "zookeeper.connect": "127.0.0.1:1", "min.insync.replicas": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp)}))
    b.logs = LogManager([tmp])
    b.logs.get_or_create_log("t", 0)  # a log found on disk, opened with the broker defaults
    b.logs.topic_configs["t"] = b._topic_log_config("t", {})
    b.node = Node(1, b.config.protocol_config(), b.logs)
    zk = FakeZk(configs)
    b.zk = zk  # type: ignore[assignment]
    b.zkd = FakeZkDriver(lambda: None)  # type: ignore[assignment]

    async def call(fn: Callable[[], Any]) -> Any:
        return fn()
    b.zkd.call = call  # type: ignore[method-assign]
    return b


def test_unavailable_config_refuses_the_request(tmp_path: Path) -> None:
    b = broker_with(tmp_path, None)
    handled: list[object] = []
    b.node.handle = handled.append  # type: ignore[method-assign]
    with pytest.raises(TopicConfigUnavailable, match="config of topic t unavailable"):
        asyncio.run(b._ensure_topic_configs(["t"]))
    assert handled == [], "the core must not be told anything in place of the topic's config"
    assert "t" not in b._replication_loaded, "read again when the controller resends"


def test_available_config_reaches_the_core_and_the_open_logs(tmp_path: Path) -> None:
    b = broker_with(tmp_path, {"t": {"min.insync.replicas": "3", "cleanup.policy": "compact"}})
    handled: list[object] = []
    b.node.handle = handled.append  # type: ignore[method-assign]
    asyncio.run(b._ensure_topic_configs(["t"]))
    (e,) = handled
    assert isinstance(e, ev.TopicConfigChanged) and e.topic == "t"
    assert e.config.min_insync_replicas == 3
    lg = b.logs.get_log("t", 0)  # type: ignore[union-attr]
    assert lg is not None and lg.config.compact, "the topic's log config replaces the default"
    # A deleted topic is forgotten: created again, it is read anew.
    b.logs.delete_log("t", 0)
    b._on_partition_deleted(TopicPartition("t", 0))
    assert "t" not in b._replication_loaded and "t" not in b.logs.topic_configs
