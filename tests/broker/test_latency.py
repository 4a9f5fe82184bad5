"""Replication latency and prompt recovery of the inter-broker channels (issues #12, #13).

- acks=all is answered when the followers' next fetches report the batch (Kafka's
  DelayedProduce); it must never be bound to a fetch wait or a timer. Live: with
  replica.fetch.wait.max.ms = 5 s, sequential acks=all produces take far less than 5 s, also
  right after the followers' held fetches came back empty.
- After an empty follower fetch the follower fetches again at once (the leader holds the
  fetch; a follower-side wait would leave a gap in which new data waits for it).
- A control request (LeaderAndIsr, ...) that meets a dead connection is resent on a new one
  within a bounded time, not after replica.socket.timeout.ms.

No test here has a tight timing threshold: each bound is a fraction of the wait that a
regression would add (seconds), so a loaded machine does not fail them.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.runtime import peers
from broker.runtime.cluster import LocalCluster
from broker.runtime.node import Node
from broker.runtime.peers import ControlChannel, Endpoint
from broker.store.manager import LogManager
from core import events as ev
from core.config import ProtocolConfig
from core.effects import SetTimer
from core.messages import FetchRequest, FetchResponse, LeaderAndIsrRequest, StopReplicaRequest
from core.node import recover, replica, step
from core.replica import on_fetch_response
from core.timers import FetchTimer
from core.types import Errors, PartitionInfo, TopicPartition

from .clients_lib import create_topic, wait_topic
from .conftest import start_cluster

LONG_WAIT_MS = 5_000
TP = TopicPartition("t", 0)


# -- live: acks=all is not bound to the follower fetch wait --------------------------------------


@pytest.fixture(scope="module")
def long_wait_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("long-wait"),
                      **{"replica.fetch.wait.max.ms": str(LONG_WAIT_MS)})
    try:
        yield c
    finally:
        c.stop()


def _timed_send(p: object, topic: str, partition: int, value: bytes) -> float:
    t0 = time.monotonic()
    p.produce(topic, value, partition=partition)  # type: ignore[attr-defined]
    assert p.flush(30) == 0  # type: ignore[attr-defined]
    return time.monotonic() - t0


@pytest.mark.timeout(180)
def test_acks_all_far_below_a_long_fetch_wait(long_wait_cluster: LocalCluster) -> None:
    """20 sequential acks=all produces, then two after the followers' held fetches expired
    empty: with replica.fetch.wait.max.ms = 5 s, each must take far less than 5 s. Bound to
    the fetch wait (the leader not waking a held fetch on append, the follower waiting after
    an empty fetch, the HW not re-evaluated when a follower reports its LEO), they take up to
    5 s each."""
    from confluent_kafka import Producer

    cluster = long_wait_cluster
    topic = "latency-long-wait"
    assert create_topic("confluent", cluster.bootstrap, topic, 3, 3) == 0
    wait_topic(cluster, topic, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                  "log.connection.close": False})
    for part in range(3):  # warm up: connections, metadata, full ISRs
        _timed_send(p, topic, part, b"warm-up")
    took = []
    for i in range(20):
        time.sleep(0.1)  # the followers' fetches park on the leader again
        took.append(_timed_send(p, topic, i % 3, f"v{i}".encode()))
    # Idle longer than the fetch wait: the held fetches come back empty and the followers
    # fetch again; a produce now must not wait for a follower-side pause.
    idle = []
    for pause in (LONG_WAIT_MS / 1000 + 0.6, LONG_WAIT_MS / 1000 * 0.5):
        time.sleep(pause)
        idle.append(_timed_send(p, topic, 0, b"after-idle"))
    del p
    bound = LONG_WAIT_MS / 1000 / 2
    shown = [round(x, 3) for x in took], [round(x, 3) for x in idle]
    assert statistics.median(took) < bound / 5, f"acks=all round trips {shown} s"
    assert max(took + idle) < bound, f"acks=all round trips {shown} s: bound to the fetch wait"


# -- the follower fetches again at once after an empty fetch (#13 leftover) ----------------------


def test_live_follower_fetches_again_at_once_after_an_empty_fetch(tmp_path: Path) -> None:
    """The live broker holds an empty follower fetch at the leader (DelayedFetch) and sets the
    core's follower-side wait to 0, so there is no gap after an empty fetch: the next
    FetchRequest leaves in the same loop turn's follow-up, before any timer could fire."""
    cfg = BrokerConfig.from_properties({
        "broker.id": "1", "zookeeper.connect": "127.0.0.1:2181",
        "replica.fetch.wait.max.ms": str(LONG_WAIT_MS)})
    assert cfg.replica_fetch_wait_max_ms == LONG_WAIT_MS  # the leader's hold
    assert cfg.protocol_config().replica_fetch_wait_max_ms == 0  # no follower-side pause

    async def run() -> list[FetchRequest]:
        sent: list[FetchRequest] = []
        node = Node(1, cfg.protocol_config(), LogManager([tmp_path]),
                    send_to_peer=lambda dst, m: sent.append(m)
                    if isinstance(m, FetchRequest) else None)
        node.handle(ev.BrokerRegistered(10))
        info = PartitionInfo(TP, 2, 1, (1, 2), 0, (1, 2))
        node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
        for _ in range(3):  # the first fetch leaves on a zero-delay timer
            await asyncio.sleep(0)
        assert len(sent) == 1, sent
        first = sent[0]
        node.handle(ev.MessageReceived(2, FetchResponse(
            TP, Errors.NONE, first.fetch_offset, first.current_leader_epoch, 0, 0,
            end_offset=first.fetch_offset)))  # empty: the leader's hold expired
        for _ in range(3):
            await asyncio.sleep(0)  # loop turns, no clock time
        node.close()
        return sent

    sent = asyncio.run(run())
    assert len(sent) == 2, f"no fetch right after an empty one: {sent}"
    assert sent[1].fetch_offset == sent[0].fetch_offset


