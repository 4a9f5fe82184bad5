"""The live broker's timers (`Node(inline_timers=True)`, issue #12's per-batch cost):

- a zero-delay timer (a follower's next fetch after a response) runs inside the `handle` call
  that set it, with no loop turn, and is skipped when re-armed or cancelled before it ran;
- the timers re-armed on every replication round (a follower's lag timer at the leader, a
  follower's fetch timeout) keep one clock handle and a deadline, and still fire when the last
  deadline set has passed: no earlier (a follower that keeps fetching stays in the ISR), and
  not much later (a follower that stops is shrunk out after replica.lag.time.max.ms).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from broker.runtime.node import Node
from broker.runtime.ports import AsyncioClock, Cancellable
from broker.store.batch import Record, build_batch
from broker.store.manager import LogManager
from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import FetchRequest, FetchResponse, LeaderAndIsrRequest
from core.timers import FetchTimer, ReplicaLagTimer
from core.types import Errors, PartitionInfo, TopicPartition

TP = TopicPartition("t", 0)
LAG_MS = 300


class CountingClock(AsyncioClock):
    """The live clock, counting the handles armed."""

    def __init__(self) -> None:
        self.armed = 0

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        self.armed += 1
        return super().call_later(delay_ms, callback)


def follower(tmp: Path, inline: bool, sent: list[FetchRequest]) -> Node:
    node = Node(2, ProtocolConfig(replica_fetch_wait_max_ms=0), LogManager([tmp]),
                send_to_peer=lambda dst, m: sent.append(m)
                if isinstance(m, FetchRequest) else None, inline_timers=inline)
    node.handle(ev.BrokerRegistered(10))
    return node


def become_follower(node: Node) -> None:
    info = PartitionInfo(TP, 1, 1, (1, 2), 0, (1, 2))
    node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))


def test_inline_zero_delay_timer_sends_the_next_fetch_in_the_same_handle_call(
        tmp_path: Path) -> None:
    async def go() -> None:
        sent: list[FetchRequest] = []
        node = follower(tmp_path, True, sent)
        steps = node.steps
        become_follower(node)
        # no loop turn yet: the fetch timer ran inside that handle call
        assert len(sent) == 1 and sent[0].fetch_offset == 0
        assert node.steps - steps == 2  # LeaderAndIsr, then TimerFired(FetchTimer)
        first = sent[0]
        steps = node.steps
        node.handle(ev.MessageReceived(1, FetchResponse(
            TP, Errors.NONE, 0, first.current_leader_epoch, 0, 0, end_offset=0,
            request_id=first.request_id)))
        assert len(sent) == 2 and sent[1].fetch_offset == 0
        assert node.steps - steps == 2  # the response, then the fetch timer
        assert FetchTimer(TP) not in node._timers  # no clock handle was left behind
        node.close()

    asyncio.run(go())


def test_without_inline_timers_the_fetch_waits_for_a_loop_turn(tmp_path: Path) -> None:
    """The simulator's mode (the default): the zero-delay timer goes through the clock."""
    async def go() -> None:
        sent: list[FetchRequest] = []
        node = follower(tmp_path, False, sent)
        become_follower(node)
        assert sent == []
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(sent) == 1
        node.close()

    asyncio.run(go())


def test_an_inline_timer_cancelled_before_it_ran_does_not_fire(tmp_path: Path) -> None:
    async def go() -> None:
        node = follower(tmp_path, True, [])
        fired: list[ev.Event] = []
        node._busy = True  # as inside a handle call: the timer is queued, not yet run
        node._apply(fx.SetTimer(FetchTimer(TP), 0))
        node._apply(fx.SetTimer(FetchTimer(TP), 0))  # re-armed: still one fire
        node._busy = False
        node.handle(ev.BrokerRegistered(10))
        assert node._queue == collections_deque() and node._soon == {}
        node._busy = True
        node._apply(fx.SetTimer(FetchTimer(TP), 0))
        node._apply(fx.CancelTimer(FetchTimer(TP)))
        node._busy = False
        steps = node.steps
        node.handle(ev.BrokerRegistered(10))
        assert node.steps - steps == 1, "the cancelled timer was stepped"
        assert not fired
        node.close()

    asyncio.run(go())


def collections_deque() -> object:
    import collections
    return collections.deque()


def leader(tmp: Path, clock: CountingClock, zk: list[fx.Effect]) -> Node:
    node = Node(1, ProtocolConfig(replica_lag_time_max_ms=LAG_MS, min_insync_replicas=1),
                LogManager([tmp]), zk_effect=zk.append, clock=clock, inline_timers=True)
    node.handle(ev.BrokerRegistered(10))
    info = PartitionInfo(TP, 1, 0, (1, 2), 0, (1, 2))
    node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
    return node


def caught_up_fetch(node: Node) -> None:
    rid = node.new_request_id()
    node.responses.expect(rid)
    node.handle(ev.MessageReceived(2, FetchRequest(2, TP, 0, 0, -1, request_id=rid)))
    node.responses.resolve(rid, None)


