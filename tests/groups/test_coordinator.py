"""Group membership: JoinGroup / SyncGroup / Heartbeat / LeaveGroup flows, timers, errors."""

from __future__ import annotations

import dataclasses

from broker.groups import GroupState, MemoryOffsetsLog
from broker.groups import records as rec

from ._harness import CONFIG, REBALANCE_MS, SESSION_MS, Harness, async_test, done, settle

NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNSUPPORTED_VERSION = 35
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81


@async_test
async def test_single_member_join_sync_heartbeat() -> None:
    h = Harness()
    await h.lead_all()
    first = await h.join("g", client_id="consumer-1")
    assert first.error == MEMBER_ID_REQUIRED and first.generation_id == -1
    member = first.member_id
    prefix, _, uuid_part = member.partition("consumer-1-")
    assert prefix == "" and len(uuid_part) == 36  # <client_id>-<uuid>
    assert h.coord.group("g").pending_members == (member,)  # type: ignore[union-attr]

    task = h.join("g", member, client_id="consumer-1")
    await settle()
    assert not task.done()  # waits for the initial rebalance delay (0 here: the timer)
    assert h.coord.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    await h.advance(0)
    joined = await done(task)
    assert joined.error == NONE and joined.generation_id == 1
    assert joined.leader == member and joined.member_id == member
    assert joined.protocol_type == "consumer" and joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"sub-range")]
    assert h.coord.group("g").state is GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]
    assert h.coord.heartbeat("g", 1, member) == NONE  # allowed while completing

    synced = await h.sync("g", 1, member, {member: b"assignment"})
    assert synced.error == NONE and synced.assignment == b"assignment"
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    view = h.coord.group("g")
    assert view is not None and view.state is GroupState.STABLE

    # The assignment was persisted as GroupMetadataValue v3 before the reply.
    p = h.coord.partition_for("g")
    key, value = h.log.partitions[p][-1]
    assert rec.decode_key(key) == rec.GroupMetadataKey("g")
    assert value is not None
    gm = rec.decode_group_metadata_value(value)
    assert (gm.generation, gm.protocol, gm.leader, gm.protocol_type) == (
        1,
        "range",
        member,
        "consumer",
    )
    assert [(m.member_id, m.assignment, m.subscription) for m in gm.members] == [
        (member, b"assignment", b"sub-range")
    ]
    assert gm.members[0].session_timeout == SESSION_MS
    assert gm.members[0].rebalance_timeout == REBALANCE_MS

    assert h.coord.heartbeat("g", 1, member) == NONE
    # SyncGroup again in Stable: the current assignment
    again = await h.sync("g", 1, member)
    assert again.error == NONE and again.assignment == b"assignment"


@async_test
async def test_join_without_required_member_id_before_v4() -> None:
    h = Harness()
    await h.lead_all()
    task = h.join("g", require_known=False)
    await h.advance(0)
    r = await done(task)
    assert r.error == NONE and r.generation_id == 1 and r.member_id.startswith("c-")


@async_test
async def test_initial_rebalance_delay_extends_while_members_join() -> None:
    config = dataclasses.replace(CONFIG, group_initial_rebalance_delay_ms=3_000)
    h = Harness(config)
    await h.lead_all()
    a = await h.join_new("g", client_id="a", rebalance_ms=10_000)
    await h.advance(2_000)
    b = await h.join_new("g", client_id="b", rebalance_ms=10_000)
    await h.advance(1_000)  # t=3000: a member arrived during the delay: wait 3000 more
    assert not a.done() and not b.done()
    await h.advance(2_999)
    assert not a.done()
    await h.advance(1)  # t=6000: nobody new: complete
    ra, rb = await done(a), await done(b)
    assert ra.generation_id == rb.generation_id == 1
    assert {m.member_id for m in ra.members} == {ra.member_id, rb.member_id}
    assert rb.members == ()  # followers get no member metadata