def test_model_follower_waits_after_an_empty_fetch() -> None:
    """The model's follower (core default) still waits replica.fetch.wait.max.ms after an
    empty fetch: that is its abstraction of the long poll, kept for the checkers."""
    cfg = ProtocolConfig()
    state = recover(1, cfg, ())
    state, _ = step(state, ev.BrokerRegistered(10))
    info = PartitionInfo(TP, 2, 1, (1, 2), 0, (1, 2))
    state, _ = step(state, ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
    state, _ = step(state, ev.TimerFired(FetchTimer(TP)))
    rs = replica(state, TP)
    assert rs.fetch_in_flight
    _, out = on_fetch_response(rs, FetchResponse(TP, Errors.NONE, 0, 1, 0, 0, end_offset=0), cfg)
    timers = [e for e in out if isinstance(e, SetTimer) and e.key == FetchTimer(TP)]
    assert timers and timers[0].delay_ms == cfg.replica_fetch_wait_max_ms


# -- control requests are resent on a new connection (#13 leftover) -----------------------------


def test_control_request_is_resent_on_a_new_connection(tmp_path: Path) -> None:
    """The destination accepts the first connection and never answers on it (a connection
    that died in a network partition); the request must be resent on a new connection within
    the attempt bound, not after the 30 s socket timeout."""

    async def run() -> tuple[float, int, int]:
        conns = 0
        answered = asyncio.Event()

        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal conns
            conns += 1
            mine = conns
            try:
                while True:
                    size = int.from_bytes(await r.readexactly(4), "big")
                    payload = await r.readexactly(size)
                    if mine == 1:
                        continue  # a black hole
                    cid = payload[4:8]
                    w.write((8).to_bytes(4, "big") + cid + b"\0\0\0\0")
                    await w.drain()
                    answered.set()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                w.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def lookup(broker: int, refresh: bool) -> Endpoint | None:
            return Endpoint("127.0.0.1", port)

        node = Node(1, ProtocolConfig(), LogManager([tmp_path]))
        ch = ControlChannel(node, 2, lookup, "127.0.0.1", 30.0, lambda: {})
        t0 = time.monotonic()
        ch.add(StopReplicaRequest(1, 1, 10, (TP,), False))
        try:
            await asyncio.wait_for(answered.wait(), 20.0)
        finally:
            took = time.monotonic() - t0
            if ch.task is not None:
                ch.task.cancel()
            ch.conn.close()
            server.close()
        return took, conns, ch.attempts

    took, conns, attempts = asyncio.run(run())
    assert conns == 2 and attempts == 2, (conns, attempts)
    assert took < peers.CONTROL_ATTEMPT_TIMEOUT_S + 5.0 < 30.0, took


# -- produce requests of one connection: appended in order, answered in order ------------------


def test_response_pipeline_answers_in_request_order_and_is_bounded() -> None:
    """Later produce requests may be acknowledged first (their partition's followers were
    quicker); the responses still go out in request order, every handler starts in request
    order, and at most `depth` are pending."""
    from broker.runtime.pipeline import ResponsePipeline

    async def run() -> tuple[list[int], list[int], int]:
        written: list[int] = []
        started: list[int] = []
        acks = {i: asyncio.get_running_loop().create_future() for i in range(6)}
        most = 0

        async def write(resp: int) -> None:
            written.append(resp)

        async def handler(i: int) -> int:
            started.append(i)  # the synchronous part: the append
            await acks[i]
            return i

        pipe = ResponsePipeline(write, depth=3)

        async def reader() -> None:
            nonlocal most
            for i in range(6):
                await pipe.submit(handler(i))
                most = max(most, len(pipe))

        r = asyncio.create_task(reader())
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == [0, 1, 2] and not r.done()  # bounded: the 4th waits for room
        for i in (2, 1):  # acknowledged out of order
            acks[i].set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)
        assert written == []  # 0 is not acknowledged yet: nothing may overtake it
        acks[0].set_result(None)
        for i in (5, 3, 4):
            acks[i].set_result(None)
        await asyncio.wait_for(r, 5)
        await asyncio.wait_for(pipe.flush(), 5)
        await pipe.close()
        return written, started, most

    written, started, most = asyncio.run(run())
    assert written == list(range(6)) and started == list(range(6)) and most <= 3


