"""One simulated campaign: options (drawn per seed in swarm mode), clients running the queue
workload's operations, the nemesis, a safety phase and a liveness phase, and the verdict.

Everything random comes from one `random.Random(seed)`; time is the scheduler's. A run is a
pure function of its options: the same options give the same history and trace hash.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.store.batch import Record as BatchRecord
from broker.store.batch import build_batch, iter_headers
from broker.store.config import LogConfig
from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.types import NO_LEADER, Errors
from harness.history import FAIL, INFO, INVOKE, NEMESIS, OK, Op, op_to_dict
from harness.sim.cluster import ZK, Broker, Cluster, NetConfig, Violation
from harness.sim.diskfaults import DISK_FAULTS, DiskFaults
from harness.sim.sched import US_PER_MS
from harness.sim.timing import TIMING_FAULTS, TimingFaults
from spec.bugs import CATALOGUE
from spec.world import TP

FAULTS = ("kill", "lossy-kill", "partition", "zk-isolate", "pause", "expire", "clog",
          "move-leader")
# kinds added after seeds were first pinned: drawn from a stream of their own (draw_later)
LATER_FAULTS = DISK_FAULTS + TIMING_FAULTS
ALL_FAULTS = FAULTS + LATER_FAULTS
WORKLOADS = ("queue", "register")
KEY = 0  # the queue workload's one key: partition t-0, the one spec's invariants watch
CLIENT_TIMEOUT_MS = 5_000
PRODUCE_TIMEOUT_MS = 4_000
POLL_MAX_BYTES = 4 * 1024  # a poll returns at most this much (max.partition.fetch.bytes)


@dataclass(frozen=True)
class SimOptions:
    seed: int
    nodes: int = 3
    time_s: float = 20.0  # the safety phase, simulated seconds
    liveness_s: float = 60.0  # the bound on convergence after healing
    bug: str | None = None  # a spec.bugs scenario name
    swarm: bool = True  # draw faults and rates from the seed
    faults: tuple[str, ...] = ALL_FAULTS  # (without swarm: all of these)
    clients: int = 3
    check_invariants: bool = True
    workload: str = "any"  # queue, register, or any: the seed draws one (swarm testing)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> SimOptions:
        d = dict(d)
        d["faults"] = tuple(d.get("faults", FAULTS))  # older traces: no disk faults
        d.setdefault("workload", "queue")  # traces written before there was a choice
        return SimOptions(**d)


@dataclass
class Drawn:
    """What the seed chose (swarm testing): enabled faults, their rates, network, timings."""

    faults: tuple[str, ...]
    fault_interval_ms: int
    fault_duration_ms: int
    loss: float
    duplicate: float
    jitter_us: int
    lag_time_max_ms: int
    session_timeout_ms: int
    op_interval_ms: int
    send_ratio: float
    acks: int
    flush_each: bool
    workload: str = "queue"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SimResult:
    options: SimOptions
    drawn: Drawn
    ok: bool
    failure: str | None  # the first broken invariant, anomaly, halt or "no convergence"
    history: list[Op]
    trace_hash: str
    events: int  # scheduler callbacks
    steps: int  # core steps
    sim_ms: int
    faults: int
    checked: dict[str, Any] = field(default_factory=dict)
    trace: list[str] | None = None


def scenario(name: str) -> Any:
    for s in CATALOGUE:
        if s.name == name:
            return s
    raise ValueError(f"unknown bug {name!r}; known: {', '.join(s.name for s in CATALOGUE)}")


def draw_workload(opts: SimOptions) -> str:
    """The workload a seed runs. "any" draws it from a stream of its own, so the faults,
    rates and network a seed draws stay what they were before there was a choice."""
    if opts.workload != "any":
        return opts.workload
    if not opts.swarm:
        return "queue"
    return random.Random(f"workload {opts.seed}").choice(WORKLOADS)


def draw_later_faults(opts: SimOptions) -> tuple[str, ...]:
    """The later fault kinds (disk, timing) a seed turns on, from a stream of their own (as
    the workload), so a seed that draws none runs as it did before they existed."""
    kinds = tuple(f for f in LATER_FAULTS if f in opts.faults)
    if not opts.swarm:
        return kinds
    r = random.Random(f"later faults {opts.seed}")
    return tuple(f for f in kinds if r.random() < 0.5)


def draw(opts: SimOptions, rng: random.Random) -> Drawn:
    # swarm testing: each seed enables a random subset of the fault kinds
    faults = tuple(f for f in opts.faults if f in FAULTS and rng.random() < 0.5) \
        if opts.swarm else tuple(f for f in opts.faults if f in FAULTS)
    faults += draw_later_faults(opts)
    acks = 1 if opts.bug == "acks-1" else -1
    return Drawn(
        faults=faults,
        fault_interval_ms=rng.choice((500, 1_000, 2_000, 4_000)),
        fault_duration_ms=rng.choice((300, 1_000, 3_000, 8_000)),
        loss=rng.choice((0.0, 0.0, 0.01, 0.05)),
        duplicate=rng.choice((0.0, 0.0, 0.01)),
        jitter_us=rng.choice((200, 1_500, 10_000)),
        lag_time_max_ms=rng.choice((1_000, 3_000, 10_000)),
        session_timeout_ms=rng.choice((2_000, 6_000)),
        op_interval_ms=rng.choice((20, 50, 100)),
        send_ratio=rng.choice((0.5, 0.7)),
        acks=acks,
        # A machine crash loses unflushed acknowledged records on the last replica standing,
        # a loss ZooKeeper-era Kafka has no fix for (spec.bugs "last-replica-standing"): so
        # with lossy crashes on, the log is flushed at each append, except to show B3.
        flush_each=("lossy-kill" in faults or "torn-crash" in faults)
        and opts.bug != "min-isr-1-lossy-crash",
        workload=draw_workload(opts),
    )


class Workload:
    """Simulated clients: Jepsen queue ops (send, poll) on one key, assign semantics."""

    def __init__(self, c: Cluster, opts: SimOptions, d: Drawn, rng: random.Random) -> None:
        self.c, self.opts, self.d, self.rng = c, opts, d, rng
        self.history: list[Op] = []
        self.next_value = 0
        self.process = list(range(opts.clients))
        self.position = [0] * opts.clients
        self.leader = [NO_LEADER] * opts.clients
        self.busy = [False] * opts.clients
        self.final = False
        self.done = [False] * opts.clients
        self.max_offset = -1  # the highest offset any op saw
        self.stopped = False
        c.produced = {}

    def record(self, process: int | str, type_: str, f: str, value: Any,
               extra: dict[str, Any] | None = None) -> None:
        self.history.append(Op(len(self.history), self.c.sched.now_us * 1000, process, type_, f,
                               value, extra))

    def start(self) -> None:
        for i in range(self.opts.clients):
            self._schedule(i)

    def _schedule(self, i: int) -> None:
        if self.stopped or self.done[i]:
            return
        gap = int(self.rng.uniform(0, 2 * self.d.op_interval_ms) * US_PER_MS)
        self.c.sched.after_us(gap, lambda: self._op(i))

    def _pick_broker(self, i: int) -> int:
        """The partition's leader as some broker's metadata cache says (a Metadata request)."""
        if self.leader[i] != NO_LEADER:
            return self.leader[i]
        b = self.rng.randrange(self.c.n)
        node = self.c.brokers[b].node
        if node is not None:
            for p in node.state.metadata:
                if p.tp == TP and p.leader != NO_LEADER:
                    self.leader[i] = p.leader
                    return p.leader
        return b

    def _op(self, i: int) -> None:
        if self.stopped or self.busy[i] or self.done[i]:
            return
        self.busy[i] = True
        x = self.rng.random()
        if not self.final and x < self.d.send_ratio:
            self._send(i)
        elif not self.final and x > 0.9:
            self._list_offsets(i)
        else:
            self._poll(i)

    def _finish(self, i: int, lost_process: bool) -> None:
        self.busy[i] = False
        if lost_process:  # Jepsen: an indeterminate op ends the process; a fresh one goes on
            self.process[i] += self.opts.clients
            self.position[i] = 0
        self._schedule(i)

    def _request(self, i: int, b: int, make: Callable[[Broker, int], None],
                 on_reply: Callable[[object], None], on_timeout: Callable[[], None]) -> None:
        """Client -> broker b (a network hop), the core's reply back (another hop)."""
        c = self.c
        rid = c.new_request_id()
        state = {"done": False}

        def reply(value: object) -> None:
            def back() -> None:
                if not state["done"]:
                    state["done"] = True
                    on_reply(value)
            c.sched.after_us(c.delay_us(b, b), back)

        def timeout() -> None:
            if not state["done"]:
                state["done"] = True
                c.clients.pop(rid, None)
                on_timeout()

        def arrive() -> None:
            br = c.brokers[b]
            if br.node is None:
                return
            c.clients[rid] = reply
            c.run_on(b, br.incarnation, lambda: make(br, rid))

        c.sched.after_us(c.delay_us(b, b), arrive)
        c.sched.after_us(CLIENT_TIMEOUT_MS * US_PER_MS, timeout)

    def _send(self, i: int) -> None:
        self.next_value += 1
        v = self.next_value
        p = self.process[i]
        self.record(p, INVOKE, "send", [["send", KEY, v]])
        self._produce(i, p, "send", KEY, v,
                      lambda offset: [["send", KEY, v if offset is None else [offset, v]]])

    def _forget_leader(self, i: int) -> None:
        """Client i's metadata is stale: the next request asks for the leader again."""
        self.leader[i] = NO_LEADER

    def _produce(self, i: int, p: int, f: str, key: int, record: int,
                 value: Callable[[int | None], object]) -> None:
        """Produce one record (key `key`, value `record`: its run-wide record id) to the
        partition's leader as client i's process p, and complete op `f`: ok when
        acknowledged, fail when rejected before the append (NOT_ENOUGH_REPLICAS), else info
        (a timeout or any other error: the process ends). `value(offset)` is the op's value
        (`offset`: the record's offset when acknowledged, else None)."""
        b = self._pick_broker(i)
        batch = build_batch([BatchRecord(0, self.c.now_ms(), str(key).encode(),
                                         str(record).encode())], base_offset=0)

        def make(br: Broker, rid: int) -> None:
            self.c.produced[rid] = record
            if br.node is not None:
                br.node.handle(ev.ProduceReceived(rid, TP, self.d.acks, 1, batch,
                                                  timeout_ms=PRODUCE_TIMEOUT_MS))

        def on_reply(r: object) -> None:
            assert isinstance(r, fx.ProduceReply)
            if r.error == Errors.NONE:
                self._saw(r.base_offset)
                self.record(p, OK, f, value(r.base_offset))
                self._finish(i, False)
            elif r.error == Errors.NOT_ENOUGH_REPLICAS:  # rejected before the append
                self.record(p, FAIL, f, value(None), {"error": r.error.name})
                self._finish(i, False)
            else:
                self._forget_leader(i)
                self.record(p, INFO, f, value(None), {"error": r.error.name})
                self._finish(i, True)

        def on_timeout() -> None:
            self._forget_leader(i)
            self.record(p, INFO, f, value(None), {"error": "timeout"})
            self._finish(i, True)

        self._request(i, b, make, on_reply, on_timeout)

    def _list_offsets(self, i: int) -> None:
        """ListOffsets(latest) with the leader epoch the client's metadata holds (KIP-320
        fencing); the answers feed the ghost of spec's `list_offsets_monotonic` (KIP-207).
        Not a queue op: it is not in the history."""
        # as spec.model's clients: to the leader ZooKeeper names, with its epoch
        p = self.c.zk.partition
        if p is None or p.leader == NO_LEADER:
            self._finish(i, False)
            return
        b, epoch = p.leader, p.leader_epoch
        floor = self.c.ghost.latest_listed  # the largest answer received before this one

        def make(br: Broker, rid: int) -> None:
            if br.node is not None:
                br.node.handle(ev.ListOffsetsReceived(rid, TP, -1, epoch))

        def on_reply(r: object) -> None:
            if isinstance(r, fx.ListOffsetsReply) and r.error == Errors.NONE:
                self.c.listed(r.offset, floor)
            self._finish(i, False)

        def on_timeout() -> None:
            self._finish(i, False)

        self._request(i, b, make, on_reply, on_timeout)

    def _poll(self, i: int) -> None:
        p = self.process[i]
        self.record(p, INVOKE, "poll", [["poll"]])
        b = self._pick_broker(i)
        pos = self.position[i]
        read: dict[str, Any] = {}

        def make(br: Broker, rid: int) -> None:
            if br.node is not None:
                br.node.handle(ev.ConsumerFetchReceived(rid, TP, pos, -1))

        def on_reply(r: object) -> None:
            assert isinstance(r, fx.ConsumerFetchReply)
            if r.error != Errors.NONE:
                self.leader[i] = NO_LEADER
                self.record(p, FAIL, "poll", [["poll"]], {"error": r.error.name})
                self._finish(i, False)
                return
            pairs = read.get("pairs", [])
            if pairs:
                self.position[i] = pairs[-1][0] + 1
                self._saw(pairs[-1][0])
            self.record(p, OK, "poll", [["poll", {KEY: pairs}]])
            if self.final and self.position[i] > self.max_offset:
                self.done[i] = True
            self._finish(i, False)

        def on_timeout() -> None:
            self.leader[i] = NO_LEADER
            self.record(p, INFO, "poll", [["poll"]], {"error": "timeout"})
            self._finish(i, True)

        def reading(value: object) -> None:
            # the records [fetch_offset, end_offset) are read when the core answers
            if isinstance(value, fx.ConsumerFetchReply) and value.error == Errors.NONE:
                read["pairs"] = self._read(b, value)

        def wrapped_make(br: Broker, rid: int) -> None:
            cb = self.c.clients.get(rid)
            if cb is not None:
                def both(v: object, cb: Callable[[object], None] = cb) -> None:
                    reading(v)
                    cb(v)

                self.c.clients[rid] = both
            make(br, rid)

        self._request(i, b, wrapped_make, on_reply, on_timeout)

    def _read(self, b: int, r: fx.ConsumerFetchReply) -> list[list[int]]:
        logs = self.c.brokers[b].logs
        lg = logs.get_log(TP.topic, TP.partition) if logs is not None else None
        if lg is None or r.end_offset <= r.fetch_offset:
            return []
        # the consumer checks each batch's CRC once (check.crcs): read_bytes' verify
        data = lg.read_bytes(r.fetch_offset, POLL_MAX_BYTES, max_offset=r.end_offset)
        out = []
        lo, hi = r.fetch_offset, r.end_offset
        for pos, h in iter_headers(data, validate=False):
            for offset, value in self.c.decoded(data, pos, h):
                if lo <= offset < hi:
                    out.append([offset, value])
        return out

    def _saw(self, offset: int) -> None:
        """An op saw `offset`: the final reads must reach it (a send acknowledged after
        they began wakes the readers that were done)."""
        if offset <= self.max_offset:
            return
        self.max_offset = offset
        if self.final:
            for j in range(self.opts.clients):
                if self.done[j] and self.position[j] <= offset:
                    self.done[j] = False
                    if not self.busy[j]:
                        self._schedule(j)

    def converged(self) -> bool:
        return self.final and all(self.done) and not any(self.busy)

    def start_final(self) -> None:
        """Jepsen's final reads: fresh consumers read from the start up to the highest
        offset any op saw."""
        self.final = True
        for i in range(self.opts.clients):
            self.process[i] += self.opts.clients
            self.position[i] = 0
            self.leader[i] = NO_LEADER
            self.done[i] = False  # at least one poll must succeed, even with nothing sent
            if not self.busy[i]:
                self._schedule(i)