@async_test
async def test_initial_delay_capped_by_rebalance_timeout() -> None:
    config = dataclasses.replace(CONFIG, group_initial_rebalance_delay_ms=3_000)
    h = Harness(config)
    await h.lead_all()
    tasks = [await h.join_new("g", client_id="m0", rebalance_ms=10_000)]
    for t in (2_900, 5_900, 8_900):
        await h.advance(t - h.clock.time_ms() + 1_700_000_000_000)
        tasks.append(await h.join_new("g", client_id=f"m{t}", rebalance_ms=10_000))
    await h.advance(10_000 - 8_900 - 1)
    assert not any(t.done() for t in tasks)
    await h.advance(1)  # exactly the rebalance timeout after the first join
    results = [await done(t) for t in tasks]
    assert {r.generation_id for r in results} == {1} and len(results[0].members) == 4


@async_test
async def test_second_member_triggers_rebalance_and_leader_assigns() -> None:
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    b_task = await h.join_new("g", client_id="b")
    assert h.coord.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    assert h.coord.heartbeat("g", 1, a) == REBALANCE_IN_PROGRESS
    assert not b_task.done()  # waits for a to rejoin
    a_task = h.join("g", a, client_id="c0")
    await settle()
    ra, rb = await done(a_task), await done(b_task)
    assert ra.generation_id == rb.generation_id == 2 and ra.leader == a == rb.leader
    assert {m.member_id for m in ra.members} == {a, rb.member_id} and rb.members == ()
    b = rb.member_id

    follower = h.sync("g", 2, b)
    await settle()
    assert not follower.done()  # followers wait for the leader's assignment
    leader = h.sync("g", 2, a, {a: b"A", b: b"B"})
    await settle()
    assert (await done(leader)).assignment == b"A"
    assert (await done(follower)).assignment == b"B"
    assert h.coord.group("g").state is GroupState.STABLE  # type: ignore[union-attr]
    assert h.coord.heartbeat("g", 1, a) == ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", 2, a) == NONE


@async_test
async def test_follower_rejoin_with_same_metadata_in_stable_gets_current_generation() -> None:
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    r = await h.join("g", b, client_id="c1")
    assert r.error == NONE and r.generation_id == 1 and r.members == ()
    assert h.coord.group("g").state is GroupState.STABLE  # type: ignore[union-attr]
    # ...but a leader's rejoin forces a rebalance.
    ta = h.join("g", a, client_id="c0")
    await settle()
    assert h.coord.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    assert not ta.done()


@async_test
async def test_leave_triggers_rebalance_of_the_rest() -> None:
    h = Harness()
    await h.lead_all()
    a, b, c = await h.stable_group("g", 3)
    left = h.coord.leave_group("g", [(c, None)])
    assert left.error == NONE and [(m.member_id, m.error) for m in left.members] == [(c, NONE)]
    assert h.coord.heartbeat("g", 1, a) == REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat("g", 1, c) == UNKNOWN_MEMBER_ID
    ta, tb = h.join("g", a, client_id="c0"), h.join("g", b, client_id="c1")
    await settle()
    ra, rb = await done(ta), await done(tb)
    assert ra.generation_id == rb.generation_id == 2
    assert {m.member_id for m in ra.members} == {a, b}
    # unknown members and a batch (LeaveGroup v3+)
    res = h.coord.leave_group("g", [("nobody", None), (a, "static-1"), ("", "static-2")])
    assert [m.error for m in res.members] == [UNKNOWN_MEMBER_ID] * 3
    res = h.coord.leave_group("other-group", [("x", None)])
    assert res.error == NONE and res.members[0].error == UNKNOWN_MEMBER_ID


