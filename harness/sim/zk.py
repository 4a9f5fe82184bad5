"""Simulated ZooKeeper: sessions, ephemeral znodes, versioned writes, watches, expiry.

The semantics are spec/world.py's abstract ZooKeeper (and spec/model.py's `_zk_*`), carried
out the way `broker.runtime.zk.ZkAdapter.execute` and `zkdriver.ZkDriver` turn ZooKeeper into
core events: each effect's completion events reach the broker before any watch that fired
after it (one FIFO link per broker), an effect that cannot reach ZooKeeper fails after the
operation timeout the way `ZkDriver._on_unavailable` handles it, and a registration that
finds our id held by an older session of ours is retried until that session expires.

A session stays alive while its broker can reach ZooKeeper; one that cannot for
`session_timeout_ms` expires: its ephemeral znodes go and the watchers hear. The broker hears
`SessionExpired` once it reaches ZooKeeper again, and carries on under a new session (kazoo).
Nothing ZooKeeper sends crosses a cut link: the cluster holds what reaches a cut broker (watch
notifications and the answers to its operations) until the client reconnects (the next tick
that finds it reachable), then delivers it if the session is still alive, as ZooKeeper
re-fires the watches that triggered meanwhile (setWatches); an expiry drops it, the watches
die with the session, and the broker re-registers and re-reads on `SessionExpired`; an answer
to one of its operations dropped so is the driver's failed operation (`unanswered`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from core import effects as fx
from core import events as ev
from core.types import NO_LEADER, LeaderIsr, LiveBroker, TopicPartition
from harness.sim.sched import US_PER_MS, Delivery, Scheduler

OP_TIMEOUT_MS = 2_000  # an effect that cannot reach ZooKeeper fails after this
RETRY_BACKOFF_MS = 1_000  # ZkDriver.RETRY_BACKOFF_S
ID_IN_USE_RETRY_MS = 500  # ZkDriver._id_in_use
TICK_MS = 200  # how often sessions are checked


class Host(Protocol):
    """What the simulated ZooKeeper needs from the cluster."""

    def zk_reachable(self, broker: int, incarnation: int) -> bool: ...

    def alive(self, broker: int, incarnation: int) -> bool: ...

    def zk_deliver(self, broker: int, incarnation: int, events: tuple[ev.Event, ...],
                   local: bool = False, answers: fx.Effect | None = None) -> None: ...

    def zk_reconnected(self, broker: int, incarnation: int, sid: int) -> None: ...

    def zk_session_over(self, broker: int, sid: int) -> None: ...

    def zk_latency_us(self) -> int: ...


@dataclass
class Session:
    sid: int
    broker: int
    incarnation: int
    last_contact_us: int
    expired: bool = False
    told: bool = False  # the broker heard of the expiry


class SimZooKeeper:
    def __init__(self, sched: Scheduler, host: Host, brokers: int, tp: TopicPartition,
                 session_timeout_ms: int, on_change: Callable[[], None]) -> None:
        self.sched = sched
        self.host = host
        self.tp = tp
        self.session_timeout_us = session_timeout_ms * US_PER_MS
        self.on_change = on_change  # the cluster re-checks invariants
        self.zxid = 0
        self.next_sid = 0
        self.sessions: dict[int, Session] = {}
        self.current: dict[int, int] = {}  # broker -> its current session id
        self.registered: dict[int, tuple[int, int]] = {}  # broker -> (session id, czxid)
        self.controller = NO_LEADER
        self.controller_sid = -1
        self.controller_epoch = 0
        self.controller_epoch_version = 0
        self.assignment = tuple(range(brokers))
        self.partition: LeaderIsr | None = None
        self.partition_mzxid = -1  # the zxid of the state's last write
        self.busy_until: dict[int, int] = {}  # broker -> when its queued effects are done
        self.expiries = 0
        # A leader's ISR write landed and the controller has not been sent the change
        # notification yet (the leader sends it after hearing its write succeeded): the
        # controller has a notification pending, as spec.world's `inbox`.
        self.isr_unseen = False
        sched.after_us(TICK_MS * US_PER_MS, self._tick)

    # -- sessions -------------------------------------------------------------------------

    def connect(self, broker: int, incarnation: int) -> None:
        """A (re)started broker opens a new session."""
        self.next_sid += 1
        s = Session(self.next_sid, broker, incarnation, self.sched.now_us)
        self.sessions[s.sid] = s
        self.current[broker] = s.sid

    def _tick(self) -> None:
        now = self.sched.now_us
        for sid in sorted(self.sessions):
            s = self.sessions[sid]
            if self.host.zk_reachable(s.broker, s.incarnation):
                s.last_contact_us = now
                if s.expired and not s.told and self.current.get(s.broker) == sid:
                    self._tell_expired(s)
                elif not s.expired:
                    self.host.zk_reconnected(s.broker, s.incarnation, sid)
            elif not s.expired and now - s.last_contact_us > self.session_timeout_us:
                self.expire(sid)
        # forget sessions that are over and told (or whose broker moved on)
        for sid in [k for k, s in sorted(self.sessions.items())
                    if s.expired and (s.told or self.current.get(s.broker) != k)]:
            del self.sessions[sid]
        self.sched.after_us(TICK_MS * US_PER_MS, self._tick)

    def expire(self, sid: int) -> None:
        """The session ends: its ephemeral znodes go, watchers hear."""
        s = self.sessions.get(sid)
        if s is None or s.expired:
            return
        s.expired = True
        self.expiries += 1
        b = s.broker
        self.host.zk_session_over(b, sid)  # what was held for it will never cross
        if self.registered.get(b, (None,))[0] == sid:
            del self.registered[b]
            self._brokers_changed()
        if self.controller_sid == sid:
            self.controller, self.controller_sid = NO_LEADER, -1
            self._notify_all(ev.ControllerChanged(NO_LEADER))
        self.on_change()

    def expire_broker(self, broker: int) -> None:
        sid = self.current.get(broker)
        if sid is not None:
            self.expire(sid)

    def delete_controller(self) -> None:
        """`/controller` is deleted (not the holder's session): every broker hears, the holder
        resigns, all race to create it again (`ZkElectController`)."""
        if self.controller == NO_LEADER:
            return
        self.zxid += 1
        self.controller, self.controller_sid = NO_LEADER, -1
        self._notify_all(ev.ControllerChanged(NO_LEADER))
        self.on_change()

    def _tell_expired(self, s: Session) -> None:
        """The broker reconnects and learns its session is gone; kazoo opens a new one."""
        s.told = True
        self.connect(s.broker, s.incarnation)
        self.host.zk_deliver(s.broker, s.incarnation, (ev.SessionExpired(),))

    def live_sid(self, broker: int, incarnation: int) -> int:
        """The id of the broker's live session in this incarnation, or -1."""
        s = self._live_session(broker, incarnation)
        return s.sid if s is not None else -1

    def _live_session(self, broker: int, incarnation: int) -> Session | None:
        sid = self.current.get(broker)
        s = self.sessions.get(sid) if sid is not None else None
        if s is None or s.expired or s.incarnation != incarnation:
            return None
        return s

    # -- watches --------------------------------------------------------------------------

    def _live(self) -> tuple[LiveBroker, ...]:
        return tuple(sorted(LiveBroker(b, cz) for b, (_, cz) in self.registered.items()))

    def _snapshots(self, electing: bool = False) -> tuple[ev.PartitionSnapshot, ...]:
        """The partition as read; a new controller (`electing`) also reads which brokers
        registered since its state was written (czxid above mzxid), as the real driver."""
        since: tuple[int, ...] = ()
        if electing and self.partition is not None:
            since = tuple(sorted(b for b, (_, czxid) in self.registered.items()
                                 if czxid > self.partition_mzxid))
        return (ev.PartitionSnapshot(self.tp, self.assignment, self.partition,
                                     registered_since=since),)

    def _notify(self, broker: int, event: ev.Event) -> None:
        s = self.current.get(broker)
        sess = self.sessions.get(s) if s is not None else None
        if sess is not None and not sess.expired:
            self.host.zk_deliver(broker, sess.incarnation, (event,))

    def _notify_all(self, event: ev.Event, but: int = NO_LEADER) -> None:
        for b in sorted(self.current):
            if b != but:
                self._notify(b, event)

    def _brokers_changed(self) -> None:
        if self.controller != NO_LEADER:
            self._notify(self.controller, ev.BrokersChanged(self._live()))

    # -- effects --------------------------------------------------------------------------

    def submit(self, broker: int, incarnation: int, effect: fx.Effect) -> None:
        """Carry out `effect` after ZooKeeper's latency, after the broker's earlier ones."""
        start = max(self.sched.now_us, self.busy_until.get(broker, 0))
        t = start + self.host.zk_latency_us()
        self.busy_until[broker] = t
        # (queued: what the znodes may yet say, as `Cluster.on_its_way` reads it)
        self.sched.at(t, Delivery(broker, effect,
                                  lambda: self._execute(broker, incarnation, effect)))

    def _execute(self, broker: int, incarnation: int, effect: fx.Effect) -> None:
        if not self.host.alive(broker, incarnation):
            return  # a crashed process's effects die with it
        s = self._live_session(broker, incarnation)
        if s is None or not self.host.zk_reachable(broker, incarnation):
            self.sched.after_us(OP_TIMEOUT_MS * US_PER_MS, Delivery(
                broker, effect, lambda: self._unavailable(broker, incarnation, effect)))
            return
        events = self._apply(broker, s, effect)
        if events is None:  # our id is held by an older session of ours: wait it out
            self.sched.after_us(ID_IN_USE_RETRY_MS * US_PER_MS, Delivery(
                broker, effect, lambda: self.submit(broker, incarnation, effect)))
            return
        if events:
            self.host.zk_deliver(broker, incarnation, events, answers=effect)
        self.on_change()

    def unanswered(self, broker: int, incarnation: int, effect: fx.Effect) -> None:
        """The answer to `effect` could not cross before its session expired: the driver
        never hears it and treats the operation as one that could not reach ZooKeeper
        (spec.model's `_expire` likewise rejects a session's pending writes)."""
        self._unavailable(broker, incarnation, effect)

    def _unavailable(self, broker: int, incarnation: int, effect: fx.Effect) -> None:
        """`ZkDriver._on_unavailable`: retry, resign or report the write failed."""
        if not self.host.alive(broker, incarnation):
            return
        match effect:
            case (fx.ZkRegisterBroker() | fx.ZkElectController() | fx.ZkNotifyIsrChange()
                  | fx.ZkDeleteTopic() | fx.ZkResignController()):
                self.sched.after_us(RETRY_BACKOFF_MS * US_PER_MS, Delivery(
                    broker, effect, lambda: self.submit(broker, incarnation, effect)))
            # (the broker's own driver reports these: they cross no link)
            case fx.ZkWritePartitionState(by_controller=True):
                self.host.zk_deliver(broker, incarnation, (ev.PartitionStateWritten(
                    effect.tp, effect.proposed, True, ok=False, fenced=True, current=None,
                    unknown=True),), local=True)
            case fx.ZkWritePartitionState():
                self.host.zk_deliver(broker, incarnation, (ev.PartitionStateWritten(
                    effect.tp, effect.proposed, False, ok=False, fenced=False, current=None,
                    unknown=True),), local=True)
            case _:
                pass

    def _apply(self, b: int, s: Session, effect: fx.Effect) -> tuple[ev.Event, ...] | None:
        match effect:
            case fx.ZkRegisterBroker():
                held = self.registered.get(b)
                if held is not None and held[0] != s.sid:
                    return None
                if held is None:
                    self.zxid += 1
                    self.registered[b] = (s.sid, self.zxid)
                    self._brokers_changed()
                return (ev.BrokerRegistered(self.registered[b][1]),
                        ev.ControllerChanged(self.controller))
            case fx.ZkElectController():
                return (self._elect(b, s),)
            case fx.ZkResignController():
                if self.controller == b and self.controller_sid == s.sid:
                    self.controller, self.controller_sid = NO_LEADER, -1
                    self._notify_all(ev.ControllerChanged(NO_LEADER))
                return ()
            case fx.ZkWritePartitionState():
                return (self._write(effect),)
            case fx.ZkNotifyIsrChange():
                if self.controller != NO_LEADER:
                    self.isr_unseen = False  # in flight to the controller now
                    self._notify(self.controller, ev.IsrChanged(self._snapshots()))
                return ()
            case fx.ZkDeleteTopic():
                return ()
        raise TypeError(f"not a ZooKeeper effect: {effect!r}")

    def _elect(self, b: int, s: Session) -> ev.ControllerElection:
        """Kafka's registerControllerAndIncrementControllerEpoch (ZkAdapter._elect_once)."""
        lost = ev.ControllerElection(False, self.controller, self.controller_epoch,
                                     self.controller_epoch_version, (), ())
        if self.controller != NO_LEADER and not (self.controller == b
                                                 and self.controller_sid == s.sid):
            return lost
        if self.registered.get(b, (None,))[0] != s.sid:
            return lost
        # (a broker that holds /controller and runs again releases it and wins a new epoch)
        self.zxid += 1
        self.controller, self.controller_sid = b, s.sid
        self.controller_epoch += 1
        self.controller_epoch_version += 1
        self.isr_unseen = False  # the new controller reads every partition's state
        self._notify_all(ev.ControllerChanged(b), but=b)
        return ev.ControllerElection(True, b, self.controller_epoch,
                                     self.controller_epoch_version, self._live(),
                                     self._snapshots(electing=True))

    def _write(self, e: fx.ZkWritePartitionState) -> ev.PartitionStateWritten:
        fenced = (e.controller_epoch_zk_version is not None
                  and e.controller_epoch_zk_version != self.controller_epoch_version)
        cur = self.partition
        version_ok = (cur is None and e.expected_zk_version == -1) or (
            cur is not None and cur.zk_version == e.expected_zk_version)
        if version_ok and not fenced:
            self.zxid += 1
            self.partition, self.partition_mzxid = e.proposed, self.zxid
            if not e.by_controller:
                self.isr_unseen = True
            return ev.PartitionStateWritten(e.tp, e.proposed, e.by_controller, True, False, None)
        return ev.PartitionStateWritten(e.tp, e.proposed, e.by_controller, False, fenced, cur)

