"""Group requests while a broker is still starting (issue #13).

`Broker.start` opens the listener before ZooKeeper and the group coordinator are up, so a client
can reach the broker while `Broker.groups` is still None. Such a request once failed its
connection (an AttributeError in the handler). Now every group API is answered as Kafka answers
while its coordinator is not active: COORDINATOR_NOT_AVAILABLE in every error field, and the
connection keeps serving. DescribeConfigs answers the broker's own configuration, and a topic's
(which needs ZooKeeper) with UNKNOWN_SERVER_ERROR rather than failing the connection. A Metadata
request that would auto-create a topic answers LEADER_NOT_AVAILABLE for it, CreateTopics and
DeleteTopics NOT_CONTROLLER for each topic: retriable, as Kafka answers.

The broker runs in-process with ZooKeeper "unreachable": `ZkAdapter.start` waits on an event the
test sets once it is done, then fails as an unreachable ZooKeeper does. No ZooKeeper is needed;
the only address is 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.runtime import zk as zkmod
from broker.runtime.server import Broker
from broker.wire import API_TABLE, ApiKey

from .wire_live_support import Client

pytestmark = pytest.mark.timeout(60)

COORDINATOR_NOT_AVAILABLE = 15
GROUP = "starting-g"

# Request data for every group API (superset of the fields of all versions).
GROUP_REQUESTS: dict[ApiKey, dict[str, Any]] = {
    ApiKey.FIND_COORDINATOR: {"key": GROUP, "key_type": 0},
    ApiKey.JOIN_GROUP: {"group_id": GROUP, "session_timeout": 10_000, "rebalance_timeout": 5_000,
                        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b"\x00"}]},
    ApiKey.SYNC_GROUP: {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocol_name": "range", "assignments": []},
    ApiKey.HEARTBEAT: {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                       "group_instance_id": None},
    ApiKey.LEAVE_GROUP: {"group_id": GROUP, "member_id": "m", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]},
    ApiKey.OFFSET_COMMIT: {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                           "member_id": "", "group_instance_id": None, "retention_time": -1,
                           "topics": [{"name": "t", "partitions": [{
                               "partition_index": 0, "committed_offset": 1,
                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
    ApiKey.OFFSET_FETCH: {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}],
                          "require_stable": False},
    ApiKey.DESCRIBE_GROUPS: {"groups": [GROUP, "other"], "include_authorized_operations": False},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
}


def error_codes(resp: Any) -> list[int]:
    """Every error_code in a decoded response, at any depth."""
    out = []
    if hasattr(resp, "__dataclass_fields__"):
        for name in resp.__dataclass_fields__:
            value = getattr(resp, name)
            if name == "error_code":
                out.append(int(getattr(value, "value", value)))
            else:
                out += error_codes(value)
    elif isinstance(resp, tuple):
        for item in resp:
            out += error_codes(item)
    return out


def window_checks(host: str, port: int) -> list[str]:
    """In the startup window: every group API at every version it is served at; then the
    same connection still answers ApiVersions. Returns what went wrong."""
    problems = []
    with Client(host, port) as c:
        for key, data in GROUP_REQUESTS.items():
            support = API_TABLE[key]
            for v in range(support.min_served, support.max_version + 1):
                resp = c.call(int(key), v, data)
                codes = error_codes(resp)
                if not codes or set(codes) != {COORDINATOR_NOT_AVAILABLE}:
                    problems.append(f"{key.name} v{v}: error codes {codes}: {resp}")
        # DescribeConfigs: the broker's own config is known; a topic's needs ZooKeeper
        cfg = c.call(32, 4, {"resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["broker.id"]}],
            "include_synonyms": False, "include_documentation": False})
        got = [(int(r.error_code), [(e.name, e.value) for e in r.configs]) for r in cfg.results]
        if got != [(-1, []), (0, [("broker.id", "1")])]:
            problems.append(f"DescribeConfigs while starting: {got}")
        # topic auto-creation, CreateTopics and DeleteTopics need ZooKeeper: retriable errors
        md = c.call(3, 9, {"topics": [{"name": "auto-t", "topic_id": None}],
                           "allow_auto_topic_creation": True,
                           "include_cluster_authorized_operations": False,
                           "include_topic_authorized_operations": False})
        if [(t.name, int(t.error_code)) for t in md.topics] != [("auto-t", 5)]:
            problems.append(f"Metadata auto-creating while starting: {md}")
        create, delete = API_TABLE[ApiKey.CREATE_TOPICS], API_TABLE[ApiKey.DELETE_TOPICS]
        for v in range(create.min_served, create.max_version + 1):
            ct = c.call(19, v, {"topics": [{"name": "new-t", "num_partitions": 1,
                                            "replication_factor": 1, "assignments": [],
                                            "configs": []}],
                                "timeout": 1000, "validate_only": False})
            if [int(t.error_code) for t in ct.topics] != [41]:  # NOT_CONTROLLER
                problems.append(f"CreateTopics v{v} while starting: {ct}")
        for v in range(delete.min_served, delete.max_version + 1):
            dt = c.call(20, v, {"topic_names": ["old-t"], "timeout": 1000})
            if [int(t.error_code) for t in dt.responses] != [41]:
                problems.append(f"DeleteTopics v{v} while starting: {dt}")
        versions = c.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        if int(versions.error_code) != 0:
            problems.append(f"ApiVersions after the group requests: {versions}")
    return problems


def test_group_requests_while_starting_get_coordinator_not_available(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def zk_start(self: Any) -> None:  # ZooKeeper "unreachable" until the test is done
        release.wait(30)
        raise zkmod.ZkUnavailable("test: ZooKeeper held back")

    monkeypatch.setattr(zkmod.ZkAdapter, "start", zk_start)
    config = BrokerConfig.from_properties({
        "broker.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": "127.0.0.1:1/unused", "log.dirs": str(tmp_path / "logs")})

    async def go() -> list[str]:
        broker = Broker(config)
        starting = asyncio.create_task(broker.start())
        try:
            for _ in range(500):  # until the listener is open (bounded: 5 s)
                if broker._server is not None or starting.done():
                    break
                await asyncio.sleep(0.01)
            assert broker._server is not None and not starting.done()
            assert broker.groups is None  # the window this test is about
            port = broker._server.sockets[0].getsockname()[1]
            return await asyncio.to_thread(window_checks, "127.0.0.1", port)
        finally:
            release.set()
            with pytest.raises(zkmod.ZkUnavailable):
                await asyncio.wait_for(starting, 30)
            await broker.stop(controlled=False)

    problems = asyncio.run(go())
    assert not problems, "\n".join(problems)
