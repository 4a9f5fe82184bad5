"""The kazoo adapter against a real ZooKeeper server: the same semantics as the abstract
ZooKeeper of `spec/model.py` (registration, election, fenced conditional writes, watches,
session expiry)."""

from __future__ import annotations

import asyncio
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from kazoo.client import KazooClient

from broker.runtime.zk import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    ISR_CHANGES,
    AsyncioSink,
    BrokerIdInUse,
    QueueSink,
    ZkAdapter,
    ZkUnavailable,
    partition_state_path,
)
from broker.runtime.zkserver import ZooKeeperServer, four_letter_word, free_port
from core import effects as fx
from core.events import (
    BrokerRegistered,
    BrokersChanged,
    ControllerChanged,
    ControllerElection,
    Event,
    IsrChanged,
    PartitionSnapshot,
    PartitionStateWritten,
    SessionExpired,
    TopicsChanged,
)
from core.types import NO_LEADER, LeaderIsr, LiveBroker, TopicPartition

E = TypeVar("E", bound=Event)
TP = TopicPartition("t", 0)
WAIT_S = 8.0  # bound for any watch to fire


class Cluster:
    """Adapters for brokers of one test, closed at the end."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.adapters: list[ZkAdapter] = []
        self.sinks: dict[int, QueueSink] = {}

    def adapter(self, broker_id: int, **kw: object) -> ZkAdapter:
        sink = QueueSink(maxsize=256, put_timeout_s=5.0)
        a = ZkAdapter(self.hosts, broker_id, sink=sink, port=9092 + broker_id,
                      session_timeout_s=2.0, connect_timeout_s=5.0, op_timeout_s=8.0,
                      **kw)  # type: ignore[arg-type]
        a.start()
        self.adapters.append(a)
        return a

    def close(self) -> None:
        for a in self.adapters:
            a.close()


@pytest.fixture
def cluster(zk_hosts: str) -> Iterator[Cluster]:
    c = Cluster(zk_hosts)
    try:
        yield c
    finally:
        c.close()


def wait_event(a: ZkAdapter, cls: type[E], pred: Callable[[E], bool] = lambda _e: True,
               timeout: float = WAIT_S) -> E:
    """The first event of type `cls` satisfying `pred` from `a`'s sink, within `timeout`."""
    sink = a.sink
    assert isinstance(sink, QueueSink)
    deadline = time.monotonic() + timeout
    seen: list[Event] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {cls.__name__} within {timeout}s; saw {seen}")
        try:
            ev = sink.get(timeout=left)
        except queue.Empty:
            continue
        seen.append(ev)
        if isinstance(ev, cls) and pred(ev):
            return ev


def drain(a: ZkAdapter) -> list[Event]:
    sink = a.sink
    assert isinstance(sink, QueueSink)
    out: list[Event] = []
    while True:
        try:
            out.append(sink.get(timeout=0))
        except queue.Empty:
            return out


def expire_session(hosts: str, a: ZkAdapter) -> None:
    """ZooKeeper's own way to expire a session in a test: connect a second client with the
    same session id and password, then close it; the server ends the session."""
    sid, passwd = a.client.client_id
    other = KazooClient(hosts=hosts, client_id=(sid, passwd), timeout=2.0)
    other.start(timeout=5)
    other.stop()
    other.close()


def elected(a: ZkAdapter) -> ControllerElection:
    e = a.elect_controller()
    assert e.won, e
    return e


# ----------------------------------------------------------------------------------------
# the server