def test_response_pipeline_failure_closes_the_connection() -> None:
    """A produce handler that fails (a bug) must not leave the client waiting: the pipeline
    closes the connection and the reader's next submit or flush raises."""
    from broker.runtime.pipeline import ResponsePipeline

    async def run() -> tuple[bool, bool]:
        closed = []

        async def write(resp: object) -> None:
            pass

        async def bad() -> object:
            raise RuntimeError("boom")

        pipe = ResponsePipeline(write, lambda: closed.append(True))
        await pipe.submit(bad())
        raised = False
        try:
            await asyncio.wait_for(pipe.flush(), 5)
        except RuntimeError:
            raised = True
        await pipe.close()
        return bool(closed), raised

    assert asyncio.run(run()) == (True, True)


def test_response_pipeline_close_still_appends_what_was_read() -> None:
    """A client that sends produce requests and then closes (an acks=0 producer's last
    batches, a FIN right behind them) still has them appended, as Kafka appends what reached
    its request queue: close() lets every submitted handler run its synchronous part (the
    append) before cancelling the waits for acknowledgement. Found by review: close() used to
    cancel handlers that had not started, so nothing was appended."""
    from broker.runtime.pipeline import ResponsePipeline

    async def run() -> list[int]:
        appended: list[int] = []
        never = asyncio.get_running_loop().create_future()

        async def write(resp: object) -> None:
            pass

        async def handler(i: int) -> int:
            appended.append(i)  # the synchronous part: the append
            await never  # acks=all: the connection closes before the acknowledgement
            return i

        pipe = ResponsePipeline(write, depth=5)
        for i in range(3):
            await pipe.submit(handler(i))
        await pipe.close()  # at once: no loop turn between the submits and the close
        return appended

    assert asyncio.run(run()) == [0, 1, 2]


def test_response_pipeline_close_with_a_handler_that_outlives_cancellation() -> None:
    """A handler that returns although cancelled (it caught the cancellation, as a handler
    that answers every error may) must not make the writer pop a cleared queue (found by the
    fuzz test in CI: IndexError logged as a failed produce request)."""
    from broker.runtime.pipeline import ResponsePipeline

    async def run() -> tuple[list[object], BaseException | None]:
        written: list[object] = []
        gate = asyncio.get_running_loop().create_future()

        async def write(resp: object) -> None:
            written.append(resp)  # no await: writes synchronously, as a None frame does

        async def stubborn() -> str:
            try:
                await gate
            except asyncio.CancelledError:
                return "answered anyway"
            return "acked"

        pipe = ResponsePipeline(write, depth=5)
        await pipe.submit(stubborn())
        await asyncio.sleep(0)
        await pipe.close()
        await asyncio.sleep(0)
        return written, pipe.failed

    written, failed = asyncio.run(run())
    assert failed is None and written == []


