"""One interface for a cluster under test: the `Runtime`.

A runtime starts and stops a cluster (or only points at one), carries out faults on it and
shows the brokers' replica states. Every runtime satisfies the nemesis's port
(`nemesis.port.Cluster`: the fault operations and the views that pick targets), so the same
fault schedule runs against local processes (`harness.runtime.local.LocalRuntime`) and a
cluster the user runs themselves (`harness.runtime.existing.ExistingClusterRuntime`, where
every fault is `FaultUnsupported`). The errors and `Grudge` are the port's, re-exported here.

Node names are `"n1" .. "nN"` (broker id i is `n<i>`). `zookeeper_node` names ZooKeeper in
grudges (`"zk"`), so "isolate n2 from ZooKeeper" is the grudge `{"n2": {"zk"}, "zk": {"n2"}}`.

A grudge maps a node to the nodes it ignores (Jepsen's `grudge`): `{"n1": {"n2"}}` drops the
packets n2 sends to n1. `complete_grudge([[a], [b, c]])` cuts between components both ways.

Every fault method returns a small JSON-friendly dict saying what it did; it becomes the value of
the nemesis's completion op in the history.

Besides faults a runtime hands out two ports (`harness.runtime.ports`): `clock()`, the time the
nemesis and the campaign's deadlines run on (the wall clock here; simulated time in
`harness.sim.runtime.SimRuntime`, also a `Runtime`), and `clients()`, the workload's clients
(Kafka-protocol clients of `bootstrap` here; simulated clients in the simulator).
"""

from __future__ import annotations

import abc
import contextlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harness.runtime.ports import Clients, KafkaClients
from nemesis.port import (
    WALL_CLOCK,
    Clock,
    ClusterRuntimeError,
    FaultReport,
    FaultUnsupported,
    Grudge,
    NodeStateError,
)

ZOOKEEPER_NODE = "zk"

_NODE_RE = re.compile(r"^n([1-9][0-9]{0,2})$")


class _ReplicaRequired(TypedDict):
    topic: str
    partition: int
    role: str  # "leader" | "follower" | "offline"
    leader: int
    leader_epoch: int
    log_end_offset: int
    high_watermark: int
    isr: list[int]
    replicas: list[int]


class ReplicaState(_ReplicaRequired, total=False):
    """One replica as a broker's admin endpoint (`GET /replicas`) shows it."""

    log_start_offset: int
    zk_version: int
    epochs: list[list[int]]
    store_log_end_offset: int | None


class _BrokerRequired(TypedDict):
    broker_id: int
    controller_epoch: int
    replicas: list[ReplicaState]


class BrokerState(_BrokerRequired, total=False):
    """A broker's `GET /replicas`: its replicas and what it knows of the controller."""

    broker_epoch: int
    controller_id: int
    is_controller: bool
    pid: int
    time_ms: int


def node_name(broker_id: int) -> str:
    return f"n{broker_id}"


def node_id(node: str) -> int:
    m = _NODE_RE.match(node)
    if m is None:
        raise ValueError(f"node names are n1, n2, ...; got {node!r}")
    return int(m.group(1))


