"""The group APIs on the wire at every served version.

Requests are encoded by kafka-python (what a real client sends), decoded by ``broker.wire``,
answered by ``broker.groups.handle``; responses are encoded by ``broker.wire.encode_response``
and decoded again by ``broker.wire.decode_response`` (must equal what was built) and by
kafka-python (what the client reads).
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest
from kio.index import load_request_schema

from broker.groups import find_coordinator_response, handle
from broker.groups import records as rec
from broker.groups.coordinator import OffsetAndMetadata
from broker.groups.handlers import not_available_response
from broker.wire import (
    API_TABLE,
    ApiKey,
    DecodedResponse,
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_class,
)
from broker.wire.build import build

from ._harness import Harness, async_test, settle

KP = {
    ApiKey.OFFSET_COMMIT: ("kafka.protocol.consumer", "OffsetCommit"),
    ApiKey.OFFSET_FETCH: ("kafka.protocol.consumer", "OffsetFetch"),
    ApiKey.FIND_COORDINATOR: ("kafka.protocol.metadata", "FindCoordinator"),
    ApiKey.JOIN_GROUP: ("kafka.protocol.consumer", "JoinGroup"),
    ApiKey.HEARTBEAT: ("kafka.protocol.consumer", "Heartbeat"),
    ApiKey.LEAVE_GROUP: ("kafka.protocol.consumer", "LeaveGroup"),
    ApiKey.SYNC_GROUP: ("kafka.protocol.consumer", "SyncGroup"),
    ApiKey.DESCRIBE_GROUPS: ("kafka.protocol.admin", "DescribeGroups"),
    ApiKey.LIST_GROUPS: ("kafka.protocol.admin", "ListGroups"),
}


def _kp_class(key: ApiKey, kind: str) -> Any:
    module, name = KP[key]
    return getattr(importlib.import_module(module), name + kind)


def _kp_instance(cls: Any, data: dict[str, Any], version: int, top: bool = True) -> Any:
    """A kafka-python message of ``version`` from a superset of fields."""
    fields = cls._struct.fields
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        f = fields.get(name)
        if f is None or not f.for_version_q(version):
            continue
        if value is not None and f.is_struct_array():
            value = [_kp_instance(f.data_class, v, version, top=False) for v in value]
        kwargs[name] = value
    return cls[version](**kwargs) if top else cls(version=version, **kwargs)


def _served(key: ApiKey) -> range:
    s = API_TABLE[key]
    return range(s.min_served, s.max_version + 1)


class Client:
    """One client connection speaking kafka-python's codec to the group handlers."""

    def __init__(self, h: Harness, client_id: str) -> None:
        self.h = h
        self.client_id = client_id
        self.correlation_id = 0

    async def call(self, key: ApiKey, version: int, /, **data: Any) -> Any:
        self.correlation_id += 1
        msg = _kp_instance(_kp_class(key, "Request"), data, version)
        msg.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        raw = bytes(msg.encode(header=True, framed=True))
        req = decode_request(raw[4:])
        assert isinstance(req, Request), req
        assert (req.api_key, req.api_version) == (key, version)
        if key == ApiKey.FIND_COORDINATOR:
            resp = find_coordinator_response(version, req.body, self.h_coordinator_for)
        else:
            resp = await handle(
                self.h.coord, req.api_key, req.api_version, req.body, req.header.client_id, "/h"
            )
        assert type(resp) is response_class(key, version)
        frame = encode_response(req.correlation_id, resp)
        again = decode_response(frame[4:], key, version)
        assert isinstance(again, DecodedResponse) and again.body == resp
        assert again.correlation_id == self.correlation_id
        kp = _kp_class(key, "Response").decode(frame, version=version, header=True, framed=True)
        return kp

    @staticmethod
    def h_coordinator_for(key: str) -> tuple[int, str, int] | int:
        return (rec.partition_for(key, 50), "broker-host", 9092) if key != "nowhere" else 15

    def start(self, key: ApiKey, version: int, /, **data: Any) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(self.call(key, version, **data))


# One "client profile" per JoinGroup version; together they use every served version of
# every group API (OffsetCommit 2-8, OffsetFetch 1-7, Sync 0-5, Heartbeat/Leave 0-4).
PROFILES = [
    {
        "join": j,
        "sync": min(j, 5),
        "heartbeat": min(j, 4),
        "leave": min(j, 4),
        "commit": min(2 + j, 8),
        "fetch": min(1 + j, 7),
    }
    for j in _served(ApiKey.JOIN_GROUP)
]


