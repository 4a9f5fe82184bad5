"""The clock and log ports: SimClock ordering, RealClock on a real loop, MemoryOffsetsLog."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.groups import GroupCoordinator, MemoryOffsetsLog, RealClock, SimClock
from broker.groups.coordinator import GroupConfig

from ._harness import async_test


def test_sim_clock_fires_in_deadline_then_set_order() -> None:
    clock = SimClock(start_ms=0)
    fired: list[str] = []
    clock.call_later(20, lambda: fired.append("b"))
    clock.call_later(10, lambda: fired.append("a"))
    clock.call_later(20, lambda: fired.append("c"))
    cancelled = clock.call_later(15, lambda: fired.append("never"))
    cancelled.cancel()

    def chain() -> None:
        fired.append("d")
        clock.call_later(5, lambda: fired.append("e"))  # inside the window: same advance

    clock.call_later(25, chain)
    assert clock.pending == 4 and clock.next_deadline_ms() == 10
    assert clock.advance(9) == 0 and fired == []
    assert clock.advance(21) == 5
    assert fired == ["a", "b", "c", "d", "e"] and clock.time_ms() == 30
    assert clock.next_deadline_ms() is None
    with pytest.raises(ValueError):
        clock.advance(-1)


@async_test
async def test_real_clock_runs_timers_on_the_loop() -> None:
    clock = RealClock()
    assert abs(clock.time_ms() - time.time() * 1000) < 1_000
    fired = asyncio.Event()
    clock.call_later(5, fired.set)
    await asyncio.wait_for(fired.wait(), 2)
    handle = clock.call_later(5, lambda: pytest.fail("cancelled timer fired"))
    handle.cancel()
    await asyncio.sleep(0.02)


@async_test
async def test_coordinator_on_the_real_clock() -> None:
    coord = GroupCoordinator(
        MemoryOffsetsLog(),
        config=GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=10),
    )
    await coord.on_became_leader(0)
    r = await coord.join_group(
        "g", "", protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, client_id="c",
        client_host="h", require_known_member_id=False,
    )  # fmt: skip
    assert r.error == 0 and r.generation_id == 1
    s = await coord.sync_group("g", 1, r.member_id, assignments={r.member_id: b"x"})
    assert s.assignment == b"x"
    await coord.close()


@async_test
async def test_memory_log_failure_injection_and_gate() -> None:
    log = MemoryOffsetsLog(fail_with={1: 6})
    assert await log.append(1, [(b"k", b"v")]) == 6 and list(log.read(1)) == []
    assert await log.append(0, [(b"k", None)]) == 0 and list(log.read(0)) == [(b"k", None)]
    log.gate = asyncio.Event()
    task = asyncio.get_running_loop().create_task(log.append(0, [(b"k2", b"v2")]))
    await asyncio.sleep(0)
    assert list(log.read(0))[-1] == (b"k2", b"v2") and not task.done()  # landed, not acked
    log.gate.set()
    assert await task == 0


def test_config_validation() -> None:
    for bad in (
        {"offsets_topic_num_partitions": 0},
        {"group_min_session_timeout_ms": 10, "group_max_session_timeout_ms": 5},
        {"group_max_size": 0},
        {"group_initial_rebalance_delay_ms": -1},
        {"load_records_per_yield": 0},
    ):
        with pytest.raises(ValueError):
            GroupConfig(**bad)  # type: ignore[arg-type]