def normalize_grudge(grudge: Grudge, nodes: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """A grudge with sorted tuples, empty entries dropped, names checked against `nodes`."""
    known = set(nodes)
    out: dict[str, tuple[str, ...]] = {}
    for dst in sorted(grudge):
        srcs = tuple(sorted(set(grudge[dst]) - {dst}))
        for n in (dst, *srcs):
            if n not in known:
                raise ValueError(f"grudge names unknown node {n!r} (known: {sorted(known)})")
        if srcs:
            out[dst] = srcs
    return out


def complete_grudge(components: Iterable[Iterable[str]]) -> dict[str, tuple[str, ...]]:
    """Every node ignores every node outside its own component (Jepsen `complete-grudge`)."""
    comps = [tuple(sorted(set(c))) for c in components]
    every = sorted({n for c in comps for n in c})
    return {
        n: tuple(m for m in every if m not in c)
        for c in comps
        for n in c
        if any(m not in c for m in every)
    }


class Runtime(abc.ABC):
    """A cluster under test. `stop()` is idempotent and stops everything `start()` started.
    Satisfies `nemesis.port.Cluster`."""

    #: the name ZooKeeper has in grudges, or None when the runtime has no ZooKeeper to cut
    zookeeper_node: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @abc.abstractmethod
    def start(self) -> Runtime: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views -------------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def bootstrap(self) -> str: ...

    @property
    @abc.abstractmethod
    def nodes(self) -> tuple[str, ...]: ...

    def capabilities(self) -> dict[str, str | None]:
        """Fault name -> None when supported, else the reason it is not."""
        return {}

    # -- ports -------------------------------------------------------------------------------

    def clock(self) -> Clock:
        """The time this cluster runs on (a live cluster: the wall clock)."""
        return WALL_CLOCK

    def clients(self) -> Clients:
        """The workload's clients (a live cluster: Kafka-protocol clients of `bootstrap`)."""
        return KafkaClients(self.bootstrap)

    @abc.abstractmethod
    def is_running(self, node: str) -> bool:
        """The node's process exists (it may be paused)."""

    @abc.abstractmethod
    def is_paused(self, node: str) -> bool: ...

    @abc.abstractmethod
    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        """The broker's replica states (raises when it cannot answer within `timeout_s`)."""

    def _reachable_states(self, timeout_s: float = 1.0) -> list[BrokerState]:
        """The replica states of every node that answers (running, not paused)."""
        out = []
        for n in self.nodes:
            if not self.is_running(n) or self.is_paused(n):
                continue
            with contextlib.suppress(Exception):
                out.append(self.replica_states(n, timeout_s))
        return out

    def leader_of(self, topic: str, partition: int) -> str | None:
        """The leader with the highest leader epoch any reachable broker reports, or None."""
        best: tuple[int, int] | None = None
        for st in self._reachable_states():
            for r in st.get("replicas", ()):
                if r.get("topic") == topic and r.get("partition") == partition:
                    leader, epoch = r.get("leader"), r.get("leader_epoch", -1)
                    if isinstance(leader, int) and leader >= 0 and (
                            best is None or epoch > best[0]):
                        best = (epoch, leader)
        return node_name(best[1]) if best is not None else None

    def controller(self) -> str | None:
        """The controller with the highest controller epoch any reachable broker reports."""
        best: tuple[int, int] | None = None
        for st in self._reachable_states():
            cid, epoch = st.get("controller_id"), st.get("controller_epoch", -1)
            if isinstance(cid, int) and cid >= 0 and (best is None or epoch > best[0]):
                best = (epoch, cid)
        return node_name(best[1]) if best is not None else None

    @abc.abstractmethod
    def collect_logs(self, run_dir: Path) -> list[Path]:
        """Copy each node's log (and ZooKeeper's) into `run_dir`; returns the files written."""

    # -- process faults ------------------------------------------------------------------------

    @abc.abstractmethod
    def kill(self, node: str) -> FaultReport:
        """SIGKILL (a crash: nothing is flushed, the ZooKeeper session expires later)."""

    @abc.abstractmethod
    def start_node(self, node: str) -> FaultReport: ...

    @abc.abstractmethod
    def stop_node(self, node: str) -> FaultReport:
        """Clean shutdown (SIGTERM: controlled shutdown, flush, checkpoints)."""

    @abc.abstractmethod
    def pause(self, node: str) -> FaultReport:
        """SIGSTOP."""

    @abc.abstractmethod
    def resume(self, node: str) -> FaultReport:
        """SIGCONT."""

    # -- disk faults (the node must be down) ---------------------------------------------------

    @abc.abstractmethod
    def wipe(self, node: str) -> FaultReport:
        """Delete the node's data directory (disk loss)."""

    @abc.abstractmethod
    def lose_unflushed(self, node: str) -> FaultReport:
        """Truncate the node's files to what was durable (power loss after a crash)."""

    @abc.abstractmethod
    def corrupt_segment(
        self, node: str, seed: int = 0, kind: str = "header"
    ) -> FaultReport:
        """Flip bytes in a closed segment of one of the node's partitions."""

    # -- network faults ------------------------------------------------------------------------

    @abc.abstractmethod
    def partition(self, grudge: Grudge) -> FaultReport:
        """Cut links as the grudge says (adds to any cut already in place)."""

    @abc.abstractmethod
    def heal(self) -> FaultReport:
        """Remove every network cut."""

    @abc.abstractmethod
    def add_toxic(
        self,
        node: str,
        toxic_type: str,
        attributes: Mapping[str, object],
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
        source: str | None = None,
    ) -> FaultReport:
        """A Toxiproxy toxic on the link into `node` (every connection to that broker; with
        `source`, only the connections from that broker, where the runtime has such links)."""

    @abc.abstractmethod
    def remove_toxics(self, node: str | None = None) -> FaultReport: ...


if TYPE_CHECKING:
    from nemesis.port import Cluster

    def _satisfies_the_nemesis_port(runtime: Runtime) -> Cluster:
        return runtime  # mypy checks every Runtime is a nemesis.port.Cluster


__all__ = ["ZOOKEEPER_NODE", "BrokerState", "Clients", "Clock", "ClusterRuntimeError",
           "FaultReport", "FaultUnsupported", "Grudge", "KafkaClients", "NodeStateError",
           "ReplicaState", "Runtime",
           "complete_grudge", "node_id", "node_name", "normalize_grudge"]