def test_profiles_cover_every_served_version() -> None:
    for name, key in [
        ("join", ApiKey.JOIN_GROUP),
        ("sync", ApiKey.SYNC_GROUP),
        ("heartbeat", ApiKey.HEARTBEAT),
        ("leave", ApiKey.LEAVE_GROUP),
        ("commit", ApiKey.OFFSET_COMMIT),
        ("fetch", ApiKey.OFFSET_FETCH),
    ]:
        assert {p[name] for p in PROFILES} == set(_served(key)), name


async def _join(c: Client, v: int, **kw: Any) -> Any:
    """JoinGroup as clients do it: v4+ first learn their member id (MEMBER_ID_REQUIRED)."""
    base = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": c.client_id.encode()}],
    }
    base.update(kw)
    if v >= 4 and not base["member_id"]:
        first = await c.call(ApiKey.JOIN_GROUP, v, **base)
        assert first.error_code == 79 and first.member_id.startswith(c.client_id + "-")
        assert first.generation_id == -1
        base["member_id"] = first.member_id
    return c.start(ApiKey.JOIN_GROUP, v, **base)


@pytest.mark.parametrize("p", PROFILES, ids=lambda p: f"join-v{p['join']}")
@async_test
async def test_group_lifecycle_at_every_version(p: dict[str, int]) -> None:
    h = Harness()
    await h.lead_all()
    a, b = Client(h, "alpha"), Client(h, "beta")
    ta = await _join(a, p["join"])
    tb = await _join(b, p["join"])
    await h.advance(0)
    ra, rb = await ta, await tb
    assert ra.error_code == rb.error_code == 0 and ra.generation_id == rb.generation_id == 1
    assert ra.protocol_name == "range" and ra.leader == ra.member_id
    if p["join"] >= 7:
        assert ra.protocol_type == "consumer"
    assert sorted((m.member_id, bytes(m.metadata)) for m in ra.members) == sorted(
        [(ra.member_id, b"alpha"), (rb.member_id, b"beta")]
    )
    assert rb.members == []
    gen, ma, mb = 1, ra.member_id, rb.member_id

    sync = {"group_id": "g", "generation_id": gen, "protocol_type": "consumer"}
    sync["protocol_name"] = "range"
    fb = b.start(ApiKey.SYNC_GROUP, p["sync"], member_id=mb, assignments=[], **sync)
    await settle()
    assert not fb.done()
    sa = await a.call(
        ApiKey.SYNC_GROUP,
        p["sync"],
        member_id=ma,
        assignments=[
            {"member_id": ma, "assignment": b"to-alpha"},
            {"member_id": mb, "assignment": b"to-beta"},
        ],
        **sync,
    )
    sb = await fb
    assert (sa.error_code, bytes(sa.assignment)) == (0, b"to-alpha")
    assert (sb.error_code, bytes(sb.assignment)) == (0, b"to-beta")
    if p["sync"] >= 5:
        assert (sa.protocol_type, sa.protocol_name) == ("consumer", "range")

    hb = await a.call(
        ApiKey.HEARTBEAT, p["heartbeat"], group_id="g", generation_id=gen, member_id=ma
    )
    assert hb.error_code == 0
    hb = await a.call(ApiKey.HEARTBEAT, p["heartbeat"], group_id="g", generation_id=9, member_id=ma)
    assert hb.error_code == 22

    commit = await a.call(
        ApiKey.OFFSET_COMMIT,
        p["commit"],
        group_id="g",
        generation_id_or_member_epoch=gen,
        member_id=ma,
        retention_time_ms=-1,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m",
                     "committed_leader_epoch": 3},
                    {"partition_index": 1, "committed_offset": 7, "committed_metadata": None,
                     "committed_leader_epoch": -1},
                ],
            }
        ],
    )  # fmt: skip
    statuses = [
        (t.name, [(x.partition_index, x.error_code) for x in t.partitions]) for t in commit.topics
    ]
    assert statuses == [("t", [(0, 0), (1, 0)])]

    fetched = await b.call(
        ApiKey.OFFSET_FETCH,
        p["fetch"],
        group_id="g",
        topics=[{"name": "t", "partition_indexes": [0, 1, 2]}],
    )
    rows = [
        (x.partition_index, x.committed_offset, x.metadata, x.error_code)
        for t in fetched.topics
        for x in t.partitions
    ]
    assert rows == [(0, 42, "m", 0), (1, 7, "", 0), (2, -1, "", 0)]
    if p["fetch"] >= 5:
        epochs = [x.committed_leader_epoch for t in fetched.topics for x in t.partitions]
        assert epochs == ([3, -1, -1] if p["commit"] >= 6 else [-1, -1, -1])
    if p["fetch"] >= 2:
        everything = await b.call(ApiKey.OFFSET_FETCH, p["fetch"], group_id="g", topics=None)
        assert everything.error_code == 0
        assert [(t.name, [x.partition_index for x in t.partitions]) for t in everything.topics] == [
            ("t", [0, 1])
        ]

    left = await b.call(
        ApiKey.LEAVE_GROUP,
        p["leave"],
        group_id="g",
        member_id=mb,
        members=[{"member_id": mb, "group_instance_id": None}],
    )
    assert left.error_code == 0
    if p["leave"] >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(mb, 0)]
    hb = await a.call(
        ApiKey.HEARTBEAT, p["heartbeat"], group_id="g", generation_id=gen, member_id=ma
    )
    assert hb.error_code == 27  # REBALANCE_IN_PROGRESS: rejoin

    gone = await b.call(
        ApiKey.LEAVE_GROUP,
        p["leave"],
        group_id="g",
        member_id=mb,
        members=[{"member_id": mb, "group_instance_id": None}],
    )
    if p["leave"] >= 3:
        assert gone.error_code == 0 and [m.error_code for m in gone.members] == [25]
    else:
        assert gone.error_code == 25  # the member's error, for the single-member versions


