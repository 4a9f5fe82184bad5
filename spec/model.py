"""Cluster semantics over `core.step`: which actions are enabled in a World and what they do.

An action is one external fact: a message delivered, dropped or duplicated, a timer firing,
a ZooKeeper notification processed, a client produce, a crash, a session expiry, a restart.
Its local consequences run to completion inside the same action: effects are applied in
order, storage and ZooKeeper answer at once, and a `Choose` effect branches into one
successor per option. In `rpc` network mode a replica fetch (request and response) is also
one action, as in the TLA+ specs; in `async` mode every message is a separate delivery.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import TypeVar, assert_never, cast

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import (
    BatchInfo,
    ControlledShutdownResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    Message,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    UpdateMetadataRequest,
)
from core.node import BrokerState, DurableReplica, init, recover, step
from core.replica import ReplicaState
from core.rules.epochs import truncate_epochs
from core.timers import LeaderImbalanceTimer, ProduceTimeoutTimer, TimerKey
from core.types import NO_LEADER, Errors, LeaderIsr, LiveBroker, Role
from spec.world import TP, Disk, Ghost, InFlight, Node, PendingWrite, Record, World, Zk

Action = tuple[object, ...]

# Timers the model never fires: a produce timeout only turns a pending request into an error
# reply. The auto-rebalance timer fires only when `Bounds.rebalance` is on: it elects the
# preferred (first assigned) replica, which makes the model asymmetric in broker ids.
_QUIET_TIMERS = (ProduceTimeoutTimer,)
_SHUTDOWN_RESPONSE = "ControlledShutdownResponse"  # what `_kind` names it
_LEADER_AND_ISR = "LeaderAndIsrRequest"
_STARTED = ev.Started()


@dataclass(frozen=True, slots=True)
class Bounds:
    """How far the checker explores, and which faults it may inject."""

    brokers: int = 3
    records: int = 2
    leader_epochs: int = 3  # leader epochs 0 .. leader_epochs-1
    controller_epochs: int = 2  # controller elections
    crashes: int = 1
    lossy_crashes: int = 0  # crashes that also lose the unflushed page cache
    expiries: int = 0  # ZooKeeper session expiries of brokers that keep running
    leader_moves: int = 0  # operator-requested elections of another live ISR member
    drops: int = 0
    duplicates: int = 0
    acks: int = -1
    network: str = "rpc"  # "rpc" or "async"
    # "sync": a ZooKeeper watch is processed as part of the action that fired it;
    # "async": notifications queue up per broker and are processed as separate actions (a
    # broker may act on stale knowledge meanwhile, e.g. a controller that lost its session).
    zk_watches: str = "sync"
    # "sync": a leader's ISR write reaches ZooKeeper within the action that sent it;
    # "async": it stays in flight until a separate action applies it (KIP-497's window)
    isr_writes: str = "sync"
    rebalance: bool = False  # the controller's auto leader rebalance timer may fire
    list_offsets: int = 0  # client ListOffsets(latest) requests to the current leader
    shutdowns: int = 0  # controlled shutdowns: a broker asks, the controller acts, it stops

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= 5:
            raise ValueError("brokers must be between 1 and 5")
        if self.network not in ("rpc", "async"):
            raise ValueError("network must be 'rpc' or 'async'")
        if self.lossy_crashes > self.crashes:
            raise ValueError("lossy crashes are crashes: lossy_crashes <= crashes")
        if self.acks not in (0, 1, -1):
            raise ValueError("acks must be 0, 1 or -1")
        for name in ("records", "leader_epochs", "controller_epochs", "crashes", "expiries",
                     "leader_moves", "list_offsets", "drops", "duplicates", "shutdowns"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


# NamedTuple constructors without the generated Python-level __new__ (hot paths; the
# argument tuples are complete, in field order).
_node = cast("Callable[[type[Node], tuple[object, ...]], Node]", tuple.__new__)
_world = cast("Callable[[type[World], tuple[object, ...]], World]", tuple.__new__)


_T = TypeVar("_T", bound=tuple[object, ...])
_E = TypeVar("_E", bound=ev.Event)


def _set1(t: _T, index: int, value: object) -> _T:
    """NamedTuple t with field `index` replaced: `_replace` without its Python-level
    keyword machinery (hot paths)."""
    fields = list(t)
    fields[index] = value
    return tuple.__new__(type(t), fields)


_DISK_RECORDS = Disk._fields.index("records")
_DISK_EPOCHS = Disk._fields.index("epochs")
_DISK_HW = Disk._fields.index("hw_checkpoint")
_GHOST_NEXT_RECORD = Ghost._fields.index("next_record")
_GHOST_ACKED = Ghost._fields.index("acked")
_GHOST_EXPOSED = Ghost._fields.index("exposed")
_GHOST_CONFLICT = Ghost._fields.index("conflicting_exposure")
_GHOST_LEADERS = Ghost._fields.index("leaders")
_ZK_PARTITION = Zk._fields.index("partition")
_LI_VERSION = LeaderIsr._fields.index("zk_version")


_NODE_STATE = cast("Callable[[Node], BrokerState | None]", itemgetter(0))
_NODE_DISK = cast("Callable[[Node], Disk]", itemgetter(1))
_NODE_INBOX = cast("Callable[[Node], tuple[str, ...]]", itemgetter(3))


class _Builder:
    """A world under construction during one action: mutable columns per broker, copied
    when the action branches, turned back into a World once at the end."""

    __slots__ = (
        "choices",
        "disks",
        "ghost",
        "inboxes",
        "network",
        "nodes",
        "sent",
        "states",
        "timers",
        "world",
        "zk",
    )

    def __init__(self, w: World) -> None:
        self.world = w
        self.nodes = w.nodes
        nodes = w.nodes
        self.states = list(map(_NODE_STATE, nodes))
        self.disks = list(map(_NODE_DISK, nodes))
        self.timers: list[set[TimerKey] | None] = [None] * len(nodes)
        self.inboxes = list(map(_NODE_INBOX, nodes))
        self.zk = w.zk
        self.network = w.network  # sorted; what this action sends is kept apart in `sent`
        self.sent: list[InFlight] = []
        self.ghost = w.ghost
        self.choices: list[object] = []

    def copy(self) -> _Builder:
        b = _Builder.__new__(_Builder)
        b.world = self.world
        b.nodes = self.nodes
        b.states = list(self.states)
        b.disks = list(self.disks)
        b.timers = [None if t is None else set(t) for t in self.timers]
        b.inboxes = list(self.inboxes)
        b.zk = self.zk
        b.network = self.network
        b.sent = list(self.sent)
        b.ghost = self.ghost
        b.choices = list(self.choices)
        return b

    def alive(self, i: int) -> bool:
        return self.states[i] is not None

    def timer_set(self, i: int) -> set[TimerKey]:
        t = self.timers[i]
        if t is None:
            t = self.timers[i] = set(self.nodes[i].timers)
        return t

    def freeze(self) -> World:
        """The world this action built; the very world it started from when nothing changed
        (a lag timer that only re-arms: about one transition in six at the default bounds),
        which the search recognises by identity as a known state."""
        nodes = []
        states, disks, inboxes = self.states, self.disks, self.inboxes
        same = True
        for i, t in enumerate(self.timers):
            n = self.nodes[i]
            st, d, inbox = states[i], disks[i], inboxes[i]
            if t is None or t == n.timers:
                if st is n.state and d is n.disk and inbox is n.inbox:
                    nodes.append(n)
                else:
                    m = _make_node(st, d, n.timers, inbox)
                    same = same and m is n
                    nodes.append(m)
            else:
                m = _make_node(st, d, frozenset(t), inbox)
                same = same and m is n
                nodes.append(m)
        w = self.world
        if self.sent:
            network = tuple(sorted(self.network + tuple(self.sent)))
        elif same and self.zk is w.zk and self.ghost is w.ghost:
            return w
        else:
            network = self.network
        return _world(World, (tuple(nodes), self.zk, network, self.ghost))


_WATCH_KIND: dict[type, str] = {
    ev.ControllerChanged: "controller",
    ev.BrokersChanged: "brokers",
    ev.IsrChanged: "isr",
    ev.SessionExpired: "expired",
}


def _inert(m: InFlight, nodes: tuple[Node, ...] | list[Node], broker_epoch_checked: bool) -> bool:
    """A LeaderAndIsr request its (running) target will ignore now and forever: its epochs
    only grow while it runs, and a crash drops what is in flight to it. Delivering it is a
    no-op, so the model forgets it."""
    msg = m.message
    if not isinstance(msg, LeaderAndIsrRequest):
        return False
    st = nodes[m.dst].state
    if st is None:
        return False
    if broker_epoch_checked and st.broker_epoch != -1 and msg.broker_epoch < st.broker_epoch:
        return True
    if msg.controller_epoch > st.controller_epoch:
        return False
    for info in msg.partitions:
        r = None
        for x in st.replicas:
            if x.tp == info.tp:
                r = x
        if r is None or info.leader_epoch > r.leader_epoch:
            return False
    return True


# Broker states interned: one representative per value, found by the state's identity
# (held, so ids are not reused). Every state a world holds is its value's representative
# (memoized steps, renumbering, the initial and recovered states hand out representatives),
# so an action that brings a broker back to the state it started from is seen unchanged by
# identity (`_Builder.freeze`), and the identity caches downstream hit.
_interned: dict[BrokerState, BrokerState] = {}
_interned_ids: dict[int, tuple[BrokerState, BrokerState]] = {}
_INTERN_SIZE = 200_000


def _intern(st: BrokerState) -> BrokerState:
    hit = _interned_ids.get(id(st))
    if hit is not None and hit[0] is st:
        return hit[1]
    if len(_interned_ids) >= _INTERN_SIZE:
        _interned_ids.clear()
    if len(_interned) >= _INTERN_SIZE:
        _interned.clear()
    rep = _interned.setdefault(st, st)
    _interned_ids[id(st)] = (st, rep)
    return rep


# Nodes hash-consed: one object per (interned state, disk, timers, inbox) value, found by
# the state's identity and the rest's value (small tuples, hashed in C), so equal nodes that
# different actions build are one object, which the canonical key and the renumbering find by
# identity. The node holds its state, so a stale entry (an id reused after the state was
# freed) is recognised and replaced.
_nodes: dict[tuple[int, Disk, frozenset[TimerKey], tuple[str, ...]], Node] = {}


def _make_node(st: BrokerState | None, d: Disk, timers: frozenset[TimerKey],
               inbox: tuple[str, ...]) -> Node:
    k = (id(st), d, timers, inbox)
    n = _nodes.get(k)
    if n is None or n.state is not st:
        if len(_nodes) >= _INTERN_SIZE:
            _nodes.clear()
        n = _nodes[k] = _node(Node, (st, d, timers, inbox))
    return n


def adopt(w: World) -> World:
    """A world that arrived from another process (the parallel search moves worlds between
    workers to balance them): its broker states interned and its nodes hash-consed, as if
    built here, so the identity caches and `_Builder.freeze`'s unchanged test hold for it.
    Equal by value to w."""
    nodes = tuple(_make_node(None if n.state is None else _intern(n.state), n.disk, n.timers,
                             n.inbox) for n in w.nodes)
    return _world(World, (nodes, w.zk, w.network, w.ghost))


# The znode versions a broker state holds, by state identity (states are shared between
# worlds, and memoized steps return the same objects).
_versions_cache: dict[int, tuple[BrokerState, frozenset[int]]] = {}
# A state renumbered by a version order, by (state identity, order): shared results.
_renumbered: dict[tuple[int, tuple[int, ...]], tuple[BrokerState, BrokerState]] = {}
# The same for LeaderAndIsr requests in flight: shared renumbered messages keep the caches
# keyed by message identity (delivery events, canonical-key parts) effective.
_renumbered_msgs: dict[tuple[int, tuple[int, ...]], tuple[InFlight, InFlight]] = {}


# The versions held by a tuple of nodes, by the nodes' identities: (the nodes, per node,
# their union without -1, its size, its maximum).
_nodes_versions: dict[tuple[int, ...], tuple[tuple[Node, ...], list[frozenset[int]],
                                               frozenset[int], int, int]] = {}


def _state_versions(st: BrokerState | None) -> frozenset[int]:
    if st is None:
        return frozenset()
    hit = _versions_cache.get(id(st))
    if hit is None or hit[0] is not st:
        vs = {r.zk_version for r in st.replicas}
        if st.controller is not None:
            for ctx in st.controller.partitions:
                if ctx.state is not None:
                    vs.add(ctx.state.zk_version)
        if len(_versions_cache) >= 100_000:
            _versions_cache.clear()
        hit = _versions_cache[id(st)] = (st, frozenset(vs))  # holds st: id not reused
    return hit[1]


def _normalize_versions(w: World) -> World:
    """Renumber partition znode versions densely, keeping their order. The core only
    compares versions (equal, greater) and proposes "current + 1", so worlds that differ
    only by such a renumbering behave the same; without it a shrink/expand cycle would make
    the state space infinite."""
    # The versions the nodes hold, by the nodes' identities (nodes are hash-consed, and the
    # entry holds them, so their ids are not reused while it is remembered).
    ids = tuple(map(id, w.nodes))
    held = _nodes_versions.get(ids)
    if held is None:
        if len(_nodes_versions) >= 100_000:
            _nodes_versions.clear()
        per_node = [_state_versions(n.state) for n in w.nodes]
        union = frozenset().union(*per_node) - {-1}
        held = _nodes_versions[ids] = (w.nodes, per_node, union, len(union),
                                       max(union, default=-1))
    union = held[2]
    # The versions outside the nodes (few, and most of them held by a node too), gathered
    # apart so the usual case, already dense, copies no set.
    extra: set[int] | None = None
    zk = w.zk
    p = zk.partition
    if p is not None and p.zk_version not in union:
        extra = {p.zk_version}
    for m in w.network:
        if m.kind == _LEADER_AND_ISR:
            assert isinstance(m.message, LeaderAndIsrRequest)
            for info in m.message.partitions:
                if info.zk_version not in union:
                    if extra is None:
                        extra = set()
                    extra.add(info.zk_version)
    for pw in zk.pending:
        for v in (pw.write.expected_zk_version, pw.write.proposed.zk_version):
            if v not in union:
                if extra is None:
                    extra = set()
                extra.add(v)
    if extra is not None:
        extra.discard(-1)
    if not extra:  # distinct and non-negative: dense already when max = count - 1
        if held[4] == held[3] - 1:
            return w
        seen: set[int] | frozenset[int] = union
    else:
        seen = union | extra
        if max(seen) == len(seen) - 1:
            return w
    per_node = held[1]
    ordered = sorted(seen)
    rank = {v: i for i, v in enumerate(ordered)}
    rank[-1] = -1

    def li(x: LeaderIsr | None) -> LeaderIsr | None:
        if x is None:
            return None
        v = rank[x.zk_version]
        return x if v == x.zk_version else _set1(x, _LI_VERSION, v)

    nodes = []
    key = tuple(ordered)
    for n, versions in zip(w.nodes, per_node, strict=True):
        st = n.state
        if st is None or all(rank[v] == v for v in versions):
            nodes.append(n)  # nothing to renumber: keep the (shared) node
            continue
        done = _renumbered.get((id(st), key))
        if done is None or done[0] is not st:
            reps = tuple(r._replace(zk_version=rank[r.zk_version]) for r in st.replicas)
            ctl = st.controller
            if ctl is not None:
                ctl = ctl._replace(partitions=tuple(c._replace(state=li(c.state))
                                                   for c in ctl.partitions))
            if len(_renumbered) >= 100_000:
                _renumbered.clear()
            done = _renumbered[(id(st), key)] = (st, _intern(st._replace(replicas=reps,
                                                                         controller=ctl)))
        nodes.append(_make_node(done[1], n.disk, n.timers, n.inbox))
    network = []
    for m in w.network:
        if isinstance(m.message, LeaderAndIsrRequest):
            moved = _renumbered_msgs.get((id(m), key))
            if moved is None or moved[0] is not m:
                infos = tuple(i._replace(zk_version=rank[i.zk_version])
                              for i in m.message.partitions)
                if len(_renumbered_msgs) >= 100_000:
                    _renumbered_msgs.clear()
                moved = _renumbered_msgs[(id(m), key)] = (m, m._replace(
                    message=dataclasses.replace(m.message, partitions=infos)))
            m = moved[1]
        network.append(m)
    zk = w.zk
    partition = li(zk.partition)
    if zk.pending:
        pending = tuple(
            pw._replace(write=dataclasses.replace(
                pw.write, expected_zk_version=rank[pw.write.expected_zk_version],
                proposed=pw.write.proposed._replace(
                    zk_version=rank[pw.write.proposed.zk_version])))
            for pw in zk.pending
        )
        zk = zk._replace(partition=partition, pending=pending)
    elif partition is not zk.partition:
        zk = _set1(zk, _ZK_PARTITION, partition)
    # The network stays sorted: the ranks keep the versions' order, and messages of other
    # kinds are unchanged (an in-flight message compares by destination, source and kind
    # before its content).
    return _world(World, (tuple(nodes), zk, tuple(network), w.ghost))


# Messages that travel as one action with their answer in `rpc` network mode.
_RPC = frozenset({FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
                  OffsetForLeaderEpochResponse})


def _kind(message: Message) -> str:
    return type(message).__name__


class Model:
    def __init__(self, config: ProtocolConfig, bounds: Bounds) -> None:
        self.config = config
        self.bounds = bounds
        self.brokers = tuple(range(bounds.brokers))
        # Renaming brokers maps behaviours to behaviours only if nothing prefers one broker:
        # every choice is explored, except the preferred replica of auto rebalance.
        self.symmetric = not bounds.rebalance
        # core.step is pure and deterministic, so its result is a function of (state, event)
        # (the state carries the config); a search meets the same broker step many times
        # (about ten times each at the default bounds), so results are remembered, per
        # state (found by identity, then by value: memoized steps return shared states)
        # and then per event. The cached effect lists are shared: nothing here mutates them.
        self._steps: dict[BrokerState, dict[ev.Event, tuple[BrokerState, list[fx.Effect]]]]
        self._steps = {}
        self._steps_by_id: dict[int, tuple[BrokerState, dict[ev.Event, tuple[
            BrokerState, list[fx.Effect]]]]] = {}
        self._step_pairs: dict[tuple[int, int], tuple[
            BrokerState, ev.Event, tuple[BrokerState, list[fx.Effect]]]] = {}
        self.step_cache_size = 200_000  # states (and (state, event) identity pairs)
        self._timer_plans: dict[frozenset[TimerKey], tuple[
            tuple[TimerKey, str, ev.TimerFired], ...]] = {}
        self._deliveries: dict[int, tuple[InFlight, ev.MessageReceived]] = {}
        self._received_events: dict[int, tuple[Message, ev.MessageReceived]] = {}
        self._filled: dict[tuple[int, int], tuple[
            FetchResponse, tuple[Record, ...], FetchResponse, ev.MessageReceived]] = {}
        self._filled_by_records: dict[tuple[int, tuple[Record, ...]], tuple[
            FetchResponse, FetchResponse, ev.MessageReceived]] = {}
        self._rpc = bounds.network == "rpc"
        self._recovered: dict[tuple[int, tuple[DurableReplica, ...]], BrokerState] = {}
        self._produces: dict[int, ev.ProduceReceived] = {}
        self._in_flight: dict[tuple[int, int, int], tuple[Message, InFlight]] = {}
        # ZooKeeper's answers and notifications, one event object per value (`_shared`), so
        # the memoized step finds them by identity instead of hashing a fresh dataclass
        self._zk_events: dict[object, ev.Event] = {}
        self._max_leader_epoch = bounds.leader_epochs
        # whether any effect may be lost (`_droppable`), decided once
        self._may_drop = bounds.network == "rpc" and bounds.drops > 0
        self._max_controller_epoch = bounds.controller_epochs

    def step(self, state: BrokerState, event: ev.Event) -> tuple[BrokerState, list[fx.Effect]]:
        """`core.step`, memoized: first by the identities of the state and the event (both
        held, so the ids are not reused while remembered; most events are shared objects,
        and hashing an event or a message dataclass runs Python-level `__hash__`s), then by
        value. The states it returns are interned (`_intern`), so a step that leaves a
        broker's state equal returns the very state it was given."""
        pair = (id(state), id(event))
        known = self._step_pairs.get(pair)
        if known is not None and known[0] is state and known[1] is event:
            return known[2]
        result = self._step_by_value(state, event)
        after = _intern(result[0])
        if after is not result[0]:
            result = (after, result[1])
        if len(self._step_pairs) >= self.step_cache_size:
            self._step_pairs.clear()
        self._step_pairs[pair] = (state, event, result)
        return result

    def _step_by_value(self, state: BrokerState,
                       event: ev.Event) -> tuple[BrokerState, list[fx.Effect]]:
        hit = self._steps_by_id.get(id(state))
        if hit is not None and hit[0] is state:
            per_event = hit[1]
        else:
            if len(self._steps) >= self.step_cache_size:
                self._steps.clear()
            if len(self._steps_by_id) >= self.step_cache_size:
                self._steps_by_id.clear()
            found = self._steps.get(state)
            if found is None:
                found = self._steps[state] = {}
            per_event = found
            # holds the state, so its id is not reused while cached
            self._steps_by_id[id(state)] = (state, per_event)
        result = per_event.get(event)
        if result is None:
            result = per_event[event] = step(state, event)
        return result

    # ----------------------------------------------------------------------------------
    # initial state

    def initial(self) -> World:
        """All brokers started and registered; the topic's assignment is in ZooKeeper; no
        controller yet, so every broker has the `/controller` notification to process."""
        registered = tuple(LiveBroker(b, 1) for b in self.brokers)
        zk = Zk(
            registered=registered,
            registrations=tuple(1 for _ in self.brokers),
            assignment=self.brokers,
        )
        nodes = []
        inbox: tuple[str, ...] = ()
        if self.bounds.zk_watches == "async":
            inbox = ("controller",)
        for b in self.brokers:
            s = init(b, self.config)
            s, _ = step(s, ev.Started())
            s, _ = step(s, ev.BrokerRegistered(1))
            nodes.append(Node(_intern(s), Disk(), frozenset(), inbox))
        return World(tuple(nodes), zk, (), Ghost())

    # ----------------------------------------------------------------------------------
    # successors

    def successors(self, w: World) -> list[tuple[Action, World]]:
        """Every action enabled in w, with the world it leads to (tidy: `tidy`), in a fixed
        order; w itself for an action that changes nothing."""
        tidy = self.tidy
        return [(a, s if s is w else tidy(s)) for a, s in self.successors_untidied(w)]

    def successors_untidied(self, w: World) -> list[tuple[Action, World]]:
        """`successors` before `tidy`: the search tidies only the worlds whose canonical key
        it has not met for the untidied world's parts (`Canonicalizer.key_tidy`): most
        successors lead to known states. Within the bounds already (`tidy` changes no
        epoch)."""
        out: list[tuple[Action, World]] = []
        b = self.bounds
        g = w.ghost
        for i, node in enumerate(w.nodes):
            if node.alive and node.inbox:
                out += self._act(w, ("zk", i, node.inbox[0]), i,
                                 self._read_watch(w.zk, node.inbox[0]), pop_inbox=True)
        if b.zk_watches == "sync" and w.zk.controller == NO_LEADER:
            # `/controller` is free: every registered broker heard it; one of them wins.
            for lb in w.zk.registered:
                if w.nodes[lb.broker_id].alive:
                    out += self._act(w, ("zk-elect", lb.broker_id), lb.broker_id,
                                     ev.ControllerChanged(NO_LEADER))
        network = w.network
        prev: InFlight | None = None
        for k, m in enumerate(network):
            # the network is sorted, so equal messages are neighbours: deliver one of them
            duplicate = prev is not None and (prev is m or prev == m)
            prev = m
            if duplicate or w.nodes[m.dst].state is None:
                continue
            if m.kind == _SHUTDOWN_RESPONSE:
                continue  # its delivery stops the broker: `_shutdowns`
            rest = network[:k] + network[k + 1:]
            out += self._act(_world(World, (w.nodes, w.zk, rest, g)),
                             ("deliver", m.dst, m.src, m.kind, k),
                             m.dst, self._delivery(m))
            if g.drops < b.drops:
                out.append((("drop", m.dst, m.src, m.kind, k),
                            w._replace(network=rest, ghost=g._replace(drops=g.drops + 1))))
            if g.duplicates < b.duplicates:
                dup = tuple(sorted((*w.network, m)))
                out.append((("duplicate", m.dst, m.src, m.kind, k),
                            w._replace(network=dup, ghost=g._replace(duplicates=g.duplicates + 1))))
        step = self.step
        for i, node in enumerate(w.nodes):
            st = node.state
            if st is None or not node.timers:
                continue
            for key, text, fired in self._timer_plan(node.timers):
                # A timer whose step leaves the broker's state as it was and only re-arms
                # it (a lag check that finds nothing, about one transition in six) changes
                # nothing: `_act` would disarm it, re-arm it, observe unchanged leaders
                # (`_observe` is idempotent and w was observed when it was built) and
                # return w itself from `freeze`. Known from the memoized step alone.
                after, effects = step(st, fired)
                if after is st and len(effects) == 1:
                    e = effects[0]
                    if type(e) is fx.SetTimer and (e.key is key or e.key == key):
                        out.append((("timer", i, text), w))
                        continue
                out += self._act(w, ("timer", i, text), i, fired, disarm=key)
        if g.next_record < b.records:
            for i, node in enumerate(w.nodes):
                st = node.state
                if st is None:
                    continue
                r = _replica(st)
                if r is not None and r.role == Role.LEADER:
                    rid = g.next_record
                    produce = self._produce(rid)
                    w2 = _world(World, (w.nodes, w.zk, w.network,
                                        _set1(g, _GHOST_NEXT_RECORD, rid + 1)))
                    out += self._act(w2, ("produce", i, rid), i, produce)
        out += self._faults(w)
        out += self._moves(w)
        out += self._list_offsets(w)
        out += self._shutdowns(w)
        for k, pw in enumerate(w.zk.pending):
            out += self._complete_write(w, k, pw)
        # w itself (an action that changed nothing) is within the bounds already; the rest
        # leave out a leader epoch or a controller epoch beyond the bounds
        max_leader_epoch, max_controller_epoch = self._max_leader_epoch, self._max_controller_epoch
        kept: list[tuple[Action, World]] = []
        for a, s in out:
            if s is not w:
                zk = s.zk
                p = zk.partition
                if ((p is not None and p.leader_epoch >= max_leader_epoch)
                        or zk.controller_epoch > max_controller_epoch):
                    continue
            kept.append((a, s))
        return kept

    def _timer_plan(self, timers: frozenset[TimerKey]) -> tuple[
            tuple[TimerKey, str, ev.TimerFired], ...]:
        """The timers of a set the model fires, in a fixed order (by their text), each with
        its label text and its event; remembered per set (a node's timers take few values,
        and a dataclass's repr is slow)."""
        plan = self._timer_plans.get(timers)
        if plan is None:
            b = self.bounds
            plan = tuple(
                (key, repr(key), ev.TimerFired(key))
                for key in sorted(timers, key=repr)
                if not (isinstance(key, _QUIET_TIMERS)
                        or (isinstance(key, LeaderImbalanceTimer) and not b.rebalance))
            )
            if len(self._timer_plans) >= 10_000:
                self._timer_plans.clear()
            self._timer_plans[timers] = plan
        return plan

    def _produce(self, rid: int) -> ev.ProduceReceived:
        """The client's produce of record `rid`: one event object per record, so memoized
        steps find it by identity."""
        event = self._produces.get(rid)
        if event is None:
            event = self._produces[rid] = ev.ProduceReceived(rid, TP, self.bounds.acks, 1,
                                                             (rid,))
        return event

    def _shared(self, key: object, make: Callable[[], _E]) -> _E:
        """The one event object for `key`, a value of builtin data and named tuples that
        determines the event."""
        event = self._zk_events.get(key)
        if event is None:
            if len(self._zk_events) >= 100_000:
                self._zk_events.clear()
            event = self._zk_events[key] = make()
        return cast(_E, event)

    def _delivery(self, m: InFlight) -> ev.MessageReceived:
        """The event delivering m; one object per in-flight message (held), and behind it
        one per message object (`_received`: every send wraps the memoized step's message
        in a fresh InFlight), so the memoized step finds it by identity."""
        hit = self._deliveries.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        if len(self._deliveries) >= 100_000:
            self._deliveries.clear()
        event = self._received(m.src, m.message)
        self._deliveries[id(m)] = (m, event)
        return event

    def tidy(self, w: World) -> World:
        """w without LeaderAndIsr requests their targets will ignore (`_inert`), its znode
        versions renumbered densely (`_normalize_versions`). A function of w's value that
        commutes with renaming brokers and changes no epoch; a tidy world stays as it is
        (the very object)."""
        nodes = w.nodes
        for m in w.network:
            if m.kind == _LEADER_AND_ISR and _inert(m, nodes, True):
                w = World(nodes, w.zk,
                          tuple(m for m in w.network if not _inert(m, nodes, True)), w.ghost)
                break
        return _normalize_versions(w)

    def _complete_write(self, w: World, k: int, pw: PendingWrite) -> list[tuple[Action, World]]:
        """ZooKeeper applies (or rejects) a leader's ISR write that was in flight."""
        rest = w.zk.pending[:k] + w.zk.pending[k + 1:]
        bld = _Builder(w._replace(zk=w.zk._replace(pending=rest)))
        queue: deque[tuple[int, ev.Event]] = deque()
        self._zk_write(bld, pw.broker_id, pw.write, queue)
        label: Action = ("zk-write", pw.broker_id, k)
        return [((*label, tuple(d.choices)) if d.choices else label, d.freeze())
                for d in self._run(bld, queue)]

    def _list_offsets(self, w: World) -> list[tuple[Action, World]]:
        """A client asks the broker that ZooKeeper names leader for the latest offset, with
        the leader epoch its metadata says (KIP-320 fencing); the ghost remembers the
        largest answer, which must never go backwards (KIP-207)."""
        p, g = w.zk.partition, w.ghost
        if p is None or p.leader == NO_LEADER or g.listings >= self.bounds.list_offsets:
            return []
        if not w.nodes[p.leader].alive:
            return []
        w2 = w._replace(ghost=g._replace(listings=g.listings + 1))
        request = ev.ListOffsetsReceived(g.listings, TP, -1, p.leader_epoch)
        return self._act(w2, ("list-offsets", p.leader), p.leader, request)

    def _moves(self, w: World) -> list[tuple[Action, World]]:
        """An operator moves leadership to another live ISR member (bounded)."""
        p, c, g = w.zk.partition, w.zk.controller, w.ghost
        if p is None or c == NO_LEADER or g.moves >= self.bounds.leader_moves:
            return []
        if not w.nodes[c].alive:
            return []
        out: list[tuple[Action, World]] = []
        registered = {lb.broker_id for lb in w.zk.registered}
        for target in p.isr:
            if target != p.leader and target in registered and w.nodes[target].alive:
                w2 = w._replace(ghost=g._replace(moves=g.moves + 1))
                out += self._act(w2, ("move-leader", target), c,
                                 ev.LeaderMoveRequested(TP, target))
        return out

    def _faults(self, w: World) -> list[tuple[Action, World]]:
        out: list[tuple[Action, World]] = []
        b = self.bounds
        g = w.ghost
        registered = {lb.broker_id for lb in w.zk.registered}
        for i, node in enumerate(w.nodes):
            if node.alive and g.crashes < b.crashes:
                out += self._crash(w, i, node.disk, ("crash", i), lossy=False)
                if g.lossy_crashes < b.lossy_crashes:
                    d = node.disk
                    for keep in range(d.durable, len(d.records)):
                        lost = d._replace(records=d.records[:keep])
                        out += self._crash(w, i, lost, ("lossy-crash", i, keep), lossy=True)
            if node.alive and i in registered and g.expiries < b.expiries:
                out += self._expire(w, i, ("expire", i))
            if not node.alive and i not in registered:
                out += self._restart(w, i)
        return out

    # ----------------------------------------------------------------------------------
    # controlled shutdown (Bounds.shutdowns; issue #15)

    def _shutdowns(self, w: World) -> list[tuple[Action, World]]:
        """Controlled shutdown as Kafka's ZooKeeper-era brokers do it, in two actions:
        - ("shutdown", i): the operator stops broker i (SIGTERM), or it asks again; it sends
          ControlledShutdown to the controller it knows; the controller moves its leaderships
          away and takes it out of the ISRs it follows (conditional ZooKeeper writes,
          LeaderAndIsr, StopReplica) and answers with the partitions nobody can take over;
        - ("shutdown-stop", i, k): the answer reaches broker i; if it is NONE with nothing
          remaining, the broker flushes its log and stops, and its ZooKeeper session closes
          (its registration goes, as on expiry); otherwise this attempt ends (Kafka retries,
          within the same bound here).
        The ghost records whether a broker stopped while ZooKeeper still named it leader with
        a live ISR member to take over, and whether the controller ever wrote an ISR that kept
        a shutting-down broker next to other members (`_observe_shutdown_write`)."""
        out: list[tuple[Action, World]] = []
        g = w.ghost
        registered = {lb.broker_id for lb in w.zk.registered}
        if g.shutdowns < self.bounds.shutdowns and w.zk.controller != NO_LEADER:
            for i, node in enumerate(w.nodes):
                if node.state is None or i not in registered:
                    continue
                w2 = w._replace(ghost=g._replace(shutdowns=g.shutdowns + 1))
                out += self._act(w2, ("shutdown", i), i, ev.ControlledShutdownRequested())
        for k, m in enumerate(w.network):
            if m.kind != _SHUTDOWN_RESPONSE or not w.nodes[m.dst].alive:
                continue
            assert isinstance(m.message, ControlledShutdownResponse)
            rest = w._replace(network=w.network[:k] + w.network[k + 1:])
            label: Action = ("shutdown-stop", m.dst, k)
            if m.message.error != Errors.NONE or m.message.remaining:
                out.append((label, rest))
            else:
                out += self._stop(rest, m.dst, label)
        return out

    def _stop(self, w: World, i: int, label: Action) -> list[tuple[Action, World]]:
        """Broker i stops cleanly: everything it wrote is flushed; then its session closes."""
        p, g = w.zk.partition, w.ghost
        if p is not None and p.leader == i:
            alive = {lb.broker_id for lb in w.zk.registered if w.nodes[lb.broker_id].alive}
            if any(m != i and m in alive for m in p.isr):
                g = g._replace(stopped_as_leader=True)
        nodes = list(w.nodes)
        d = w.nodes[i].disk
        nodes[i] = Node(None, d._replace(durable=len(d.records)))
        stopped = w._replace(nodes=tuple(nodes), ghost=g)
        if any(lb.broker_id == i for lb in w.zk.registered):
            return self._expire(stopped, i, label)
        return [(label, stopped)]

    def _observe_shutdown_write(self, bld: _Builder, i: int,
                                e: fx.ZkWritePartitionState) -> None:
        """A controller's partition write that keeps a shutting-down broker in a larger ISR
        breaks controlled shutdown's promise. (A leader's own ISR expansion may still add it
        back after it fetched in the new epoch: Kafka's ZooKeeper-era leaders do not know who
        is shutting down; KIP-841 closed that in KRaft. docs/mutation.md.)"""
        st = bld.states[i]
        if not e.by_controller or st is None or st.controller is None:
            return
        isr = e.proposed.isr
        if len(isr) > 1 and any(b in isr for b in st.controller.shutting_down):
            bld.ghost = bld.ghost._replace(stopped_in_isr=True)

    # ----------------------------------------------------------------------------------
    # faults

    def _crash(self, w: World, i: int, disk: Disk, label: Action,
               lossy: bool) -> list[tuple[Action, World]]:
        """Broker i dies (kill -9, or a machine crash when `lossy`). The model lets its
        ZooKeeper session expire in the same action: what happens between a crash and its
        expiry is what a live-but-partitioned broker does, which `expiries` covers."""
        nodes = list(w.nodes)
        epochs = truncate_epochs(disk.epochs, len(disk.records)) if disk.records else ()
        disk = disk._replace(epochs=epochs, hw_checkpoint=min(disk.hw_checkpoint,
                                                             len(disk.records)))
        nodes[i] = Node(None, disk)
        # The controller keeps its requests to a broker queued and sends them again when the
        # broker reconnects (ControllerChannelManager), so control requests in flight to the
        # crashed broker survive; they reach the restarted broker (KIP-380's scenario).
        network = w.network
        g = w.ghost
        ghost = g._replace(crashes=g.crashes + 1, lossy_crashes=g.lossy_crashes + int(lossy))
        crashed = w._replace(nodes=tuple(nodes), network=network, ghost=ghost)
        if any(lb.broker_id == i for lb in w.zk.registered):
            return self._expire(crashed, i, label)
        return [(label, crashed)]

    def _expire(self, w: World, i: int, label: Action) -> list[tuple[Action, World]]:
        """ZooKeeper expires broker i's session: its ephemeral nodes go, watchers hear.

        A live broker's ISR writes still in flight (`isr_writes="async"`) end with their
        outcome unknown to it: ZooKeeper may have applied the first k of them before the
        session ended, their answers lost with it (k = 0 .. all, one successor each), and the
        broker's driver reports each as `unknown` (`ZkDriver._on_unavailable`; found by the
        simulator, seeds 385633 and 397166). A dead broker hears nothing: its writes are
        rejected (ZooKeeper applying one first is the interleaving "applied, then crash")."""
        mine = [pw for pw in w.zk.pending if pw.broker_id == i]
        if not mine or not w.nodes[i].alive:
            return self._expire_applying(w, i, label, mine, 0)
        return [succ for k in range(len(mine) + 1)
                for succ in self._expire_applying(w, i, (*label, "applied", k) if k else label,
                                                  mine, k)]

    def _expire_applying(self, w: World, i: int, label: Action, mine: list[PendingWrite],
                         applied: int) -> list[tuple[Action, World]]:
        bld = _Builder(w)
        queue: deque[tuple[int, ev.Event]] = deque()
        zk = bld.zk
        bld.zk = zk._replace(pending=tuple(pw for pw in zk.pending if pw.broker_id != i))
        for pw in mine[:applied]:
            before = bld.zk.partition
            self._zk_write(bld, i, pw.write, deque())  # its answer is lost with the session
            if bld.zk.partition is not before:
                bld.zk = bld.zk._replace(unseen=True)
        zk = bld.zk
        bld.zk = zk._replace(registered=tuple(lb for lb in zk.registered if lb.broker_id != i),
                             registered_since=tuple(b for b in zk.registered_since if b != i))
        alive = w.nodes[i].alive
        for pw in mine:
            queue.append((i, ev.PartitionStateWritten(pw.write.tp, pw.write.proposed, False,
                                                      False, False, None if alive
                                                      else zk.partition, unknown=alive)))
        if alive:
            bld.ghost = bld.ghost._replace(expiries=bld.ghost.expiries + 1)
            self._notify(bld, i, ev.SessionExpired(), queue)
        if zk.controller == i:
            bld.zk = bld.zk._replace(controller=NO_LEADER)
            self._notify_all(bld, ev.ControllerChanged(NO_LEADER), queue)
        self._notify_controller(bld, queue)
        return [((*label, tuple(d.choices)) if d.choices else label, d.freeze())
                for d in self._run(bld, queue)]

    def _restart(self, w: World, i: int) -> list[tuple[Action, World]]:
        d = w.nodes[i].disk
        durable = DurableReplica(
            tp=TP,
            replicas=w.zk.assignment,
            log_start_offset=0,
            log_end_offset=len(d.records),
            epochs=d.epochs,
            hw_checkpoint=d.hw_checkpoint,
        )
        what = (i, (durable,) if d.records or d.epochs else ())
        state = self._recovered.get(what)
        if state is None:
            # `recover` is pure: one state object per input keeps the memoized step and the
            # canonical key's state interning on their identity fast paths
            if len(self._recovered) >= 100_000:
                self._recovered.clear()
            state = self._recovered[what] = _intern(recover(i, self.config, what[1]))
        nodes = list(w.nodes)
        nodes[i] = Node(state, d)
        w2 = w._replace(nodes=tuple(nodes))
        return self._act(w2, ("restart", i), i, _STARTED)

    # ----------------------------------------------------------------------------------
    # running one action to completion

    def _act(
        self,
        w: World,
        label: Action,
        node: int,
        event: ev.Event,
        pop_inbox: bool = False,
        disarm: TimerKey | None = None,
    ) -> list[tuple[Action, World]]:
        bld = _Builder(w)
        if pop_inbox:
            bld.inboxes[node] = bld.inboxes[node][1:]
        if disarm is not None:
            bld.timer_set(node).discard(disarm)
        results: list[tuple[Action, World]] = []
        for done in self._run(bld, deque([(node, event)])):
            results.append(((*label, tuple(done.choices)) if done.choices else label,
                            done.freeze()))
        return results

    def _run(
        self, bld: _Builder, queue: deque[tuple[int, ev.Event]]
    ) -> list[_Builder]:
        states = bld.states
        while queue:
            i, event = queue.popleft()
            current = states[i]
            if current is None:
                continue
            state, effects = self.step(current, event)
            if state is not current:  # an unchanged state cannot take up a leadership
                states[i] = state
                self._record_leadership(bld, i, current, state)
            if effects:
                return self._effects(bld, i, effects, queue)
        self._observe(bld)
        return [bld]

    def _effects(self, bld: _Builder, i: int, effects: list[fx.Effect],
                 queue: deque[tuple[int, ev.Event]]) -> list[_Builder]:
        """Apply one step's effects in order, then go on with the queue. A `Choose` branches
        into one world per option; in rpc mode a replica-fetch response may be lost (within
        the drops bound), which opens the window between a leader acting on a request and
        the follower hearing of it."""
        may_drop = self._may_drop
        for k, e in enumerate(effects):
            if type(e) is fx.Choose:
                branches: list[_Builder] = []
                for option in range(len(e.options)):
                    b2 = bld.copy()
                    b2.choices.append(e.options[option])
                    q2 = deque(queue)
                    q2.appendleft((i, ev.Chosen(e.key, option)))
                    branches += self._effects(b2, i, effects[k + 1:], q2)
                return branches
            if may_drop and self._droppable(bld, e):
                b2 = bld.copy()
                b2.choices.append("lost")
                b2.ghost = b2.ghost._replace(drops=b2.ghost.drops + 1)
                lost = self._effects(b2, i, effects[k + 1:], deque(queue))
                self._apply(bld, i, e, queue)
                return self._effects(bld, i, effects[k + 1:], queue) + lost
            self._apply(bld, i, e, queue)
        return self._run(bld, queue)

    def _droppable(self, bld: _Builder, e: fx.Effect) -> bool:
        return (
            isinstance(e, fx.Send)
            and isinstance(e.message, (FetchResponse, OffsetForLeaderEpochResponse))
            and self.bounds.network == "rpc"
            and bld.ghost.drops < self.bounds.drops
        )

    def _apply(self, bld: _Builder, i: int, e: fx.Effect,
               queue: deque[tuple[int, ev.Event]]) -> None:
        t = type(e)  # the most frequent effects first, without the match's isinstance chain
        if t is fx.Send:
            send = cast(fx.Send, e)
            self._send(bld, i, send.dst, send.message, queue)
            return
        if t is fx.SetTimer:
            key = cast(fx.SetTimer, e).key
            armed = bld.timers[i]
            if armed is not None:
                armed.add(key)
            elif key not in bld.nodes[i].timers:  # re-arming an armed timer changes nothing
                bld.timer_set(i).add(key)
            return
        if t is fx.CancelTimer:
            key = cast(fx.CancelTimer, e).key
            armed = bld.timers[i]
            if armed is not None:
                armed.discard(key)
            elif key in bld.nodes[i].timers:
                bld.timer_set(i).discard(key)
            return
        if t is fx.CheckpointHighWatermark:
            hw = cast(fx.CheckpointHighWatermark, e).high_watermark
            bld.disks[i] = _set1(bld.disks[i], _DISK_HW, hw)
            return
        d = bld.disks[i]
        match e:
            case fx.Send(dst=dst, message=msg):
                self._send(bld, i, dst, msg, queue)
            case fx.AppendAsLeader(record_count=count, leader_epoch=epoch, records=recs):
                assert isinstance(recs, tuple) and len(recs) == count
                new: tuple[Record, ...] = tuple((int(r), epoch) for r in recs)
                bld.disks[i] = _set1(d, _DISK_RECORDS, d.records + new)
            case fx.AppendAsFollower(records=recs):
                assert isinstance(recs, tuple)
                bld.disks[i] = _set1(d, _DISK_RECORDS, d.records + recs)
            case fx.TruncateTo(offset=offset):
                bld.disks[i] = d._replace(records=d.records[:offset],
                                          durable=min(d.durable, offset))
            case fx.CheckpointHighWatermark(high_watermark=hw):
                bld.disks[i] = _set1(d, _DISK_HW, hw)
            case fx.CheckpointLeaderEpochs(epochs=epochs):
                bld.disks[i] = _set1(d, _DISK_EPOCHS, epochs)
            case fx.SetTimer(key=key):
                bld.timer_set(i).add(key)
            case fx.CancelTimer(key=key):
                armed = bld.timers[i]
                if key in (bld.nodes[i].timers if armed is None else armed):
                    bld.timer_set(i).discard(key)
            case fx.ListOffsetsReply(error=error, offset=offset):
                g = bld.ghost
                if error == 0:
                    bld.ghost = g._replace(
                        latest_listed=max(g.latest_listed, offset),
                        listed_backwards=g.listed_backwards or offset < g.latest_listed,
                    )
            case fx.ProduceReply(request_id=rid, error=error):
                if error == 0:
                    bld.ghost = _set1(bld.ghost, _GHOST_ACKED, bld.ghost.acked | {rid})
            case fx.ZkRegisterBroker(broker_id=b):
                self._zk_register(bld, b, queue)
            case fx.ZkElectController(broker_id=b):
                self._zk_elect(bld, b, queue)
            case fx.ZkResignController(broker_id=b):
                if bld.zk.controller == b:
                    bld.zk = bld.zk._replace(controller=NO_LEADER)
                    self._notify_all(bld, ev.ControllerChanged(NO_LEADER), queue)
            case fx.ZkWritePartitionState():
                if not e.by_controller and self.bounds.isr_writes == "async":
                    bld.zk = bld.zk._replace(pending=(*bld.zk.pending, PendingWrite(i, e)))
                else:
                    self._zk_write(bld, i, e, queue)
            case fx.ZkNotifyIsrChange():
                self._notify_controller_isr(bld, queue)
            case fx.ConsumerFetchReply() | fx.DeletePartition():
                pass  # no model consequence: consumers are not modelled, one partition stays
            case fx.ZkDeleteTopic() | fx.Choose():  # no topic deletion; _effects branches
                raise ValueError(f"the model cannot apply {e!r}")
            case _:
                assert_never(e)

    # ----------------------------------------------------------------------------------
    # network

    def _send(self, bld: _Builder, src: int, dst: int, msg: Message,
              queue: deque[tuple[int, ev.Event]]) -> None:
        if isinstance(msg, UpdateMetadataRequest):
            # Metadata caches serve clients; no replication decision reads them. Dropping
            # them is a behaviour the network allows, and keeps the state space small.
            return
        t = type(msg)
        event: ev.MessageReceived | None = None
        if t is FetchResponse:
            msg, event = self._fill_fetch(bld, src, cast(FetchResponse, msg))
        if dst < 0 or dst >= len(bld.states):
            return
        if t in _RPC and self._rpc:
            if bld.states[dst] is not None:
                queue.append((dst, self._received(src, msg) if event is None else event))
            return
        # one in-flight object per (message object, destination, source), held: memoized
        # steps send the same message objects again, and the canonical key, the delivery
        # events and the renumbering then find the message by identity
        hit = self._in_flight.get((id(msg), dst, src))
        if hit is None or hit[0] is not msg:
            if len(self._in_flight) >= 100_000:
                self._in_flight.clear()
            hit = self._in_flight[(id(msg), dst, src)] = (msg, InFlight(dst, src, _kind(msg),
                                                                         msg))
        bld.sent.append(hit[1])

    def _received(self, src: int, msg: Message) -> ev.MessageReceived:
        """The event delivering msg from src. Memoized steps hand out the same effects, so
        the same message objects come back: one event per message object (held), which
        the memoized step then finds without comparing dataclasses field by field."""
        hit = self._received_events.get(id(msg))
        if hit is not None and hit[0] is msg and hit[1].src == src:
            return hit[1]
        if len(self._received_events) >= 100_000:
            self._received_events.clear()
        event = ev.MessageReceived(src, msg)
        self._received_events[id(msg)] = (msg, event)
        return event

    def _fill_fetch(self, bld: _Builder, src: int,
                    msg: FetchResponse) -> tuple[FetchResponse, ev.MessageReceived]:
        """The response with the leader's records from its disk, and the event delivering
        it; one pair per (response, log) object pair (both held, so ids are not reused):
        the same response meets the same log again and again."""
        log = bld.disks[src].records
        hit = self._filled.get((id(msg), id(log)))
        if hit is not None and hit[0] is msg and hit[1] is log and hit[3].src == src:
            return hit[2], hit[3]
        # logs are fresh tuples after every append: then by the records sent (hashed in C)
        recs = log[msg.fetch_offset:msg.end_offset]
        same = self._filled_by_records.get((id(msg), recs))
        if same is not None and same[0] is msg and same[2].src == src:
            filled, event = same[1], same[2]
        else:
            batches = tuple(BatchInfo(msg.fetch_offset + k, msg.fetch_offset + k, r[1])
                            for k, r in enumerate(recs))
            filled = dataclasses.replace(msg, batches=batches, records=recs)
            event = ev.MessageReceived(src, filled)
            if len(self._filled_by_records) >= 100_000:
                self._filled_by_records.clear()
            self._filled_by_records[(id(msg), recs)] = (msg, filled, event)
        if len(self._filled) >= 100_000:
            self._filled.clear()
        self._filled[(id(msg), id(log))] = (msg, log, filled, event)
        return filled, event

    # ----------------------------------------------------------------------------------
    # ZooKeeper

    def _notify(self, bld: _Builder, i: int, event: ev.Event,
                queue: deque[tuple[int, ev.Event]] | None = None) -> None:
        """A ZooKeeper watch fires at broker i. In async mode the broker only learns that
        something changed; what it reads when it gets round to it is ZooKeeper's state then
        (`_read_watch`), as Kafka's controller re-reads the znodes. Watches are one-shot, so
        a kind already pending is not queued twice."""
        if not bld.alive(i):
            return
        if self.bounds.zk_watches == "sync" and queue is not None:
            queue.append((i, event))
        elif self.bounds.zk_watches == "async":
            kind = _WATCH_KIND[type(event)]
            if kind not in bld.inboxes[i]:
                bld.inboxes[i] = (*bld.inboxes[i], kind)

    def _read_watch(self, zk: Zk, kind: str) -> ev.Event:
        if kind == "controller":
            return ev.ControllerChanged(zk.controller)
        if kind == "brokers":
            return ev.BrokersChanged(zk.registered)
        if kind == "isr":
            return ev.IsrChanged(self._snapshot(zk))
        return ev.SessionExpired()

    def _controller_changed(self, controller: int) -> ev.ControllerChanged:
        return self._shared(("controller", controller), lambda: ev.ControllerChanged(controller))

    def _notify_all(self, bld: _Builder, event: ev.Event,
                    queue: deque[tuple[int, ev.Event]]) -> None:
        if self.bounds.zk_watches == "sync" and event == ev.ControllerChanged(NO_LEADER):
            return  # the race for /controller is the model's `zk-elect` actions
        registered = {lb.broker_id for lb in bld.zk.registered}
        for i in range(len(bld.states)):
            if i in registered:
                self._notify(bld, i, event, queue)

    def _notify_controller(self, bld: _Builder, queue: deque[tuple[int, ev.Event]]) -> None:
        c = bld.zk.controller
        if c != NO_LEADER:
            registered = bld.zk.registered
            self._notify(bld, c, self._shared(("brokers", registered),
                                              lambda: ev.BrokersChanged(registered)), queue)

    def _snapshot(self, zk: Zk, electing: bool = False) -> tuple[ev.PartitionSnapshot, ...]:
        """The partition as read; a new controller (`electing`) also reads which brokers
        registered since its state was written, as the real driver does."""
        since = zk.registered_since if electing else ()
        return (ev.PartitionSnapshot(TP, zk.assignment, zk.partition, registered_since=since),)

    def _notify_controller_isr(self, bld: _Builder,
                               queue: deque[tuple[int, ev.Event]]) -> None:
        c = bld.zk.controller
        if c != NO_LEADER:
            if bld.zk.unseen:
                bld.zk = bld.zk._replace(unseen=False)
            zk = bld.zk
            self._notify(bld, c, self._shared(("isr", zk.assignment, zk.partition),
                                              lambda: ev.IsrChanged(self._snapshot(zk))), queue)

    def _zk_register(self, bld: _Builder, b: int, queue: deque[tuple[int, ev.Event]]) -> None:
        zk = bld.zk
        counts = list(zk.registrations)
        counts[b] += 1
        registered = tuple(sorted((*zk.registered, LiveBroker(b, counts[b])),
                                  key=lambda lb: lb.broker_id))
        since = tuple(sorted({*zk.registered_since, b}))
        bld.zk = zk._replace(registered=registered, registrations=tuple(counts),
                             registered_since=since)
        n = counts[b]
        queue.append((b, self._shared(("registered", n), lambda: ev.BrokerRegistered(n))))
        self._notify(bld, b, self._controller_changed(bld.zk.controller), queue)
        self._notify_controller(bld, queue)

    def _zk_elect(self, bld: _Builder, b: int, queue: deque[tuple[int, ev.Event]]) -> None:
        zk = bld.zk
        if zk.controller != NO_LEADER or all(lb.broker_id != b for lb in zk.registered):
            queue.append((b, ev.ControllerElection(False, zk.controller, zk.controller_epoch,
                                                   zk.controller_epoch_version, (), ())))
            return
        # (the new controller reads every partition's state: nothing is owed to it)
        bld.zk = zk = zk._replace(controller=b, controller_epoch=zk.controller_epoch + 1,
                              controller_epoch_version=zk.controller_epoch_version + 1,
                              unseen=False)
        queue.append((b, ev.ControllerElection(True, b, zk.controller_epoch,
                                               zk.controller_epoch_version, zk.registered,
                                               self._snapshot(zk, electing=True))))
        for i in range(len(bld.states)):
            if i != b and any(lb.broker_id == i for lb in zk.registered):
                self._notify(bld, i, self._controller_changed(b), queue)

    def _zk_write(self, bld: _Builder, i: int, e: fx.ZkWritePartitionState,
                  queue: deque[tuple[int, ev.Event]]) -> None:
        zk = bld.zk
        fenced = (e.controller_epoch_zk_version is not None
                  and e.controller_epoch_zk_version != zk.controller_epoch_version)
        current = zk.partition
        version_ok = (current is None and e.expected_zk_version == -1) or (
            current is not None and current.zk_version == e.expected_zk_version)
        ok = version_ok and not fenced
        if ok:
            bld.zk = _set1(zk, _ZK_PARTITION, e.proposed)
            if zk.registered_since:
                bld.zk = bld.zk._replace(registered_since=())
            self._observe_shutdown_write(bld, i, e)
        queue.append((i, self._written(e, ok, fenced, current)))

    def _written(self, e: fx.ZkWritePartitionState, ok: bool, fenced: bool,
                 current: LeaderIsr | None) -> ev.PartitionStateWritten:
        """ZooKeeper's answer to a partition write (its fields are named tuples and flags,
        hashed in C)."""
        tp, proposed, by_controller = e.tp, e.proposed, e.by_controller
        return self._shared(("written", tp, proposed, by_controller, ok, fenced, current),
                            lambda: ev.PartitionStateWritten(tp, proposed, by_controller, ok,
                                                             fenced, current))

    # ----------------------------------------------------------------------------------
    # ghosts

    def _record_leadership(self, bld: _Builder, i: int, old: BrokerState,
                           new: BrokerState) -> None:
        after = _replica(new)
        if after is None or after.role != Role.LEADER:
            return
        before = _replica(old)
        if before is not None and before.role == Role.LEADER and (
            before.leader_epoch == after.leader_epoch
        ):
            return
        entry = (after.leader_epoch, i)
        if entry not in bld.ghost.leaders:
            bld.ghost = _set1(bld.ghost, _GHOST_LEADERS,
                              tuple(sorted((*bld.ghost.leaders, entry))))

    def _observe(self, bld: _Builder) -> None:
        """Extend the ghost of exposed records with every leader's HW prefix."""
        g = bld.ghost
        exposed, conflict = g.exposed, g.conflicting_exposure
        leader = Role.LEADER
        for i, st in enumerate(bld.states):
            if st is None:
                continue
            for r in st.replicas:  # `_replica`, inline: this runs once per action
                if r.tp == TP:
                    break
            else:
                continue
            if r.role != leader or r.high_watermark == 0:
                continue
            prefix = bld.disks[i].records[:r.high_watermark]
            n = min(len(prefix), len(exposed))
            if prefix[:n] != exposed[:n]:
                conflict = True
            elif len(prefix) > len(exposed):
                exposed = prefix
        if exposed != g.exposed or conflict != g.conflicting_exposure:
            bld.ghost = _set1(_set1(g, _GHOST_EXPOSED, exposed), _GHOST_CONFLICT, conflict)


def _replica(state: BrokerState | None) -> ReplicaState | None:
    if state is None:
        return None
    for r in state.replicas:
        if r.tp == TP:
            return r
    return None


def leader_isr(w: World) -> LeaderIsr | None:
    return w.zk.partition