class Nemesis:
    def __init__(self, c: Cluster, w: Workload, d: Drawn, rng: random.Random) -> None:
        self.c, self.w, self.d, self.rng = c, w, d, rng
        self.count = 0
        self.stopped = False
        self.crashed: set[int] = set()
        self.disk = DiskFaults(self)
        self.timing = TimingFaults(self)

    def start(self) -> None:
        if self.d.faults:
            self._next()

    def _next(self) -> None:
        gap = int(self.rng.expovariate(1.0 / self.d.fault_interval_ms) * US_PER_MS)
        self.c.sched.after_us(gap, self._fault)

    def _log(self, f: str, value: Any) -> None:
        if f not in ("start", "resume", "stop-partition"):  # count faults, not their heals
            self.count += 1
        self.c.note(f"{f} {value}")
        self.w.record(NEMESIS, INFO, f, value)

    def _later(self, fn: Any) -> None:
        d = int(self.rng.uniform(0.5, 1.5) * self.d.fault_duration_ms * US_PER_MS)
        self.c.sched.after_us(d, lambda: None if self.stopped else fn())

    def _fault(self) -> None:
        if self.stopped:
            return
        c = self.c
        kind = self.rng.choice(self.d.faults)
        b = self.rng.randrange(c.n)
        br = c.brokers[b]
        if kind in ("kill", "lossy-kill") and br.node is not None and not self.crashed:
            self.crashed.add(b)
            self._log("kill", {"node": b, "lossy": kind == "lossy-kill"})
            br.crash(lossy=kind == "lossy-kill")
            self._later(lambda: self._restart(b))
        elif kind == "partition" and not c.down:
            side = [x for x in (*range(c.n), ZK) if self.rng.random() < 0.5]
            other = [x for x in (*range(c.n), ZK) if x not in side]
            for x in side:
                for y in other:
                    c.down |= {(x, y), (y, x)}
            self._log("start-partition", [sorted(side), sorted(other)])
            self._later(self._heal)
        elif kind == "zk-isolate" and not c.down:
            c.down |= {(b, ZK), (ZK, b)}
            self._log("start-partition", [[b], ["zk"]])
            self._later(self._heal)
        elif kind == "pause" and br.node is not None and not br.paused:
            br.paused = True
            self._log("pause", [b])
            self._later(lambda: self._resume(b))
        elif kind == "expire":
            self._log("expire-session", [b])
            c.zk.expire_broker(b)
        elif kind == "clog":
            dst = self.rng.randrange(c.n)
            c.clogged[(b, dst)] = self.rng.choice((50_000, 500_000, 2_000_000))
            self._log("clog", [b, dst])
            self._later(lambda: c.clogged.pop((b, dst), None))
        elif kind == "move-leader":
            ctl = c.zk.controller
            p = c.zk.partition
            if ctl != NO_LEADER and p is not None and c.brokers[ctl].node is not None:
                targets = [x for x in p.isr if x != p.leader]
                if targets:
                    t = self.rng.choice(targets)
                    self._log("move-leader", [t])
                    node = c.brokers[ctl]
                    c.run_on(ctl, node.incarnation,
                             lambda: node.node.handle(ev.LeaderMoveRequested(TP, t))
                             if node.node is not None else None)
        elif kind in DISK_FAULTS:
            self.disk.inject(kind, b)
        elif kind in TIMING_FAULTS:
            self.timing.inject(kind, b)
        self._next()

    def _restart(self, b: int) -> None:
        if self.c.brokers[b].node is None:
            self._log("start", [b])
            self.c.brokers[b].start()
        self.crashed.discard(b)

    def _resume(self, b: int) -> None:
        if self.c.brokers[b].paused:
            self._log("resume", [b])
            self.c.resume(b)

    def _heal(self) -> None:
        if self.c.down:
            self.c.down.clear()
            self._log("stop-partition", None)

    def heal_all(self) -> None:
        self.stopped = True
        self.disk.heal()
        self.timing.heal()
        self._heal()
        self.c.clogged.clear()
        for br in self.c.brokers:
            if br.paused:
                self._resume(br.id)
            if br.node is None:
                self._restart(br.id)