@async_test
async def test_session_expiry_removes_a_silent_member() -> None:
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    for _ in range(2):  # a heartbeats, b does not
        await h.advance(SESSION_MS // 2 - 1)
        assert h.coord.heartbeat("g", 1, a) == NONE
    assert b in h.coord.group("g").members  # type: ignore[union-attr]
    await h.advance(2)  # b's session timeout since its SyncGroup
    view = h.coord.group("g")
    assert view is not None and b not in view.members
    assert view.state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", 1, a) == REBALANCE_IN_PROGRESS
    ra = await h.join("g", a, client_id="c0")  # the only member left: completes at once
    assert ra.generation_id == 2 and [m.member_id for m in ra.members] == [a]


@async_test
async def test_silent_stable_member_expires_during_a_rebalance() -> None:
    """The stale member does not block the new joiner for the whole rebalance timeout."""
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    b_task = await h.join_new("g", client_id="b")
    await h.advance(SESSION_MS)  # a never rejoins nor heartbeats
    rb = await done(b_task)
    assert rb.error == NONE and rb.generation_id == 2 and rb.leader == rb.member_id
    assert a not in h.coord.group("g").members  # type: ignore[union-attr]


@async_test
async def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    ta = h.join("g", a, client_id="c0")  # leader rejoin: rebalance
    t = 0
    while t < REBALANCE_MS - 1_000:  # b keeps heartbeating but never rejoins
        await h.advance(1_000)
        t += 1_000
        assert h.coord.heartbeat("g", 1, b) == REBALANCE_IN_PROGRESS
        assert not ta.done()
    await h.advance(1_000)
    ra = await done(ta)
    assert ra.generation_id == 2 and [m.member_id for m in ra.members] == [a]
    assert h.coord.heartbeat("g", 1, b) == UNKNOWN_MEMBER_ID


@async_test
async def test_members_that_never_sync_are_removed() -> None:
    h = Harness()
    await h.lead_all()
    ta = await h.join_new("g", client_id="a")
    tb = await h.join_new("g", client_id="b")
    await h.advance(0)
    ra, rb = await done(ta), await done(tb)
    leader = h.sync("g", 1, ra.member_id, {ra.member_id: b"A", rb.member_id: b"B"})
    await settle()
    assert (await done(leader)).assignment == b"A"
    for _ in range(REBALANCE_MS // 5_000):
        await h.advance(5_000)
        h.coord.heartbeat("g", 1, ra.member_id)
    view = h.coord.group("g")
    assert view is not None and rb.member_id not in view.members
    assert view.state is GroupState.PREPARING_REBALANCE


@async_test
async def test_pending_member_expires_and_group_is_dropped() -> None:
    h = Harness()
    await h.lead_all()
    r = await h.join("g")
    assert r.error == MEMBER_ID_REQUIRED
    await h.advance(SESSION_MS)
    assert h.coord.group("g") is None  # nothing left of it
    late = await h.join("g", r.member_id)
    assert late.error == UNKNOWN_MEMBER_ID


@async_test
async def test_validation_errors() -> None:
    h = Harness()
    await h.lead_all()
    assert (await h.join("g", session_ms=999)).error == INVALID_SESSION_TIMEOUT
    assert (await h.join("g", session_ms=60_001)).error == INVALID_SESSION_TIMEOUT
    assert (await h.join("")).error == INVALID_GROUP_ID
    assert h.coord.heartbeat("", 0, "x") == INVALID_GROUP_ID
    assert (await h.join("g", "made-up-id")).error == UNKNOWN_MEMBER_ID
    assert (await h.join("g", protocols=())).error == INCONSISTENT_GROUP_PROTOCOL
    assert (await h.join("g", protocol_type="")).error == INCONSISTENT_GROUP_PROTOCOL
    static = await h.coord.join_group(
        "g", "", protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS, client_id="c",
        client_host="h", require_known_member_id=True, group_instance_id="instance-1",
    )  # fmt: skip
    assert static.error == UNSUPPORTED_VERSION and static.member_id == ""
    assert h.coord.group_ids() == ()

    a, _b = await h.stable_group("g", 2)
    other = await h.join("g", protocols=(("roundrobin", b""),))
    assert other.error == INCONSISTENT_GROUP_PROTOCOL
    assert (await h.join("g", protocol_type="connect")).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.coord.heartbeat("g", 1, "stranger") == UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", 1, a, group_instance_id="i") == UNSUPPORTED_VERSION
    with_instance = await h.coord.sync_group("g", 1, a, assignments={}, group_instance_id="i")
    assert with_instance.error == UNSUPPORTED_VERSION
    assert h.coord.heartbeat("nope", 1, a) == UNKNOWN_MEMBER_ID
    assert (await h.sync("g", 2, a)).error == ILLEGAL_GENERATION
    assert (await h.sync("g", 1, "stranger")).error == UNKNOWN_MEMBER_ID
    assert (await h.sync("nope", 1, a)).error == UNKNOWN_MEMBER_ID
    bad = await h.coord.sync_group("g", 1, a, assignments={}, protocol_name="roundrobin")
    assert bad.error == INCONSISTENT_GROUP_PROTOCOL
    bad = await h.coord.sync_group("g", 1, a, assignments={}, protocol_type="connect")
    assert bad.error == INCONSISTENT_GROUP_PROTOCOL


@async_test
async def test_protocol_selected_by_votes_among_common_protocols() -> None:
    h = Harness()
    await h.lead_all()
    prefs = [
        (("sticky", b"s0"), ("roundrobin", b"r0"), ("range", b"g0")),
        (("range", b"g1"), ("roundrobin", b"r1")),  # no sticky: sticky is not a candidate
        (("range", b"g2"), ("roundrobin", b"r2"), ("sticky", b"s2")),
    ]
    tasks = [await h.join_new("g", client_id=f"c{i}", protocols=p) for i, p in enumerate(prefs)]
    await h.advance(0)
    results = [await done(t) for t in tasks]
    assert {r.protocol_name for r in results} == {"range"}  # 2 votes to 1
    leader = next(r for r in results if r.members)
    assert sorted(m.metadata for m in leader.members) == [b"g0", b"g1", b"g2"]


@async_test
async def test_group_max_size() -> None:
    h = Harness(dataclasses.replace(CONFIG, group_max_size=2))
    await h.lead_all()
    await h.stable_group("g", 2)
    r = await h.join("g", client_id="third")
    assert r.error == GROUP_MAX_SIZE_REACHED and r.member_id == ""


@async_test
async def test_coordinator_status_errors() -> None:
    leader_of = {0, 1, 2, 3}
    h = Harness(is_partition_leader=lambda p: p in leader_of)
    g = "g"
    p = h.coord.partition_for(g)
    assert h.coord.heartbeat(g, 0, "m") == NONE  # leader, not loaded: as if loading
    assert (await h.join(g)).error == COORDINATOR_LOAD_IN_PROGRESS  # leader, not yet loaded
    leader_of.discard(p)
    assert (await h.join(g)).error == NOT_COORDINATOR
    assert (await h.sync(g, 1, "m")).error == NOT_COORDINATOR
    leader_of.add(p)
    loading = h.coord.on_became_leader(p)
    # Until the loading task runs, the partition's groups are loading (direct calls: no yield).
    direct = await h.coord.join_group(
        g, "", protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS, client_id="c",
        client_host="h", require_known_member_id=True,
    )  # fmt: skip
    assert direct.error == COORDINATOR_LOAD_IN_PROGRESS
    sync = await h.coord.sync_group(g, 1, "m", assignments={})
    assert sync.error == REBALANCE_IN_PROGRESS  # the rebalance state is lost: rejoin
    assert h.coord.heartbeat(g, 1, "m") == NONE  # answered blindly while loading
    assert h.coord.leave_group(g, [("m", None)]).error == COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.fetch_offsets(g, None) == (COORDINATOR_LOAD_IN_PROGRESS, [])
    assert p in h.coord.loading_partitions
    await loading
    assert (await h.join(g)).error == MEMBER_ID_REQUIRED
    leader_of.discard(p)  # the runtime knows before calling on_resigned
    assert (await h.join(g)).error == NOT_COORDINATOR
    await h.coord.close()
    assert (await h.join(g)).error == COORDINATOR_NOT_AVAILABLE


@async_test
async def test_resignation_answers_waiting_members_not_coordinator() -> None:
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    b_task = await h.join_new("g", client_id="b")
    a_task = h.join("g", a, client_id="c0")
    await settle()
    ra, rb = await done(a_task), await done(b_task)
    assert ra.generation_id == rb.generation_id == 2
    # a follower waits in SyncGroup for the leader's assignment
    follower = h.sync("g", 2, rb.member_id)
    await settle()
    h.coord.on_resigned(h.coord.partition_for("g"))
    await settle()
    assert (await done(follower)).error == NOT_COORDINATOR
    assert h.coord.group("g") is None
    assert h.coord.heartbeat("g", 2, ra.member_id) == NOT_COORDINATOR
    assert h.coord.owned_partitions == frozenset({0, 1, 2, 3}) - {h.coord.partition_for("g")}


@async_test
async def test_resignation_while_preparing_rebalance() -> None:
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    b_task = await h.join_new("g", client_id="b")
    h.coord.on_resigned(h.coord.partition_for("g"))
    await settle()
    r = await done(b_task)
    assert r.error == NOT_COORDINATOR
    _ = a


@async_test
async def test_failed_assignment_store_fails_the_sync_and_rebalances() -> None:
    log = MemoryOffsetsLog()
    h = Harness(log=log)
    await h.lead_all()
    ta = await h.join_new("g", client_id="a")
    tb = await h.join_new("g", client_id="b")
    await h.advance(0)
    ra, rb = await done(ta), await done(tb)
    log.fail_with[h.coord.partition_for("g")] = 19  # NOT_ENOUGH_REPLICAS
    follower = h.sync("g", 1, rb.member_id)
    leader = h.sync("g", 1, ra.member_id, {ra.member_id: b"A", rb.member_id: b"B"})
    await settle()
    assert (await done(leader)).error == COORDINATOR_NOT_AVAILABLE
    assert (await done(follower)).error == COORDINATOR_NOT_AVAILABLE
    assert h.coord.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]


@async_test
async def test_a_second_join_from_the_same_member_supersedes_the_first() -> None:
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    first = h.join("g", a, client_id="c0")
    await settle()
    second = h.join("g", a, client_id="c0")
    await settle()
    assert (await done(first)).error == REBALANCE_IN_PROGRESS
    assert not second.done()
    await h.join("g", b, client_id="c1")
    assert (await done(second)).generation_id == 2


@async_test
async def test_cancelled_join_keeps_kafka_semantics() -> None:
    """A client that disconnects while waiting is still counted as joined (Kafka mutes, not
    forgets, the request); completing the rebalance does not fail on the cancelled future."""
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    ta = h.join("g", a, client_id="c0")
    await settle()
    ta.cancel()
    rb = await h.join("g", b, client_id="c1")
    assert rb.generation_id == 2 and rb.leader == a
    for _ in range(5):  # b heartbeats; a never syncs nor heartbeats: removed
        await h.advance(SESSION_MS // 5)
        h.coord.heartbeat("g", 2, b)
    assert a not in h.coord.group("g").members  # type: ignore[union-attr]


@async_test
async def test_group_without_offsets_is_removed_with_a_tombstone_when_empty() -> None:
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    h.coord.leave_group("g", [(a, None)])
    await settle()
    assert h.coord.group("g") is None
    p = h.coord.partition_for("g")
    keys = [(rec.decode_key(k), v) for k, v in h.log.partitions[p]]
    assert keys[-1] == (rec.GroupMetadataKey("g"), None)
    # the empty generation (2) was written before the tombstone
    assert keys[-2][1] is not None
    assert rec.decode_group_metadata_value(keys[-2][1]).generation == 2