@pytest.mark.parametrize("version", list(_served(ApiKey.OFFSET_FETCH)))
@async_test
async def test_offset_fetch_group_error_placement(version: int) -> None:
    h = Harness()  # leads nothing: NOT_COORDINATOR
    r = await Client(h, "c").call(
        ApiKey.OFFSET_FETCH,
        version,
        group_id="g",
        topics=[{"name": "t", "partition_indexes": [0, 5]}],
    )
    if version < 2:  # no group-level error field: every partition carries it
        rows = [
            (x.partition_index, x.committed_offset, x.error_code) for x in r.topics[0].partitions
        ]
        assert rows == [(0, -1, 16), (5, -1, 16)]
    else:
        assert r.error_code == 16 and r.topics == []


@pytest.mark.parametrize("version", [2, 3, 4])
@async_test
async def test_offset_commit_retention_time_writes_value_v1(version: int) -> None:
    h = Harness()
    await h.lead_all()
    r = await Client(h, "c").call(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=86_400_000,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
        ],
    )
    assert r.topics[0].partitions[0].error_code == 0
    (_, value), *_ = h.log.partitions[h.coord.partition_for("g")]
    assert value is not None and value[:2] == b"\x00\x01"
    v = rec.decode_offset_commit_value(value)
    assert v.expire_timestamp == v.commit_timestamp + 86_400_000 == h.clock.time_ms() + 86_400_000