def build(opts: SimOptions) -> tuple[Cluster, Drawn, random.Random]:
    rng = random.Random(opts.seed)
    d = draw(opts, rng)
    protocol = ProtocolConfig(
        min_insync_replicas=2, replica_lag_time_max_ms=d.lag_time_max_ms,
        replica_fetch_backoff_ms=200, replica_fetch_wait_max_ms=100,
        request_timeout_ms=3_000, leader_imbalance_check_interval_seconds=5)
    if opts.bug is not None:
        protocol = scenario(opts.bug).config(protocol)
    log_config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=256,
                           flush_messages=1 if d.flush_each else
                           LogConfig().flush_messages)
    net = NetConfig(jitter_us=d.jitter_us, loss=d.loss, duplicate=d.duplicate)
    c = Cluster(seed=rng.randrange(1 << 62), nodes=opts.nodes, protocol=protocol,
                log_config=log_config, net=net, session_timeout_ms=d.session_timeout_ms,
                check_invariants=opts.check_invariants)
    return c, d, rng


def settle_gc() -> None:
    """For a process about to run many seeds: what is alive now (modules, code, the
    checkers' numpy) leaves the collector's generations (`gc.freeze`), so the full
    collections that a seed's allocations trigger scan the seed's objects only (they were
    about a tenth of a seed's time). Collection stays on; no result depends on it."""
    gc.collect()
    gc.freeze()