def shrinks(zk: list[fx.Effect]) -> list[fx.ZkWritePartitionState]:
    return [e for e in zk if isinstance(e, fx.ZkWritePartitionState) and e.proposed.isr == (1,)]


def test_lag_timer_keeps_one_handle_and_shrinks_only_after_the_last_catch_up(
        tmp_path: Path) -> None:
    async def go() -> tuple[int, float, float]:
        clock = CountingClock()
        zk: list[fx.Effect] = []
        node = leader(tmp_path, clock, zk)
        armed = clock.armed
        # caught-up fetches every 20 ms for 3 lag periods: never shrunk
        end = time.monotonic() + 3 * LAG_MS / 1000
        last = time.monotonic()
        while time.monotonic() < end:
            caught_up_fetch(node)
            last = time.monotonic()  # the lag clock restarts here
            await asyncio.sleep(0.02)
        assert shrinks(zk) == [], "a follower that kept fetching was shrunk out"
        handles = clock.armed - armed
        # the follower stops while the leader appends: it is out of sync from now
        records = build_batch([Record(0, 1000, b"k", b"v")], base_offset=0)
        node.handle(ev.ProduceReceived(node.new_request_id(), TP, 0, 1, records))
        assert ReplicaLagTimer(TP, 2) in node._timers
        while not shrinks(zk) and time.monotonic() < last + 10 * LAG_MS / 1000:
            await asyncio.sleep(0.005)
        shrunk_after = time.monotonic() - last
        node.close()
        return handles, shrunk_after, 3 * LAG_MS / 20

    handles, shrunk_after, fetches = asyncio.run(go())
    # ~45 fetches re-armed the lag timer; the handle was re-armed about once per lag period
    assert handles <= 8, f"{handles} clock handles for ~{fetches:.0f} re-arms"
    assert shrunk_after >= (LAG_MS - 2) / 1000, f"shrunk {shrunk_after * 1000:.0f} ms after"
    assert shrunk_after < 5 * LAG_MS / 1000, f"shrunk only {shrunk_after * 1000:.0f} ms after"


def test_a_cancelled_lazy_timer_does_not_fire(tmp_path: Path) -> None:
    """Leaving the leader role cancels the lag timers: the handle that stays finds nothing due."""
    async def go() -> None:
        clock = CountingClock()
        zk: list[fx.Effect] = []
        node = leader(tmp_path, clock, zk)
        caught_up_fetch(node)
        steps = node.steps
        node._apply(fx.CancelTimer(ReplicaLagTimer(TP, 2)))
        await asyncio.sleep(2 * LAG_MS / 1000)
        assert node.steps == steps and shrinks(zk) == []
        assert ReplicaLagTimer(TP, 2) not in node._timers  # the stale handle cleaned up
        node.close()

    asyncio.run(go())


def test_produce_timeouts_share_one_handle_and_still_time_out(tmp_path: Path) -> None:
    """Every acks=all produce sets a timeout the follower's next fetch nearly always cancels
    within ms: 20 such produces arm one clock handle between them; a produce nobody
    acknowledges is still answered REQUEST_TIMED_OUT at its own timeout, no earlier, also
    when it is shorter than the ones set before it; no deadline is left behind."""
    async def go() -> None:
        clock = CountingClock()
        node = Node(1, ProtocolConfig(min_insync_replicas=2), LogManager([tmp_path]),
                    clock=clock, inline_timers=True)
        node.handle(ev.BrokerRegistered(10))
        info = PartitionInfo(TP, 1, 0, (1, 2), 0, (1, 2))
        node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
        armed = clock.armed

        def produce(timeout_ms: int) -> asyncio.Future[object]:
            rid = node.new_request_id()
            fut = node.replies.expect(rid)
            records = build_batch([Record(0, 1000, b"k", b"v")], base_offset=0)
            node.handle(ev.ProduceReceived(rid, TP, -1, 1, records, timeout_ms=timeout_ms))
            return fut

        def follower_fetch(at: int) -> None:
            rid = node.new_request_id()
            node.responses.expect(rid)
            node.handle(ev.MessageReceived(2, FetchRequest(2, TP, at, 0, -1, request_id=rid)))
            node.responses.resolve(rid, None)

        for offset in range(1, 21):
            fut = produce(30_000)
            follower_fetch(offset)  # the follower has it: the HW covers it, answered
            assert fut.done() and fut.result().error == Errors.NONE
        assert clock.armed - armed == 1, f"{clock.armed - armed} handles for 20 produces"
        start = time.monotonic()
        late = produce(150)  # the follower never fetches it
        await asyncio.wait_for(late, 5)
        took = time.monotonic() - start
        assert late.result().error == Errors.REQUEST_TIMED_OUT
        assert 0.14 <= took < 2.0, f"timed out after {took * 1000:.0f} ms"
        assert node._queued == {}
        node.close()

    asyncio.run(go())
