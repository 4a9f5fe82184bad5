"""OffsetCommit / OffsetFetch, persistence in ``__consumer_offsets``, and failover loading."""

from __future__ import annotations

import asyncio
import dataclasses

from broker.groups import GroupState, MemoryOffsetsLog, OffsetAndMetadata
from broker.groups import records as rec

from ._harness import CONFIG, SESSION_MS, Harness, async_test, done, settle

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28


def om(offset: int, metadata: str = "", epoch: int = -1) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, metadata, epoch, commit_timestamp_ms=1_000)


@async_test
async def test_simple_commit_creates_an_empty_group_and_fetch_reads_it() -> None:
    h = Harness()
    await h.lead_all()
    errors = await h.coord.commit_offsets(
        "g", -1, "", [("t", 0, om(10, "m0", 3)), ("t", 1, om(20)), ("u", 0, om(30))]
    )
    assert errors == [NONE, NONE, NONE]
    view = h.coord.group("g")
    assert view is not None and view.state is GroupState.EMPTY and view.generation_id == 0

    err, rows = h.coord.fetch_offsets("g", [("t", 0), ("t", 5), ("v", 0)])
    assert err == NONE
    assert rows == [("t", 0, om(10, "m0", 3)), ("t", 5, None), ("v", 0, None)]
    err, rows = h.coord.fetch_offsets("g", None)
    assert [(t, p, o.offset if o else None) for t, p, o in rows] == [
        ("t", 0, 10),
        ("t", 1, 20),
        ("u", 0, 30),
    ]
    assert h.coord.fetch_offsets("unknown-group", [("t", 0)]) == (NONE, [("t", 0, None)])
    assert h.coord.fetch_offsets("unknown-group", None) == (NONE, [])

    # The records: OffsetCommitKey v1 + OffsetCommitValue v3, all in one batch.
    records = h.log.partitions[h.coord.partition_for("g")]
    assert len(records) == 3 and h.log.appends == 1
    key, value = records[0]
    assert rec.decode_key(key) == rec.OffsetCommitKey("g", "t", 0)
    assert value is not None and value[:2] == b"\x00\x03"
    assert rec.decode_offset_commit_value(value) == rec.OffsetCommitValue(
        offset=10, metadata="m0", commit_timestamp=1_000, leader_epoch=3
    )

    # A later commit overwrites; an empty group id is allowed for offsets.
    assert await h.coord.commit_offsets("g", -1, "", [("t", 0, om(11))]) == [NONE]
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(11)
    assert await h.coord.commit_offsets("", -1, "", [("t", 0, om(1))]) == [NONE]


@async_test
async def test_group_commit_checks_generation_and_member() -> None:
    h = Harness()
    await h.lead_all()
    a, b = await h.stable_group("g", 2)
    assert await h.coord.commit_offsets("g", 1, a, [("t", 0, om(5))]) == [NONE]
    assert await h.coord.commit_offsets("g", 0, a, [("t", 0, om(6))]) == [ILLEGAL_GENERATION]
    assert await h.coord.commit_offsets("g", 1, "who", [("t", 0, om(6))]) == [UNKNOWN_MEMBER_ID]
    # generation -1 only while the group is Empty
    assert await h.coord.commit_offsets("g", -1, "", [("t", 0, om(6))]) == [UNKNOWN_MEMBER_ID]
    assert await h.coord.commit_offsets("g", -1, a, [("t", 0, om(6))]) == [ILLEGAL_GENERATION]
    assert await h.coord.commit_offsets(
        "g", 1, a, [("t", 0, om(6))], group_instance_id="static"
    ) == [35]  # UNSUPPORTED_VERSION: no static membership
    # a generation >= 0 for a group that does not exist: from an old generation
    assert await h.coord.commit_offsets("other", 3, "m", [("t", 0, om(6))]) == [ILLEGAL_GENERATION]
    assert h.coord.group("other") is None
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(5)

    # During PreparingRebalance members of the current generation may still commit...
    a_rejoin = h.join("g", a, client_id="c0")  # the leader's JoinGroup: a rebalance
    await settle()
    assert await h.coord.commit_offsets("g", 1, b, [("t", 0, om(7))]) == [NONE]
    # ...but not in CompletingRebalance.
    b_rejoin = h.join("g", b, client_id="c1")
    await settle()
    assert (await done(a_rejoin)).generation_id == (await done(b_rejoin)).generation_id == 2
    assert await h.coord.commit_offsets("g", 2, a, [("t", 0, om(8))]) == [REBALANCE_IN_PROGRESS]
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(7)


@async_test
async def test_commit_resets_the_session_timer() -> None:
    h = Harness()
    await h.lead_all()
    [a] = await h.stable_group("g", 1)
    for i in range(4):
        await h.advance(SESSION_MS - 1)
        assert await h.coord.commit_offsets("g", 1, a, [("t", 0, om(i))]) == [NONE]
    assert a in h.coord.group("g").members  # type: ignore[union-attr]


