"""The simulated cluster: brokers (core + the real `Node` interpreter + the real store on
`SimFS`), links between them, the simulated ZooKeeper, and the projection into spec's World.

Every callback the scheduler runs is one event; after each one the cluster is projected into
a `spec.world.World` and `spec.invariants` are checked (state invariants when the
invariants' view changed, step invariants against the previous world).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.runtime.node import Node as Interpreter
from broker.runtime.ports import Cancellable
from broker.store.batch import BatchHeader, decode_records, iter_headers
from broker.store.config import LogConfig
from broker.store.fs import SimFS
from broker.store.manager import LogManager
from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.messages import (
    BatchInfo,
    ControlledShutdownRequest,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    Message,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from core.replica import ReplicaState
from core.timers import ReplicaLagTimer, TimerKey
from core.types import Errors, Role, TopicPartition
from harness.sim.sched import US_PER_MS, Delivery, Scheduler
from harness.sim.zk import SimZooKeeper
from spec import invariants as inv
from spec.world import TP, Disk, Ghost, Record, World, Zk
from spec.world import Node as WorldNode

EPOCH_MS = 1_700_000_000_000  # the simulated wall clock starts here
DATA_DIR = Path("/data")
CONTROL = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest,
           ControlledShutdownRequest)
CONTROL_BACKOFF_MS = (50, 1_000)  # peers.CONTROL_BACKOFF_S
RPC_FAIL_MS = 1_000  # a fetch whose connection fails is reported after this
FETCH_MAX_BYTES = 1 << 20
ZK = -1  # the ZooKeeper host in link tables
DECODED_MAX = 50_000  # decoded batches kept (a 20 s seed writes a few thousand)


_tuple_new = tuple.__new__  # a NamedTuple from all its fields, in order, without its __new__
NO_BROKER = -2  # matches no broker id (NO_LEADER is -1)
_NO_TIMERS: frozenset[TimerKey] = frozenset()
_ZK_INBOX = ("zk",)

# the simulator's projection keeps no timers (the Node's live ones are in its clock)
STATE_CHECKS = (frozenset(i.name for i in inv.STATE_INVARIANTS) - {"epoch_offset_uniqueness"}
                - inv.TIMER_INVARIANTS)
# the invariants that compare log prefixes below HWs, which `Cluster._prefixes_agree` can show
# to hold from the logs' common prefix lengths
PREFIX_CHECKS = frozenset({"strong_isr", "weak_isr", "log_matching"})
_ACK_CHECKS_WITHOUT = (STATE_CHECKS, STATE_CHECKS - {"no_acked_record_lost"}, STATE_CHECKS,
                       STATE_CHECKS - {"no_acked_record_lost", "leader_completeness"})
# the invariants that only read one flag of the ghost each, which hold while it is False
GHOST_FLAG_CHECKS = frozenset({"consistent_read", "list_offsets_monotonic",
                               "controlled_shutdown_moves_leadership",
                               "controlled_shutdown_shrinks_isr"})
# by `Cluster._state_skip`'s bits: 1, 2 as above, 4 the prefix checks, 8 the flag checks
_CHECKS_WITHOUT_4 = (*_ACK_CHECKS_WITHOUT, *(c - PREFIX_CHECKS for c in _ACK_CHECKS_WITHOUT))
_CHECKS_WITHOUT = (*_CHECKS_WITHOUT_4, *(c - GHOST_FLAG_CHECKS for c in _CHECKS_WITHOUT_4))
# the same sets as the invariants to run, in spec's order: `check_state(w, only)` without its
# name test per invariant on every check
_RUN_WITHOUT = tuple(tuple(i for i in inv.STATE_INVARIANTS if i.name in only)
                     for only in _CHECKS_WITHOUT)


@dataclass(frozen=True)
class NetConfig:
    delay_us: int = 500  # base one-way delay
    jitter_us: int = 1_500  # mean of the exponential part (reorders messages)
    loss: float = 0.0  # per message
    duplicate: float = 0.0
    zk_latency_us: int = 1_000


class Violation(Exception):
    """An invariant broke, or a broker halted: the seed fails."""

    def __init__(self, kind: str, name: str, why: str) -> None:
        super().__init__(f"{kind} {name}: {why}")
        self.kind, self.name, self.why = kind, name, why


class SimClockPort:
    """Node's `Clock` port on simulated time; callbacks die with the incarnation."""

    def __init__(self, cluster: Cluster, broker: int, incarnation: int) -> None:
        self.c, self.b, self.inc = cluster, broker, incarnation

    def now_ms(self) -> int:
        return EPOCH_MS + self.c.sched.now_us // US_PER_MS

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self.c.sched.after_us(max(0, delay_ms) * US_PER_MS,
                                     lambda: self.c.run_on(self.b, self.inc, callback))


class SimTransportPort:
    def __init__(self, cluster: Cluster, broker: int, incarnation: int) -> None:
        self.c, self.b, self.inc = cluster, broker, incarnation

    def send(self, dst: int, message: Message) -> None:
        self.c.net_send(self.b, self.inc, dst, message)

    def respond(self, dst: int, message: Message) -> None:
        if isinstance(message, FetchResponse):
            message = self.c.fill_fetch(self.b, message)
        self.c.net_send(self.b, self.inc, dst, message)


class SimZkPort:
    def __init__(self, cluster: Cluster, broker: int, incarnation: int) -> None:
        self.c, self.b, self.inc = cluster, broker, incarnation

    def submit(self, effect: fx.Effect) -> None:
        self.c.zk.submit(self.b, self.inc, effect)


class SimReplies:
    """Stands in for Node's reply waiters: client replies go to the simulated clients."""

    def __init__(self, cluster: Cluster, broker: int) -> None:
        self.c, self.b = cluster, broker

    def resolve(self, key: object, value: object) -> bool:
        return self.c.client_reply(self.b, key, value)