@pytest.mark.parametrize("version", list(_served(ApiKey.JOIN_GROUP)))
@async_test
async def test_join_group_errors_at_every_version(version: int) -> None:
    h = Harness()
    await h.lead_all()
    c = Client(h, "c")
    base = {
        "group_id": "g",
        "session_timeout_ms": 10,  # below group.min.session.timeout.ms
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    r = await c.call(ApiKey.JOIN_GROUP, version, **base)
    assert r.error_code == 26 and r.generation_id == -1 and r.leader == "" and r.members == []
    assert r.protocol_name == (None if version >= 7 else "")
    if version >= 5:  # static membership: refused as by a pre-2.3 broker
        r = await c.call(
            ApiKey.JOIN_GROUP,
            version,
            **{**base, "session_timeout_ms": 10_000},
            group_instance_id="i",
        )
        assert r.error_code == 35 and r.member_id == ""


@pytest.mark.parametrize("version", list(_served(ApiKey.HEARTBEAT)))
@async_test
async def test_static_members_refused_as_by_a_pre_2_3_broker(version: int) -> None:
    h = Harness()
    await h.lead_all()
    c = Client(h, "c")
    common = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": "i"}
    hb = await c.call(ApiKey.HEARTBEAT, version, **common)
    sync = await c.call(ApiKey.SYNC_GROUP, version, **common, assignments=[])
    if version >= 3:  # the first versions with group_instance_id
        assert hb.error_code == sync.error_code == 35
        commit = await c.call(
            ApiKey.OFFSET_COMMIT,
            version + 4,
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id="m",
            group_instance_id="i",
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
        )
        assert commit.topics[0].partitions[0].error_code == 35
    else:
        assert hb.error_code == sync.error_code == 25


@pytest.mark.parametrize("version", list(_served(ApiKey.SYNC_GROUP)))
@async_test
async def test_sync_group_unknown_member_at_every_version(version: int) -> None:
    h = Harness()
    await h.lead_all()
    r = await Client(h, "c").call(
        ApiKey.SYNC_GROUP,
        version,
        group_id="g",
        generation_id=1,
        member_id="m",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )
    assert r.error_code == 25 and bytes(r.assignment) == b""


@async_test
async def test_sync_group_v5_requires_protocol_type_and_name() -> None:
    h = Harness()
    await h.lead_all()
    body = build(
        load_request_schema(ApiKey.SYNC_GROUP, 5),
        {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
    )
    resp = await handle(h.coord, ApiKey.SYNC_GROUP, 5, body, "c", "/h")
    assert resp.error_code == 23  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", list(_served(ApiKey.FIND_COORDINATOR)))
@async_test
async def test_find_coordinator_at_every_version(version: int) -> None:
    c = Client(Harness(), "c")
    r = await c.call(ApiKey.FIND_COORDINATOR, version, key="hiwater", key_type=0)
    assert (r.error_code, r.node_id, r.host, r.port) == (0, 14, "broker-host", 9092)
    if version >= 1:
        assert r.error_message == "NONE"
        r = await c.call(ApiKey.FIND_COORDINATOR, version, key="txn", key_type=1)
        assert (r.error_code, r.node_id, r.host, r.port) == (15, -1, "", -1)
        assert r.error_message == "The coordinator is not available."
        r = await c.call(ApiKey.FIND_COORDINATOR, version, key="x", key_type=7)
        assert r.error_code == 42
    r = await c.call(ApiKey.FIND_COORDINATOR, version, key="nowhere", key_type=0)
    assert (r.error_code, r.node_id, r.host, r.port) == (15, -1, "", -1)


def test_handle_refuses_other_apis() -> None:
    body = build(load_request_schema(ApiKey.FIND_COORDINATOR, 0), {"key": "g"})
    with pytest.raises(ValueError):
        asyncio.run(handle(Harness().coord, ApiKey.FIND_COORDINATOR, 0, body, "c", "/h"))


@async_test
async def test_kio_built_requests_work_too() -> None:
    """Bodies built with kio directly (the broker's own encode_request path)."""
    h = Harness()
    await h.lead_all()
    body = build(
        load_request_schema(ApiKey.OFFSET_COMMIT, 8),
        {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 3, "committed_offset": 9, "committed_metadata": None}
                    ],
                }
            ],
        },
    )
    req = decode_request(encode_request(body, 1, client_id=None)[4:])
    assert isinstance(req, Request)
    resp = await handle(h.coord, req.api_key, req.api_version, req.body, None, "/h")
    assert resp.topics[0].partitions[0].error_code == 0  # type: ignore[attr-defined]
    assert h.coord.fetch_offsets("g", [("t", 3)])[1][0][2].offset == 9  # type: ignore[union-attr]


@pytest.mark.parametrize("version", list(_served(ApiKey.DESCRIBE_GROUPS)))
@async_test
async def test_describe_groups_at_every_version(version: int) -> None:
    h = Harness()
    await h.lead_all()
    ids = await h.stable_group("g", 2)
    c = Client(h, "c")
    r = await c.call(ApiKey.DESCRIBE_GROUPS, version, groups=["g", "nope", ""],
                     include_authorized_operations=True)
    g, nope, empty = r.groups
    assert (g.error_code, g.group_id, g.group_state) == (0, "g", "Stable")
    assert (g.protocol_type, g.protocol_data) == ("consumer", "range")
    assert [m.member_id for m in g.members] == ids
    for i, m in enumerate(g.members):
        assert (m.client_id, m.client_host) == (f"c{i}", "/127.0.0.1")
        assert m.member_metadata == b"sub-range" and m.member_assignment == m.member_id.encode()
    if version >= 3:
        assert g.authorized_operations == {3, 6, 8}  # READ, DELETE, DESCRIBE
    if version >= 6:
        assert (nope.error_code, nope.error_message) == (69, "Group nope not found.")
    else:
        assert (nope.error_code, nope.group_state, nope.members) == (0, "Dead", [])
    assert empty.error_code == (69 if version >= 6 else 0)  # "" is a valid id here
    # a rebalancing group shows its members without metadata and no protocol
    t = await h.join_new("g", client_id="late")
    r = await c.call(ApiKey.DESCRIBE_GROUPS, version, groups=["g"],
                     include_authorized_operations=False)
    (g,) = r.groups
    assert (g.group_state, g.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in g.members)
    t.cancel()