@async_test
async def test_partition_errors() -> None:
    h = Harness(
        dataclasses.replace(CONFIG, offset_metadata_max_bytes=4, offsets_per_group_max=2),
        partition_exists=lambda topic, partition: topic != "gone",
    )
    await h.lead_all()
    errors = await h.coord.commit_offsets(
        "g",
        -1,
        "",
        [("t", 0, om(1, "ok")), ("t", 1, om(1, "too long")), ("gone", 0, om(1)), ("t", 2, om(1))],
    )
    assert errors == [NONE, OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION, NONE]
    # the third distinct partition of the group is over the bound
    errors = await h.coord.commit_offsets("g", -1, "", [("t", 3, om(1)), ("t", 0, om(2))])
    assert errors == [INVALID_COMMIT_OFFSET_SIZE, NONE]
    assert [p for _, p, _ in h.coord.fetch_offsets("g", None)[1]] == [0, 2]


@async_test
async def test_append_errors_are_mapped_and_not_cached() -> None:
    log = MemoryOffsetsLog()
    h = Harness(log=log)
    await h.lead_all()
    p = h.coord.partition_for("g")
    assert await h.coord.commit_offsets("g", -1, "", [("t", 0, om(1))]) == [NONE]
    for code, want in [
        (19, COORDINATOR_NOT_AVAILABLE),  # NOT_ENOUGH_REPLICAS
        (20, COORDINATOR_NOT_AVAILABLE),  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
        (7, COORDINATOR_NOT_AVAILABLE),  # REQUEST_TIMED_OUT
        (3, COORDINATOR_NOT_AVAILABLE),  # UNKNOWN_TOPIC_OR_PARTITION
        (6, NOT_COORDINATOR),  # NOT_LEADER_OR_FOLLOWER
        (56, NOT_COORDINATOR),  # KAFKA_STORAGE_ERROR
        (10, INVALID_COMMIT_OFFSET_SIZE),  # MESSAGE_TOO_LARGE
    ]:
        log.fail_with[p] = code
        assert await h.coord.commit_offsets("g", -1, "", [("t", 0, om(99))]) == [want]
        assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(1)


@async_test
async def test_commit_replies_only_after_the_append() -> None:
    log = MemoryOffsetsLog(gate=asyncio.Event())
    h = Harness(log=log)
    await h.lead_all()
    task = asyncio.get_running_loop().create_task(
        h.coord.commit_offsets("g", -1, "", [("t", 0, om(1))])
    )
    await settle()
    assert not task.done()
    assert h.coord.fetch_offsets("g", [("t", 0)])[1] == [("t", 0, None)]  # not committed yet
    task2 = asyncio.get_running_loop().create_task(
        h.coord.commit_offsets("g", -1, "", [("t", 0, om(2))])
    )
    await settle()
    task.cancel()  # the client went away: the append still completes and is cached
    assert log.gate is not None
    log.gate.set()
    await settle()
    assert await done(task2) == [NONE]
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(2)  # the later commit wins


@async_test
async def test_later_commit_wins_whatever_the_completion_order() -> None:
    class ReversedLog(MemoryOffsetsLog):
        """Completes appends in reverse order of their calls (records land in call order)."""

        def __init__(self) -> None:
            super().__init__()
            self.events: list[asyncio.Event] = []

        async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
            self.partitions.setdefault(partition, []).extend(records)
            event = asyncio.Event()
            self.events.append(event)
            await event.wait()
            return 0

    log = ReversedLog()
    h = Harness(log=log)
    await h.lead_all()
    loop = asyncio.get_running_loop()
    first = loop.create_task(h.coord.commit_offsets("g", -1, "", [("t", 0, om(1))]))
    second = loop.create_task(h.coord.commit_offsets("g", -1, "", [("t", 0, om(2))]))
    await settle()
    log.events[1].set()
    await settle()
    log.events[0].set()
    await settle()
    assert await done(first) == await done(second) == [NONE]
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][0][2] == om(2)


