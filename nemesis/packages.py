"""Nemesis packages (Jepsen `nemesis.combined`): a generator of faults, the final faults that
heal what it may have left broken, and the executor that applies a fault to a runtime.

    pkg = compose([partition_package(interval_s=10), kill_package(interval_s=10)])
    pkg = rotating_package([partition_package(), pause_package()], period_s=30)
    pkg = package_for(["partition", "kill"], interval_s=15)

`plan(pkg, seed, horizon_s)` expands the schedule without a cluster: the same seed gives the
same (time, fault) list every time (the executor's random choices come from the same seed; see
`nemesis.runner`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from nemesis import schedule
from nemesis.executor import execute
from nemesis.faults import (
    CleanRestart,
    CorruptSegment,
    Fault,
    HealNetwork,
    KillNode,
    LeaderOf,
    LoseUnflushed,
    NodeSpec,
    PartitionNetwork,
    PauseNode,
    RemoveToxics,
    ResumeNode,
    SlowLink,
    StartNode,
    Toxic,
    WipeDisk,
)
from nemesis.port import Cluster
from nemesis.schedule import Choice, GeneratorFactory, Step

#: carries out one fault; returns the completion's value (see `nemesis.executor`)
Executor = Callable[[Fault, Cluster, random.Random, LeaderOf | None], object]
DEFAULT_INTERVAL_S = 15.0  # Jepsen Redpanda's --nemesis-interval
FINAL_ORDER = (HealNetwork, RemoveToxics, ResumeNode, StartNode)


@dataclass(frozen=True)
class Package:
    name: str
    generator: GeneratorFactory
    final: tuple[Fault, ...] = ()
    executor: Executor = field(default=execute)
    fs: frozenset[str] = frozenset()  # the history `f`s it produces (report bands)

    def choice(self) -> Choice:
        return Choice(self.name, self.generator, self.final)


def _nothing(_rng: random.Random) -> schedule.Generator:
    return iter(())


def none_package() -> Package:
    return Package("none", _nothing)


def _fs(*faults: Fault) -> frozenset[str]:
    return frozenset(f.f for f in faults)


def partition_package(shapes: Sequence[str] = ("one", "majority", "majorities-ring"),
                      interval_s: float = DEFAULT_INTERVAL_S, zookeeper: bool = True
                      ) -> Package:
    starts = tuple(PartitionNetwork(s, zookeeper) for s in shapes)
    stop = HealNetwork()
    return Package("partition", lambda rng: schedule.flip_flop(starts, stop, interval_s, rng),
                   (stop,), fs=_fs(*starts, stop))


def isolate_leader_package(focus: LeaderOf | None = None,
                           interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    start = PartitionNetwork("isolate-leader", focus=focus)
    stop = HealNetwork()
    return Package("isolate-leader",
                   lambda rng: schedule.flip_flop(start, stop, interval_s, rng), (stop,),
                   fs=_fs(start, stop))


def zookeeper_package(targets: Sequence[NodeSpec] = ("one",),
                      interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    starts = tuple(PartitionNetwork("isolate-from-zookeeper", targets=t) for t in targets)
    stop = HealNetwork()
    return Package("zookeeper", lambda rng: schedule.flip_flop(starts, stop, interval_s, rng),
                   (stop,), fs=_fs(*starts, stop))


def kill_package(targets: Sequence[NodeSpec] = ("one", "all"),
                 interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    starts = tuple(KillNode(t) for t in targets)
    stop = StartNode()
    return Package("kill", lambda rng: schedule.flip_flop(starts, stop, interval_s, rng),
                   (stop,), fs=_fs(*starts, stop))


def pause_package(targets: Sequence[NodeSpec] = ("one", "all"),
                  interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    starts = tuple(PauseNode(t) for t in targets)
    stop = ResumeNode()
    return Package("pause", lambda rng: schedule.flip_flop(starts, stop, interval_s, rng),
                   (stop,), fs=_fs(*starts, stop))


def _repeating(name: str, faults: tuple[Fault, ...], interval_s: float) -> Package:
    return Package(name, lambda rng: schedule.repeat(faults, interval_s, rng), (StartNode(),),
                   fs=_fs(*faults, StartNode()))


def wipe_package(targets: Sequence[NodeSpec] = ("one",),
                 interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    return _repeating("wipe", tuple(WipeDisk(t) for t in targets), interval_s)


def lose_unflushed_package(targets: Sequence[NodeSpec] = ("one",),
                           interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    return _repeating("lose-unflushed", tuple(LoseUnflushed(t) for t in targets), interval_s)


def corrupt_package(targets: Sequence[NodeSpec] = ("one",), kind: str = "header",
                    interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    return _repeating("corrupt", tuple(CorruptSegment(t, kind) for t in targets), interval_s)


def clean_restart_package(targets: Sequence[NodeSpec] = ("one",),
                          interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    return _repeating("restart", tuple(CleanRestart(t) for t in targets), interval_s)


def toxic_package(toxics: Sequence[Toxic] = (SlowLink(),),
                  interval_s: float = DEFAULT_INTERVAL_S) -> Package:
    starts = tuple(toxics)
    stop = RemoveToxics()
    return Package("toxic", lambda rng: schedule.flip_flop(starts, stop, interval_s, rng),
                   (stop,), fs=_fs(*starts, stop))


def _ordered_finals(finals: Iterable[Fault]) -> tuple[Fault, ...]:
    uniq: list[Fault] = []
    for f in finals:
        if f not in uniq:
            uniq.append(f)

    def rank(f: Fault) -> int:
        for i, t in enumerate(FINAL_ORDER):
            if isinstance(f, t):
                return i
        return len(FINAL_ORDER)

    return tuple(sorted(uniq, key=rank))


def compose(packages: Sequence[Package]) -> Package:
    """All packages at once, overlapping (`gen/any`); finals in Jepsen's order (network,
    toxics, resume, start)."""
    pkgs = list(packages)

    def gen(rng: random.Random) -> schedule.Generator:
        subs = [p.generator(random.Random(rng.getrandbits(64))) for p in pkgs]
        return schedule.merge(subs)

    return Package("+".join(p.name for p in pkgs) or "none", gen,
                   _ordered_finals(f for p in pkgs for f in p.final),
                   fs=frozenset().union(*(p.fs for p in pkgs)) if pkgs else frozenset())


def rotating_package(packages: Sequence[Package], period_s: float = 30.0,
                     quiet_probability: float = 0.25) -> Package:
    """Every `period_s` a random non-empty subset of `packages` (or, with
    `quiet_probability`, none), then that subset's finals."""
    pkgs = list(packages)
    choices = [p.choice() for p in pkgs]
    return Package(
        "rotating(" + ",".join(p.name for p in pkgs) + ")",
        lambda rng: schedule.rotating(choices, period_s, rng, quiet_probability),
        _ordered_finals(f for p in pkgs for f in p.final),
        fs=frozenset().union(*(p.fs for p in pkgs)) if pkgs else frozenset())