class Broker:
    def __init__(self, cluster: Cluster, bid: int, fs_seed: int) -> None:
        self.c = cluster
        self.id = bid
        self.fs = SimFS(seed=fs_seed)
        self.incarnation = 0
        self.node: Interpreter | None = None
        self.logs: LogManager | None = None
        self.paused = False
        self.deferred: list[Callable[[], None]] = []
        self.mirror: list[Record] = []  # the partition's log as (record id, leader epoch)
        self.mirror_t: tuple[Record, ...] = ()
        self.disk = Disk(())  # the projected disk: Disk(mirror_t), made when that changes
        self.mirror_dirty = False
        self.ids: dict[int, int] = {}  # record id -> copies in this broker's log
        self.ids_lost = 0  # ids that left `ids` (their last copy here went)

    @property
    def alive(self) -> bool:
        return self.node is not None

    def open_logs(self) -> None:
        self.logs = LogManager([DATA_DIR], self.c.log_config, self.fs, now_ms=self.c.now_ms())
        m = self.mirror
        while m:  # the copies the old log held are counted off before it is read again
            self.c.drop_copy(self.id, len(m) - 1, m.pop())
        self.mirror_dirty = True
        self.sync_mirror()

    def start(self) -> None:
        if self.logs is None:
            self.open_logs()
        assert self.logs is not None
        self.incarnation += 1
        inc = self.incarnation
        c = self.c
        node = Interpreter(self.id, c.protocol, self.logs,
                           clock=SimClockPort(c, self.id, inc),
                           transport=SimTransportPort(c, self.id, inc),
                           zookeeper=SimZkPort(c, self.id, inc))
        node.replies = SimReplies(c, self.id)  # type: ignore[assignment]
        node.on_replica_changed = lambda tp: self.sync_mirror()
        orig = node.handle

        def handle(e: ev.Event) -> None:
            c.trace_event(self.id, e)
            orig(e)

        node.handle = handle  # type: ignore[method-assign,assignment]
        self.node = node
        c.zk.connect(self.id, inc)
        node.handle(ev.Started())

    def crash(self, lossy: bool, torn: bool = False) -> None:
        """kill -9 (the page cache survives) or, `lossy`, a machine crash (it does not;
        `torn`: a random prefix of each file's unsynced tail survives, maybe garbled)."""
        if self.node is not None:
            self.node.close()
        self.node = None
        self.paused = False
        self.deferred = []
        self.c.dirty = True
        self.incarnation += 1  # every callback of the old process is void
        self.c.zk_held[self.id] = []  # (what was held for it dies with it)
        self.fs.crash(lose_unsynced=lossy, torn=torn)
        self.logs = None
        # Recover now (what the restart will find), so the projected disk is the real one.
        self.open_logs()

    def sync_mirror(self) -> None:
        """Follow the store's log of TP after each change (appends and truncations)."""
        logs = self.logs
        lg = logs.get_log(TP.topic, TP.partition) if logs is not None else None
        leo = lg.log_end_offset if lg is not None else 0
        m = self.mirror
        if len(m) == leo and not self.mirror_dirty:
            # a HW checkpoint, most often: the same records, so the same projected tuple
            # (a new one made every comparison with the last world walk the whole log)
            return
        while len(m) > leo:
            self.c.drop_copy(self.id, len(m) - 1, m.pop())
        while lg is not None and len(m) < leo:
            data = lg.read_bytes(len(m), FETCH_MAX_BYTES, verify=False)
            if not data:
                break
            for pos, h in iter_headers(data, validate=False):
                epoch = h.partition_leader_epoch
                for offset, value in self.c.decoded(data, pos, h):
                    if offset >= len(m):
                        rec = self.c.add_copy(self.id, len(m), (value, epoch))
                        m.append(rec)
        self.mirror_dirty = True