def run_seed(opts: SimOptions, *, keep_trace: bool = False, check: bool = True) -> SimResult:
    c, d, rng = build(opts)
    if keep_trace:
        c.trace = []
    w = make_workload(c, opts, d, random.Random(rng.randrange(1 << 62)))
    nem = Nemesis(c, w, d, random.Random(rng.randrange(1 << 62)))
    c.note(f"options {json.dumps(opts.to_json(), sort_keys=True)}")
    c.note(f"drawn {json.dumps(d.to_json(), sort_keys=True)}")
    for br in c.brokers:
        br.start()
    w.start()
    nem.start()
    failure: str | None = None
    safety_end = int(opts.time_s * 1_000_000)
    live_end = safety_end + int(opts.liveness_s * 1_000_000)
    sched = c.sched
    try:
        while sched.run_one(safety_end):
            if c.dirty:  # (after_event's own first test, without the call)
                c.after_event()
        c.note("liveness phase")
        nem.heal_all()
        # a quiet spell before the final reads (Jepsen's recovery wait)
        quiet_end = safety_end + 5_000_000
        while sched.run_one(quiet_end):
            if c.dirty:  # (after_event's own first test, without the call)
                c.after_event()
        w.start_final()
        while not w.converged() and sched.run_one(live_end):
            if c.dirty:  # (after_event's own first test, without the call)
                c.after_event()
        if not w.converged():
            failure = (f"no convergence: the final reads did not reach offset {w.max_offset} "
                       f"within {opts.liveness_s:g} simulated seconds of healing")
        w.stopped = True
    except Violation as v:
        failure = str(v)
        w.stopped = True
    except Exception as e:  # the real code (or the simulator) raised: the seed's finding
        failure = crash_line(e)
        c.note(failure)
        w.stopped = True
    checked: dict[str, Any] = {}
    if check and failure is None:
        from harness.checkers import check as check_history

        checked = check_history(w.history)
        if checked.get("valid?") is not True:
            failure = anomaly_line(checked)
    return SimResult(opts, d, failure is None, failure, w.history, c.hash.hexdigest(),
                     sched.events, c.stepped, sched.now_us // US_PER_MS, nem.count, checked,
                     c.trace)


