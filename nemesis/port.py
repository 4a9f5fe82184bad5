"""What the nemesis needs from the world, and nothing more: the port its faults call.

The nemesis depends on no test harness. It speaks to a cluster through `Cluster`, a
`typing.Protocol` of the operations faults carry out (kill, start, stop, pause, resume, wipe,
lose-unflushed, corrupt, partition, heal, toxics) and the views that choose their targets
(nodes, leader, controller, capabilities); and it reports what it did through a `Record`
callback, `record(f, value)`, called twice per fault (the invocation, then the completion).
The harness's runtimes (`harness.runtime.base.Runtime`) satisfy `Cluster`, and its history
recorder's `nemesis(f, value)` is a `Record`: the dependency points one way, harness →
nemesis (`tests/nemesis_faults/test_imports.py` keeps it so).

Time reaches the nemesis through a second port, `Clock`: when the next fault is due, and the
waits between faults. A live cluster's clock is the wall clock (`WALL_CLOCK`); a simulated
cluster's clock is simulated time, where waiting runs the simulation forward
(`harness.sim.runtime.SimClock`), so the same schedule drives either.

Node names are `"n1" .. "nN"`; `zookeeper_node` names ZooKeeper in grudges (`"zk"`), or is
None when the cluster has no ZooKeeper to cut. A grudge maps a node to the nodes it ignores
(Jepsen's `grudge`): `{"n1": {"n2"}}` drops the packets n2 sends to n1.

Every fault operation returns a small JSON-friendly `FaultReport` saying what it did (e.g.
`{"node": "n2", "result": "killed"}`); the nemesis records it as the completion's value. An
operation the cluster cannot do raises `FaultUnsupported` (with the reason); one that needs
the node in another state raises `NodeStateError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeAlias

#: dst node -> the src nodes whose packets it drops
Grudge: TypeAlias = Mapping[str, Iterable[str]]
#: what a fault operation did, JSON-friendly (the completion op's value)
FaultReport: TypeAlias = dict[str, object]
#: `record(f, value)`: the nemesis's ops, for a history (process "nemesis", type info)
Record: TypeAlias = Callable[[str, object], object]


class ClusterRuntimeError(RuntimeError):
    """Base of the errors a cluster raises for a fault."""


class FaultUnsupported(ClusterRuntimeError):
    """This cluster cannot carry out this fault here (and says why)."""

    def __init__(self, fault: str, reason: str) -> None:
        super().__init__(f"{fault} unsupported: {reason}")
        self.fault = fault
        self.reason = reason


class NodeStateError(ClusterRuntimeError):
    """The fault needs the node in another state (e.g. `wipe` on a running node)."""


class Clock(Protocol):
    """Time as the nemesis sees it: `monotonic()` in seconds (comparable only with itself),
    and waits that end early when an event is set."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Wait until `event` is set or `timeout_s` passed; whether it is set."""
        ...


class WallClock:
    """Real time: `time.monotonic`, `time.sleep`, `Event.wait`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(max(0.0, timeout_s))


WALL_CLOCK = WallClock()


class Cluster(Protocol):
    """The operations the nemesis's faults call (see the module docstring)."""

    # -- views -------------------------------------------------------------------------------

    @property
    def zookeeper_node(self) -> str | None: ...

    @property
    def nodes(self) -> tuple[str, ...]: ...

    def capabilities(self) -> Mapping[str, str | None]:
        """Fault name -> None when supported, else the reason it is not."""
        ...

    def is_running(self, node: str) -> bool:
        """The node's process exists (it may be paused)."""
        ...

    def is_paused(self, node: str) -> bool: ...

    def leader_of(self, topic: str, partition: int) -> str | None:
        """The partition's leader as far as the cluster knows, or None."""
        ...

    def controller(self) -> str | None: ...

    # -- process faults ------------------------------------------------------------------------

    def kill(self, node: str) -> FaultReport:
        """SIGKILL (a crash: nothing is flushed, the ZooKeeper session expires later)."""
        ...

    def start_node(self, node: str) -> FaultReport: ...

    def stop_node(self, node: str) -> FaultReport:
        """Clean shutdown (controlled shutdown, flush, checkpoints)."""
        ...

    def pause(self, node: str) -> FaultReport:
        """SIGSTOP."""
        ...

    def resume(self, node: str) -> FaultReport:
        """SIGCONT."""
        ...

    # -- disk faults (the node must be down) ---------------------------------------------------

    def wipe(self, node: str) -> FaultReport:
        """Delete the node's data directory (disk loss)."""
        ...

    def lose_unflushed(self, node: str) -> FaultReport:
        """Truncate the node's files to what was durable (power loss after a crash)."""
        ...

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header") -> FaultReport:
        """Flip bytes in a closed segment of one of the node's partitions."""
        ...

    # -- network faults ------------------------------------------------------------------------

    def partition(self, grudge: Grudge) -> FaultReport:
        """Cut links as the grudge says; the report's `isolated` is the grudge in place."""
        ...

    def heal(self) -> FaultReport:
        """Remove every network cut."""
        ...

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, object], *,
                  stream: str = "downstream", toxicity: float = 1.0,
                  source: str | None = None) -> FaultReport:
        """A Toxiproxy toxic on the link into `node` (with `source`: only on the connections
        from that node); the report's `toxic` names it."""
        ...

    def remove_toxics(self, node: str | None = None) -> FaultReport:
        """Remove the toxics of `node` (all nodes: None); the report's `removed` lists them."""
        ...


__all__ = ["WALL_CLOCK", "Clock", "Cluster", "ClusterRuntimeError", "FaultReport",
           "FaultUnsupported", "Grudge", "NodeStateError", "Record", "WallClock"]
