"""Faults as data: frozen, hashable dataclasses. Each names its history `f` and describes itself
as the JSON-friendly value of its `info` invocation. `nemesis.executor.execute` carries one out
on a `Runtime`; the resolved targets and results are the completion's value.

Node targets (`NodeSpec`):

- `"one"` — one random node; `"random"` — a random non-empty subset; `"minority"`,
  `"majority"`, `"minority-third"` (< n/3, at least one), `"all"`;
- `"leader"` — the leader of the executor's focus partition, `LeaderOf(topic, partition)` —
  of that partition; `"controller"` — the controller;
- a tuple of node names.

Faults that need the node down do the whole dance themselves: `WipeDisk`, `LoseUnflushed` and
`CorruptSegment` kill, change the disk, and start the node again; `CleanRestart` stops it
cleanly and starts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

TARGET_NAMES = ("one", "random", "minority", "majority", "minority-third", "all", "leader",
                "controller")
PARTITION_SHAPES = ("one", "majority", "majorities-ring", "bridge", "isolate-leader",
                    "isolate-controller", "isolate-from-zookeeper")


@dataclass(frozen=True, slots=True)
class LeaderOf:
    topic: str
    partition: int = 0

    def describe(self) -> Any:
        return {"leader_of": [self.topic, self.partition]}


NodeSpec = str | tuple[str, ...] | LeaderOf


def check_spec(spec: NodeSpec) -> None:
    if isinstance(spec, str) and spec not in TARGET_NAMES:
        raise ValueError(f"node spec must be one of {TARGET_NAMES}, a tuple of names or "
                         f"LeaderOf, not {spec!r}")
    if isinstance(spec, tuple) and not spec:
        raise ValueError("an explicit node spec needs at least one node")


def describe_spec(spec: NodeSpec) -> Any:
    if isinstance(spec, LeaderOf):
        return spec.describe()
    if isinstance(spec, tuple):
        return list(spec)
    return spec


@dataclass(frozen=True, slots=True)
class Fault:
    f: ClassVar[str] = ""

    def describe(self) -> Any:
        return None


@dataclass(frozen=True, slots=True)
class _Targeted(Fault):
    targets: NodeSpec = "one"

    def __post_init__(self) -> None:
        check_spec(self.targets)

    def describe(self) -> Any:
        return describe_spec(self.targets)


Grudge = tuple[tuple[str, tuple[str, ...]], ...]


def grudge_value(grudge: dict[str, tuple[str, ...]] | Grudge) -> Grudge:
    """A grudge as a hashable, sorted tuple (for `PartitionNetwork(shape=...)`)."""
    items = grudge.items() if isinstance(grudge, dict) else grudge
    return tuple(sorted((k, tuple(sorted(v))) for k, v in items))


@dataclass(frozen=True, slots=True)
class PartitionNetwork(Fault):
    """Cut the network. `shape` is a name from `PARTITION_SHAPES` or an explicit grudge
    (`grudge_value({...})`). With `zookeeper=True` ZooKeeper sits with the largest component
    (and, for `majorities-ring` and `bridge`, sees everyone); `isolate-leader` and
    `isolate-controller` always cut the node from ZooKeeper too, or Kafka would keep it as the
    leader. `targets` chooses the nodes for `isolate-from-zookeeper`; `focus` the partition
    for `isolate-leader` (default: the executor's)."""

    f: ClassVar[str] = "start-partition"
    shape: str | Grudge = "one"
    zookeeper: bool = True
    targets: NodeSpec = "one"
    focus: LeaderOf | None = None

    def __post_init__(self) -> None:
        if isinstance(self.shape, str) and self.shape not in PARTITION_SHAPES:
            raise ValueError(f"shape must be one of {PARTITION_SHAPES} or a grudge, "
                             f"not {self.shape!r}")
        check_spec(self.targets)

    def describe(self) -> Any:
        if isinstance(self.shape, str):
            if self.shape == "isolate-from-zookeeper":
                return {"shape": self.shape, "targets": describe_spec(self.targets)}
            return self.shape
        return {"grudge": {k: list(v) for k, v in self.shape}}


@dataclass(frozen=True, slots=True)
class IsolateFromZooKeeper(PartitionNetwork):
    """Cut the target brokers from ZooKeeper (both ways): their sessions expire."""

    shape: str | Grudge = "isolate-from-zookeeper"


@dataclass(frozen=True, slots=True)
class HealNetwork(Fault):
    f: ClassVar[str] = "stop-partition"


@dataclass(frozen=True, slots=True)
class KillNode(_Targeted):
    f: ClassVar[str] = "kill"


@dataclass(frozen=True, slots=True)
class StartNode(_Targeted):
    f: ClassVar[str] = "start"
    targets: NodeSpec = "all"


@dataclass(frozen=True, slots=True)
class PauseNode(_Targeted):
    f: ClassVar[str] = "pause"


@dataclass(frozen=True, slots=True)
class ResumeNode(_Targeted):
    f: ClassVar[str] = "resume"
    targets: NodeSpec = "all"


@dataclass(frozen=True, slots=True)
class WipeDisk(_Targeted):
    """Kill, delete the data directory, start: the node comes back empty."""

    f: ClassVar[str] = "wipe"


@dataclass(frozen=True, slots=True)
class LoseUnflushed(_Targeted):
    """Kill, truncate to what was durable (`harness.runtime.disk`), start: a power failure."""

    f: ClassVar[str] = "lose-unflushed"


@dataclass(frozen=True, slots=True)
class CorruptSegment(_Targeted):
    """Kill, flip bytes in a closed segment (`kind` "header" or "records"), start."""

    f: ClassVar[str] = "corrupt"
    kind: str = "header"
    topic: str | None = None

    def describe(self) -> Any:
        return {"targets": describe_spec(self.targets), "kind": self.kind, "topic": self.topic}


@dataclass(frozen=True, slots=True)
class CleanRestart(_Targeted):
    """SIGTERM (controlled shutdown), then start."""

    f: ClassVar[str] = "restart"


@dataclass(frozen=True, slots=True)
class Toxic(_Targeted):
    """A Toxiproxy toxic on the link into the target brokers. `attributes` is a tuple of
    (name, value) pairs, e.g. `(("latency", 100), ("jitter", 20))`. With `source` (a node spec
    chosen among the other brokers) only the links from the source brokers into the targets
    (runtimes with per-pair links: docker); downstream is then what a target sends to a source,
    e.g. `Toxic(targets="leader", source="one")`: a leader's fetch responses to one follower."""

    f: ClassVar[str] = "toxic"
    toxic_type: str = "latency"
    attributes: tuple[tuple[str, Any], ...] = (("latency", 100), ("jitter", 20))
    stream: str = "downstream"
    toxicity: float = 1.0
    source: NodeSpec | None = None

    def __post_init__(self) -> None:
        check_spec(self.targets)
        if self.source is not None:
            check_spec(self.source)

    def describe(self) -> Any:
        out = {"targets": describe_spec(self.targets), "type": self.toxic_type,
               "attributes": dict(self.attributes), "stream": self.stream,
               "toxicity": self.toxicity}
        if self.source is not None:
            out["source"] = describe_spec(self.source)
        return out


@dataclass(frozen=True, slots=True)
class SlowLink(Toxic):
    """Latency on the links into the targets (a `latency` toxic)."""

    toxic_type: str = "latency"
    attributes: tuple[tuple[str, Any], ...] = field(
        default=(("latency", 200), ("jitter", 50)))


@dataclass(frozen=True, slots=True)
class RemoveToxics(_Targeted):
    f: ClassVar[str] = "stop-toxic"
    targets: NodeSpec = "all"


@dataclass(frozen=True, slots=True)
class HealAll(Fault):
    """Heal the network, remove toxics, resume paused and start stopped nodes."""

    f: ClassVar[str] = "heal"


FAULT_TYPES: tuple[type[Fault], ...] = (
    PartitionNetwork, IsolateFromZooKeeper, HealNetwork, KillNode, StartNode, PauseNode,
    ResumeNode, WipeDisk, LoseUnflushed, CorruptSegment, CleanRestart, Toxic, SlowLink,
    RemoveToxics, HealAll)
