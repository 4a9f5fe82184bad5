"""The simulated cluster as a `Runtime`: the campaign's nemesis code drives the simulator.

`SimRuntime` is a `harness.runtime.base.Runtime` (so a `nemesis.port.Cluster`) over
`harness.sim.cluster.Cluster`: the same package generators, executor and runner that attack a
live cluster (`nemesis.packages`, `nemesis.executor`, `nemesis.runner`) attack the simulated
one, and it hands out the two ports a live runtime does:

- `clock()`: a `SimClock`. Its `monotonic()` is simulated time; `sleep` and `wait` run the
  simulation forward (every scheduled callback up to then, the invariants checked after each,
  as `harness.sim.run` does), so a `NemesisRunner` whose `run()` is called in this thread
  waits between faults while the brokers and clients move.
- `clients()`: a `SimClients`, whose `open()` gives the simulator's own event-driven clients
  (`harness.sim.run.Workload`, `harness.sim.register.RegisterWorkload`) on this cluster.

Node names are the live runtimes' `"n1" .. "nN"`; the simulator's broker ids are 0-based
(spec's World), so node `n<i>` is simulated broker `i - 1`, and `replica_states` reports ids
shifted by one, as a live broker's admin endpoint would.

What the simulator cannot do, `capabilities()` says (and the call raises `FaultUnsupported`):
a clean stop (the simulated broker has no controlled-shutdown path: it leaves by crashing),
corrupting a segment (the simulator's bit flips are its own nemesis's `bitflip`, which waits
for the broker to leave the ISR: `harness.sim.diskfaults`), and toxics other than latency.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from broker.store.fs import SimFS
from core.types import NO_LEADER
from harness.runtime.base import (
    ZOOKEEPER_NODE,
    BrokerState,
    ClusterRuntimeError,
    FaultReport,
    FaultUnsupported,
    Grudge,
    NodeStateError,
    ReplicaState,
    Runtime,
    node_id,
    node_name,
    normalize_grudge,
)
from harness.runtime.ports import Clients
from harness.sim.cluster import ZK, Cluster, Violation
from harness.sim.diskfaults import stored_files
from harness.sim.run import SimOptions, Workload, build, make_workload
from harness.sim.sched import US_PER_MS

US_PER_S = 1_000_000

CAPABILITIES: dict[str, str | None] = {
    "kill": None, "start": None, "pause": None, "resume": None, "wipe": None,
    "lose-unflushed": None, "partition": None, "isolate-from-zookeeper": None,
    "toxic": None,  # latency only (`add_toxic`)
    "stop": "the simulated broker has no controlled shutdown: it leaves by crashing",
    "corrupt": "the simulator flips bits with its own nemesis (harness.sim.diskfaults), which "
               "waits for the broker to leave the ISR",
}


class SimClock:
    """Simulated time as a `nemesis.port.Clock`: waiting runs the simulation."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        # a break found while a fault was carried out (`SimRuntime._observed`), raised by
        # the next wait: the executor turns what a fault raises into a history value
        self.pending: Violation | None = None

    def monotonic(self) -> float:
        return self.c.sched.now_us / US_PER_S

    def sleep(self, seconds: float) -> None:
        self.run_until(self.c.sched.now_us + int(max(0.0, seconds) * US_PER_S))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        end = self.c.sched.now_us + int(max(0.0, timeout_s) * US_PER_S)
        self.run_until(end, event)
        return event.is_set()

    def run_until(self, end_us: int, event: threading.Event | None = None) -> None:
        """Run every callback due by `end_us` (checking the invariants after each: a
        `harness.sim.cluster.Violation` propagates), then let idle time pass to `end_us`;
        stop early once `event` is set (only a callback can set it: one thread)."""
        c = self.c
        sched = c.sched
        if self.pending is not None:
            v, self.pending = self.pending, None
            raise v
        while event is None or not event.is_set():
            if not sched.run_one(end_us):
                sched.advance(end_us)
                return
            c.after_event()


@dataclass
class SimClients:
    """The simulator's client port: its simulated clients on the simulated network."""

    runtime: SimRuntime
    kind: Literal["simulated"] = "simulated"

    def open(self) -> Workload:
        """The workload's clients (queue or register, as the runtime's options say), not yet
        started: `start()` begins their ops, `start_final()` the final reads."""
        rt = self.runtime
        return make_workload(rt.cluster, rt.options, rt.drawn,
                             random.Random(rt.rng.randrange(1 << 62)))


