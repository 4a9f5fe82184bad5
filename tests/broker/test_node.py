"""The effect interpreter in-process: the core's effects land in a real store, replies reach
the waiting requests, timers fire, and a store that disagrees with the core halts the node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.runtime.node import Node
from broker.store.batch import Record, build_batch
from broker.store.manager import LogManager
from core import events as ev
from core.config import ProtocolConfig
from core.messages import FetchRequest, LeaderAndIsrRequest
from core.timers import FetchTimeoutTimer, FetchTimer
from core.types import Errors, PartitionInfo, Role, TopicPartition

TP = TopicPartition("t", 0)


def batch(n: int, pid: int = -1, seq: int = -1) -> bytes:
    return build_batch([Record(i, 1000 + i, b"k", b"v%d" % i) for i in range(n)],
                       base_offset=0, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=seq)


def leader_node(tmp: Path, isr: tuple[int, ...] = (1,), replicas: tuple[int, ...] = (1,),
                min_isr: int = 1) -> Node:
    node = Node(1, ProtocolConfig(min_insync_replicas=min_isr), LogManager([tmp]))
    node.handle(ev.BrokerRegistered(10))
    info = PartitionInfo(TP, 1, 0, isr, 0, replicas)
    node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
    return node


def produce(node: Node, records: bytes, acks: int, n: int, **kw: int) -> asyncio.Future[object]:
    rid = node.new_request_id()
    fut = node.replies.expect(rid)
    node.handle(ev.ProduceReceived(rid, TP, acks, n, records, **kw))
    return fut


def test_leader_append_reaches_the_store_and_the_reply(tmp_path: Path) -> None:
    async def go() -> None:
        node = leader_node(tmp_path)
        assert node.replica(TP).role == Role.LEADER
        fut = produce(node, batch(3), 1, 3)
        reply = await asyncio.wait_for(fut, 1)
        assert reply.error == Errors.NONE and reply.base_offset == 0
        lg = node.logs.get_log("t", 0)
        assert lg is not None and lg.log_end_offset == 3
        assert lg.high_watermark == 3  # ISR of one: committed at once
        assert lg.leader_epoch_cache.entries == [(0, 0)]
        node.close()

    asyncio.run(go())


def test_acks_all_waits_for_the_follower_and_times_out(tmp_path: Path) -> None:
    async def go() -> None:
        node = leader_node(tmp_path, isr=(1, 2), replicas=(1, 2), min_isr=2)
        fut = produce(node, batch(2), -1, 2, timeout_ms=200)
        await asyncio.sleep(0.05)
        assert not fut.done()  # in purgatory until the follower fetches past offset 2
        sent = []
        node.send_to_peer = lambda dst, msg: sent.append((dst, msg))
        rid = node.new_request_id()
        resp_fut = node.responses.expect(rid)
        node.handle(ev.MessageReceived(2, FetchRequest(2, TP, 2, 0, 0, request_id=rid)))
        reply = await asyncio.wait_for(fut, 1)
        assert reply.error == Errors.NONE
        assert resp_fut.done() and resp_fut.result().high_watermark == 2
        late = produce(node, batch(1), -1, 1, timeout_ms=100)
        reply = await asyncio.wait_for(late, 2)  # the core's produce timer fired
        assert reply.error == Errors.REQUEST_TIMED_OUT
        node.close()

    asyncio.run(go())


def test_idempotent_retry_gets_its_original_offset_and_survives_restart(tmp_path: Path) -> None:
    async def go() -> None:
        node = leader_node(tmp_path)
        first = await produce(node, batch(2, pid=7, seq=0), 1, 2, producer_id=7,
                              producer_epoch=0, base_sequence=0)
        again = await produce(node, batch(2, pid=7, seq=0), 1, 2, producer_id=7,
                              producer_epoch=0, base_sequence=0)
        assert again.base_offset == first.base_offset == 0
        assert node.logs.get_log("t", 0).log_end_offset == 2
        node.logs.shutdown()
        # restart: producer state is rebuilt from the log's batch headers
        node2 = leader_node(tmp_path)
        retry = await produce(node2, batch(2, pid=7, seq=0), 1, 2, producer_id=7,
                              producer_epoch=0, base_sequence=0)
        assert retry.error == Errors.NONE and retry.base_offset == 0
        gap = await produce(node2, batch(1, pid=7, seq=5), 1, 1, producer_id=7,
                            producer_epoch=0, base_sequence=5)
        assert gap.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        node2.close()

    asyncio.run(go())


def test_long_poll_wakes_on_append(tmp_path: Path) -> None:
    async def go() -> None:
        node = leader_node(tmp_path)
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter = asyncio.create_task(node.wait_for_change([TP], 5.0))
        await asyncio.sleep(0.05)
        produce(node, batch(1), 0, 1)  # acks=0: no reply at all
        await asyncio.wait_for(waiter, 1)
        assert loop.time() - start < 1.0
        node.close()

    asyncio.run(go())


def test_long_polls_share_one_clock_handle_and_still_expire(tmp_path: Path) -> None:
    """Long polls that complete on data (a held follower fetch, twice per acks=all produce)
    arm no clock handle each; a poll nobody wakes still returns at its own deadline, also
    when it is shorter than the polls before it and when those completed early; the
    deadlines table empties once the handle has passed them."""

    async def go() -> None:
        node = leader_node(tmp_path)
        loop = asyncio.get_running_loop()
        armed = 0
        call_at = loop.call_at

        def counting(when: float, cb: object, *args: object, **kw: object) -> object:
            nonlocal armed
            armed += cb == node._expire_polls
            return call_at(when, cb, *args, **kw)  # type: ignore[arg-type]

        loop.call_at = counting  # type: ignore[method-assign,assignment]
        try:
            for _ in range(30):  # each woken by an append long before its 5 s
                waiter = asyncio.create_task(node.wait_for_change([TP], 5.0))
                await asyncio.sleep(0)
                produce(node, batch(1), 0, 1)
                await asyncio.wait_for(waiter, 1)
            assert armed == 1
            start = loop.time()
            await asyncio.wait_for(node.wait_for_change([TP], 0.05), 2)  # nobody wakes it
            assert 0.04 <= loop.time() - start < 1.0
            assert armed == 2  # re-armed earlier for it, once
            long_poll = asyncio.create_task(node.wait_for_change([TP], 0.2))
            await asyncio.wait_for(long_poll, 2)
            assert not node._poll_deadlines or all(
                f.done() for _, _, f in node._poll_deadlines)
        finally:
            loop.call_at = call_at  # type: ignore[method-assign]
        node.close()

    asyncio.run(go())


def test_store_disagreeing_with_the_core_halts_the_node(tmp_path: Path) -> None:
    async def go() -> None:
        node = leader_node(tmp_path)
        failures: list[BaseException] = []
        node.on_failure = failures.append
        # the record count the core is told does not match the batch: a local impossibility
        produce(node, batch(3), 0, 2)
        assert failures and node.failed is not None
        node.handle(ev.TimerFired(FetchTimer(TP)))  # ignored once halted
        node.close()

    asyncio.run(go())


@pytest.mark.parametrize("acks", [0, 1])
def test_produce_to_unknown_partition(tmp_path: Path, acks: int) -> None:
    async def go() -> None:
        node = Node(1, ProtocolConfig(), LogManager([tmp_path]))
        rid = node.new_request_id()
        fut = node.replies.expect(rid)
        node.handle(ev.ProduceReceived(rid, TopicPartition("nope", 0), acks, 1, batch(1)))
        if acks:
            assert fut.done() and fut.result().error == Errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            assert not fut.done()
        node.close()

    asyncio.run(go())


def test_replies_to_peers_are_matched_by_request_id(tmp_path: Path) -> None:
    """Two fetches of the same partition by the same follower, each waiting for its own
    answer: matched by request id, not by (follower, message type, partition)."""
    async def go() -> None:
        node = leader_node(tmp_path, isr=(1, 2), replicas=(1, 2))
        produce(node, batch(3), 1, 3)
        first, second = node.new_request_id(), node.new_request_id()
        fut2 = node.responses.expect(second)
        fut1 = node.responses.expect(first)  # expected last, answered first
        node.handle(ev.MessageReceived(2, FetchRequest(2, TP, 0, 0, -1, request_id=first)))
        assert fut1.done() and not fut2.done()
        assert (fut1.result().request_id, fut1.result().fetch_offset) == (first, 0)
        node.handle(ev.MessageReceived(2, FetchRequest(2, TP, 3, 0, 0, request_id=second)))
        assert (fut2.result().request_id, fut2.result().fetch_offset) == (second, 3)
        node.close()

    asyncio.run(go())


def test_requests_to_peers_are_numbered_and_a_failed_send_backs_off(tmp_path: Path) -> None:
    async def go() -> None:
        node = Node(2, ProtocolConfig(), LogManager([tmp_path]))
        sent: list[tuple[int, object]] = []
        node.send_to_peer = lambda dst, msg: sent.append((dst, msg))
        node.handle(ev.BrokerRegistered(10))
        info = PartitionInfo(TP, 1, 0, (1, 2), 0, (1, 2))
        node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
        for _ in range(20):  # the zero-delay fetch timer fires on the loop
            await asyncio.sleep(0)
            if sent:
                break
        ((dst, fetch),) = sent
        assert dst == 1 and isinstance(fetch, FetchRequest) and fetch.request_id > 0
        assert node.replica(TP).fetch_in_flight
        node.handle(ev.SendFailed(1, fetch))
        assert not node.replica(TP).fetch_in_flight  # backing off replica.fetch.backoff.ms
        assert FetchTimeoutTimer(TP) not in node._timers and FetchTimer(TP) in node._timers
        node.close()

    asyncio.run(go())


def test_a_fetch_round_that_fails_reports_send_failed_per_request() -> None:
    from broker.runtime.peers import Fetcher

    class Recorder:
        broker_id = 2

        def __init__(self) -> None:
            self.events: list[ev.Event] = []

        def handle(self, e: ev.Event) -> None:
            self.events.append(e)

    async def unregistered(broker: int, refresh: bool) -> None:
        return None

    async def go() -> None:
        rec = Recorder()
        f = Fetcher(rec, 1, unregistered, "", 10, 1, 1 << 20, 1 << 20, 1.0)  # type: ignore[arg-type]
        fetch = FetchRequest(2, TP, 0, 0, -1, request_id=7)
        other = FetchRequest(2, TopicPartition("t", 1), 0, 0, -1, request_id=8)
        f.add(fetch)
        f.add(other)
        for _ in range(50):
            await asyncio.sleep(0)
            if len(rec.events) == 2:
                break
        assert sorted(rec.events, key=repr) == [ev.SendFailed(1, fetch), ev.SendFailed(1, other)]
        assert f.task is not None
        f.task.cancel()

    asyncio.run(go())


def test_an_unknown_effect_is_an_error_in_the_broker_too(tmp_path: Path) -> None:
    from broker.runtime.node import NodeError

    node = Node(1, ProtocolConfig(), LogManager([tmp_path]))
    with pytest.raises(NodeError, match="unknown effect"):
        node._apply(object())  # type: ignore[arg-type]