def test_server_answers_four_letter_words(zk_server: ZooKeeperServer) -> None:
    assert zk_server.port is not None
    assert four_letter_word("127.0.0.1", zk_server.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word("127.0.0.1", zk_server.port, "srvr")
    assert zk_server.running and zk_server.pid is not None


def test_server_start_stop_by_pid(zk_server: ZooKeeperServer) -> None:
    with ZooKeeperServer(tick_time_ms=500) as z:
        pid, port = z.pid, z.port
        assert pid is not None and port is not None
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
    assert not z.running
    with pytest.raises(OSError):
        four_letter_word("127.0.0.1", port, "ruok", timeout_s=0.5)


# ----------------------------------------------------------------------------------------
# registration


def test_register_broker_czxid_is_broker_epoch(cluster: Cluster) -> None:
    a = cluster.adapter(1)
    reg = a.register_broker()
    data, stat = a.client.get("/brokers/ids/1")
    assert reg.broker_epoch == stat.czxid > 0
    assert stat.ephemeralOwner == a.session_id
    d = json.loads(data)
    assert (d["host"], d["port"], d["version"]) == ("127.0.0.1", 9093, 5)
    assert d["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"]
    # registering again in the same session is idempotent (a retry after connection loss)
    assert a.register_broker() == reg
    # the effect also tells the broker who the controller is (spec.model._zk_register)
    assert a.execute(fx.ZkRegisterBroker(1)) == (reg, ControllerChanged(NO_LEADER))


def test_duplicate_broker_id_is_a_clear_error(cluster: Cluster) -> None:
    a = cluster.adapter(1)
    first = a.register_broker()
    b = cluster.adapter(1)
    with pytest.raises(BrokerIdInUse, match=re.escape("broker.id 1 is already registered")):
        b.register_broker()
    a.close()  # the first broker goes: its ephemeral node with it
    second = b.register_broker()
    assert second.broker_epoch > first.broker_epoch  # a new registration, a new epoch


# ----------------------------------------------------------------------------------------
# controller election


def test_controller_election_race_exactly_one_wins(cluster: Cluster) -> None:
    adapters = [cluster.adapter(b) for b in (1, 2, 3)]
    regs = {a.broker_id: a.register_broker().broker_epoch for a in adapters}
    adapters[0].create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    epoch0, _ = adapters[0].read_controller_epoch()
    barrier = threading.Barrier(len(adapters))
    results: dict[int, ControllerElection] = {}

    def run(a: ZkAdapter) -> None:
        barrier.wait(5)
        results[a.broker_id] = a.elect_controller()

    threads = [threading.Thread(target=run, args=(a,)) for a in adapters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    winners = [r for r in results.values() if r.won]
    losers = [r for r in results.values() if not r.won]
    assert len(results) == 3 and len(winners) == 1, results
    w = winners[0]
    assert w.controller_epoch == epoch0 + 1
    data, stat = adapters[0].client.get(CONTROLLER_EPOCH)
    assert (int(data), stat.version) == (w.controller_epoch, w.epoch_zk_version)
    assert w.live_brokers == tuple(LiveBroker(b, regs[b]) for b in (1, 2, 3))
    assert w.partitions == (
        PartitionSnapshot(TopicPartition("t", 0), (1, 2, 3), None),
        PartitionSnapshot(TopicPartition("t", 1), (2, 3, 1), None),
    )
    for r in losers:
        assert (r.controller_id, r.controller_epoch) == (w.controller_id, w.controller_epoch)
        assert r.live_brokers == () and r.partitions == ()
    data, _ = adapters[0].client.get(CONTROLLER)
    assert json.loads(data)["brokerid"] == w.controller_id
    assert json.loads(data)["version"] == 1


def test_unregistered_broker_does_not_become_controller(cluster: Cluster) -> None:
    a = cluster.adapter(1)
    e = a.elect_controller()
    assert not e.won and e.controller_id == NO_LEADER  # as spec.model._zk_elect


def test_zombie_controller_write_is_fenced(cluster: Cluster) -> None:
    a, b = cluster.adapter(1), cluster.adapter(2)
    a.register_broker()
    b.register_broker()
    a.create_topic("t", {0: [1, 2]})
    ea = elected(a)
    first = LeaderIsr(1, 0, (1, 2), ea.controller_epoch, 0)
    w = a.write_partition_state(TP, first, -1, ea.epoch_zk_version, by_controller=True)
    assert w.ok and not w.fenced
    # a loses /controller without hearing of it (a zombie); b is elected
    a.client.delete(CONTROLLER)
    eb = elected(b)
    assert eb.controller_epoch == ea.controller_epoch + 1
    assert eb.partitions[0].state == first
    stale = LeaderIsr(2, 1, (2,), ea.controller_epoch, 1)
    z = a.write_partition_state(TP, stale, 0, ea.epoch_zk_version, by_controller=True)
    assert (z.ok, z.fenced, z.current) == (False, True, first)
    # the new controller's write at the same zkVersion goes through
    fresh = LeaderIsr(2, 1, (2,), eb.controller_epoch, 1)
    ok = b.write_partition_state(TP, fresh, 0, eb.epoch_zk_version, by_controller=True)
    assert ok.ok and b.read_partition_state(TP) == fresh


def test_partition_state_cas(cluster: Cluster) -> None:
    a = cluster.adapter(1)
    a.register_broker()
    a.create_topic("t", {0: [1, 2, 3]})
    e = elected(a)
    s0 = LeaderIsr(1, 0, (1, 2, 3), e.controller_epoch, 0)
    (w,) = a.execute(fx.ZkWritePartitionState(TP, s0, -1, e.epoch_zk_version, True))
    assert w == PartitionStateWritten(TP, s0, True, True, False, None)
    data, stat = a.client.get(partition_state_path(TP))
    assert stat.version == 0
    assert json.loads(data) == {"controller_epoch": e.controller_epoch, "leader": 1,
                                "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
    # creating again: NodeExists -> not ok, not fenced, current state returned
    again = a.write_partition_state(TP, s0, -1, e.epoch_zk_version, True)
    assert (again.ok, again.fenced, again.current) == (False, False, s0)
    # the leader shrinks the ISR (no controller-epoch check), at zkVersion 0
    s1 = LeaderIsr(1, 0, (1, 2), e.controller_epoch, 1)
    w1 = a.write_partition_state(TP, s1, 0, None, by_controller=False)
    assert w1.ok and a.read_partition_state(TP) == s1
    # a stale zkVersion: BadVersion -> not ok, current is what ZooKeeper holds
    s2 = LeaderIsr(1, 0, (1,), e.controller_epoch, 1)
    w2 = a.write_partition_state(TP, s2, 0, None, by_controller=False)
    assert (w2.ok, w2.fenced, w2.current) == (False, False, s1)
    # a controller write on a stale zkVersion but a current epoch is not fenced
    w3 = a.write_partition_state(TP, s2, 0, e.epoch_zk_version, by_controller=True)
    assert (w3.ok, w3.fenced, w3.current) == (False, False, s1)


# ----------------------------------------------------------------------------------------
# watches


def test_controller_watch_fires_on_resign_and_on_session_close(cluster: Cluster) -> None:
    a, b = cluster.adapter(1), cluster.adapter(2)
    a.register_broker()
    b.register_broker()
    elected(a)
    wait_event(b, ControllerChanged, lambda e: e.controller_id == 1)
    t0 = time.monotonic()
    a.execute(fx.ZkResignController(1))
    wait_event(b, ControllerChanged, lambda e: e.controller_id == NO_LEADER, timeout=2.0)
    assert time.monotonic() - t0 < 2.0
    assert not a.is_controller
    elected(b)
    wait_event(a, ControllerChanged, lambda e: e.controller_id == 2)
    b.close()  # the controller's session ends: /controller goes at once
    wait_event(a, ControllerChanged, lambda e: e.controller_id == NO_LEADER, timeout=2.0)
    assert a.read_controller() == NO_LEADER


def test_brokers_and_topics_watches(cluster: Cluster) -> None:
    c, x, y = cluster.adapter(1), cluster.adapter(2), cluster.adapter(3)
    reg = {a.broker_id: a.register_broker().broker_epoch for a in (c, x, y)}
    e = elected(c)
    assert [lb.broker_id for lb in e.live_brokers] == [1, 2, 3]
    y.close()  # broker 3's ephemeral goes with its session
    ev = wait_event(c, BrokersChanged)
    assert ev.live_brokers == (LiveBroker(1, reg[1]), LiveBroker(2, reg[2]))
    y2 = cluster.adapter(3)
    r3 = y2.register_broker()
    ev = wait_event(c, BrokersChanged, lambda e: len(e.live_brokers) == 3)
    assert ev.live_brokers[2] == LiveBroker(3, r3.broker_epoch) and r3.broker_epoch > reg[3]
    x.create_topic("u", {0: [2, 3], 1: [3, 1]})
    tc = wait_event(c, TopicsChanged)
    assert tc.partitions == (
        PartitionSnapshot(TopicPartition("u", 0), (2, 3), None),
        PartitionSnapshot(TopicPartition("u", 1), (3, 1), None),
    )
    # a non-controller hears nothing of brokers or topics
    assert not any(isinstance(ev, (BrokersChanged, TopicsChanged)) for ev in drain(x))


def test_isr_change_notification_is_consumed(cluster: Cluster) -> None:
    c, leader = cluster.adapter(1), cluster.adapter(2)
    c.register_broker()
    leader.register_broker()
    c.create_topic("t", {0: [2, 1]})
    e = elected(c)
    s0 = LeaderIsr(2, 0, (2, 1), e.controller_epoch, 0)
    assert c.write_partition_state(TP, s0, -1, e.epoch_zk_version, True).ok
    s1 = s0._replace(isr=(2,), zk_version=1)
    assert leader.write_partition_state(TP, s1, 0, None, False).ok
    assert leader.execute(fx.ZkNotifyIsrChange(TP)) == ()
    ev = wait_event(c, IsrChanged)
    assert ev.partitions == (PartitionSnapshot(TP, (2, 1), s1),)
    deadline = time.monotonic() + 2
    while c.client.get_children(ISR_CHANGES) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.client.get_children(ISR_CHANGES) == []
    assert not any(isinstance(ev, IsrChanged) for ev in drain(leader))


def test_stale_isr_notifications_are_covered_by_the_election_snapshot(
    cluster: Cluster,
) -> None:
    c = cluster.adapter(1)
    c.register_broker()
    c.create_topic("t", {0: [1]})
    c.notify_isr_change([TP])
    assert len(c.client.get_children(ISR_CHANGES)) == 1
    elected(c)
    assert c.client.get_children(ISR_CHANGES) == []
    assert not any(isinstance(ev, IsrChanged) for ev in drain(c))


# ----------------------------------------------------------------------------------------
# session expiry and unreachable servers


def test_session_expiry_then_reregistration(cluster: Cluster) -> None:
    a, other = cluster.adapter(1), cluster.adapter(2)
    reg = a.register_broker()
    other.register_broker()
    elected(a)
    drain(other)
    expire_session(cluster.hosts, a)
    wait_event(a, SessionExpired)
    assert not a.is_controller
    # its ephemeral nodes are gone: another broker hears the controller left
    wait_event(other, ControllerChanged, lambda e: e.controller_id == NO_LEADER)
    # kazoo reconnects with a new session; the core asks to register again
    events = a.execute(fx.ZkRegisterBroker(1))
    assert isinstance(events[0], BrokerRegistered)
    assert events[0].broker_epoch > reg.broker_epoch
    assert other.live_brokers()[0] == LiveBroker(1, events[0].broker_epoch)
    # and the watch on /controller works in the new session
    elected(other)
    wait_event(a, ControllerChanged, lambda e: e.controller_id == 2)


def test_unreachable_zookeeper_is_a_clear_error_within_the_bound() -> None:
    port = free_port()  # nobody listens there
    a = ZkAdapter(f"127.0.0.1:{port}", 1, connect_timeout_s=1.5)
    t0 = time.monotonic()
    why = re.escape(f"127.0.0.1:{port} not reachable within 1.5s")
    with pytest.raises(ZkUnavailable, match=why):
        a.start()
    assert time.monotonic() - t0 < 5.0


def test_operation_bounded_while_server_down(zk_server: ZooKeeperServer) -> None:
    """A separate server we can stop: operations fail with ZkUnavailable after the bound."""
    with ZooKeeperServer(tick_time_ms=500) as z:
        a = ZkAdapter(z.hosts, 1, session_timeout_s=2.0, op_timeout_s=1.5)
        a.start()
        try:
            a.register_broker()
            z.stop()
            t0 = time.monotonic()
            with pytest.raises(ZkUnavailable, match=re.escape("did not complete within 1.5s")):
                a.read_controller()
            assert time.monotonic() - t0 < 4.0
        finally:
            a.close()


# ----------------------------------------------------------------------------------------
# asyncio


def test_asyncio_sink_and_aexecute(cluster: Cluster) -> None:
    async def main() -> list[Event]:
        loop = asyncio.get_running_loop()
        sink = AsyncioSink(loop, maxsize=8)
        a = ZkAdapter(cluster.hosts, 1, sink=sink, session_timeout_s=2.0)
        b = cluster.adapter(2)
        await asyncio.to_thread(a.start)
        try:
            got: list[Event] = list(await a.aexecute(fx.ZkRegisterBroker(1)))
            await asyncio.to_thread(b.register_broker)
            got += await a.aexecute(fx.ZkElectController(1))
            await asyncio.to_thread(b.close)
            while not any(isinstance(e, BrokersChanged) for e in got):
                got.append(await asyncio.wait_for(sink.get(), WAIT_S))
            return got
        finally:
            await asyncio.to_thread(a.close)

    got = asyncio.run(main())
    assert isinstance(got[0], BrokerRegistered)
    assert got[1] == ControllerChanged(NO_LEADER)
    assert isinstance(got[2], ControllerElection) and got[2].won
    assert [lb.broker_id for lb in got[2].live_brokers] == [1, 2]
    assert got[-1] == BrokersChanged((LiveBroker(1, got[0].broker_epoch),))


# ----------------------------------------------------------------------------------------
# the real core over the adapter


def test_core_brokers_elect_a_controller_and_write_partition_states(cluster: Cluster) -> None:
    """Three `core.node` brokers whose ZooKeeper effects go through their adapters (other
    effects are dropped: no replication here). One becomes controller and writes every
    partition's state; when its session ends, another takes over with the next epoch."""
    from core.config import ProtocolConfig
    from core.events import Started
    from core.node import BrokerState, init, step

    cfg = ProtocolConfig()
    ids = (1, 2, 3)
    adapters = {b: cluster.adapter(b) for b in ids}
    adapters[1].create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    states: dict[int, BrokerState] = {b: init(b, cfg) for b in ids}
    alive = set(ids)

    trace: list[tuple[int, str, str]] = []

    def run(b: int, event: Event) -> None:
        states[b], effects = step(states[b], event)
        trace.append((b, repr(event)[:150], repr(effects)[:300]))
        for e in effects:
            if isinstance(e, (fx.ZkRegisterBroker, fx.ZkElectController, fx.ZkResignController,
                              fx.ZkWritePartitionState, fx.ZkNotifyIsrChange)):
                for completion in adapters[b].execute(e):  # in order, before the sink
                    run(b, completion)
            elif isinstance(e, fx.Choose):
                from core.events import Chosen

                run(b, Chosen(e.key, 0))  # an index: the first option

    def pump_until(cond: Callable[[], bool], timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for b in sorted(alive):
                for ev in drain(adapters[b]):
                    run(b, ev)
            if cond():
                return
            time.sleep(0.02)
        raise AssertionError("condition not reached; states: "
                             f"{[(b, states[b].controller_id) for b in ids]}")

    tps = [TopicPartition("t", p) for p in range(3)]
    probe = adapters[1]

    def all_written(epoch: int) -> bool:
        got = [probe.read_partition_state(tp) for tp in tps]
        return all(s is not None and s.controller_epoch == epoch for s in got)

    # 2 and 3 are registered when 1 runs for controller (else 1 would start alone, with
    # ISRs of one); their own Started re-registers idempotently in the same session.
    adapters[2].register_broker()
    adapters[3].register_broker()
    for b in ids:
        run(b, Started())
    pump_until(lambda: all_written(1))
    controllers = [b for b in ids if states[b].controller is not None]
    assert len(controllers) == 1, "\n".join(map(str, trace))
    del trace[:]
    first = controllers[0]
    assert all(states[b].controller_id == first for b in ids)
    for tp, replicas in zip(tps, ([1, 2, 3], [2, 3, 1], [3, 1, 2]), strict=True):
        s = probe.read_partition_state(tp)
        assert s is not None
        assert s.leader == replicas[0] and s.isr == tuple(replicas) and s.leader_epoch == 0

    # the controller's session ends: its ephemerals go, another broker is elected (epoch 2)
    adapters[first].close()
    alive.discard(first)
    probe = adapters[min(alive)]
    before = {tp: probe.read_partition_state(tp) for tp in tps}

    def failed_over() -> bool:
        ctl = [b for b in alive if states[b].controller is not None]
        if len(ctl) != 1 or probe.read_controller() != ctl[0]:
            return False
        led = [tp for tp in tps if (s := before[tp]) is not None and s.leader == first]
        return all((s := probe.read_partition_state(tp)) is not None and s.leader != first
                   and s.controller_epoch == 2 for tp in led)

    pump_until(failed_over)
    e, v = probe.read_controller_epoch()
    assert (e, v) == (2, 2)
    for tp in tps:
        s = probe.read_partition_state(tp)
        assert s is not None and first not in s.isr and s.leader != first
