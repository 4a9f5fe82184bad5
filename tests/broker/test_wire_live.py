"""The Kafka wire protocol against live brokers, over plain sockets.

1. Every (API, version) pair the broker advertises in ApiVersions gets a valid request built
   with kio; the response must decode and carry a sensible error code. Produce v0-2 (advertised
   for librdkafka's sake, not served) must close the connection without an answer, as Kafka 4.
   The ZooKeeper-era inter-broker APIs, from a stale controller epoch, are refused with
   STALE_CONTROLLER_EPOCH and change nothing.
2. Malformed input never takes a broker down: garbage, bad size prefixes, truncated frames and
   resets, unknown API keys, garbage bodies, ApiVersions above the maximum, and a seeded fuzz
   loop of mutated valid frames. Afterwards every broker still runs (same PID), answers
   Metadata, produces and consumes, and its log holds no traceback.

One 3-broker cluster for the module, with a small socket.request.max.bytes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import random
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.runtime.cluster import LocalCluster
from broker.wire import API_TABLE, ApiKey, DecodedResponse, decode_response, encode_request
from broker.wire import interbroker as ib
from core.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from core.types import LiveBroker, PartitionInfo
from core.types import TopicPartition as CoreTp

from .wire_live_support import (
    Client,
    PeerClosed,
    client_for,
    closed_by_peer,
    connect,
    discard_cluster,
    record_batch,
    recv_frame,
    request_body,
    reset_close,
    start_cluster_patiently,
)

pytestmark = pytest.mark.timeout(150)

MAX_REQUEST = 2 * 1024 * 1024  # socket.request.max.bytes of this module's cluster
TOPIC = "wire"
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
STALE_CONTROLLER_EPOCH = 11
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
MEMBER_ID_REQUIRED = 79
FUZZ_CASES = 2000
FUZZ_TIME_S = 60.0
FUZZ_SEED = 20260611
FUZZ_WORKERS = 8

ADVERTISED = [(s.api_key, v) for s in API_TABLE for v in range(s.min_version, s.max_version + 1)]


def md_data(topic: str) -> dict[str, Any]:
    """Metadata request data for one topic, without auto-creation (any version)."""
    return {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}


def code(x: Any) -> int:
    return int(getattr(x, "value", x))


# ---------------------------------------------------------------------------------------------
# the cluster and what the sweep needs from it


class Env:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.ids = sorted(cluster.nodes)
        self._coordinators: dict[str, int] = {}

    def client(self, broker_id: int) -> Client:
        return client_for(self.cluster, broker_id)

    def partition(self, topic: str = TOPIC, broker_id: int | None = None) -> Any:
        """Metadata v9 of `topic` partition 0 (leader, leader epoch), from `broker_id`."""
        with self.client(self.ids[0] if broker_id is None else broker_id) as c:
            body = c.call(3, 9, md_data(topic))
        (t,) = body.topics
        assert code(t.error_code) == NONE, t
        return t.partitions[0]

    def leader(self, topic: str = TOPIC) -> int:
        return int(self.partition(topic).leader_id)

    def coordinator(self, group: str) -> int:
        if group not in self._coordinators:
            deadline = time.monotonic() + 20
            while True:
                with self.client(self.ids[0]) as c:
                    r = c.call(10, 3, {"key": group, "key_type": 0})
                if code(r.error_code) == NONE:
                    self._coordinators[group] = int(r.node_id)
                    break
                assert time.monotonic() < deadline, f"no coordinator for {group}: {r}"
                time.sleep(0.2)
        return self._coordinators[group]

    def group_client(self, group: str) -> Client:
        return self.client(self.coordinator(group))

    def produce_raw(self, values: list[bytes]) -> int:
        with self.client(self.leader()) as c:
            r = c.call(0, 7, {"transactional_id": None, "acks": -1, "timeout": 10_000,
                              "topic_data": [{"name": TOPIC, "partition_data": [
                                  {"index": 0, "records": record_batch(values)}]}]})
        (p,) = r.responses[0].partition_responses
        assert code(p.error_code) == NONE, p
        return int(p.base_offset)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    overrides = {"socket.request.max.bytes": str(MAX_REQUEST)}
    c = start_cluster_patiently(tmp_path_factory.mktemp("wire"), 3, **overrides)
    try:
        e = Env(c)
        with e.client(1) as cl:
            r = cl.call(19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                            "replication_factor": 3, "assignments": [],
                                            "configs": []}],
                                "timeout": 15_000, "validate_only": False})
        assert code(r.topics[0].error_code) == NONE, r
        wait_for(lambda: full_isr(c, TOPIC), 20, "ISR of the wire topic")
        e.produce_raw([b"seed-0", b"seed-1", b"seed-2"])
        yield e
    finally:
        discard_cluster(c)


def wait_for(cond: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except (OSError, AssertionError, PeerClosed) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}: {last!r}")


def full_isr(c: LocalCluster, topic: str) -> bool:
    for i in sorted(c.nodes):
        for r in c.replica_states(i)["replicas"]:
            if r["topic"] == topic and r["role"] == "leader":
                return len(r["isr"]) == len(r["replicas"])
    return False


# ---------------------------------------------------------------------------------------------
# 1. every advertised (API, version)


def _legacy_produce_frame(version: int, cid: int) -> bytes:
    """Produce v0-v2 with a message set of magic 0 (v0) or 1 (v1, v2), encoded by hand:
    kio has no codec for these versions."""
    magic = 0 if version == 0 else 1
    key, value = b"k", b"legacy"
    inner = struct.pack(">bb", magic, 0)
    if magic == 1:
        inner += struct.pack(">q", int(time.time() * 1000))
    inner += struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(inner)) + inner
    message_set = struct.pack(">qi", 0, len(msg)) + msg
    client = b"wire-live"
    head = struct.pack(">hhih", 0, version, cid, len(client)) + client
    body = struct.pack(">hi", -1, 5000) + struct.pack(">i", 1)
    body += struct.pack(">h", len(TOPIC)) + TOPIC.encode() + struct.pack(">i", 1)
    body += struct.pack(">ii", 0, len(message_set)) + message_set
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def _join(env: Env, group: str, sync: bool) -> tuple[Client, str, int]:
    """A one-member group at JoinGroup v5 (MEMBER_ID_REQUIRED, then the real join), synced
    by its leader when `sync`. Returns the coordinator connection, member id, generation."""
    c = env.group_client(group)
    data = {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 5_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01sub"}]}
    r = c.call(11, 5, data)
    assert code(r.error_code) == MEMBER_ID_REQUIRED and r.member_id, r
    r = c.call(11, 5, {**data, "member_id": r.member_id})
    assert code(r.error_code) == NONE, r
    member, gen = r.member_id, int(r.generation_id)
    if sync:
        s = c.call(14, 3, {"group_id": group, "generation_id": gen, "member_id": member,
                           "group_instance_id": None,
                           "assignments": [{"member_id": member, "assignment": b"asg"}]})
        assert code(s.error_code) == NONE, s
    return c, member, gen


def _check_produce(env: Env, v: int) -> None:
    leader = env.leader()
    if v < API_TABLE[ApiKey.PRODUCE].min_served:
        with env.client(leader) as c:
            c.send_raw(_legacy_produce_frame(v, 7))
            assert closed_by_peer(c.sock), f"Produce v{v} must close the connection"
        return
    with env.client(leader) as c:
        r = c.call(0, v, {"transactional_id": None, "acks": -1, "timeout": 10_000,
                          "topic_data": [{"name": TOPIC, "partition_data": [
                              {"index": 0, "records": record_batch([f"p{v}".encode()])}]}]})
    (t,) = r.responses
    (p,) = t.partition_responses
    assert t.name == TOPIC and int(p.index) == 0
    assert code(p.error_code) == NONE and int(p.base_offset) >= 3, p
    # a broker that does not lead the partition says so
    other = next(i for i in env.ids if i != leader)
    with env.client(other) as c:
        r = c.call(0, v, {"transactional_id": None, "acks": 1, "timeout": 5_000,
                          "topic_data": [{"name": TOPIC, "partition_data": [
                              {"index": 0, "records": record_batch([b"x"])}]}]})
    assert code(r.responses[0].partition_responses[0].error_code) == 6  # NOT_LEADER_OR_FOLLOWER


def _check_fetch(env: Env, v: int) -> None:
    with env.client(env.leader()) as c:
        r = c.call(1, v, {
            "cluster_id": None, "replica_id": -1, "max_wait": 100, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
    if v >= 7:
        assert code(r.error_code) == NONE, r
    (t,) = r.responses
    (p,) = t.partitions
    assert t.topic == TOPIC and int(p.partition_index) == 0
    assert code(p.error_code) == NONE and int(p.high_watermark) >= 3, p
    assert p.records and b"seed-0" in bytes(p.records)
    # a replica fetch (replica_id >= 0) at this version, from a broker id that is no replica
    with env.client(env.leader()) as c:
        r = c.call(1, v, {
            "cluster_id": None, "replica_id": 99, "max_wait": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
    assert code(r.responses[0].partitions[0].error_code) != NONE, r
    assert_no_traceback(env, env.leader())


def _check_list_offsets(env: Env, v: int) -> None:
    hw = None
    for ts in (-2, -1):
        with env.client(env.leader()) as c:
            r = c.call(2, v, {"replica_id": -1, "isolation_level": 0, "topics": [{
                "name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                               "timestamp": ts}]}]})
        (p,) = r.topics[0].partitions
        assert code(p.error_code) == NONE, p
        if ts == -2:
            assert int(p.offset) == 0, p
        else:
            hw = int(p.offset)
    assert hw is not None and hw >= 3


def _check_metadata(env: Env, v: int) -> None:
    broker_id = env.ids[v % len(env.ids)]
    with env.client(broker_id) as c:
        r = c.call(3, v, {"topics": [{"name": TOPIC, "topic_id": None}],
                          "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False})
    assert sorted(int(b.node_id) for b in r.brokers) == env.ids
    for b in r.brokers:
        node = env.cluster.nodes[int(b.node_id)]
        assert (b.host, int(b.port)) == (node.host, node.port)
    if v >= 1:
        assert int(r.controller_id) in env.ids
    (t,) = r.topics
    assert t.name == TOPIC and code(t.error_code) == NONE, t
    (p,) = t.partitions
    assert code(p.error_code) == NONE and int(p.leader_id) in env.ids, p
    assert sorted(int(x) for x in p.replica_nodes) == env.ids


def _check_offset_commit(env: Env, v: int) -> None:
    group = f"wire-commit-v{v}"
    with env.group_client(group) as c:
        r = c.call(8, v, {"group_id": group, "generation_id_or_member_epoch": -1,
                          "member_id": "", "group_instance_id": None, "retention_time": -1,
                          "topics": [{"name": TOPIC, "partitions": [{
                              "partition_index": 0, "committed_offset": 100 + v,
                              "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        (p,) = r.topics[0].partitions
        assert code(p.error_code) == NONE, p
        f = c.call(9, 7, {"group_id": group, "topics": [{"name": TOPIC,
                                                         "partition_indexes": [0]}],
                          "require_stable": False})
    assert int(f.topics[0].partitions[0].committed_offset) == 100 + v, f


def _check_offset_fetch(env: Env, v: int) -> None:
    group = f"wire-fetch-v{v}"
    with env.group_client(group) as c:
        r = c.call(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                          "member_id": "", "group_instance_id": None,
                          "topics": [{"name": TOPIC, "partitions": [{
                              "partition_index": 0, "committed_offset": 7,
                              "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        assert code(r.topics[0].partitions[0].error_code) == NONE, r
        f = c.call(9, v, {"group_id": group, "topics": [{"name": TOPIC,
                                                         "partition_indexes": [0, 1]}],
                          "require_stable": False})
    if v >= 2:
        assert code(f.error_code) == NONE, f
    (t,) = f.topics
    parts = {int(p.partition_index): p for p in t.partitions}
    assert code(parts[0].error_code) == NONE and int(parts[0].committed_offset) == 7, parts
    assert int(parts[1].committed_offset) == -1, parts  # never committed


def _check_find_coordinator(env: Env, v: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        with env.client(env.ids[v % len(env.ids)]) as c:
            r = c.call(10, v, {"key": "wire-g", "key_type": 0})
        if code(r.error_code) != 15 or time.monotonic() > deadline:  # COORDINATOR_NOT_AVAILABLE
            break
        time.sleep(0.2)
    assert code(r.error_code) == NONE, r
    node = env.cluster.nodes[int(r.node_id)]
    assert (r.host, int(r.port)) == (node.host, node.port)


def _check_join_group(env: Env, v: int) -> None:
    group = f"wire-join-v{v}"
    data = {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 5_000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01sub"}]}
    with env.group_client(group) as c:
        r = c.call(11, v, data)
        if v >= 4:
            assert code(r.error_code) == MEMBER_ID_REQUIRED and r.member_id, r
            r = c.call(11, v, {**data, "member_id": r.member_id})
        assert code(r.error_code) == NONE, r
        assert int(r.generation_id) >= 1 and r.leader == r.member_id
        assert [m.member_id for m in r.members] == [r.member_id]
        # an unknown member rejoining is refused
        bad = c.call(11, v, {**data, "member_id": "nobody"})
        assert code(bad.error_code) == 25, bad  # UNKNOWN_MEMBER_ID


def _check_heartbeat(env: Env, v: int) -> None:
    c, member, gen = _join(env, f"wire-hb-v{v}", sync=True)
    with c:
        base = {"group_id": f"wire-hb-v{v}", "group_instance_id": None}
        r = c.call(12, v, {**base, "generation_id": gen, "member_id": member})
        assert code(r.error_code) == NONE, r
        r = c.call(12, v, {**base, "generation_id": gen + 5, "member_id": member})
        assert code(r.error_code) == 22, r  # ILLEGAL_GENERATION
        r = c.call(12, v, {**base, "generation_id": gen, "member_id": "nobody"})
        assert code(r.error_code) == 25, r  # UNKNOWN_MEMBER_ID


def _check_leave_group(env: Env, v: int) -> None:
    group = f"wire-leave-v{v}"
    c, member, _ = _join(env, group, sync=True)
    with c:
        r = c.call(13, v, {"group_id": group, "member_id": member, "members": [
            {"member_id": member, "group_instance_id": None, "reason": "bye"}]})
        assert code(r.error_code) == NONE, r
        if v >= 3:
            assert [code(m.error_code) for m in r.members] == [NONE], r


def _check_sync_group(env: Env, v: int) -> None:
    group = f"wire-sync-v{v}"
    c, member, gen = _join(env, group, sync=False)
    with c:
        r = c.call(14, v, {"group_id": group, "generation_id": gen, "member_id": member,
                           "group_instance_id": None, "protocol_type": "consumer",
                           "protocol_name": "range",
                           "assignments": [{"member_id": member, "assignment": b"asg"}]})
    assert code(r.error_code) == NONE and bytes(r.assignment) == b"asg", r


def _check_api_versions(env: Env, v: int) -> None:
    with env.client(env.ids[v % len(env.ids)]) as c:
        r = c.call(18, v, {"client_software_name": "wire-live",
                           "client_software_version": "1.0"})
    assert code(r.error_code) == NONE, r
    got = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert got == {int(s.api_key): (s.min_version, s.max_version) for s in API_TABLE}


def _create(c: Client, v: int, name: str) -> Any:
    r = c.call(19, v, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 3,
                                   "assignments": [], "configs": []}],
                       "timeout": 15_000, "validate_only": False})
    (t,) = r.topics
    assert t.name == name
    return t


def _check_create_topics(env: Env, v: int) -> None:
    name = f"wire-ct-v{v}"
    broker_id = env.ids[v % len(env.ids)]
    with env.client(broker_id) as c:
        t = _create(c, v, name)
        assert code(t.error_code) == NONE, t
        t = _create(c, v, name)
        assert code(t.error_code) == TOPIC_ALREADY_EXISTS, t
    # CreateTopics answers once the receiving broker knows a leader (Kafka's
    # DelayedCreatePartitions); the others learn it asynchronously
    assert int(env.partition(name, broker_id).leader_id) in env.ids


def _check_delete_topics(env: Env, v: int) -> None:
    name = f"wire-dt-v{v}"
    with env.client(env.ids[v % len(env.ids)]) as c:
        assert code(_create(c, 5, name).error_code) == NONE
        r = c.call(20, v, {"topic_names": [name, "wire-never-existed"], "timeout": 15_000})
        codes = {x.name: code(x.error_code) for x in r.responses}
        assert codes == {name: NONE, "wire-never-existed": UNKNOWN_TOPIC_OR_PARTITION}, r
        m = c.call(3, 9, md_data(name))
    assert code(m.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION, m


def _check_init_producer_id(env: Env, v: int) -> None:
    with env.client(env.ids[v % len(env.ids)]) as c:
        r = c.call(22, v, {"transactional_id": None, "transaction_timeout": 60_000,
                           "producer_id": -1, "producer_epoch": -1})
    assert code(r.error_code) == NONE and int(r.producer_id) >= 0, r
    assert int(r.producer_epoch) == 0, r


def _check_offset_for_leader_epoch(env: Env, v: int) -> None:
    p = env.partition()
    with env.client(int(p.leader_id)) as c:
        hw = c.call(2, 1, {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]}).topics[0].partitions[0].offset
        r = c.call(23, v, {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": int(p.leader_epoch),
             "leader_epoch": int(p.leader_epoch)}]}]})
    (x,) = r.topics[0].partitions
    assert code(x.error_code) == NONE, x
    assert int(x.leader_epoch) == int(p.leader_epoch) and int(x.end_offset) >= int(hw), x


GROUP_ID_NOT_FOUND = 69
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE (no authorizer)


def _not_coordinator_of(env: Env, group: str) -> int:
    return next(i for i in env.ids if i != env.coordinator(group))


def _check_describe_groups(env: Env, v: int) -> None:
    group, nobody = f"wire-dg-v{v}", f"wire-dg-nobody-v{v}"
    c, member, _ = _join(env, group, sync=True)
    with c:
        r = c.call(15, v, {"groups": [group], "include_authorized_operations": True})
    (g,) = r.groups
    assert (code(g.error_code), g.group_id, g.group_state) == (NONE, group, "Stable"), g
    assert (g.protocol_type, g.protocol_data) == ("consumer", "range"), g
    (m,) = g.members
    assert (m.member_id, m.client_id, m.client_host) == (member, "wire-live", "/127.0.0.1"), m
    assert (bytes(m.member_metadata), bytes(m.member_assignment)) == (b"\x00\x01sub", b"asg")
    if v >= 3:
        assert int(g.authorized_operations) == GROUP_OPERATIONS, g
    # a group its coordinator does not have: Dead before v6, GROUP_ID_NOT_FOUND from v6
    with env.group_client(nobody) as c:
        r = c.call(15, v, {"groups": [nobody], "include_authorized_operations": False})
    (g,) = r.groups
    if v >= 6:
        assert code(g.error_code) == GROUP_ID_NOT_FOUND, g
        assert g.error_message == f"Group {nobody} not found.", g
    else:
        assert (code(g.error_code), g.group_state, g.members) == (NONE, "Dead", ()), g
    if v >= 3:
        assert int(g.authorized_operations) == -(2**31), g  # not asked for
    # asked at a broker that does not coordinate the group
    with env.client(_not_coordinator_of(env, group)) as c:
        r = c.call(15, v, {"groups": [group], "include_authorized_operations": False})
    (g,) = r.groups
    assert (code(g.error_code), g.group_state, g.members) == (NOT_COORDINATOR, "", ()), g


def _check_list_groups(env: Env, v: int) -> None:
    group = f"wire-lg-v{v}"
    c, _, _ = _join(env, group, sync=True)

    def listed(cl: Client, states: list[str], types: list[str]) -> dict[str, Any]:
        r = cl.call(16, v, {"states_filter": states, "types_filter": types})
        assert code(r.error_code) == NONE, r
        return {g.group_id: g for g in r.groups}

    with c:
        got = listed(c, [], [])
        assert got[group].protocol_type == "consumer", got
        if v >= 4:
            assert got[group].group_state == "Stable", got
            assert group not in listed(c, ["Empty"], [])
            assert group in listed(c, ["stable", "Empty"], [])
        if v >= 5:
            assert got[group].group_type == "classic", got
            assert listed(c, [], ["consumer"]) == {}  # no KIP-848 groups
            assert group in listed(c, [], ["Classic"])
    with env.client(_not_coordinator_of(env, group)) as c:
        assert group not in listed(c, [], [])


CFG_TOPIC = "wire-cfg"


def _cfg_topic(env: Env) -> str:
    """A topic with a retention.ms override (created once)."""
    if not getattr(env, "cfg_topic_made", False):
        with env.client(env.ids[0]) as c:
            r = c.call(19, 5, {"topics": [{"name": CFG_TOPIC, "num_partitions": 1,
                                           "replication_factor": 3, "assignments": [],
                                           "configs": [{"name": "retention.ms",
                                                        "value": "3600000"}]}],
                               "timeout": 15_000, "validate_only": False})
        assert code(r.topics[0].error_code) in (NONE, TOPIC_ALREADY_EXISTS), r
        env.cfg_topic_made = True  # type: ignore[attr-defined]
    return CFG_TOPIC


def _check_describe_configs(env: Env, v: int) -> None:
    topic = _cfg_topic(env)
    broker_id = env.ids[v % len(env.ids)]
    other = next(i for i in env.ids if i != broker_id)
    resources = [
        (2, topic, None),
        (2, topic, ["segment.bytes", "retention.ms", "no.such.key"]),
        (2, "wire-no-such-topic", None),
        (2, "bad/name", None),
        (4, str(broker_id), ["min.insync.replicas", "num.partitions"]),
        (4, str(other), None),
        (4, "", None),
        (4, "one", None),
        (8, str(broker_id), None),  # BROKER_LOGGER: none here
    ]
    with env.client(broker_id) as c:
        r = c.call(32, v, {"resources": [{"resource_type": t, "resource_name": n,
                                          "configuration_keys": k} for t, n, k in resources],
                           "include_synonyms": True, "include_documentation": False})
        plain = c.call(32, v, {"resources": [{"resource_type": 2, "resource_name": topic,
                                              "configuration_keys": ["retention.ms"]}],
                               "include_synonyms": False, "include_documentation": False})
    assert [(int(x.resource_type), x.resource_name) for x in r.results] == \
        [(t, n) for t, n, _ in resources]
    assert [code(x.error_code) for x in r.results] == [
        NONE, NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, NONE, INVALID_REQUEST,
        NONE, INVALID_REQUEST, INVALID_REQUEST], r.results
    every = {e.name: e for e in r.results[0].configs}
    ret = every["retention.ms"]
    assert (ret.value, int(ret.config_source), ret.read_only, ret.is_sensitive) == \
        ("3600000", 1, False, False), ret
    assert [(s.name, s.value, int(s.source)) for s in ret.synonyms][:1] == \
        [("retention.ms", "3600000", 1)], ret
    seg = every["segment.bytes"]
    assert (seg.value, int(seg.config_source)) == (str(1 << 30), 5), seg
    assert [e.name for e in r.results[1].configs] == ["retention.ms", "segment.bytes"]
    mir = {e.name: e for e in r.results[4].configs}
    assert sorted(mir) == ["min.insync.replicas", "num.partitions"]
    m = mir["min.insync.replicas"]
    assert (m.value, int(m.config_source), m.read_only) == ("2", 4, True), m
    assert [(s.name, s.value, int(s.source)) for s in m.synonyms] == [
        ("min.insync.replicas", "2", 4), ("min.insync.replicas", "1", 5)], m
    assert (mir["num.partitions"].value, int(mir["num.partitions"].config_source)) == ("1", 5)
    assert r.results[6].configs == ()
    for x in r.results[2:4] + r.results[5:6] + r.results[7:]:
        assert x.error_message and x.configs == (), x
    if v >= 3:
        assert int(ret.config_type) == 5 and int(m.config_type) == 3  # LONG, INT
    (p,) = plain.results[0].configs
    assert (p.name, p.value, p.synonyms) == ("retention.ms", "3600000", ()), p


CHECKS = {
    ApiKey.PRODUCE: _check_produce,
    ApiKey.FETCH: _check_fetch,
    ApiKey.LIST_OFFSETS: _check_list_offsets,
    ApiKey.METADATA: _check_metadata,
    ApiKey.OFFSET_COMMIT: _check_offset_commit,
    ApiKey.OFFSET_FETCH: _check_offset_fetch,
    ApiKey.FIND_COORDINATOR: _check_find_coordinator,
    ApiKey.JOIN_GROUP: _check_join_group,
    ApiKey.HEARTBEAT: _check_heartbeat,
    ApiKey.LEAVE_GROUP: _check_leave_group,
    ApiKey.SYNC_GROUP: _check_sync_group,
    ApiKey.API_VERSIONS: _check_api_versions,
    ApiKey.CREATE_TOPICS: _check_create_topics,
    ApiKey.DELETE_TOPICS: _check_delete_topics,
    ApiKey.INIT_PRODUCER_ID: _check_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _check_offset_for_leader_epoch,
    ApiKey.DESCRIBE_GROUPS: _check_describe_groups,
    ApiKey.LIST_GROUPS: _check_list_groups,
    ApiKey.DESCRIBE_CONFIGS: _check_describe_configs,
}


def test_every_advertised_api_has_a_check() -> None:
    assert set(CHECKS) == {s.api_key for s in API_TABLE}


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED,
                         ids=[f"{k.name}-v{v}" for k, v in ADVERTISED])
def test_every_advertised_version_answers(env: Env, api_key: ApiKey, version: int) -> None:
    CHECKS[api_key](env, version)


# ---------------------------------------------------------------------------------------------
# inter-broker APIs from a stale controller


def _interbroker_call(env: Env, broker_id: int, frame: bytes, api_key: int) -> Any:
    with env.client(broker_id) as c:
        c.send_raw(frame)
        resp = ib.decode_interbroker_response(recv_frame(c.sock), api_key)
    assert isinstance(resp, ib.InterbrokerResponse), resp
    return resp


def test_stale_controller_epoch_is_refused_without_harm(env: Env) -> None:
    c = env.cluster
    leader = env.leader()
    follower = next(i for i in env.ids if i != leader)
    view = c.replica_states(follower)
    epoch = int(view["controller_epoch"])
    assert epoch >= 1
    before = next(r for r in view["replicas"] if r["topic"] == TOPIC)
    tp = CoreTp(TOPIC, 0)
    replicas = tuple(before["replicas"])
    stale = epoch - 1
    zombie = next(i for i in env.ids if i != view["controller_id"])
    broker_epoch = int(view["broker_epoch"])
    # "you lead now", with a leader epoch far ahead, from a zombie controller
    lai = LeaderAndIsrRequest(zombie, stale, broker_epoch, (PartitionInfo(
        tp, follower, before["leader_epoch"] + 10, (follower,), 99, replicas),))
    b = c.nodes[follower]
    r = _interbroker_call(env, follower, ib.encode_leader_and_isr(
        lai, [ib.Endpoint(follower, b.host, b.port)], 41), 4)
    assert (r.correlation_id, r.error) == (41, STALE_CONTROLLER_EPOCH), r
    # "delete your replica"
    sr = StopReplicaRequest(zombie, stale, broker_epoch, (tp,), True)
    r = _interbroker_call(env, follower, ib.encode_stop_replica(sr, 42), 5)
    assert (r.correlation_id, r.error) == (42, STALE_CONTROLLER_EPOCH), r
    # "the cluster is only you, and the topic has no leader"
    um = UpdateMetadataRequest(zombie, stale, broker_epoch, (PartitionInfo(
        tp, -1, before["leader_epoch"] + 10, (follower,), 99, replicas),),
        (LiveBroker(follower, broker_epoch),))
    r = _interbroker_call(env, follower, ib.encode_update_metadata(
        um, {follower: ib.Endpoint(follower, b.host, b.port)}, 43), 6)
    assert (r.correlation_id, r.error) == (43, STALE_CONTROLLER_EPOCH), r

    time.sleep(0.5)
    after_view = c.replica_states(follower)
    after = next(r for r in after_view["replicas"] if r["topic"] == TOPIC)
    assert after["role"] == "follower" and after["leader"] == leader, after
    assert after["leader_epoch"] == before["leader_epoch"], after
    assert after_view["controller_epoch"] == epoch
    assert after["store_log_end_offset"] is not None  # the replica was not deleted
    with env.client(follower) as cl:
        m = cl.call(3, 9, md_data(TOPIC))
    assert sorted(int(x.node_id) for x in m.brokers) == env.ids
    assert int(m.topics[0].partitions[0].leader_id) == leader
    base = env.produce_raw([b"after-stale"])

    def follower_leo() -> int:
        return int(next(r for r in c.replica_states(follower)["replicas"]
                        if r["topic"] == TOPIC)["log_end_offset"])

    wait_for(lambda: follower_leo() > base, 10, "the follower to keep replicating")


# ---------------------------------------------------------------------------------------------
# 2. malformed input


def assert_alive(env: Env) -> None:
    """Every broker runs, answers Metadata on a new connection, and has logged no traceback
    (an exception nothing handled: a bug, even when the connection was closed)."""
    for i in env.ids:
        assert env.cluster.nodes[i].running, f"broker {i} died:\n{env.cluster.log_tail(i)}"
        with env.client(i) as c:
            r = c.call(3, 1, {"topics": []})
        assert sorted(int(b.node_id) for b in r.brokers) == env.ids
        assert_no_traceback(env, i)


def assert_no_traceback(env: Env, broker_id: int) -> None:
    text = Path(env.cluster.nodes[broker_id].log_path).read_text(errors="replace")
    clean = "Traceback" not in text
    assert clean, f"broker {broker_id} logged a traceback:\n{_around(text)}"
    alive = " fatal: " not in text
    assert alive, f"broker {broker_id}: {_around(text, ' fatal: ')}"


def _send_and_expect_close(env: Env, broker_id: int, data: bytes, what: str) -> None:
    with env.client(broker_id) as c:
        c.send_raw(data)
        assert closed_by_peer(c.sock), f"{what}: the broker kept the connection open"


def _metadata_frame(cid: int) -> bytes:
    return encode_request(request_body(3, 1, {"topics": []}), cid, "wire-live")


def test_garbage_and_bad_size_prefixes_close_the_connection(env: Env) -> None:
    b = env.ids[0]
    cases = {
        "negative size": struct.pack(">i", -1) + b"\x00" * 8,
        "int32 min size": struct.pack(">i", -(2 ** 31)),
        "zero size": struct.pack(">i", 0),
        "size over socket.request.max.bytes": struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64,
        "default 100 MiB + 1": struct.pack(">i", 100 * 1024 * 1024 + 1),
        "int32 max size": struct.pack(">i", 2 ** 31 - 1) + b"x" * 100,
        "HTTP": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # 'GET ' is a 1.19 GB size prefix
        "TLS hello": bytes.fromhex("160301020001000200030363") + b"\x00" * 64,
        "tiny frame": struct.pack(">i", 3) + b"abc",
        "header only, unknown key": struct.pack(">ihhi", 8, 999, 0, 1),
        "garbage frame": struct.pack(">i", 40) + bytes(range(40)),
    }
    for what, data in cases.items():
        _send_and_expect_close(env, b, data, what)
    # a frame of exactly the limit is read (and then closed as garbage), not refused early
    with env.client(b) as c:
        c.send_raw(struct.pack(">i", MAX_REQUEST) + struct.pack(">hhi", 999, 0, 1)
                   + b"\xab" * (MAX_REQUEST - 8))
        assert closed_by_peer(c.sock, 10.0)
    assert_alive(env)


def test_truncated_frames_and_abrupt_disconnects(env: Env) -> None:
    rng = random.Random(7)
    frames = [_metadata_frame(1), encode_request(request_body(
        0, 9, {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": record_batch([b"t"])}]}]}),
        2, "wire-live")]
    for n in range(60):
        b = env.ids[n % len(env.ids)]
        f = frames[n % len(frames)]
        cut = rng.randrange(1, len(f))
        s = connect(env.cluster.nodes[b].host, env.cluster.nodes[b].port)
        s.sendall(f[:cut])
        if n % 2:
            reset_close(s)
        else:
            s.close()
    # a half-sent size prefix, a full prefix with a promise of more, then gone
    for data in (b"\x00\x00", struct.pack(">i", MAX_REQUEST), struct.pack(">i", 1000) + b"ab"):
        s = connect(env.cluster.nodes[env.ids[1]].host, env.cluster.nodes[env.ids[1]].port)
        s.sendall(data)
        reset_close(s)
    # a client that disappears while its long poll is held
    s = connect(env.cluster.nodes[env.leader()].host, env.cluster.nodes[env.leader()].port)
    s.sendall(encode_request(request_body(1, 12, {
        "cluster_id": None, "replica_id": -1, "max_wait": 2000, "min_bytes": 1 << 20,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""}), 3, "wire-live"))
    reset_close(s)
    assert_alive(env)


@pytest.mark.parametrize("api_key", [-1, 17, 21, 24, 33, 36, 50, 67, 999, 32767])
def test_unknown_api_keys_close(env: Env, api_key: int) -> None:
    payload = struct.pack(">hhih", api_key, 0, 5, -1) + b"\x00" * 12
    _send_and_expect_close(env, env.ids[api_key % 3], struct.pack(">i", len(payload)) + payload,
                           f"api key {api_key}")


@pytest.mark.parametrize(("api_key", "version"), [
    (s.api_key, v) for s in API_TABLE for v in (s.min_served, s.max_version)])
def test_valid_header_with_garbage_body_closes(env: Env, api_key: ApiKey, version: int) -> None:
    rng = random.Random(int(api_key) * 100 + version)
    flexible = API_TABLE[api_key].is_flexible(version)
    head = struct.pack(">hhih", api_key, version, 9, 4) + b"junk" + (b"\x00" if flexible else b"")
    # a body that kio cannot read: huge counts / lengths first, then noise
    body = b"\xff\xff\xff\x7f" + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    data = head + body
    with env.client(env.ids[version % 3]) as c:
        c.send_raw(struct.pack(">i", len(data)) + data)
        c.sock.settimeout(5.0)
        try:
            got = c.sock.recv(4)
        except ConnectionResetError:
            got = b""
        if got:  # a body that happens to parse must get a well-formed answer
            (size,) = struct.unpack(">i", got + b"\x00" * (4 - len(got)))
            assert 0 < size < 1 << 24
        else:
            assert got == b""


@pytest.mark.parametrize("version", [3, 9])
def test_null_non_nullable_arrays_close(env: Env, version: int) -> None:
    """kio reads a null (-1 / compact 0) array where Kafka's schema forbids one as None; the
    broker must close the connection as Kafka does, not crash in the handler."""
    if version < 9:
        head = struct.pack(">hhih", 0, version, 5, -1)
        null_topics = struct.pack(">hhii", -1, -1, 1000, -1)
        null_parts = struct.pack(">hhii", -1, -1, 1000, 1) + struct.pack(">h", 4) + b"wire" \
            + struct.pack(">i", -1)
    else:
        head = struct.pack(">hhih", 0, version, 5, -1) + b"\x00"
        null_topics = b"\x00" + struct.pack(">hi", -1, 1000) + b"\x00\x00"
        null_parts = b"\x00" + struct.pack(">hi", -1, 1000) + b"\x02\x05wire\x00\x00\x00"
    for body in (null_topics, null_parts):
        data = head + body
        _send_and_expect_close(env, env.ids[0], struct.pack(">i", len(data)) + data,
                               f"Produce v{version} with a null array")
    assert_alive(env)


def test_api_versions_above_max_answers_v0_and_keeps_the_connection(env: Env) -> None:
    support = API_TABLE[ApiKey.API_VERSIONS]
    for version in (support.max_version + 1, 99, 32767):
        with env.client(env.ids[version % 3]) as c:
            # header v2 (a flexible version), then an ApiVersions v3-style body
            head = struct.pack(">hhih", 18, version, 77, 9) + b"wire-live" + b"\x00"
            body = b"\x0awire-live" + b"\x041.0" + b"\x00"
            c.send_raw(struct.pack(">i", len(head + body)) + head + body)
            resp = decode_response(recv_frame(c.sock), 18, 0)
            assert isinstance(resp, DecodedResponse), resp
            assert resp.correlation_id == 77
            v0: Any = resp.body
            assert code(v0.error_code) == UNSUPPORTED_VERSION
            got = {int(k.api_key): (int(k.min_version), int(k.max_version))
                   for k in v0.api_keys}
            assert got == {int(s.api_key): (s.min_version, s.max_version) for s in API_TABLE}
            # the same connection still serves requests
            r = c.call(3, 1, {"topics": []})
            assert sorted(int(b.node_id) for b in r.brokers) == env.ids


# -- the fuzz loop ------------------------------------------------------------------------------

# Seeds: a valid frame for every served version, except what would change the cluster in
# bulk when a mutation happens to stay valid (CreateTopics could ask for 10 000 partitions,
# DeleteTopics could delete the test topic).
FUZZ_EXCLUDED = {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS}
HUGE = [b"\xff\xff\xff\xff\x7f", b"\xe8\xff\xff\xff\x7f", b"\x7f\xff\xff\xff", b"\xff\xff\xff\x0f",
        b"\x80\x00\x00\x00", b"\xff\xff"]


def _fuzz_seed(api_key: ApiKey, v: int) -> bytes:
    data: dict[ApiKey, dict[str, Any]] = {
        ApiKey.PRODUCE: {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0,
                                                "records": record_batch([b"f1", b"f2"])}]}]},
        ApiKey.FETCH: {
            "cluster_id": None, "replica_id": -1, "max_wait": 0, "min_bytes": 1,
            "max_bytes": 1 << 16, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 16}]}],
            "forgotten_topics_data": [], "rack_id": ""},
        ApiKey.LIST_OFFSETS: {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": -1}]}]},
        ApiKey.METADATA: {"topics": [{"name": TOPIC, "topic_id": None}],
                          "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False},
        ApiKey.OFFSET_COMMIT: {"group_id": "fz", "generation_id_or_member_epoch": -1,
                               "member_id": "", "group_instance_id": None,
                               "retention_time": -1, "topics": [{"name": TOPIC, "partitions": [{
                                   "partition_index": 0, "committed_offset": 1,
                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        ApiKey.OFFSET_FETCH: {"group_id": "fz", "topics": [{"name": TOPIC,
                                                           "partition_indexes": [0]}],
                              "require_stable": False},
        ApiKey.FIND_COORDINATOR: {"key": "fz", "key_type": 0},
        ApiKey.JOIN_GROUP: {"group_id": "fz-join", "session_timeout": 2000,
                            "rebalance_timeout": 1000, "member_id": "",
                            "group_instance_id": None, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b"\x00"}]},
        ApiKey.HEARTBEAT: {"group_id": "fz", "generation_id": 1, "member_id": "m",
                           "group_instance_id": None},
        ApiKey.LEAVE_GROUP: {"group_id": "fz", "member_id": "m", "members": [
            {"member_id": "m", "group_instance_id": None, "reason": None}]},
        ApiKey.SYNC_GROUP: {"group_id": "fz", "generation_id": 1, "member_id": "m",
                            "group_instance_id": None, "protocol_type": "consumer",
                            "protocol_name": "range",
                            "assignments": [{"member_id": "m", "assignment": b"a"}]},
        ApiKey.API_VERSIONS: {"client_software_name": "fz", "client_software_version": "1"},
        ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 1000,
                                  "producer_id": -1, "producer_epoch": -1},
        ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1, "topics": [{"topic": TOPIC,
                                         "partitions": [{"partition": 0,
                                                         "current_leader_epoch": -1,
                                                         "leader_epoch": 0}]}]},
        ApiKey.DESCRIBE_GROUPS: {"groups": ["fz", "fz-join"],
                                 "include_authorized_operations": True},
        ApiKey.LIST_GROUPS: {"states_filter": ["Stable"], "types_filter": ["classic"]},
        ApiKey.DESCRIBE_CONFIGS: {"resources": [
            {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["broker.id"]}],
            "include_synonyms": True, "include_documentation": False},
    }
    return encode_request(request_body(api_key, v, data[api_key]), 1000 + v, "fz")


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame[4:])
    for _ in range(rng.choice([1, 1, 1, 2, 3, 6])):
        if not data:
            break
        i = rng.randrange(len(data))
        op = rng.choice(["flip", "set", "insert", "delete", "truncate", "huge", "version",
                         "key"])
        if op == "flip":
            data[i] ^= 1 << rng.randrange(8)
        elif op == "set":
            data[i] = rng.randrange(256)
        elif op == "insert":
            data[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == "delete":
            del data[i:i + rng.randint(1, 8)]
        elif op == "truncate":
            del data[i:]
        elif op == "huge":
            w = rng.choice(HUGE)
            data[i:i + len(w)] = w
        elif op == "version" and len(data) >= 4:
            data[2:4] = struct.pack(">h", rng.choice([-1, 0, 1, 3, 7, 12, 13, 99, 32767]))
        elif op == "key" and len(data) >= 2:
            # never 4-7 (the inter-broker APIs: a mutation could make a valid one)
            data[0:2] = struct.pack(">h", rng.choice([0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15,
                                                      16, 18, 22, 23, 19, 20, 32, 33, 99, -1]))
    size = len(data)
    r = rng.random()
    if r < 0.05:
        size = rng.choice([-1, 0, MAX_REQUEST + 1, 2 ** 31 - 1])
    elif r < 0.15:
        size = max(0, size + rng.randint(-8, 8))
    return struct.pack(">i", size) + bytes(data)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_fuzzed_frames_never_crash_a_broker(env: Env) -> None:
    """FUZZ_CASES frames, each a valid frame with 1-6 random mutations (one to three per
    connection), from FUZZ_WORKERS concurrent clients; case i is reproducible from
    Random(FUZZ_SEED * 1_000_003 + i) alone."""
    seeds = [_fuzz_seed(k, v) for s in API_TABLE if s.api_key not in FUZZ_EXCLUDED
             for k in [s.api_key] for v in range(s.min_served, s.max_version + 1)]
    pids = {i: env.cluster.nodes[i].pid for i in env.ids}
    start = time.monotonic()

    def one_case(i: int) -> tuple[int, str]:
        if time.monotonic() - start > FUZZ_TIME_S:
            return 0, "skipped"
        rng = random.Random(FUZZ_SEED * 1_000_003 + i)
        b = env.cluster.nodes[env.ids[i % len(env.ids)]]
        frames = [_mutate(rng, rng.choice(seeds)) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        s = connect(b.host, b.port, 2.0)
        try:
            s.sendall(b"".join(frames))
            if rng.random() < 0.1:
                reset_close(s)
                return len(frames), "reset"
            s.shutdown(socket.SHUT_WR)
            s.settimeout(0.5)
            got = b""
            with contextlib.suppress(TimeoutError, ConnectionResetError):
                while len(got) < 1 << 22:
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        break
                    got += chunk
            return len(frames), "answered" if got else "closed"
        except (ConnectionResetError, BrokenPipeError):
            return len(frames), "closed"
        finally:
            s.close()

    outcomes: dict[str, int] = {}
    n = 0
    with concurrent.futures.ThreadPoolExecutor(FUZZ_WORKERS) as pool:
        # connections, not frames, are numbered; stop once FUZZ_CASES frames were sent
        i = 0
        while n < FUZZ_CASES and time.monotonic() - start < FUZZ_TIME_S:
            batch = list(pool.map(one_case, range(i, i + 64)))
            i += 64
            for frames, outcome in batch:
                n += frames
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
    elapsed = time.monotonic() - start
    print(f"fuzz: {n} frames on {i} connections in {elapsed:.1f}s: {outcomes}")
    assert n >= min(FUZZ_CASES, 500), f"only {n} cases in {elapsed:.0f}s"
    assert outcomes.get("answered", 0) > 0 and outcomes.get("closed", 0) > 0
    for b, pid in pids.items():
        assert env.cluster.nodes[b].pid == pid and env.cluster.nodes[b].running, b
    assert_alive(env)


def test_after_malformed_input_the_cluster_still_works(env: Env) -> None:
    """Runs last: Metadata, produce and consume with a real client, and no traceback in any
    broker's log (a traceback is an unhandled error, i.e. a bug)."""
    assert_alive(env)
    topic = "wire-after"
    p = Producer({"bootstrap.servers": env.cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 20_000})
    acked: list[bytes] = []
    failed: list[Any] = []

    def cb(err: Any, msg: Any) -> None:
        (failed.append(err) if err is not None else acked.append(msg.value()))

    # the first Metadata auto-creates the topic; the producer retries until it has a leader
    for i in range(50):
        p.produce(topic, f"v{i}".encode(), partition=0, on_delivery=cb)
    assert p.flush(30) == 0
    assert not failed and len(acked) == 50, failed
    consumer = Consumer({"bootstrap.servers": env.cluster.bootstrap, "group.id": "wire-after",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 50 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value() or b"")
    finally:
        consumer.close()
    assert got == acked
    for i in env.ids:
        assert_no_traceback(env, i)


def _around(text: str, needle: str = "Traceback", lines: int = 40) -> str:
    at = text.find(needle)
    head = text[:at].count("\n")
    return "\n".join(text.splitlines()[max(0, head - 5):head + lines])