def crash_line(e: BaseException) -> str:
    """A seed's failure line for an exception that escaped the event loop: its type, its
    words and where it was raised (the innermost frame), so that a swarm reports it as a
    failing seed with a replayable trace instead of dying on it."""
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        f = tb[-1]
        where = f" (at {Path(f.filename).name}:{f.lineno} in {f.name})"
    return f"error: {type(e).__name__}: {e}{where}"


def make_workload(c: Cluster, opts: SimOptions, d: Drawn, rng: random.Random) -> Workload:
    if d.workload == "register":
        from harness.sim.register import RegisterWorkload

        return RegisterWorkload(c, opts, d, rng)
    return Workload(c, opts, d, rng)


def anomaly_line(checked: dict[str, Any]) -> str:
    """The checkers' verdict as the seed's failure line (queue or linearizability)."""
    q = checked.get("queue")
    if q is not None and q.get("valid?") is not True:
        bad = q.get("bad_anomaly_types") or q.get("anomaly_types")
        return f"anomaly {bad}: {str(q.get('anomalies'))[:300]}"
    lz = checked.get("linearizable", {})
    return (f"anomaly {lz.get('anomaly_types') or lz.get('valid?')}: "
            f"{str(lz.get('per_key') or lz.get('failures'))[:300]}")


def history_lines(history: list[Op]) -> list[str]:
    return [json.dumps(op_to_dict(op), sort_keys=True) for op in history]


def write_trace(path: Path, r: SimResult) -> None:
    """A replayable trace: the options (the whole input), then every event line, the
    verdict and the hash. `replay` runs the options again and compares."""
    with path.open("w") as fh:
        fh.write(json.dumps({"options": r.options.to_json(), "drawn": r.drawn.to_json(),
                             "failure": r.failure, "trace_hash": r.trace_hash,
                             "events": r.events}) + "\n")
        for line in r.trace or ():
            fh.write(line + "\n")


def read_trace(path: Path) -> tuple[SimOptions, dict[str, Any], list[str]]:
    with path.open() as fh:
        head = json.loads(fh.readline())
        lines = [ln.rstrip("\n") for ln in fh]
    return SimOptions.from_json(head["options"]), head, lines
