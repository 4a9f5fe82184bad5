"""The effect interpreter: one broker's core state, and everything that carries out its effects.

`Node` owns the pure core's `BrokerState` and is the only place that calls `core.node.step`.
Events come from the network (requests, peer responses), timers and ZooKeeper; each is queued
and stepped in order, and the effects that come out are applied in order (DESIGN rule 2):

    Append*/TruncateTo/Checkpoint*/DeletePartition -> the segment store (`broker.store`)
    SetTimer/CancelTimer                            -> the `Clock` port, one handle per key
    Choose                                          -> Kafka's first option, fed back as Chosen
    Zk*                                             -> the `ZkEffects` port (kazoo, in order)
    Send                                            -> the `Transport` port: a request to a
                                                       peer, or the answer to a peer's request
    ProduceReply/ConsumerFetchReply/ListOffsetsReply -> the client request waiting for it

Clock, transport and ZooKeeper are ports (`broker.runtime.ports`) and the store is a
`LogManager` over an FS port, so the live broker (asyncio, kazoo, real files) and the
deterministic simulator (`harness.sim`) run this same interpreter. `handle` is re-entrant
safe (an event raised while effects are being applied is queued behind the current one), so
the order in which the core sees events is the order they were handled.

Long polls (Kafka's DelayedFetch) live here too: `wait_for_change(tps, timeout)` wakes when a
partition's log or high watermark moves, and the request handler asks the core again.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import heapq
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.runtime.ports import (
    AsyncioClock,
    CallbackTransport,
    CallbackZk,
    Cancellable,
    Clock,
    Transport,
    ZkEffects,
    running_loop,
)
from broker.store.config import LogConfig
from broker.store.log import Log
from broker.store.manager import LogManager
from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import (
    ControlledShutdownResponse,
    FetchResponse,
    LeaderAndIsrRequest,
    Message,
    OffsetForLeaderEpochResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.node import BrokerState, DurableReplica, recover, replica, step
from core.producer import ProducerTable, record_batch
from core.rules.epochs import EpochEntry
from core.timers import FetchTimeoutTimer, ProduceTimeoutTimer, ReplicaLagTimer, TimerKey
from core.types import NO_BROKER_EPOCH, InvariantBroken, TopicPartition

log = logging.getLogger(__name__)
state_log = logging.getLogger("hiwater.state_change")

EVENT_QUEUE_MAX = 100_000  # events raised while applying effects (bounded, DESIGN rule 9)
# Timers re-armed or cancelled on every replication round, whose keys are per partition (or
# per follower), so at most one handle each stays with the clock (see `Node._set_lazy`).
LAZY_TIMERS = (ReplicaLagTimer, FetchTimeoutTimer)
# Timers set once per request with a new key each and nearly always cancelled long before
# they are due: deadlines in one heap with one clock handle (see `Node._set_queued`).
QUEUED_TIMERS = (ProduceTimeoutTimer,)
QUEUED_SLACK = 1024  # cancelled heap entries tolerated beyond twice the live ones
RESPONSES = (FetchResponse, OffsetForLeaderEpochResponse, ControlledShutdownResponse)
ROLE_CHANGES = (LeaderAndIsrRequest, StopReplicaRequest)
CONTROL_REQUESTS = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)
HELD_CONTROL_MAX = 64  # control requests kept while the broker is not registered yet
STATE_CHANGE_EVENTS = (ev.PartitionStateWritten, ev.SessionExpired, ev.BrokerRegistered,
                       ev.ControllerElection, ev.BrokersChanged)


_OTHER_FIELDS: dict[type, tuple[str, ...]] = {}  # per message class: its fields but request_id


def _with_request_id(msg: Message, request_id: int) -> Message:
    """`dataclasses.replace(msg, request_id=request_id)` without its per-field checks on
    every request sent (messages are plain frozen dataclasses: every field is an init
    field, none an InitVar)."""
    cls = type(msg)
    names = _OTHER_FIELDS.get(cls)
    if names is None:
        names = _OTHER_FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(msg) if f.init and f.name != "request_id")
    kw = {n: getattr(msg, n) for n in names}
    return cls(**kw, request_id=request_id)


class NodeError(RuntimeError):
    """The broker cannot go on (a store failure, a broken local invariant)."""


@dataclass(slots=True)
class _Soon:
    """A zero-delay timer run inline (`Node(inline_timers=True)`): queued behind the current
    event; skipped when the core re-armed or cancelled the key before it ran."""

    key: TimerKey


@dataclass
class ReplyWaiters:
    """Futures of requests waiting for the core's answer, by key. A key may have several
    waiters (a follower's retry while its previous fetch is still held): first in, first out."""

    waiting: dict[object, collections.deque[asyncio.Future[Any]]] = field(default_factory=dict)
    # run synchronously right after their future is resolved (`watch`)
    hooks: dict[asyncio.Future[Any], Callable[[asyncio.Future[Any]], None]] = field(
        default_factory=dict)
    _loop: list[asyncio.AbstractEventLoop] = field(default_factory=list, repr=False)

    def expect(self, key: object) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = running_loop(self._loop).create_future()
        self.waiting.setdefault(key, collections.deque()).append(fut)
        return fut

    def watch(self, fut: asyncio.Future[Any], hook: Callable[[asyncio.Future[Any]], None]
              ) -> bool:
        """Call `hook(fut)` as soon as `fut` is resolved here, inside `resolve` (a future's
        own done-callbacks run a loop turn later). The produce pipeline writes an acks=all
        response from it in the step that advanced the HW. The hook is dropped with its
        future (resolved, found cancelled, or forgotten), so the table stays bounded by
        the waiting futures."""
        if fut.done():
            return False
        self.hooks[fut] = hook
        return True

    def resolve(self, key: object, value: object) -> bool:
        q = self.waiting.get(key)
        while q:
            fut = q.popleft()
            hook = self.hooks.pop(fut, None) if self.hooks else None
            if not fut.done():
                fut.set_result(value)
                if not q:
                    del self.waiting[key]
                if hook is not None:
                    try:
                        hook(fut)
                    except Exception as e:  # the waiter's bug, not the core's: never halt
                        log.error("reply hook failed: %r", e, exc_info=e)
                return True
        self.waiting.pop(key, None)
        return False

    def forget(self, key: object, fut: asyncio.Future[Any]) -> None:
        self.hooks.pop(fut, None)
        q = self.waiting.get(key)
        if q is not None and fut in q:
            q.remove(fut)
            if not q:
                del self.waiting[key]


def _replica_line(r: Any) -> str:
    if r is None:
        return "none"
    return (f"{r.role.name.lower()} leader {r.leader} epoch {r.leader_epoch} "
            f"leo {r.log_end_offset} hw {r.high_watermark} isr {list(r.isr)}")


def _li(s: Any) -> str:
    return f"[leader {s.leader} epoch {s.leader_epoch} isr {list(s.isr)}]"


def durable_replicas(logs: LogManager, max_batches: int) -> tuple[DurableReplica, ...]:
    """What each log on disk tells the core after a restart (Kafka's log loading): offsets,
    the leader-epoch cache, the HW checkpoint and the idempotent producers' recent batches."""
    out = []
    for (topic, partition), lg in sorted(logs.logs.items()):
        epochs = tuple(EpochEntry(e, o) for e, o in lg.leader_epoch_cache.entries)
        out.append(
            DurableReplica(
                tp=TopicPartition(topic, partition),
                replicas=(),
                log_start_offset=lg.log_start_offset,
                log_end_offset=lg.log_end_offset,
                epochs=epochs,
                hw_checkpoint=lg.high_watermark,
                producers=producer_state(lg, max_batches),
            )
        )
    return tuple(out)


def producer_state(lg: Log, max_batches: int) -> ProducerTable:
    """Rebuild the idempotent producers' table from the batch headers in the log (Kafka
    rebuilds it from its snapshot plus the log; we have only the log, which is exact)."""
    table: ProducerTable = ()
    for seg in lg.segments:
        for _, h in seg.headers_from(0):
            if h.producer_id < 0 or h.base_sequence < 0 or h.is_control:
                continue
            table = record_batch(
                table, h.producer_id, h.producer_epoch, h.base_sequence,
                h.last_offset_delta + 1, h.base_offset, max_batches,
            )
    return table


class Node:
    """One broker's core plus the interpreter of its effects. Network-free: the server and
    the peer clients plug in through `send_to_peer` and the waiters."""

    def __init__(
        self,
        broker_id: int,
        config: ProtocolConfig,
        logs: LogManager,
        *,
        send_to_peer: Callable[[int, Message], None] | None = None,
        zk_effect: Callable[[fx.Effect], None] | None = None,
        topic_config: Callable[[str], LogConfig] | None = None,
        now_ms: Callable[[], int] | None = None,
        clock: Clock | None = None,
        transport: Transport | None = None,
        zookeeper: ZkEffects | None = None,
        inline_timers: bool = False,
    ) -> None:
        """`inline_timers` (the live broker): a zero-delay timer fires inside the current
        `handle` call, right after the event that set it, instead of a loop turn later; and
        the timers re-armed on every replication round (`LAZY_TIMERS`) keep one clock handle
        and a deadline. Off in the simulator, whose schedules stay as they were."""
        self.broker_id = broker_id
        self.logs = logs
        self.state: BrokerState = recover(
            broker_id, config, durable_replicas(logs, config.max_idempotent_batches)
        )
        self.send_to_peer = send_to_peer or (lambda dst, msg: None)
        self.zk_effect = zk_effect or (lambda e: None)
        self.topic_config = topic_config
        self.clock: Clock = clock or AsyncioClock()
        self.now_ms = now_ms or self.clock.now_ms
        # Without explicit ports: requests through `send_to_peer` (looked up at each send, so
        # it can be replaced), answers to the request handlers waiting in `responses`.
        self.transport: Transport = transport or CallbackTransport(
            lambda dst, msg: self.send_to_peer(dst, msg), self._resolve_response)
        self.zookeeper: ZkEffects = zookeeper or CallbackZk(lambda e: self.zk_effect(e))
        self.replies = ReplyWaiters()
        self.responses = ReplyWaiters()  # inbound inter-broker requests, by request id
        self._timers: dict[TimerKey, Cancellable] = {}
        self.inline_timers = inline_timers
        self._soon: dict[TimerKey, _Soon] = {}  # zero-delay timers queued inline
        self._handle_due: dict[TimerKey, int] = {}  # lazy timers: when their handle fires
        self._deadline: dict[TimerKey, int] = {}  # lazy timers: when the core's timer is due
        # queued timers (produce timeouts): deadline by key, a heap of (deadline, seq, key)
        self._queued: dict[TimerKey, int] = {}
        self._queued_heap: list[tuple[int, int, TimerKey]] = []
        self._queue_seq = 0
        self._queued_handle: Cancellable | None = None
        self._queued_due = 0
        self._queue: collections.deque[ev.Event | _Soon] = collections.deque()
        # control requests that came before this incarnation's registration was answered
        self._held: collections.deque[ev.Event] = collections.deque()
        self._busy = False
        self._change: dict[TopicPartition, list[asyncio.Future[None]]] = {}
        # long polls' deadlines: (loop time, sequence, future), one clock handle (_expire_at)
        self._poll_deadlines: list[tuple[float, int, asyncio.Future[None]]] = []
        self._poll_seq = 0
        self._poll_timer: asyncio.TimerHandle | None = None
        self._loop: list[asyncio.AbstractEventLoop] = []  # running_loop's cache
        self._poll_due = 0.0
        self._next_request_id = 0
        self.failed: BaseException | None = None
        self.on_failure: Callable[[BaseException], None] | None = None
        self.on_replica_changed: Callable[[TopicPartition], None] | None = None
        # The controller's requests to its own broker (LeaderAndIsr, UpdateMetadata,
        # StopReplica): the live server routes them as a peer's, its topic configs first.
        self.local_control: Callable[[Message], None] | None = None
        self.on_partition_deleted: Callable[[TopicPartition], None] | None = None
        self.on_roles_changed: Callable[[], None] | None = None
        self.steps = 0
        self._appliers = self._effect_appliers()

    # -- events in ------------------------------------------------------------------------

    def new_request_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id

    def handle(self, event: ev.Event) -> None:
        """Step the core with `event` (and anything its effects raise), applying effects in
        order. Re-entrant calls queue their event behind the current one."""
        if self.failed is not None:
            return
        if len(self._queue) >= EVENT_QUEUE_MAX:
            self._fail(NodeError(f"more than {EVENT_QUEUE_MAX} events queued"))
            return
        self._queue.append(event)
        if self._busy:
            return
        self._busy = True
        try:
            while self._queue and self.failed is None:
                item = self._queue.popleft()
                if isinstance(item, _Soon):
                    if self._soon.get(item.key) is not item:
                        continue  # re-armed or cancelled since
                    del self._soon[item.key]
                    e: ev.Event = ev.TimerFired(item.key)
                else:
                    e = item
                if self.state.broker_epoch == NO_BROKER_EPOCH and self._hold_until_registered(e):
                    continue
                try:
                    before = self.state
                    self.state, effects = step(self.state, e)
                    self.steps += 1
                    if isinstance(e, STATE_CHANGE_EVENTS) or (
                            isinstance(e, ev.MessageReceived)
                            and isinstance(e.message, ROLE_CHANGES)):
                        self._log_state_change(before, e, effects)
                    for effect in effects:
                        self._apply(effect)
                    if self.on_roles_changed is not None and isinstance(
                            e, ev.MessageReceived) and isinstance(e.message, ROLE_CHANGES):
                        self.on_roles_changed()
                    if isinstance(e, ev.BrokerRegistered) and self._held:
                        self._queue.extendleft(reversed(self._held))  # next, in order
                        self._held.clear()
                except (InvariantBroken, NodeError, OSError) as err:
                    self._fail(err)
                except Exception as err:  # a store error, or a bug: stop, loudly
                    self._fail(err)
        finally:
            self._busy = False

    def _hold_until_registered(self, e: ev.Event) -> bool:
        """Kafka's broker processes no request before its registration in ZooKeeper is done
        (KafkaServer.startup starts processing requests last). Here the listener is open
        earlier, and the core drops a control request while it knows no broker epoch: a
        controller that saw the registration first and sent LeaderAndIsr with the new epoch
        lost it for good (harness/sim seed 100317: a restarted sole ISR member never led
        again). Such requests wait here; once registered, the core judges their epoch."""
        if (self.state.broker_epoch != NO_BROKER_EPOCH or not isinstance(e, ev.MessageReceived)
                or not isinstance(e.message, CONTROL_REQUESTS)):
            return False
        if len(self._held) >= HELD_CONTROL_MAX:
            # bounded (DESIGN rule 9): the oldest goes, loudly; a controller sends one
            # request per change, so 64 before one registration answer is far past normal
            dropped = self._held.popleft()
            log.warning("broker %d: more than %d control requests before registration; "
                        "dropped %s", self.broker_id, HELD_CONTROL_MAX,
                        type(dropped.message).__name__ if isinstance(
                            dropped, ev.MessageReceived) else dropped)
        self._held.append(e)
        return True

    def _log_state_change(self, before: BrokerState, e: ev.Event,
                          effects: list[fx.Effect]) -> None:
        """Kafka's state-change log: what each control event did to each replica."""
        if not state_log.isEnabledFor(logging.INFO):
            return
        if isinstance(e, ev.MessageReceived):
            msg = e.message
            parts = getattr(msg, "partitions", ())
            state_log.info(
                "broker %d: %s from %d (controller epoch %s, broker epoch %s; mine %d/%d)",
                self.broker_id, type(msg).__name__, e.src,
                getattr(msg, "controller_epoch", "?"), getattr(msg, "broker_epoch", "?"),
                before.controller_epoch, before.broker_epoch)
            for p in parts:
                tp = p if isinstance(p, TopicPartition) else p.tp
                old, new = replica(before, tp), replica(self.state, tp)
                state_log.info(
                    "  %s: %s -> %s%s", tp, _replica_line(old), _replica_line(new),
                    "" if isinstance(p, TopicPartition) else
                    f" (asked: leader {p.leader} epoch {p.leader_epoch} isr {list(p.isr)})")
        elif isinstance(e, ev.PartitionStateWritten):
            state_log.info("broker %d: %s write of %s %s: %s%s", self.broker_id,
                           "controller" if e.by_controller else "ISR", e.tp,
                           _li(e.proposed), "ok" if e.ok else "failed",
                           " (fenced)" if e.fenced else "")
        elif isinstance(e, ev.BrokersChanged) and before.controller is not None:
            # Kafka's controller line: a bounced broker (same id, new broker epoch) loses its
            # leaderships and ISR places (KIP-380)
            was = {b.broker_id: b.broker_epoch for b in before.controller.live}
            now = {b.broker_id: b.broker_epoch for b in e.live_brokers}
            state_log.info(
                "broker %d: BrokersChanged: newly added brokers %s, deleted brokers %s, "
                "bounced brokers %s, all live brokers %s", self.broker_id,
                sorted(now.keys() - was.keys()), sorted(was.keys() - now.keys()),
                sorted(b for b in now.keys() & was.keys() if now[b] != was[b]),
                sorted(now.items()))
        elif isinstance(e, ev.ControllerElection) and e.won and self.state.controller:
            # the members a new controller keeps out: registered again since the state named
            # them (core/controller.py `on_elected`)
            restarted = {str(p.tp): list(p.restarted)
                         for p in self.state.controller.partitions if p.restarted}
            state_log.info(
                "broker %d: ControllerElection: won controller epoch %d, live brokers %s%s",
                self.broker_id, e.controller_epoch,
                sorted((b.broker_id, b.broker_epoch) for b in e.live_brokers),
                f", restarted since their partitions' last write: {restarted}"
                if restarted else "")
        else:
            state_log.info("broker %d: %s", self.broker_id, type(e).__name__)
        for x in effects:
            if isinstance(x, fx.TruncateTo):
                state_log.info("broker %d: %s truncated to %d", self.broker_id, x.tp, x.offset)
            elif isinstance(x, fx.ZkWritePartitionState):
                state_log.info("broker %d: proposes %s %s (zk version %d)", self.broker_id,
                               x.tp, _li(x.proposed), x.expected_zk_version)

    def _fail(self, err: BaseException) -> None:
        log.error("broker %d: halting: %r", self.broker_id, err, exc_info=err)
        self.failed = err
        self._clear_timers()
        if self.on_failure is not None:
            self.on_failure(err)

    # -- effects out ----------------------------------------------------------------------

    def _apply(self, e: fx.Effect) -> None:
        # by exact type, one dict lookup (a `match` over the effect classes tried them in
        # order: ~1 µs for the later ones, and a round applies about 20 effects)
        apply = self._appliers.get(type(e))
        if apply is None:
            raise NodeError(f"unknown effect {e!r}")
        apply(e)

    def _effect_appliers(self) -> dict[type, Callable[[Any], None]]:
        def zk(e: Any) -> None:
            self.zookeeper.submit(e)  # the ports are looked up at each call: replaceable

        def reply(e: Any) -> None:
            self.replies.resolve(e.request_id, e)

        return {
            fx.Send: lambda e: self._send(e.dst, e.message),
            fx.AppendAsLeader: self._append_as_leader,
            fx.AppendAsFollower: self._append_as_follower,
            fx.TruncateTo: self._truncate,
            fx.CheckpointHighWatermark: self._checkpoint_hw,
            fx.CheckpointLeaderEpochs: self._checkpoint_epochs,
            fx.DeletePartition: self._delete_partition,
            fx.SetTimer: lambda e: self._set_timer(e.key, e.delay_ms),
            fx.CancelTimer: lambda e: self._cancel_timer(e.key),
            # queued: Kafka takes the first option
            fx.Choose: lambda e: self.handle(ev.Chosen(e.key, 0)),
            fx.ZkRegisterBroker: zk, fx.ZkElectController: zk, fx.ZkResignController: zk,
            fx.ZkWritePartitionState: zk, fx.ZkNotifyIsrChange: zk, fx.ZkDeleteTopic: zk,
            fx.ProduceReply: reply, fx.ConsumerFetchReply: reply, fx.ListOffsetsReply: reply,
        }

    def _truncate(self, e: fx.TruncateTo) -> None:
        tp, offset = e.tp, e.offset
        lg = self.log(tp)
        lg.truncate_to(offset)
        if lg.log_end_offset != offset:
            raise NodeError(
                f"{tp}: truncation to {offset} left the log end at {lg.log_end_offset} "
                "(not a batch boundary)"
            )
        self._changed(tp)

    def _checkpoint_hw(self, e: fx.CheckpointHighWatermark) -> None:
        self.log(e.tp).update_high_watermark(e.high_watermark)
        self._changed(e.tp)

    def _checkpoint_epochs(self, e: fx.CheckpointLeaderEpochs) -> None:
        cache = self.log(e.tp).leader_epoch_cache
        wanted = [(x.epoch, x.start_offset) for x in e.epochs]
        if cache.entries != wanted:
            cache.replace(wanted)

    def _delete_partition(self, e: fx.DeletePartition) -> None:
        tp = e.tp
        self.logs.delete_log(tp.topic, tp.partition)
        self._changed(tp)
        if self.on_partition_deleted is not None:
            self.on_partition_deleted(tp)

    # -- timers ---------------------------------------------------------------------------

    def _set_timer(self, key: TimerKey, delay: int) -> None:
        """Re-arming replaces the timer of an equal key (core/timers.py)."""
        if self.inline_timers:
            if delay <= 0:
                # A follower's next fetch right after a response: run it when the current
                # event is done, without a loop turn (Kafka's fetcher thread just loops).
                self._cancel_timer(key)
                soon = self._soon[key] = _Soon(key)
                self._queue.append(soon)
                return
            self._soon.pop(key, None)
            if isinstance(key, LAZY_TIMERS):
                self._set_lazy(key, delay)
                return
            if isinstance(key, QUEUED_TIMERS):
                self._set_queued(key, delay)
                return
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        # delay <= 0 runs as soon as the current work is done, in the order set
        self._timers[key] = self.clock.call_later(delay, functools.partial(self._fire, key))

    def _cancel_timer(self, key: TimerKey) -> None:
        if self.inline_timers:
            self._soon.pop(key, None)
            if isinstance(key, LAZY_TIMERS):
                self._deadline.pop(key, None)  # its handle stays, and finds nothing due
                return
            if isinstance(key, QUEUED_TIMERS):
                self._queued.pop(key, None)  # its entry stays in the heap, found stale
                return
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()

    def _set_lazy(self, key: TimerKey, delay: int) -> None:
        """A deadline plus one clock handle per key, as Kafka keeps `lastCaughtUpTimeMs` per
        follower and checks it periodically instead of a timer per fetch. The leader re-arms
        a follower's lag timer on every fetch that reaches its log end, and a follower its
        fetch timeout on every request: each was a `call_later` and a cancel per round. Now
        a re-arm that is not earlier than the handle only moves the deadline; the handle,
        when it fires before the deadline, waits again for the rest. The core sees
        `TimerFired` at the same time as before: once the last deadline set has passed."""
        now = self.clock.now_ms()
        deadline = now + max(0, delay)
        self._deadline[key] = deadline
        due = self._handle_due.get(key)
        if due is not None and key in self._timers and due <= deadline:
            return
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._arm_lazy(key, now, deadline - now)

    def _arm_lazy(self, key: TimerKey, now: int, delay: int) -> None:
        self._handle_due[key] = now + delay
        self._timers[key] = self.clock.call_later(delay, functools.partial(self._fire_lazy, key))

    def _fire_lazy(self, key: TimerKey) -> None:
        self._timers.pop(key, None)
        self._handle_due.pop(key, None)
        deadline = self._deadline.get(key)
        if deadline is None:
            return  # cancelled since it was armed
        now = self.clock.now_ms()
        if deadline > now:
            self._arm_lazy(key, now, deadline - now)
            return
        del self._deadline[key]
        self.handle(ev.TimerFired(key))

    def _set_queued(self, key: TimerKey, delay: int) -> None:
        """A produce's timeout: a deadline in one heap, one clock handle for the earliest
        one still set (Kafka's purgatory keeps its timeouts in a timing wheel, not a timer
        each). Every acks=all produce set one and cancelled it a few ms later: a
        `call_later` and a cancel per request. `TimerFired` reaches the core at the same
        time as before; cancelled entries are dropped when the handle reaches them, and
        the heap is rebuilt when they are most of it (bounded)."""
        now = self.clock.now_ms()
        deadline = now + max(0, delay)
        self._queued[key] = deadline
        self._queue_seq += 1
        heapq.heappush(self._queued_heap, (deadline, self._queue_seq, key))
        if len(self._queued_heap) > 2 * len(self._queued) + QUEUED_SLACK:
            self._queued_heap = [(d, i, k) for i, (k, d) in enumerate(self._queued.items())]
            heapq.heapify(self._queued_heap)
        if self._queued_handle is None or deadline < self._queued_due:
            if self._queued_handle is not None:
                self._queued_handle.cancel()
            self._arm_queued(now, deadline)

    def _arm_queued(self, now: int, deadline: int) -> None:
        self._queued_due = deadline
        self._queued_handle = self.clock.call_later(deadline - now, self._fire_queued)

    def _fire_queued(self) -> None:
        self._queued_handle = None
        now = self.clock.now_ms()
        heap, due = self._queued_heap, []
        while heap:
            deadline, _, key = heap[0]
            if self._queued.get(key) != deadline:
                heapq.heappop(heap)  # cancelled, or set again with another deadline
            elif deadline <= now:
                heapq.heappop(heap)
                del self._queued[key]
                due.append(key)
            else:
                self._arm_queued(now, deadline)
                break
        for key in due:
            self.handle(ev.TimerFired(key))

    def _fire(self, key: TimerKey) -> None:
        self._timers.pop(key, None)
        self.handle(ev.TimerFired(key))

    def _send(self, dst: int, msg: Message) -> None:
        if isinstance(msg, RESPONSES):
            self.transport.respond(dst, msg)
            return
        if dst == self.broker_id:
            if self.local_control is not None and isinstance(msg, CONTROL_REQUESTS):
                self.local_control(msg)
            else:
                self.handle(ev.MessageReceived(self.broker_id, msg))
            return
        self.transport.send(dst, _with_request_id(msg, self.new_request_id()))

    def _resolve_response(self, dst: int, msg: Message) -> None:
        """The live transport's answers: to the request handler waiting for them (a request
        a server read off the wire and numbered)."""
        self.responses.resolve(msg.request_id, msg)

    def log(self, tp: TopicPartition) -> Log:
        lg = self.logs.get_log(tp.topic, tp.partition)
        if lg is None:
            if self.topic_config is not None and tp.topic not in self.logs.topic_configs:
                self.logs.topic_configs[tp.topic] = self.topic_config(tp.topic)
            lg = self.logs.get_or_create_log(tp.topic, tp.partition, now_ms=self.now_ms())
        return lg

    def _append_as_leader(self, e: fx.AppendAsLeader) -> None:
        if not isinstance(e.records, bytes | bytearray | memoryview):
            raise NodeError(f"{e.tp}: records of type {type(e.records).__name__}")
        first, last = self.log(e.tp).append_as_leader(
            e.records, e.leader_epoch, now_ms=self.now_ms()
        )
        if first != e.base_offset or last != e.base_offset + e.record_count - 1:
            raise NodeError(
                f"{e.tp}: store appended [{first}, {last}], core expected base "
                f"{e.base_offset} and {e.record_count} records"
            )
        self._changed(e.tp)

    def _append_as_follower(self, e: fx.AppendAsFollower) -> None:
        if not isinstance(e.records, bytes | bytearray | memoryview):
            raise NodeError(f"{e.tp}: records of type {type(e.records).__name__}")
        first, last = self.log(e.tp).append_as_follower(e.records, now_ms=self.now_ms())
        if (first, last) != (e.batches[0].base_offset, e.batches[-1].last_offset):
            raise NodeError(
                f"{e.tp}: store appended [{first}, {last}], core expected "
                f"[{e.batches[0].base_offset}, {e.batches[-1].last_offset}]"
            )
        self._changed(e.tp)

    # -- long polls -----------------------------------------------------------------------

    def _changed(self, tp: TopicPartition) -> None:
        waiters = self._change.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        if self.on_replica_changed is not None:
            self.on_replica_changed(tp)

    async def wait_for_change(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of `tps` gets new data, a new HW or a truncation, or after
        `timeout_s` (Kafka's DelayedFetch completion conditions, as one wake-up)."""
        if timeout_s <= 0:
            return
        loop = running_loop(self._loop)
        fut: asyncio.Future[None] = loop.create_future()
        keys = list(dict.fromkeys(tps))
        for tp in keys:
            self._change.setdefault(tp, []).append(fut)
        # One future, set by the change or by its deadline: the waiter resumes in the loop's
        # next iteration (asyncio.wait_for(shield(...)) took three hops through callbacks).
        self._expire_at(loop, loop.time() + timeout_s, fut)
        try:
            await fut
        finally:
            for tp in keys:
                lst = self._change.get(tp)
                if lst is not None and fut in lst:
                    lst.remove(fut)
                    if not lst:
                        del self._change[tp]

    def _expire_at(self, loop: asyncio.AbstractEventLoop, when: float,
                   fut: asyncio.Future[None]) -> None:
        """Set `fut` at `when` (loop time) unless it is done by then. One clock handle for
        all long polls, armed for the earliest deadline of a poll still waiting: a held
        follower fetch (two per acks=all produce) nearly always completes on data long
        before its `replica.fetch.wait.max.ms`, and its `call_later` plus cancel was wasted.
        A completed poll's entry is dropped when the handle reaches it (bounded: polls per
        second times their timeout)."""
        self._poll_seq += 1
        heapq.heappush(self._poll_deadlines, (when, self._poll_seq, fut))
        if self._poll_timer is None or when < self._poll_due:
            if self._poll_timer is not None:
                self._poll_timer.cancel()
            self._poll_due = when
            self._poll_timer = loop.call_at(when, self._expire_polls)

    def _expire_polls(self) -> None:
        self._poll_timer = None
        loop = running_loop(self._loop)
        now = loop.time()
        heap = self._poll_deadlines
        while heap:
            when, _, fut = heap[0]
            if fut.done():
                heapq.heappop(heap)
            elif when <= now:
                heapq.heappop(heap)
                fut.set_result(None)
            else:
                self._poll_due = when
                self._poll_timer = loop.call_at(when, self._expire_polls)
                return

    def wake_all(self) -> None:
        """Release every long poll (shutdown, role changes the poll cannot see)."""
        for tp in list(self._change):
            self._changed(tp)

    # -- views ----------------------------------------------------------------------------

    def replica(self, tp: TopicPartition) -> Any:
        return replica(self.state, tp)

    def armed_timers(self) -> Collection[TimerKey]:
        """The keys of the timers armed now, for the simulator's checks. Only without inline
        timers (the simulator's interpreter), where every armed timer has its clock handle;
        the live broker's lazy and queued timers keep deadlines instead."""
        if self.inline_timers:
            raise NodeError("armed_timers needs an interpreter without inline timers")
        return self._timers.keys()

    def _clear_timers(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        if self._poll_timer is not None:
            self._poll_timer.cancel()
            self._poll_timer = None
        if self._queued_handle is not None:
            self._queued_handle.cancel()
            self._queued_handle = None
        self._queued.clear()
        self._queued_heap.clear()
        self._soon.clear()
        self._handle_due.clear()
        self._deadline.clear()

    def close(self) -> None:
        self._clear_timers()
        self.wake_all()


def log_dirs_of(paths: Iterable[str]) -> list[Path]:
    return [Path(p) for p in paths]