@pytest.mark.parametrize("version", list(_served(ApiKey.LIST_GROUPS)))
@async_test
async def test_list_groups_at_every_version(version: int) -> None:
    h = Harness()
    await h.lead_all()
    await h.stable_group("stable", 1)
    assert await h.coord.commit_offsets(
        "simple", -1, "", [("t", 0, OffsetAndMetadata(5))]) == [0]
    c = Client(h, "c")
    r = await c.call(ApiKey.LIST_GROUPS, version, states_filter=[], types_filter=[])
    assert r.error_code == 0
    got = {g.group_id: g for g in r.groups}
    assert sorted(got) == ["simple", "stable"]
    assert (got["stable"].protocol_type, got["simple"].protocol_type) == ("consumer", "")
    if version >= 4:
        assert (got["stable"].group_state, got["simple"].group_state) == ("Stable", "Empty")
        r = await c.call(ApiKey.LIST_GROUPS, version, states_filter=["empty"], types_filter=[])
        assert [g.group_id for g in r.groups] == ["simple"]
    if version >= 5:
        assert got["stable"].group_type == "classic"
        r = await c.call(ApiKey.LIST_GROUPS, version, states_filter=[],
                         types_filter=["consumer"])
        assert r.groups == []
    # a partition still loading: the groups so far and COORDINATOR_LOAD_IN_PROGRESS
    h.coord.on_resigned(0)
    h.coord._loading[0] = asyncio.get_running_loop().create_future()  # type: ignore[assignment]
    r = await c.call(ApiKey.LIST_GROUPS, version, states_filter=[], types_filter=[])
    assert r.error_code == 14
    h.coord._loading.pop(0).cancel()
    await h.coord.close()
    r = await c.call(ApiKey.LIST_GROUPS, version, states_filter=[], types_filter=[])
    assert (r.error_code, r.groups) == (15, [])


GROUP_BODIES: dict[ApiKey, dict[str, Any]] = {
    ApiKey.FIND_COORDINATOR: {"key": "g", "key_type": 0},
    ApiKey.JOIN_GROUP: {"group_id": "g", "session_timeout": 10_000, "rebalance_timeout": 5_000,
                        "member_id": "m", "group_instance_id": None, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b""}]},
    ApiKey.SYNC_GROUP: {"group_id": "g", "generation_id": 1, "member_id": "m",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocol_name": "range", "assignments": []},
    ApiKey.HEARTBEAT: {"group_id": "g", "generation_id": 1, "member_id": "m",
                       "group_instance_id": None},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "m", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None},
        {"member_id": "n", "group_instance_id": None, "reason": None}]},
    ApiKey.OFFSET_COMMIT: {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                           "group_instance_id": None, "retention_time": -1, "topics": [
                               {"name": "t", "partitions": [
                                   {"partition_index": 0, "committed_offset": 1,
                                    "committed_leader_epoch": -1, "committed_metadata": ""},
                                   {"partition_index": 1, "committed_offset": 1,
                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
    ApiKey.OFFSET_FETCH: {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}],
                          "require_stable": False},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g", "h"], "include_authorized_operations": True},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
}


def _codes(x: Any) -> list[int]:
    out: list[int] = []
    if hasattr(x, "__dataclass_fields__"):
        for name in x.__dataclass_fields__:
            v = getattr(x, name)
            out += [int(v)] if name == "error_code" else _codes(v)
    elif isinstance(x, tuple):
        for item in x:
            out += _codes(item)
    return out


@pytest.mark.parametrize(("key", "version"), [(k, v) for k in GROUP_BODIES for v in _served(k)],
                         ids=lambda x: str(x))
def test_not_available_response_at_every_version(key: ApiKey, version: int) -> None:
    """What a broker answers while its coordinator is not started: the error everywhere."""
    body = build(load_request_schema(key, version), GROUP_BODIES[key])
    resp = not_available_response(key, version, body, 15)
    assert type(resp) is response_class(key, version)
    frame = encode_response(7, resp)
    again = decode_response(frame[4:], key, version)
    assert isinstance(again, DecodedResponse) and again.body == resp
    codes = _codes(resp)
    expected = {ApiKey.OFFSET_COMMIT: 2, ApiKey.DESCRIBE_GROUPS: 2}.get(key, 1)
    if key == ApiKey.OFFSET_FETCH and version < 2:
        expected = 2
    if key == ApiKey.LEAVE_GROUP and version >= 3:
        expected = 3
    assert codes == [15] * expected, resp