PACKAGE_BUILDERS: dict[str, Callable[[float], Package]] = {
    "partition": lambda i: partition_package(interval_s=i),
    "isolate-leader": lambda i: isolate_leader_package(interval_s=i),
    "zookeeper": lambda i: zookeeper_package(interval_s=i),
    "kill": lambda i: kill_package(interval_s=i),
    "pause": lambda i: pause_package(interval_s=i),
    "wipe": lambda i: wipe_package(interval_s=i),
    "lose-unflushed": lambda i: lose_unflushed_package(interval_s=i),
    "corrupt": lambda i: corrupt_package(interval_s=i),
    "restart": lambda i: clean_restart_package(interval_s=i),
    "toxic": lambda i: toxic_package(interval_s=i),
}


def package_for(names: Iterable[str], interval_s: float = DEFAULT_INTERVAL_S,
                rotate_period_s: float | None = None, quiet_probability: float = 0.25
                ) -> Package:
    """A package from names (`PACKAGE_BUILDERS`; "none" or nothing: no faults; "standard":
    partition, kill, pause), composed, or rotated every `rotate_period_s`."""
    wanted: list[str] = []
    for n in names:
        for part in n.split(","):
            part = part.strip()
            if part in ("", "none"):
                continue
            for m in (("partition", "kill", "pause") if part in ("standard", "all") else (part,)):
                if m not in PACKAGE_BUILDERS:
                    raise ValueError(f"unknown nemesis {m!r}; known: "
                                     f"{', '.join(sorted(PACKAGE_BUILDERS))}, none, standard")
                if m not in wanted:
                    wanted.append(m)
    pkgs = [PACKAGE_BUILDERS[m](interval_s) for m in wanted]
    if not pkgs:
        return none_package()
    if rotate_period_s is not None:
        return rotating_package(pkgs, rotate_period_s, quiet_probability)
    return pkgs[0] if len(pkgs) == 1 else compose(pkgs)


def plan(package: Package, seed: int, horizon_s: float) -> list[tuple[float, Fault]]:
    """The package's schedule for `seed` up to `horizon_s` (what `run_nemesis` would invoke,
    and when, before the executor's target choices)."""
    gen_rng, _exec_rng = split_seed(seed)
    return schedule.plan(package.generator(gen_rng), horizon_s)


def split_seed(seed: int) -> tuple[random.Random, random.Random]:
    """One `random.Random(seed)` split into the schedule's and the executor's generators."""
    root = random.Random(seed)
    return random.Random(root.getrandbits(64)), random.Random(root.getrandbits(64))


__all__ = ["Package", "Step", "compose", "package_for", "plan", "rotating_package",
           "split_seed"]