class Cluster:
    def __init__(self, *, seed: int, nodes: int, protocol: ProtocolConfig,
                 log_config: LogConfig, net: NetConfig, session_timeout_ms: int,
                 check_invariants: bool = True) -> None:
        self.rng = random.Random(seed)
        self.sched = Scheduler()
        self.protocol = protocol
        self.log_config = log_config
        self.net = net
        self.n = nodes
        self.down: set[tuple[int, int]] = set()  # directed links cut (ZK = -1)
        self.clogged: dict[tuple[int, int], int] = {}  # extra delay (us) per link
        self.check_invariants = check_invariants
        # Set when anything the projection reads may have changed (a broker stepped, a
        # process died, ZooKeeper's data changed); events that change nothing (a dropped
        # message, an idle tick) skip the invariants, whose answer cannot have changed.
        self.dirty = True
        self.zk = SimZooKeeper(self.sched, self, nodes, TP, session_timeout_ms, self._touch)
        # per pair of brokers, the length of the longest common prefix of their logs (their
        # mirrors), kept by add_copy and drop_copy: see `_prefixes_agree`
        self._lcp = [[0] * nodes for _ in range(nodes)]
        self.brokers = [Broker(self, b, self.rng.randrange(1 << 30)) for b in range(nodes)]
        self.zk_queue_until = [0] * nodes  # FIFO delivery of ZooKeeper events per broker
        self.zk_inflight = [0] * nodes
        # ZooKeeper events that reached a broker cut from ZooKeeper, per broker, in order:
        # (incarnation, session id, the events, the operation they answer or None), held
        # until it reconnects (`zk_reconnected`) or its session expires (`zk_session_over`);
        # see `zk_deliver`, `on_its_way`
        self.zk_held: list[list[tuple[int, int, tuple[ev.Event, ...], fx.Effect | None]]] = [
            [] for _ in range(nodes)]
        # Messages a timing fault holds back from a broker's process: (broker, incarnation,
        # the held MessageReceived events, emptied as they go in); see `on_its_way`
        self.withheld: list[tuple[int, int, list[ev.MessageReceived]]] = []
        self.clients: dict[int, Callable[[object], None]] = {}  # request id -> callback
        self.next_request_id = 0
        self.acked: set[int] = set()
        self.ghost = Ghost()
        self.world: World | None = None
        self._view: tuple[object, ...] | None = None
        self._step_key: tuple[object, ...] | None = None
        self._nodes: list[WorldNode | None] = [None] * nodes  # the last projection, per broker
        # per broker, of that projected node: its part of spec's view, its replica of TP
        self._node_views: list[tuple[object, ...]] = [()] * nodes
        self._reps: list[ReplicaState | None] = [None] * nodes
        self._world_reps: tuple[ReplicaState | None, ...] = ()  # `_reps` of `self.world`
        # per broker, of that projected node: its state's controller epoch (None: down)
        self._ctl_epochs: list[int | None] = [None] * nodes
        self._zk_key: tuple[object, ...] | None = None
        self._zk = Zk()
        self._world_zk: Zk | None = None  # what the last World was built from
        self._world_ghost: Ghost | None = None
        # per broker: (log, HW, exposure after it) when _observe last compared it
        self._exposure_seen: list[tuple[tuple[Record, ...], int, tuple[Record, ...]] | None] = (
            [None] * nodes)
        self._exposure_behind = False  # see `project`
        self.hash = hashlib.sha256()
        self.trace: list[str] | None = None  # event lines, when asked for
        self.stepped = 0
        # epoch_offset_uniqueness, kept incrementally: (offset, epoch) -> (record, copies)
        self.held: dict[tuple[int, int], tuple[int, int]] = {}
        # record id -> copies on all disks (no_acked_record_lost's "held"; ids with no copy
        # are deleted), per broker in Broker.ids (leader_completeness's)
        self.copies: dict[int, int] = {}
        self.copies_lost = 0  # ids that left `copies`
        # (acknowledged ids, ids lost) when every acknowledged id was last found among the
        # copies (key -1) or broker b's (key b): see `_covered`
        self._covered_at: dict[int, tuple[int, int]] = {}
        self.records: dict[Record, Record] = {}  # one shared tuple per distinct record
        self.broken: tuple[str, str] | None = None
        self._decoded: dict[bytes, tuple[tuple[int, int], ...]] = {}

    # -- time, tracing ----------------------------------------------------------------------

    def now_ms(self) -> int:
        return EPOCH_MS + self.sched.now_us // US_PER_MS

    def _touch(self) -> None:
        self.dirty = True

    def trace_event(self, b: int, e: ev.Event) -> None:
        self.dirty = True
        self.stepped += 1
        line = f"{self.sched.now_us} {b} {_summary(e)}"
        self.hash.update(line.encode())
        if self.trace is not None:
            self.trace.append(line)

    def note(self, line: str) -> None:
        """A fault or phase change, in the trace and its hash."""
        line = f"{self.sched.now_us} * {line}"
        self.hash.update(line.encode())
        if self.trace is not None:
            self.trace.append(line)

    def decoded(self, data: bytes, pos: int, h: BatchHeader) -> tuple[tuple[int, int], ...]:
        """(offset, record id) of each record with a value in the batch at `pos`: what the
        simulated clients and the projection read. Decoded once per distinct batch (the
        same bytes reach every replica and every poll); keyed by the bytes themselves, so
        a batch that differs in any byte is decoded afresh."""
        raw = data[pos:pos + h.size]
        out = self._decoded.get(raw)
        if out is None:
            out = tuple((r.offset, int(r.value)) for r in decode_records(raw, h)
                        if r.value is not None)
            if len(self._decoded) >= DECODED_MAX:
                self._decoded.clear()
            self._decoded[raw] = out
        return out

    def add_copy(self, b: int, offset: int, rec: Record) -> Record:
        """Count a record copy on broker b's disk; returns the one tuple every disk shares
        for it (the invariants compare log prefixes: equal elements that are the same
        object compare at once). Two records at one (offset, epoch) break
        epoch_offset_uniqueness (the same predicate as spec.invariants', kept incrementally
        instead of rescanning every log after every event)."""
        rec = self.records.setdefault(rec, rec)
        key = (offset, rec[1])
        cur = self.held.get(key)
        if cur is None:
            self.held[key] = (rec[0], 1)
        elif cur[0] == rec[0]:
            self.held[key] = (cur[0], cur[1] + 1)
        elif self.broken is None:
            self.broken = ("epoch_offset_uniqueness",
                           f"offset {offset} epoch {rec[1]}: record {cur[0]} on one broker, "
                           f"record {rec[0]} on broker {b}")
        for ids in (self.copies, self.brokers[b].ids):
            ids[rec[0]] = ids.get(rec[0], 0) + 1
        # b's log (`offset` records, before this one) was a prefix of j's: it still is if
        # j holds this record next
        lcp = self._lcp[b]
        for j, other in enumerate(self.brokers):
            if j != b and lcp[j] == offset:
                om = other.mirror
                if len(om) > offset and om[offset] == rec:
                    lcp[j] = self._lcp[j][b] = offset + 1
        return rec

    def drop_copy(self, b: int, offset: int, rec: Record) -> None:
        """The copy at `offset` left broker b's disk (truncation, or a log read again)."""
        key = (offset, rec[1])
        cur = self.held.get(key)
        if cur is not None and cur[0] == rec[0]:  # (a conflicting copy was never counted)
            if cur[1] > 1:
                self.held[key] = (cur[0], cur[1] - 1)
            else:
                del self.held[key]
        lcp = self._lcp[b]
        for j in range(self.n):  # b's log is `offset` records long now
            if j != b and lcp[j] > offset:
                lcp[j] = self._lcp[j][b] = offset
        br = self.brokers[b]
        for ids in (self.copies, br.ids):
            n = ids[rec[0]] - 1
            if n:
                ids[rec[0]] = n
            else:
                del ids[rec[0]]
                if ids is br.ids:
                    br.ids_lost += 1
                else:
                    self.copies_lost += 1

    # -- running callbacks on a broker ------------------------------------------------------

    def run_on(self, b: int, inc: int, fn: Callable[[], None]) -> None:
        br = self.brokers[b]
        if br.incarnation != inc or br.node is None:
            return
        if br.paused:
            br.deferred.append(fn)
            return
        fn()

    def resume(self, b: int) -> None:
        """The process runs again and works off its backlog at once, in order (one event:
        the invariants never see the backlog half-done with nothing marked pending)."""
        br = self.brokers[b]
        br.paused = False
        pending, br.deferred = br.deferred, []
        for fn in pending:
            if br.paused or br.node is None:
                break
            fn()

    # -- network ----------------------------------------------------------------------------

    def link_up(self, a: int, b: int) -> bool:
        return (a, b) not in self.down

    def delay_us(self, a: int, b: int) -> int:
        n = self.net
        return n.delay_us + int(self.rng.expovariate(1.0 / n.jitter_us)) + self.clogged.get(
            (a, b), 0)

    def net_send(self, src: int, inc: int, dst: int, msg: Message) -> None:
        if not 0 <= dst < self.n:
            return
        control = isinstance(msg, CONTROL)
        down = self.down  # (`link_up`, written out: once per message)
        if (down and (src, dst) in down) or self.rng.random() < self.net.loss:
            self._lost(src, inc, dst, msg, control, attempt=0)
            return
        self.sched.after_us(self.delay_us(src, dst), self._on_wire(src, inc, dst, msg))
        if self.net.duplicate and self.rng.random() < self.net.duplicate:
            self.sched.after_us(self.delay_us(src, dst), self._on_wire(src, inc, dst, msg))

    def _on_wire(self, src: int, inc: int, dst: int, msg: Message) -> Delivery:
        return Delivery(src, msg, lambda: self._arrive(src, inc, dst, msg))

    def _arrive(self, src: int, inc: int, dst: int, msg: Message) -> None:
        down = self.down
        if down and (src, dst) in down:  # cut while in flight (`link_up`, written out)
            self._lost(src, inc, dst, msg, isinstance(msg, CONTROL), attempt=0)
            return
        br = self.brokers[dst]
        if br.node is None:
            return
        if br.paused:  # `run_on` for this incarnation, written out: it keeps it in its
            # backlog, where `on_its_way` still finds it
            br.deferred.append(Delivery(src, msg, lambda: self._deliver(dst, src, msg)))
            return
        br.node.handle(ev.MessageReceived(src, msg))  # `_deliver`

    def on_its_way(self) -> Iterator[tuple[int, object]]:
        """(sender, what it carries) of everything sent and not yet handled: messages on the
        wire or resent across a cut link (a dead sender's too: the bytes were sent before it
        died), in a paused broker's backlog or held back by a timing fault; ZooKeeper
        operations queued (behind the submitter's earlier ones, or slowed) and ZooKeeper's
        notifications and answers on their way or held for a broker cut from it. One scan
        of the scheduler, the backlogs and the holds, so a new path that carries something
        is covered by making it a `Delivery`."""
        for fn in self.sched.queued():
            if isinstance(fn, Delivery):
                yield fn.src, fn.payload
        for br in self.brokers:
            for fn in br.deferred:
                if isinstance(fn, Delivery):
                    yield fn.src, fn.payload
        live = [w for w in self.withheld if self.alive(w[0], w[1])]
        self.withheld[:] = live  # (a hold dies with its process)
        for _, _, held in live:
            for e in held:
                yield e.src, e.message
        for b, zk_held in enumerate(self.zk_held):  # ZooKeeper's events for a cut broker
            for inc, _, events, _ in zk_held:
                if self.alive(b, inc):
                    yield ZK, events

    def _deliver(self, dst: int, src: int, msg: Message) -> None:
        node = self.brokers[dst].node
        if node is not None:
            node.handle(ev.MessageReceived(src, msg))

    def _lost(self, src: int, inc: int, dst: int, msg: Message, control: bool,
              attempt: int) -> None:
        """A control request is resent until it gets through (ControlChannel); a failed
        fetch round is reported to the follower as `SendFailed` (peers.Fetcher)."""
        if control:
            lo, hi = CONTROL_BACKOFF_MS
            wait = min(hi, lo << min(attempt, 5))

            def again() -> None:
                if self.brokers[src].incarnation != inc or self.brokers[src].node is None:
                    return
                if self.link_up(src, dst) and self.rng.random() >= self.net.loss:
                    self.sched.after_us(self.delay_us(src, dst),
                                        self._on_wire(src, inc, dst, msg))
                else:
                    self._lost(src, inc, dst, msg, True, attempt + 1)

            self.sched.after_us(wait * US_PER_MS, Delivery(src, msg, again))
            return
        request: FetchRequest | OffsetForLeaderEpochRequest
        if isinstance(msg, FetchRequest | OffsetForLeaderEpochRequest):
            follower, finc, leader, request = src, inc, dst, msg
        elif isinstance(msg, FetchResponse):  # the request it answers, as the follower sent it
            follower, finc, leader = dst, self.brokers[dst].incarnation, src
            request = FetchRequest(dst, msg.tp, msg.fetch_offset, msg.current_leader_epoch,
                                   -1, msg.request_id)
        elif isinstance(msg, OffsetForLeaderEpochResponse):
            follower, finc, leader = dst, self.brokers[dst].incarnation, src
            request = OffsetForLeaderEpochRequest(dst, msg.tp, msg.current_leader_epoch,
                                                  msg.requested_epoch, msg.request_id)
        else:
            return

        def failed() -> None:
            node = self.brokers[follower].node
            if node is not None:
                node.handle(ev.SendFailed(leader, request))

        self.sched.after_us(RPC_FAIL_MS * US_PER_MS, lambda: self.run_on(follower, finc, failed))

    def fill_fetch(self, b: int, msg: FetchResponse) -> FetchResponse:
        """What the leader's Fetch handler reads from its store for the core's answer."""
        if msg.error != Errors.NONE or msg.end_offset <= msg.fetch_offset:
            return msg
        logs = self.brokers[b].logs
        lg = logs.get_log(msg.tp.topic, msg.tp.partition) if logs is not None else None
        if lg is None:
            return dataclasses.replace(msg, end_offset=msg.fetch_offset)
        # The live leader sends the region unread (sendfile); its follower's Fetcher checks
        # each batch's CRC once (peers._fetch_response): so one check here, not two.
        data = lg.read_bytes(msg.fetch_offset, FETCH_MAX_BYTES, max_offset=msg.end_offset,
                             verify=False)
        batches = tuple(BatchInfo(h.base_offset, h.last_offset, h.partition_leader_epoch,
                                  h.producer_id, h.producer_epoch, h.base_sequence)
                        for _, h in iter_headers(data))
        if not batches or batches[0].base_offset != msg.fetch_offset:
            return dataclasses.replace(msg, end_offset=msg.fetch_offset)
        return dataclasses.replace(msg, batches=batches, records=data,
                                   end_offset=batches[-1].last_offset + 1)

    # -- ZooKeeper host ---------------------------------------------------------------------

    def alive(self, broker: int, incarnation: int) -> bool:
        br = self.brokers[broker]
        return br.node is not None and br.incarnation == incarnation

    def zk_reachable(self, broker: int, incarnation: int) -> bool:
        br = self.brokers[broker]
        return (br.node is not None and br.incarnation == incarnation and not br.paused
                and self.link_up(broker, ZK) and self.link_up(ZK, broker))

    def zk_latency_us(self) -> int:
        return self.net.zk_latency_us + int(self.rng.expovariate(1.0 / self.net.zk_latency_us))

    def zk_cut(self, broker: int) -> bool:
        return not (self.link_up(broker, ZK) and self.link_up(ZK, broker))

    def zk_deliver(self, broker: int, incarnation: int, events: tuple[ev.Event, ...],
                   local: bool = False, answers: fx.Effect | None = None) -> None:
        """ZooKeeper's events reach the broker after its latency, in order. One that finds
        the link cut (or others held before it) is held for the session it was sent in,
        unless `local`: the broker's own driver reports it (an operation that timed out).
        `answers`: the operation these events answer, if any."""
        t = max(self.sched.now_us + self.zk_latency_us(), self.zk_queue_until[broker])
        self.zk_queue_until[broker] = t
        self.zk_inflight[broker] += 1
        sid = self.zk.current.get(broker, -1)

        def arrive() -> None:
            self.zk_inflight[broker] -= 1
            self.dirty = True  # the broker's "notifications pending" changed
            if not local and self.alive(broker, incarnation) and (
                    self.zk_cut(broker) or self.zk_held[broker]):
                if self.zk.live_sid(broker, incarnation) == sid:
                    self.zk_held[broker].append((incarnation, sid, events, answers))
                elif answers is not None:  # the session it was sent in is over
                    self.zk.unanswered(broker, incarnation, answers)
                return
            self.run_on(broker, incarnation,
                        Delivery(ZK, events, lambda: self._zk_events(broker, events)))

        self.sched.at(t, Delivery(ZK, events, arrive))

    def zk_reconnected(self, broker: int, incarnation: int, sid: int) -> None:
        """The broker reached ZooKeeper again with its session alive: what was held for it
        arrives now, in order (ZooKeeper re-fires the watches that triggered meanwhile)."""
        held = self.zk_held[broker]
        if not held:
            return
        self.zk_held[broker] = []
        self.dirty = True
        for inc, s, events, _ in held:
            if inc == incarnation and s == sid:
                self.run_on(broker, inc, Delivery(ZK, events, self._zk_handler(broker, events)))

    def zk_session_over(self, broker: int, sid: int) -> None:
        """The session expired: what was held for it is dropped with its watches; the
        answers among it never reach the driver, which fails their operations."""
        held = self.zk_held[broker]
        if not held:
            return
        self.zk_held[broker] = [h for h in held if h[1] != sid]
        self.dirty = True
        for inc, s, _, answers in held:
            if s == sid and answers is not None and self.alive(broker, inc):
                self.zk.unanswered(broker, inc, answers)

    def _zk_held_pending(self, b: int) -> bool:
        inc = self.brokers[b].incarnation
        return any(h[0] == inc for h in self.zk_held[b])

    def _zk_handler(self, b: int, events: tuple[ev.Event, ...]) -> Callable[[], None]:
        return lambda: self._zk_events(b, events)

    def _zk_events(self, b: int, events: tuple[ev.Event, ...]) -> None:
        node = self.brokers[b].node
        for e in events:
            if node is not None:
                node.handle(e)

    # -- clients ----------------------------------------------------------------------------

    def new_request_id(self) -> int:
        self.next_request_id += 1
        return self.next_request_id

    def client_reply(self, b: int, key: object, value: object) -> bool:
        if isinstance(value, fx.ProduceReply) and value.error == Errors.NONE:
            rid = self.produced.get(key)  # type: ignore[call-overload]
            if rid is not None:
                self.acked.add(rid)
        cb = self.clients.pop(key, None)  # type: ignore[call-overload]
        if cb is None:
            return False
        cb(value)
        return True

    produced: dict[int, int]  # request id -> record id (set by the workload)

    def listed(self, offset: int, floor: int) -> None:
        """A client received ListOffsets(latest) = `offset` for a request it sent when the
        largest answer any client had received was `floor`. KIP-207 promises that answer
        is not below the floor; requests that overlap in time may be answered in any order,
        and an answer no client waits for any more (it timed out) is seen by no one: the
        broker's reply alone is not an observation (seed 200312: a paused leader answered a
        request 11 s old, after the next leader had answered higher)."""
        g = self.ghost
        self.ghost = g._replace(latest_listed=max(g.latest_listed, offset),
                                listed_backwards=g.listed_backwards or offset < floor)
        self.dirty = True

    # -- projection and invariants ----------------------------------------------------------

    def project(self) -> World | None:
        """The cluster as a `World`, or None when it is the last one projected. Incremental:
        a broker whose core state, log and pending notifications are the same objects as at
        the last projection keeps its projected node (the core's state is immutable, so `is`
        is exact), and ZooKeeper's projection is kept while its fields are unchanged."""
        zk_inflight = self.zk_inflight
        z = self.zk
        isr_unseen_ctl = z.controller if z.isr_unseen else NO_BROKER
        nodes = self._nodes
        changed = observe = False
        for i, br in enumerate(self.brokers):
            if br.mirror_dirty:
                br.mirror_t = tuple(br.mirror)
                br.disk = Disk(br.mirror_t)
                br.mirror_dirty = False
            node = br.node
            st = node.state if node is not None else None
            pending = bool(zk_inflight[i] or br.deferred or isr_unseen_ctl == i
                           or (self.zk_held[i] and self._zk_held_pending(i)))
            old = nodes[i]
            if (old is not None and old[0] is st and old[1][0] is br.mirror_t
                    and bool(old[3]) == pending):  # (state, disk.records, inbox)
                continue
            # WorldNode(st, br.disk, _NO_TIMERS, inbox) without the NamedTuple's Python-level
            # __new__ (the same tuple: every field given, in order)
            new = nodes[i] = _tuple_new(WorldNode, (st, br.disk, _NO_TIMERS,
                                                    _ZK_INBOX if pending else ()))
            nv = inv.node_view(new)
            ov = self._node_views[i]  # (alive, (role, epoch, HW, LEO, ISR), log, ...) or
            # (False, log): `_observe` reads a live broker's replica and log
            if not ov or ov[0] is not nv[0] or (nv[0] and (ov[1] != nv[1] or ov[2] is not nv[2])):
                observe = True
            self._node_views[i] = nv
            self._reps[i] = _replica(new)
            self._ctl_epochs[i] = st.controller_epoch if st is not None else None
            changed = True
        zk_key = (z.controller, z.controller_epoch, z.controller_epoch_version, z.assignment,
                  z.partition)
        if zk_key != self._zk_key:
            self._zk_key = zk_key
            self._zk = Zk(controller=z.controller, controller_epoch=z.controller_epoch,
                          controller_epoch_version=z.controller_epoch_version,
                          assignment=z.assignment, partition=z.partition)
        # The ghost moves only with what `_observe` reads: whether a broker runs, its
        # replica's role, leader epoch and HW, its log, and the acknowledgements. A broker
        # that stepped without changing them (a fetch state, a timer, a purgatory, its
        # controller) leaves the ghost as it is, unless the last call moved the exposure
        # after comparing a leader with the older one: every call (on any change, as before)
        # compares that leader again, so this one must run.
        if (observe or len(self.acked) != len(self.ghost.acked)
                or (changed and self._exposure_behind)):
            self._observe(nodes)
        if not changed and self._zk is self._world_zk and self.ghost is self._world_ghost:
            return None
        self._world_zk, self._world_ghost = self._zk, self.ghost
        # World(tuple(nodes), self._zk, (), self.ghost), as above
        return _tuple_new(World, (tuple(nodes), self._zk, (), self.ghost))

    def _observe(self, nodes: list[WorldNode | None]) -> None:
        """The ghost: acknowledged records, exposed prefixes, leaders per epoch."""
        g = self.ghost
        exposed, conflict, leaders = g.exposed, g.conflicting_exposure, g.leaders
        reps = self._reps  # _replica of each of `nodes`, kept by `project`
        for i, n in enumerate(nodes):
            assert n is not None
            r = reps[i]
            if r is None or r.role != Role.LEADER:
                continue
            if (r.leader_epoch, i) not in leaders:
                leaders = tuple(sorted((*leaders, (r.leader_epoch, i))))
            if r.high_watermark == 0:
                continue
            # the same log and HW against the same exposure as last time: the same answer
            # (the exposure only grows, a conflict stays), so the O(log) slices are skipped
            seen = (n.disk.records, r.high_watermark, exposed)
            last = self._exposure_seen[i]
            if (last is not None and last[0] is seen[0] and last[1] == seen[1]
                    and last[2] is exposed):
                continue
            prefix = n.disk.records[:r.high_watermark]
            k = min(len(prefix), len(exposed))
            if prefix[:k] != exposed[:k]:
                conflict = True
            elif len(prefix) > len(exposed):
                exposed = prefix
            self._exposure_seen[i] = (seen[0], seen[1], exposed)
        behind = False  # a leader compared before the exposure moved in this call
        if exposed is not g.exposed:
            for i, r in enumerate(reps):
                if r is not None and r.role == Role.LEADER and r.high_watermark != 0:
                    last = self._exposure_seen[i]
                    if last is None or last[2] is not exposed:
                        behind = True
        self._exposure_behind = behind
        acked = g.acked if len(g.acked) == len(self.acked) else frozenset(self.acked)
        if (exposed is not g.exposed or conflict != g.conflicting_exposure
                or leaders is not g.leaders or acked is not g.acked):
            self.ghost = g._replace(exposed=exposed, conflicting_exposure=conflict,
                                    leaders=leaders, acked=acked)

    def _state_checks(self, w: World) -> frozenset[str]:
        return _CHECKS_WITHOUT[self._state_skip(w, remember=False)]

    def _covered(self, acked: frozenset[int], key: int, ids: dict[int, int], lost: int,
                 remember: bool) -> bool:
        """`acked <= ids.keys()`. That test walks every acknowledged id, and ran on every
        change of the invariants' view; the projected acknowledgements only grow, and ids
        only leave `ids` by `drop_copy`, which counts them: the same number acknowledged
        and none lost since the last time they were all found, they all still are."""
        if remember and self._covered_at.get(key) == (len(acked), lost):
            return True
        if not acked <= ids.keys():
            return False
        if remember:
            self._covered_at[key] = (len(acked), lost)
        return True

    def _state_skip(self, w: World, remember: bool = True) -> int:
        """Which of `_CHECKS_WITHOUT` to check: STATE_CHECKS without the two invariants
        that scan every log for acknowledged records when the copy counts show they hold:
        every acknowledged record has a copy on some disk (no_acked_record_lost), on the
        leader ZooKeeper names (leader_completeness). When the counts cannot tell, spec's
        own check runs; leaving out invariants that hold does not change which one is
        reported first."""
        acked = w.ghost.acked
        skip = 0
        if self._covered(acked, -1, self.copies, self.copies_lost, remember):
            skip |= 1
            p = w.zk.partition
            if p is None or p.leader < 0:
                skip |= 2
            else:
                br = self.brokers[p.leader]
                if self._covered(acked, p.leader, br.ids, br.ids_lost, remember):
                    skip |= 2
        return skip

    def _prefixes_agree(self, w: World) -> bool:
        """Whether strong_isr, weak_isr and log_matching hold in `w`, from the common
        prefix lengths of the brokers' logs instead of slicing each log below each HW (their
        slices and comparisons walked every log on every change of the view, a fifth of a
        seed's instructions as the logs grew). The same predicates: `x[:k] == y[:k]` exactly
        when both are cut at the same length and the logs agree up to it. False when that
        does not show they hold (spec's own checks then run and say what broke)."""
        nodes, reps, lcp = w.nodes, self._reps, self._lcp
        n = len(nodes)
        lens = [len(x.disk.records) for x in nodes]
        # nodes[a]'s log[:k] == nodes[b]'s log[:k], written out below (a nested function
        # called per pair was a third of this method's cost): False when b is out of range
        # or k < 0 (spec indexes and slices as Python does: run it), True when a == b, else
        # whether both are cut at the same length, min(k, len), and agree up to it
        for a in range(n):  # log_matching
            ra = reps[a]
            if ra is None:
                continue
            ha, la, lcp_a = ra.high_watermark, lens[a], lcp[a]
            for b in range(a + 1, n):
                rb = reps[b]
                if rb is None:
                    continue
                k = min(ha, rb.high_watermark)
                if k < 0:
                    return False
                ka = min(k, la)
                if ka != min(k, lens[b]) or lcp_a[b] < ka:
                    return False
        p = w.zk.partition
        zk_isr = p.isr if p is not None else ()
        for i in range(n):  # strong_isr (ZooKeeper's ISR), weak_isr (the leader's)
            r = reps[i]
            if r is None or r.role != Role.LEADER:
                continue
            hw = r.high_watermark
            ki, lcp_i = min(hw, lens[i]), lcp[i]
            for isr in (zk_isr, r.isr):
                for m in isr:
                    if not 0 <= m < n or hw < 0:
                        return False
                    if m != i and (ki != min(hw, lens[m]) or lcp_i[m] < ki):
                        return False
        return True

    def after_event(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        for br in self.brokers:
            node = br.node
            if node is not None and node.failed is not None:
                raise Violation("halt", f"broker {br.id}", repr(node.failed))
        if not self.check_invariants:
            return
        w = self.project()
        if self.broken is not None:
            raise Violation("invariant", *self.broken)
        if w is None:  # the same world as the last one checked: the same answers
            return
        view = inv.view(w, tuple(self._node_views))
        if view != self._view:
            self._view = view
            skip = self._state_skip(w)
            if self._prefixes_agree(w):
                skip |= 4
            g = w.ghost  # consistent_read, list_offsets_monotonic and the two controlled
            # shutdown invariants each return None exactly when their flag is False
            if not (g.conflicting_exposure or g.listed_backwards or g.stopped_as_leader
                    or g.stopped_in_isr):
                skip |= 8
            for i in _RUN_WITHOUT[skip]:  # inv.check_state(w, only)
                why = i.check(w)
                if why is not None:
                    raise Violation("invariant", i.name, why)
            why = self._isr_members_watched(w)
            if why is not None:
                raise Violation("invariant", "isr_members_watched", why)
        # The step invariants compare, per broker, what the view holds (role, leader epoch,
        # HW) and the controller epochs: when none of that moved since the last world they
        # were checked on, each compares a value with itself and holds, so the previous
        # world stays the one to compare against.
        step_key = (view, w.zk.controller_epoch, tuple(self._ctl_epochs))
        if step_key == self._step_key:
            return
        self._step_key = step_key
        before, before_reps = self.world, self._world_reps
        self.world, self._world_reps = w, tuple(self._reps)
        if before is not None and not self._steps_hold(before, before_reps, w):
            broken = inv.check_step(before, w)
            if broken is not None:
                raise Violation("invariant", *broken)

    def _isr_members_watched(self, w: World) -> str | None:
        """spec's `isr_members_watched`, read off the interpreters' armed timers (the
        projection keeps none): a leader with no ISR write in flight has a lag timer for
        every other ISR member. Spec's own check and words on the leader's node with its lag
        timers, once the look-ups show one missing."""
        for br, r in zip(self.brokers, self._reps, strict=True):
            if r is None or r.role is not Role.LEADER or br.node is None:
                continue
            armed = br.node.armed_timers()
            if not inv.unwatched_isr_members(r, armed):
                continue
            node = w.nodes[br.id]._replace(
                timers=frozenset(k for k in armed if isinstance(k, ReplicaLagTimer)))
            return inv.isr_members_watched(w._replace(nodes=(node,)))
        return None

    def _steps_hold(self, before: World, before_reps: tuple[ReplicaState | None, ...],
                    w: World) -> bool:
        """Whether spec's four step invariants hold from `before` to `w`, read off the
        replicas `project` already found (`before_reps`: those of `before.nodes`,
        `self._reps`: of `w.nodes`) instead of spec's check_step looking each broker's
        replica up again in each invariant (a sixth of the projection's cost). The same
        predicates, all in one pass; False when any might break: spec's own check_step then
        runs and reports (so the first broken invariant and its words stay spec's)."""
        bz, az = before.zk, w.zk
        if az.controller_epoch < bz.controller_epoch:  # controller_epoch_monotonic
            return False
        pa, pb = bz.partition, az.partition  # zk_leader_epoch_monotonic
        if pa is not None and (pb is None or pb.leader_epoch < pa.leader_epoch):
            return False
        reps = self._reps
        for i, (a, b) in enumerate(zip(before.nodes, w.nodes, strict=True)):
            sa, sb = a.state, b.state
            if sa is sb:
                continue  # (each of the four skips a broker whose state is the same object)
            if sa is not None and sb is not None and sb.controller_epoch < sa.controller_epoch:
                return False
            ra, rb = before_reps[i], reps[i]
            if ra is None or rb is None:
                continue
            if rb.leader_epoch < ra.leader_epoch:  # leader_epoch_monotonic
                return False
            if (ra.role == rb.role == Role.LEADER and ra.leader_epoch == rb.leader_epoch
                    and rb.high_watermark < ra.high_watermark):  # hw_monotonic
                return False
        return True


def _replica(n: WorldNode) -> ReplicaState | None:
    st = n.state
    if st is None:
        return None
    for r in st.replicas:
        if r.tp == TP:
            return r
    return None


# reprs of the values most trace lines repeat (a timer's key, a partition): formatting them
# (Python-level dataclass and NamedTuple reprs, an Enum's) was most of a line's cost
_REPRS: dict[object, str] = {}
_REPRS_MAX = 4_096  # (produce timeouts' keys differ per request)


def _repr_of(x: object) -> str:
    s = _REPRS.get(x)
    if s is None:
        if len(_REPRS) >= _REPRS_MAX:
            _REPRS.clear()
        s = _REPRS[x] = repr(x)
    return s


def _tp_repr(tp: TopicPartition) -> str:
    # (a TopicPartition equals the plain tuple of its fields, whose repr differs)
    return _repr_of(tp) if type(tp) is TopicPartition else repr(tp)


def _timer_line(e: ev.TimerFired) -> str:
    return f"TimerFired(key={_repr_of(e.key)})"


def _message_line(e: ev.MessageReceived) -> str | None:
    m = e.message
    if type(m) is not FetchRequest:
        return None
    return (f"MessageReceived(src={e.src!r}, message=FetchRequest(replica_id={m.replica_id!r}, "
            f"tp={_tp_repr(m.tp)}, fetch_offset={m.fetch_offset!r}, "
            f"current_leader_epoch={m.current_leader_epoch!r}, "
            f"last_fetched_epoch={m.last_fetched_epoch!r}, request_id={m.request_id!r}))")


def _consumer_fetch_line(e: ev.ConsumerFetchReceived) -> str:
    return (f"ConsumerFetchReceived(request_id={e.request_id!r}, tp={_tp_repr(e.tp)}, "
            f"fetch_offset={e.fetch_offset!r}, current_leader_epoch={e.current_leader_epoch!r})")


def _list_offsets_line(e: ev.ListOffsetsReceived) -> str:
    return (f"ListOffsetsReceived(request_id={e.request_id!r}, tp={_tp_repr(e.tp)}, "
            f"timestamp={e.timestamp!r}, current_leader_epoch={e.current_leader_epoch!r})")


# The most frequent kinds, written out field by field in their dataclass repr's exact words
# (tests/sim pins each against `repr`); None: not this way, `repr` it
_LINES: dict[type, Callable[[Any], str | None]] = {
    ev.TimerFired: _timer_line,
    ev.MessageReceived: _message_line,
    ev.ConsumerFetchReceived: _consumer_fetch_line,
    ev.ListOffsetsReceived: _list_offsets_line,
}


def _summary(e: ev.Event) -> str:
    """An event as a trace line: its repr, with record bytes replaced by their length."""
    f = _LINES.get(type(e))
    if f is not None:
        line = f(e)
        if line is not None:
            return line
    if isinstance(e, ev.ProduceReceived):
        return f"ProduceReceived({e.request_id}, acks={e.acks}, {len(e.records)}B)"  # type: ignore[arg-type]
    if isinstance(e, ev.MessageReceived) and isinstance(e.message, FetchResponse):
        m = e.message
        return (f"Fetched<-{e.src}({m.error.name} {m.fetch_offset}..{m.end_offset} "
                f"hw {m.high_watermark} epoch {m.current_leader_epoch})")
    return repr(e)
