"""Resolving a `NodeSpec` to node names on a runtime (Jepsen `combined/db-nodes`).

Random choices use only the given `random.Random` and the sorted node list, so for a seed
they are the same every run; `leader`/`controller` ask the runtime.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from nemesis.faults import LeaderOf, NodeSpec
from nemesis.port import Cluster


class TargetError(LookupError):
    pass


def choose(spec: NodeSpec, nodes: Sequence[str], rng: random.Random) -> tuple[str, ...]:
    """The nodes a spec names, for specs that need no runtime (everything but leader and
    controller)."""
    pool = sorted(nodes)
    n = len(pool)
    if isinstance(spec, tuple):
        unknown = [x for x in spec if x not in pool]
        if unknown:
            raise TargetError(f"unknown nodes {unknown} (nodes: {pool})")
        return tuple(sorted(set(spec)))
    if not isinstance(spec, str):
        raise TargetError(f"{spec!r} needs a runtime")
    if n == 0:
        raise TargetError("no nodes")
    if spec == "one":
        return (rng.choice(pool),)
    if spec == "all":
        return tuple(pool)
    if spec == "random":
        k = rng.randint(1, n)
        return tuple(sorted(rng.sample(pool, k)))
    if spec == "minority":
        return tuple(sorted(rng.sample(pool, max(1, (n - 1) // 2))))
    if spec == "majority":
        return tuple(sorted(rng.sample(pool, n // 2 + 1)))
    if spec == "minority-third":
        return tuple(sorted(rng.sample(pool, max(1, (n - 1) // 3))))
    raise TargetError(f"{spec!r} needs a runtime")


def resolve(spec: NodeSpec, runtime: Cluster, rng: random.Random,
            focus: LeaderOf | None = None) -> tuple[str, ...]:
    if isinstance(spec, LeaderOf) or spec == "leader":
        tp = spec if isinstance(spec, LeaderOf) else focus
        if tp is None:
            raise TargetError("'leader' needs a focus partition (LeaderOf(topic, partition))")
        leader = runtime.leader_of(tp.topic, tp.partition)
        if leader is None:
            raise TargetError(f"no leader known for {tp.topic}-{tp.partition}")
        return (leader,)
    if spec == "controller":
        c = runtime.controller()
        if c is None:
            raise TargetError("no controller known")
        return (c,)
    return choose(spec, runtime.nodes, rng)