# -- a held follower fetch: data or a leadership change completes it, a HW change alone not ---


def test_held_follower_fetch_completes_on_data_not_on_a_high_watermark_change(
        tmp_path: Path) -> None:
    """Kafka's DelayedFetch for a follower: a caught-up follower's fetch stays held when only
    the leader's high watermark moves (the follower learns it with its next data), and
    completes as soon as the leader appends past its offset, or stops leading."""
    import types

    from broker.runtime.handlers import Apis
    from broker.store.batch import Record, build_batch
    from broker.wire.fast import FetchPartitionData

    async def run() -> None:
        node = Node(1, ProtocolConfig(), LogManager([tmp_path]))
        node.handle(ev.BrokerRegistered(10))
        info = PartitionInfo(TP, 1, 1, (1, 2), 0, (1, 2))
        node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (info,))))
        apis = Apis(types.SimpleNamespace(node=node))  # type: ignore[arg-type]
        leo = node.replica(TP).log_end_offset
        wanted = [(TP, FetchPartitionData(0, 1, leo, -1, -1, 1 << 20))]
        loop = asyncio.get_running_loop()

        held = asyncio.create_task(apis._hold_replica_fetch(wanted, loop.time() + 30))
        for _ in range(5):
            await asyncio.sleep(0)
        node._changed(TP)  # what a high-watermark checkpoint does
        for _ in range(5):
            await asyncio.sleep(0)
        assert not held.done(), "a high-watermark change alone completed the held fetch"
        now_ms = int(time.time() * 1000)
        batch = build_batch([Record(0, now_ms, b"k", b"v")], base_offset=0)
        node.handle(ev.ProduceReceived(node.new_request_id(), TP, 1, 1, batch))
        await asyncio.wait_for(held, 5)  # data past the fetch offset: completed at once

        leo = node.replica(TP).log_end_offset
        wanted = [(TP, FetchPartitionData(0, 1, leo, -1, -1, 1 << 20))]
        held = asyncio.create_task(apis._hold_replica_fetch(wanted, loop.time() + 30))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not held.done()
        follower = PartitionInfo(TP, 2, 2, (1, 2), 1, (1, 2))  # this broker now follows
        node.handle(ev.MessageReceived(0, LeaderAndIsrRequest(0, 1, 10, (follower,))))
        node._changed(TP)
        await asyncio.wait_for(held, 5)
        node.close()

    asyncio.run(run())


def test_response_pipeline_writes_from_the_resolving_step_in_request_order() -> None:
    """A produce already appended (`Pending`) is answered inside `ReplyWaiters.resolve`, with
    no loop turn (the acks=all response leaves in the step that advanced the HW), yet never
    before an earlier request's response; a future that is not watched (or is resolved
    elsewhere) still completes through its done-callback; the hooks table empties."""
    from broker.runtime.node import ReplyWaiters
    from broker.runtime.pipeline import Pending, ResponsePipeline

    async def run() -> tuple[list[list[int]], int]:
        written: list[int] = []
        seen: list[list[int]] = []
        replies = ReplyWaiters()
        futs = [replies.expect(i) for i in range(4)]

        def write(resp: int) -> None:
            written.append(resp)

        pipe = ResponsePipeline(write, depth=5)
        for i in range(3):
            await pipe.submit_pending(Pending([futs[i]], functools.partial(int, i),
                                              replies.watch))
        unwatched = Pending([futs[3]], lambda: 3)  # no watch: its done-callback writes it
        await pipe.submit_pending(unwatched)
        replies.resolve(1, "ack")
        seen.append(list(written))  # 0 is not acknowledged: 1 waits behind it
        replies.resolve(0, "ack")
        seen.append(list(written))  # at once, no loop turn: 0 then the waiting 1
        replies.resolve(3, "ack")
        seen.append(list(written))  # 2 not yet: 3 waits
        replies.resolve(2, "ack")
        seen.append(list(written))  # 2 in the step; 3 only by its callback, a turn later
        await asyncio.wait_for(pipe.flush(), 5)
        seen.append(list(written))
        await pipe.close()
        return seen, len(replies.hooks) + len(replies.waiting)

    seen, left = asyncio.run(run())
    assert seen == [[], [0, 1], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert left == 0
