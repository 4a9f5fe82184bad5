"""Live invariant probes: `spec.invariants`, evaluated on brokers' sampled replica states.

A probe samples every broker's `GET /replicas` during a campaign and projects each sample into
spec's `World`, so the predicates the model checker uses are the ones that judge the live
cluster (DESIGN rule 4: one set of invariants for every driver). A sample is one broker at one
time and says nothing of ZooKeeper, the records' identities or other brokers, so only the
invariants such a projection can decide are evaluated:

- state invariants on one sample, per partition: `high_watermark_le_log_end` and
  `log_end_matches_disk` (the disk is as long as the store says its log is);
- `single_leader_per_epoch` over every leadership claim of the run (the World's ghost);
- step invariants between two samples of the same broker process: `leader_epoch_monotonic`
  and `controller_epoch_monotonic` (a restart starts over, as in Kafka: the broker relearns
  them). The projection keeps no records, so a step's worlds carry empty disks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TypedDict

from core.config import ProtocolConfig
from core.node import BrokerState as CoreBroker
from core.node import init
from core.replica import ReplicaState as CoreReplica
from core.rules.epochs import EpochEntry
from core.types import Role
from harness.runtime.base import BrokerState, ReplicaState, Runtime
from harness.topic_settings import TopicSettings
from spec import invariants
from spec.world import TP, Disk, Ghost, Node, World, Zk

PROBE_INTERVAL_S = 1.0
VIOLATIONS_MAX = 1000  # kept in results.json (DESIGN rule 9)
ISR_CHANGES_MAX = 5000  # ISR samples kept in results.json

STATE_CHECKS = frozenset({"high_watermark_le_log_end", "log_end_matches_disk"})
LEADERSHIP_CHECKS = frozenset({"single_leader_per_epoch"})
BROKER_STEP_CHECKS = frozenset({"controller_epoch_monotonic"})  # on the broker alone
REPLICA_STEP_CHECKS = frozenset({"leader_epoch_monotonic"})  # per partition
CHECKED = STATE_CHECKS | LEADERSHIP_CHECKS | BROKER_STEP_CHECKS | REPLICA_STEP_CHECKS

_ROLES = {"leader": Role.LEADER, "follower": Role.FOLLOWER}
_CONFIG = ProtocolConfig()  # the projection's replicas obey nothing: only their values count
_NO_RECORD = (-1, -1)  # a record of the projected disk: its identity is not sampled

Partition = tuple[str, int]


class Violation(TypedDict, total=False):
    invariant: str  # the name in spec.invariants (or "probe_format": an unreadable sample)
    why: str  # the invariant's own sentence
    node: str
    tp: list[object]  # [topic, partition]
    pid: int


def project_replica(r: ReplicaState, broker_id: int) -> CoreReplica:
    """A sampled replica as the core's value, as spec's single partition `TP`."""
    return CoreReplica(
        tp=TP, broker_id=broker_id, replicas=tuple(int(b) for b in r.get("replicas", ())),
        role=_ROLES.get(r["role"], Role.NONE), leader=int(r.get("leader", -1)),
        leader_epoch=int(r["leader_epoch"]), zk_version=int(r.get("zk_version", -1)),
        log_start_offset=int(r.get("log_start_offset", 0)),
        log_end_offset=int(r["log_end_offset"]), high_watermark=int(r["high_watermark"]),
        epochs=tuple(EpochEntry(int(e), int(o)) for e, o in r.get("epochs", ())),
        isr=tuple(int(b) for b in r.get("isr", ())),
    )


def project_broker(s: BrokerState, replica: ReplicaState | None) -> CoreBroker:
    """A sampled broker, hosting `replica` (as `TP`) or nothing."""
    b = int(s["broker_id"])
    return init(b, _CONFIG)._replace(
        broker_epoch=int(s.get("broker_epoch", -1)),
        controller_epoch=int(s["controller_epoch"]),
        controller_id=int(s.get("controller_id", -1)),
        replicas=() if replica is None else (project_replica(replica, b),),
    )


def project(s: BrokerState, replica: ReplicaState | None, *, with_disk: bool,
            leaders: tuple[tuple[int, int], ...] = ()) -> World:
    """One sample as a World: the sampled broker is the only one running (the others are
    unknown, which the invariants read as down); its disk holds as many records as the
    store's log (`with_disk`); the ghost holds the run's leadership claims of the partition."""
    state = project_broker(s, replica)
    records: tuple[tuple[int, int], ...] = ()
    if with_disk and replica is not None:
        store = replica.get("store_log_end_offset")
        length = int(replica["log_end_offset"]) if store is None else int(store)
        records = (_NO_RECORD,) * max(0, length)
    nodes = tuple(Node(state, Disk(records=records)) if i == state.broker_id
                  else Node(None, Disk()) for i in range(state.broker_id + 1))
    return World(nodes, Zk(), (), Ghost(leaders=leaders))


class IsrChange(TypedDict):
    time_ns: int  # on the history's clock
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]


class LiveProbe(threading.Thread):
    """Samples `/replicas` of every broker and evaluates the invariants of `spec.invariants`
    a sample can decide (see the module's docstring); violations carry the invariant's name.

    It also keeps the ISR each leader reported whenever it changed (`isr`: time on the
    history's clock, partition, leader, leader epoch, ISR; at most ISR_CHANGES_MAX), so a
    shrink under a fault shows in results.json next to the fault's window."""

    def __init__(self, runtime: Runtime | None, stop: threading.Event,
                 clock_ns: Callable[[], int] | None = None) -> None:
        super().__init__(name="live-probe", daemon=True)
        self.runtime = runtime
        self.stop_event = stop
        self.clock_ns = clock_ns or time.monotonic_ns
        self.samples = 0
        self.violations: list[Violation] = []
        self.isr_changes: list[IsrChange] = []
        self._isr: dict[Partition, tuple[int, int, tuple[int, ...]]] = {}
        # per partition: (leader epoch, broker) of every leadership claim seen
        self._leaders: dict[Partition, tuple[tuple[int, int], ...]] = {}
        # per broker process (node, pid), and partition (None: the broker itself): last world
        self._last: dict[tuple[str, int, Partition | None], World] = {}
        # the replication settings the leaders reported, per topic (results: topic_settings)
        self.settings = TopicSettings(lambda t: not t.startswith("__"))

    def _violate(self, v: Violation) -> None:
        if len(self.violations) < VIOLATIONS_MAX:
            self.violations.append(v)

    def check(self, node: str, s: BrokerState) -> None:
        """Evaluate one sample of `node`."""
        self.settings.add(s)
        pid = int(s.get("pid", 0))
        self._step(node, pid, None, project(s, None, with_disk=False))
        for r in s["replicas"]:
            tp: Partition = (str(r["topic"]), int(r["partition"]))
            here: Violation = {"node": node, "tp": list(tp)}
            w = project(s, r, with_disk=True)
            for name in sorted(STATE_CHECKS):  # every one broken, not only the first
                bad = invariants.check_state(w, frozenset({name}))
                if bad is not None:
                    self._violate({"invariant": bad[0], "why": bad[1], **here})
            self._step(node, pid, tp, project(s, r, with_disk=False))
            if r["role"] == "leader":
                self._claim(tp, int(r["leader_epoch"]), int(s["broker_id"]), here)
                self._note_isr(tp, int(s["broker_id"]), int(r["leader_epoch"]),
                               r.get("isr", ()))

    def _note_isr(self, tp: Partition, leader: int, epoch: int, isr: Iterable[int]) -> None:
        now = (leader, epoch, tuple(sorted(int(b) for b in isr)))
        if self._isr.get(tp) == now or len(self.isr_changes) >= ISR_CHANGES_MAX:
            return
        self._isr[tp] = now
        self.isr_changes.append({"time_ns": self.clock_ns(), "topic": tp[0],
                                 "partition": tp[1], "leader": leader, "leader_epoch": epoch,
                                 "isr": list(now[2])})

    def _step(self, node: str, pid: int, tp: Partition | None, now: World) -> None:
        key = (node, pid, tp)
        before = self._last.get(key)
        self._last[key] = now
        if before is None:
            return
        for name in sorted(BROKER_STEP_CHECKS if tp is None else REPLICA_STEP_CHECKS):
            bad = invariants.check_step(before, now, frozenset({name}))
            if bad is not None:
                v: Violation = {"invariant": bad[0], "why": bad[1], "node": node, "pid": pid}
                if tp is not None:
                    v["tp"] = list(tp)
                self._violate(v)

    def _claim(self, tp: Partition, epoch: int, broker: int, here: Violation) -> None:
        claims = self._leaders.get(tp, ())
        if (epoch, broker) in claims:
            return
        claims = self._leaders[tp] = tuple(sorted((*claims, (epoch, broker))))
        # this epoch's claims only: an earlier conflict was reported when it was seen
        w = World((), Zk(), (), Ghost(leaders=tuple(c for c in claims if c[0] == epoch)))
        bad = invariants.check_state(w, LEADERSHIP_CHECKS)
        if bad is not None:
            self._violate({"invariant": bad[0], "why": bad[1], **here})

    def sample_all(self, nodes: Iterable[str]) -> None:
        """One round: every node that answers in time is sampled and checked."""
        assert self.runtime is not None
        for node in nodes:
            try:
                s = self.runtime.replica_states(node, timeout_s=1.0)
            except Exception:
                continue  # down, paused or partitioned: nothing to sample
            self.samples += 1
            try:
                self.check(node, s)
            except (KeyError, TypeError, ValueError) as e:
                self._violate({"invariant": "probe_format", "node": node, "why": str(e)})

    def run(self) -> None:
        if self.runtime is None:
            return
        while not self.stop_event.wait(PROBE_INTERVAL_S):
            self.sample_all(self.runtime.nodes)

    def result(self) -> dict[str, object]:
        return {"samples": self.samples, "violations": self.violations,
                "valid?": not self.violations, "isr": self.isr_changes}