@async_test
async def test_failover_a_new_coordinator_loads_groups_and_offsets() -> None:
    log = MemoryOffsetsLog()
    old = Harness(log=log)
    await old.lead_all()
    a, b = await old.stable_group("g", 2)
    assert await old.coord.commit_offsets("g", 1, a, [("t", 0, om(100, "a", 4))]) == [NONE]
    assert await old.coord.commit_offsets("g", 1, b, [("t", 1, om(200))]) == [NONE]
    assert await old.coord.commit_offsets("simple", -1, "", [("u", 0, om(7))]) == [NONE]
    old.coord.on_resigned(old.coord.partition_for("g"))
    old.coord.on_resigned(old.coord.partition_for("simple"))
    assert await old.coord.commit_offsets("g", 1, a, [("t", 0, om(1))]) == [NOT_COORDINATOR]

    new = Harness(log=log, clock=old.clock)
    await new.lead_all()
    assert new.coord.fetch_offsets("g", None)[1] == [
        ("t", 0, om(100, "a", 4)),
        ("t", 1, om(200)),
    ]
    assert new.coord.fetch_offsets("simple", [("u", 0)])[1] == [("u", 0, om(7))]
    view = new.coord.group("g")
    assert view is not None and view.state is GroupState.STABLE and view.generation_id == 1
    assert set(view.members) == {a, b} and view.leader == a and view.protocol_name == "range"
    # Members carry on with their generation; the stored assignment is served.
    assert new.coord.heartbeat("g", 1, a) == NONE
    synced = await new.sync("g", 1, b)
    assert synced.error == NONE and synced.assignment == b.encode()
    assert await new.coord.commit_offsets("g", 1, a, [("t", 0, om(101))]) == [NONE]
    # b stops heartbeating: its session (restarted at load) expires.
    for _ in range(3):
        await new.advance(SESSION_MS // 2 - 1)
        new.coord.heartbeat("g", 1, a)
    assert b not in new.coord.group("g").members  # type: ignore[union-attr]


@async_test
async def test_loading_applies_tombstones_and_the_last_value() -> None:
    log = MemoryOffsetsLog()
    h = Harness(log=log)
    p = h.coord.partition_for("g")

    def offset(topic: str, part: int, value: int | None) -> tuple[bytes, bytes | None]:
        v = None if value is None else rec.encode_offset_commit_value(
            rec.OffsetCommitValue(offset=value, metadata="", commit_timestamp=5)
        )  # fmt: skip
        return rec.encode_offset_commit_key("g", topic, part), v

    group_value = rec.GroupMetadataValue(
        protocol_type="consumer", generation=9, protocol=None, leader=None
    )
    log.partitions[p] = [
        offset("t", 0, 1),
        offset("t", 1, 2),
        (b"\x00\x09junk", b"unknown key version: skipped"),
        (rec.encode_offset_commit_key("g", "t", 2), b"\x00\x03bad"),  # malformed: skipped
        offset("t", 0, 3),
        offset("t", 1, None),
        (rec.encode_group_metadata_key("g"), rec.encode_group_metadata_value(group_value)),
        (rec.encode_group_metadata_key("gone"), rec.encode_group_metadata_value(group_value)),
        (rec.encode_group_metadata_key("gone"), None),
    ]
    await h.coord.on_became_leader(p)
    assert h.coord.fetch_offsets("g", None)[1] == [
        ("t", 0, OffsetAndMetadata(3, "", -1, commit_timestamp_ms=5))
    ]
    view = h.coord.group("g")
    assert view is not None and view.state is GroupState.EMPTY and view.generation_id == 9
    assert h.coord.group("gone") is None
    # A JoinGroup continues the loaded generation.
    first = await h.join("g")
    task = h.join("g", first.member_id)
    await h.advance(0)
    assert (await done(task)).generation_id == 10


@async_test
async def test_loading_yields_and_answers_load_in_progress() -> None:
    log = MemoryOffsetsLog()
    config = dataclasses.replace(CONFIG, load_records_per_yield=1)
    h = Harness(config, log=log)
    p = h.coord.partition_for("g")
    log.partitions[p] = [
        (
            rec.encode_offset_commit_key("g", "t", i),
            rec.encode_offset_commit_value(rec.OffsetCommitValue(i, "", 0)),
        )
        for i in range(50)
    ]
    loading = h.coord.on_became_leader(p)
    assert h.coord.on_became_leader(p) is loading  # a second election while loading: same load
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not loading.done()
    assert await h.coord.commit_offsets("g", -1, "", [("t", 0, om(1))]) == [14]
    await loading
    assert len(h.coord.fetch_offsets("g", None)[1]) == 50
    # resigning during a load abandons it
    h.coord.on_resigned(p)
    loading = h.coord.on_became_leader(p)
    await asyncio.sleep(0)
    h.coord.on_resigned(p)
    await settle()
    assert loading.cancelled() and p not in h.coord.owned_partitions
    assert h.coord.fetch_offsets("g", None)[0] == NOT_COORDINATOR


@async_test
async def test_leader_epochs_ignore_stale_leadership_changes() -> None:
    h = Harness()
    await h.coord.on_became_leader(0, leader_epoch=5)
    h.coord.on_resigned(0, leader_epoch=4)  # stale
    assert 0 in h.coord.owned_partitions
    await h.coord.on_became_leader(0, leader_epoch=3)  # stale
    h.coord.on_resigned(0, leader_epoch=5)
    assert 0 not in h.coord.owned_partitions
