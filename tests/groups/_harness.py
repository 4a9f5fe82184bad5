"""A coordinator on a manual clock and an in-memory ``__consumer_offsets``, for asyncio tests."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from broker.groups import GroupConfig, GroupCoordinator, MemoryOffsetsLog, SimClock
from broker.groups.coordinator import JoinResult, SyncResult

T = TypeVar("T")

PARTITIONS = 4
CONFIG = GroupConfig(
    offsets_topic_num_partitions=PARTITIONS,
    group_min_session_timeout_ms=1_000,
    group_max_session_timeout_ms=60_000,
    group_initial_rebalance_delay_ms=0,
)
SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = (("range", b"sub-range"),)


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async def`` test on a fresh event loop."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout=30))

    return run


async def settle(rounds: int = 30) -> None:
    """Let every runnable task run (appends of the in-memory log complete at once)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class Harness:
    def __init__(
        self,
        config: GroupConfig = CONFIG,
        log: MemoryOffsetsLog | None = None,
        clock: SimClock | None = None,
        **kwargs: Any,
    ) -> None:
        self.clock = clock or SimClock()
        self.log = log if log is not None else MemoryOffsetsLog()
        self.coord = GroupCoordinator(
            self.log, config=config, clock=self.clock, rng=random.Random(7), **kwargs
        )

    async def lead_all(self) -> None:
        for p in range(self.coord.config.offsets_topic_num_partitions):
            await self.coord.on_became_leader(p)

    async def advance(self, ms: int) -> None:
        await settle()
        self.clock.advance(ms)
        await settle()

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        client_id: str = "c",
        protocols: tuple[tuple[str, bytes], ...] = RANGE,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_known: bool = True,
    ) -> asyncio.Task[JoinResult]:
        return asyncio.get_running_loop().create_task(
            self.coord.join_group(
                group,
                member_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known,
            )
        )

    async def join_new(
        self, group: str, client_id: str = "c", **kw: Any
    ) -> asyncio.Task[JoinResult]:
        """KIP-394: the first JoinGroup gets MEMBER_ID_REQUIRED, the second waits in the group."""
        first = await self.join(group, client_id=client_id, **kw)
        assert first.error == 79, first
        assert first.member_id.startswith(f"{client_id}-")
        task = self.join(group, first.member_id, client_id=client_id, **kw)
        await settle()
        return task

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
    ) -> asyncio.Task[SyncResult]:
        return asyncio.get_running_loop().create_task(
            self.coord.sync_group(group, generation, member_id, assignments=assignments or {})
        )

    async def stable_group(self, group: str, n: int) -> list[str]:
        """A Stable group of ``n`` members (generation 1); returns the member ids, leader first."""
        tasks = [await self.join_new(group, client_id=f"c{i}") for i in range(n)]
        await self.advance(0)
        results = [await t for t in tasks]
        assert all(r.error == 0 and r.generation_id == 1 for r in results), results
        leader = results[0].leader
        ids = [leader] + [r.member_id for r in results if r.member_id != leader]
        syncs = [
            self.sync(group, 1, m, {x: x.encode() for x in ids} if m == leader else None)
            for m in ids
        ]
        out = [await s for s in syncs]
        assert all(s.error == 0 for s in out), out
        return ids


async def done(task: Awaitable[T]) -> T:
    """The result of a task that must already be finished."""
    assert isinstance(task, asyncio.Future) and task.done(), "still waiting"
    return await task