class SimRuntime(Runtime):
    """A simulated cluster of `options.nodes` brokers, its network, rates and timings drawn
    from `options.seed` (`harness.sim.run.build`). Its own nemesis does not run: faults come
    through the `Runtime` interface."""

    zookeeper_node = ZOOKEEPER_NODE

    def __init__(self, options: SimOptions) -> None:
        # no fault kinds of the simulator's own nemesis: the faults are the caller's
        self.options = options
        self.cluster, self.drawn, self.rng = build(options)
        self._clock = SimClock(self.cluster)
        self._toxics: dict[str, dict[str, list[tuple[int, int]]]] = {}  # node -> name -> links
        self.started = False

    @classmethod
    def of_seed(cls, seed: int, *, nodes: int = 3, workload: str = "queue",
                clients: int = 3) -> SimRuntime:
        return cls(SimOptions(seed=seed, nodes=nodes, swarm=False, faults=(),
                              workload=workload, clients=clients))

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SimRuntime:
        if not self.started:
            self.started = True
            for br in self.cluster.brokers:
                br.start()
        return self

    def stop(self) -> None:
        """Nothing to release: the simulation is objects in this process. Later waits on the
        clock still run it (a stopped runtime is not asked to)."""

    # -- views and ports ---------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"sim://seed-{self.options.seed}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node_name(b + 1) for b in range(self.cluster.n))

    def capabilities(self) -> dict[str, str | None]:
        return dict(CAPABILITIES)

    def clock(self) -> SimClock:
        return self._clock

    def clients(self) -> Clients:
        return SimClients(self)

    def _observed(self) -> None:
        """A fault is an event of the simulation: the invariants see the world it made
        before anything else happens (a kill and a restart in one executor call, as
        `nemesis.executor` does around a disk fault, would otherwise look to the step
        invariants like one broker whose state jumped back)."""
        try:
            self.cluster.after_event()
        except Violation as v:
            if self._clock.pending is None:
                self._clock.pending = v

    def _broker(self, node: str) -> int:
        b = node_id(node) - 1
        if not 0 <= b < self.cluster.n:
            raise ValueError(f"no node {node!r} (nodes: {', '.join(self.nodes)})")
        return b

    def is_running(self, node: str) -> bool:
        return self.cluster.brokers[self._broker(node)].node is not None

    def is_paused(self, node: str) -> bool:
        return self.cluster.brokers[self._broker(node)].paused

    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        """What the broker's admin endpoint would show (broker ids one-based, as node names)."""
        br = self.cluster.brokers[self._broker(node)]
        if br.node is None or br.paused:
            raise ClusterRuntimeError(f"{node} does not answer (down or paused)")
        st = br.node.state
        replicas: list[ReplicaState] = []
        for r in st.replicas:
            lg = br.logs.get_log(r.tp.topic, r.tp.partition) if br.logs is not None else None
            replicas.append({
                "topic": r.tp.topic, "partition": r.tp.partition, "role": r.role.name.lower(),
                "leader": _one_based(r.leader), "leader_epoch": r.leader_epoch,
                "log_end_offset": r.log_end_offset, "high_watermark": r.high_watermark,
                "log_start_offset": r.log_start_offset, "isr": [b + 1 for b in r.isr],
                "replicas": [b + 1 for b in r.replicas], "zk_version": r.zk_version,
                "epochs": [list(e) for e in r.epochs],
                "store_log_end_offset": lg.log_end_offset if lg is not None else None})
        return {"broker_id": br.id + 1, "broker_epoch": st.broker_epoch,
                "controller_id": _one_based(st.controller_id),
                "controller_epoch": st.controller_epoch,
                "is_controller": st.controller is not None, "replicas": replicas,
                "time_ms": self.cluster.now_ms()}

    def collect_logs(self, run_dir: Path) -> list[Path]:
        """The simulation's trace (when kept): every event line, in order."""
        trace = self.cluster.trace
        if trace is None:
            return []
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "sim-trace.log"
        path.write_text("".join(line + "\n" for line in trace))
        return [path]

    # -- process faults ----------------------------------------------------------------------

    def kill(self, node: str) -> FaultReport:
        """kill -9: the process dies, the page cache survives (`lose_unflushed` loses it)."""
        br = self.cluster.brokers[self._broker(node)]
        if br.node is None:
            return {"node": node, "result": "already-down"}
        br.crash(lossy=False)
        self._observed()
        return {"node": node, "result": "killed"}

    def start_node(self, node: str) -> FaultReport:
        br = self.cluster.brokers[self._broker(node)]
        if br.node is not None:
            return {"node": node, "result": "already-running"}
        br.start()
        self._observed()
        return {"node": node, "result": "started"}

    def stop_node(self, node: str) -> FaultReport:
        raise FaultUnsupported("stop", _reason("stop"))

    def pause(self, node: str) -> FaultReport:
        br = self.cluster.brokers[self._broker(node)]
        if br.node is None:
            return {"node": node, "result": "down"}
        br.paused = True
        self.cluster.dirty = True
        self._observed()
        return {"node": node, "result": "paused"}

    def resume(self, node: str) -> FaultReport:
        b = self._broker(node)
        br = self.cluster.brokers[b]
        if br.node is None:
            return {"node": node, "result": "down"}
        was = br.paused
        if was:
            self.cluster.resume(b)
            self._observed()
        return {"node": node, "result": "resumed" if was else "not-paused"}

    # -- disk faults -------------------------------------------------------------------------

    def _require_down(self, node: str, fault: str) -> int:
        b = self._broker(node)
        if self.cluster.brokers[b].node is not None:
            raise NodeStateError(f"{fault} needs {node} down (kill it first)")
        return b

    def wipe(self, node: str) -> FaultReport:
        b = self._require_down(node, "wipe")
        br = self.cluster.brokers[b]
        files = len(stored_files(br.fs))
        br.fs = SimFS(seed=self.cluster.rng.randrange(1 << 30))
        br.logs = None
        br.open_logs()  # what the restart will find: nothing
        self.cluster.dirty = True
        self._observed()
        return {"node": node, "files": files}

    def lose_unflushed(self, node: str) -> FaultReport:
        """The machine loses power: every file keeps only what was synced."""
        b = self._require_down(node, "lose-unflushed")
        br = self.cluster.brokers[b]
        before = len(br.mirror)  # the records of the watched partition on its disk
        br.fs.crash(lose_unsynced=True)
        br.logs = None
        br.open_logs()
        self.cluster.dirty = True
        self._observed()
        return {"node": node, "lost": {"records": max(0, before - len(br.mirror))}}

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header") -> FaultReport:
        raise FaultUnsupported("corrupt", _reason("corrupt"))

    # -- network faults ----------------------------------------------------------------------

    def _host(self, node: str) -> int:
        return ZK if node == ZOOKEEPER_NODE else self._broker(node)

    def partition(self, grudge: Grudge) -> FaultReport:
        """Each node of the grudge drops what the nodes it names send it (added to any cut
        already in place)."""
        g = normalize_grudge(grudge, (*self.nodes, ZOOKEEPER_NODE))
        for dst, srcs in g.items():
            for src in srcs:
                self.cluster.down.add((self._host(src), self._host(dst)))
        self.cluster.dirty = True
        return {"isolated": {k: list(v) for k, v in g.items()}}

    def heal(self) -> FaultReport:
        healed = len(self.cluster.down)
        self.cluster.down.clear()
        return {"healed": healed}

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, object], *,
                  stream: str = "downstream", toxicity: float = 1.0,
                  source: str | None = None) -> FaultReport:
        """A latency toxic: every message on the links between `node` and its peers (only
        `source`, when given) is delayed by `latency` ms more, in the direction `stream`
        says (downstream: what `node` sends back; upstream: what reaches it)."""
        if toxic_type != "latency" or toxicity != 1.0:
            raise FaultUnsupported("toxic", f"the simulator's links take latency toxics of "
                                            f"toxicity 1 only, not {toxic_type} at {toxicity}")
        latency = attributes.get("latency", 0)
        if not isinstance(latency, int | float) or latency < 0:
            raise ValueError(f"latency must be a non-negative number of ms, not {latency!r}")
        b = self._broker(node)
        peers = [self._broker(source)] if source is not None else [
            x for x in range(self.cluster.n) if x != b]
        links = [(b, p) if stream == "downstream" else (p, b) for p in peers]
        name = f"latency_{stream}" + (f"_from_{source}" if source is not None else "")
        for link in links:
            self.cluster.clogged[link] = int(latency * US_PER_MS)
        self._toxics.setdefault(node, {})[name] = links
        return {"node": node, "toxic": name, "type": toxic_type, "stream": stream}

    def remove_toxics(self, node: str | None = None) -> FaultReport:
        removed: dict[str, list[str]] = {}
        for n in sorted(self._toxics) if node is None else [node]:
            for name, links in sorted(self._toxics.pop(n, {}).items()):
                for link in links:
                    self.cluster.clogged.pop(link, None)
                removed.setdefault(n, []).append(name)
        return {"removed": removed}


def _one_based(broker: int) -> int:
    return broker + 1 if broker >= 0 else NO_LEADER


def _reason(fault: str) -> str:
    reason = CAPABILITIES[fault]
    assert reason is not None
    return reason


__all__ = ["CAPABILITIES", "SimClients", "SimClock", "SimRuntime"]
