"""Seeded churn: consumer-like clients join, sync, heartbeat, commit, leave and die at random
on a simulated clock; the group stays consistent at every step and converges once churn stops."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest

from broker.groups import GroupState, OffsetAndMetadata, SimClock

from ._harness import CONFIG, Harness, async_test, settle

SESSION_MS = 6_000
REBALANCE_MS = 12_000
HEARTBEAT_MS = 2_000


async def sim_sleep(clock: SimClock, ms: int) -> None:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    clock.call_later(ms, lambda: fut.done() or fut.set_result(None))
    await fut


@dataclasses.dataclass
class ClientState:
    name: str
    member_id: str = ""
    generation: int = -1
    assignment: bytes = b""
    alive: bool = True
    leaves_at_ms: int | None = None
    dies_at_ms: int | None = None


async def consumer(h: Harness, c: ClientState, rng: random.Random) -> None:
    """A classic consumer's coordinator loop (as kafka-python / librdkafka run it)."""
    coord, clock = h.coord, h.clock
    protocols = [("range", c.name.encode()), ("roundrobin", c.name.encode())]
    if rng.random() < 0.5:
        protocols.reverse()
    for _ in range(500):  # bounded: every pass either waits or sleeps
        r = await coord.join_group(
            "g", c.member_id, protocol_type="consumer", protocols=protocols,
            session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
            client_id=c.name, client_host="/sim", require_known_member_id=True,
        )  # fmt: skip
        if r.error == 79:
            c.member_id = r.member_id
            continue
        if r.error == 81:  # GROUP_MAX_SIZE_REACHED is fatal for Kafka clients
            c.alive = False
            return
        if r.error:
            c.member_id = "" if r.error == 25 else c.member_id
            await sim_sleep(clock, 100)
            continue
        c.member_id, c.generation = r.member_id, r.generation_id
        assignments = {m.member_id: m.member_id.encode() for m in r.members}
        s = await coord.sync_group("g", r.generation_id, c.member_id, assignments=assignments)
        if s.error:
            c.member_id = "" if s.error == 25 else c.member_id
            if s.error == 16:
                await sim_sleep(clock, 100)
            continue
        c.assignment = s.assignment
        while True:
            await sim_sleep(clock, HEARTBEAT_MS)
            now = clock.time_ms() - START_MS
            if c.dies_at_ms is not None and now >= c.dies_at_ms:
                c.alive = False
                return  # crashed: no LeaveGroup
            if c.leaves_at_ms is not None and now >= c.leaves_at_ms:
                coord.leave_group("g", [(c.member_id, None)])
                c.alive = False
                return
            if rng.random() < 0.3:
                errs = await coord.commit_offsets(
                    "g", c.generation, c.member_id, [("t", 0, OffsetAndMetadata(now))]
                )
                assert errs[0] in (0, 14, 16, 22, 25, 27), errs
            e = coord.heartbeat("g", c.generation, c.member_id)
            if e == 0:
                continue
            assert e in (16, 22, 25, 27), e
            if e == 25:
                c.member_id = ""
            break
    raise AssertionError(f"{c.name} never settled")


START_MS = 1_700_000_000_000


def check_invariants(h: Harness) -> None:
    view = h.coord.group("g")
    if view is None:
        return
    g = h.coord._groups["g"]
    assert set(g.pending_sync_members) <= set(g.members)
    if g.members:
        assert g.leader_id in g.members
    if view.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert g.members and g.protocol_name in g.candidate_protocols()
    if view.state is GroupState.EMPTY:
        assert not g.members
    assert (g.join_op is not None) == (view.state is GroupState.PREPARING_REBALANCE)
    # While preparing, members that have not rejoined yet may be over the bound (as in Kafka):
    # those that rejoin are counted, and the others are dropped when the rebalance completes.
    if view.state is GroupState.PREPARING_REBALANCE:
        assert g.num_awaiting_join <= h.coord.config.group_max_size
    else:
        assert len(g.members) <= h.coord.config.group_max_size


@pytest.mark.parametrize("seed", range(12))
@async_test
async def test_churn_converges(seed: int) -> None:
    rng = random.Random(seed)
    config = dataclasses.replace(
        CONFIG, group_initial_rebalance_delay_ms=rng.choice([0, 500, 3_000]), group_max_size=5
    )
    h = Harness(config, clock=SimClock(START_MS))
    await h.lead_all()
    clients: list[ClientState] = []
    tasks: list[asyncio.Task[None]] = []
    churn_end_ms = 60_000
    for i in range(rng.randint(2, 6)):
        c = ClientState(f"c{i}")
        fate = rng.random()
        if fate < 0.25:
            c.dies_at_ms = rng.randint(0, churn_end_ms)
        elif fate < 0.5:
            c.leaves_at_ms = rng.randint(0, churn_end_ms)
        start = rng.randint(0, churn_end_ms // 2)
        clients.append(c)

        async def run(c: ClientState = c, start: int = start) -> None:
            await sim_sleep(h.clock, start)
            await consumer(h, c, random.Random(rng.random()))

        tasks.append(asyncio.get_running_loop().create_task(run()))
    # The coordinator fails over (it resigns, then leads and reloads) at random moments.
    p = h.coord.partition_for("g")
    failovers = sorted(rng.randint(0, churn_end_ms) for _ in range(rng.randint(0, 3)))
    horizon = churn_end_ms + 4 * (SESSION_MS + REBALANCE_MS)
    while h.clock.time_ms() - START_MS < horizon:
        if failovers and h.clock.time_ms() - START_MS >= failovers[0]:
            failovers.pop(0)
            h.coord.on_resigned(p)
            await settle(10)
            h.clock.advance(rng.choice([0, 100, 5_000]))
            await settle(10)
            await h.coord.on_became_leader(p)
        h.clock.advance(100)
        await settle(10)
        check_invariants(h)
        for t in tasks:
            if t.done() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
    alive = [c for c in clients if c.alive]
    view = h.coord.group("g")
    if not alive:
        assert view is None or view.state is GroupState.EMPTY
        return
    assert view is not None and view.state is GroupState.STABLE, (seed, view)
    assert sorted(view.members) == sorted(c.member_id for c in alive), (seed, view, alive)
    for c in alive:
        assert c.generation == view.generation_id
        assert c.assignment == c.member_id.encode()
    for t in tasks:
        t.cancel()
    await h.coord.close()
