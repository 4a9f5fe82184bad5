"""Partition shapes as grudges (Jepsen `nemesis.combined/grudge`, `nemesis.clj`): pure functions
of the node list and a seeded `random.Random`.

A grudge maps a node to the nodes whose packets it drops. Shapes over the brokers:

- `one`: one random node alone;
- `majority`: a random majority and the rest (`bisect (shuffle nodes)`);
- `majorities-ring`: on a random ring each node sees itself and its neighbours, a majority;
  no two nodes see the same majority (an exact ring for every n);
- `bridge`: two halves plus one node that sees both;
- `isolate`: the given nodes alone, each in its own component.

`with_zookeeper` places ZooKeeper: with the largest component (first on ties), or — for a
grudge that is not made of components — seeing everyone.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

Grudge = dict[str, tuple[str, ...]]


def majority_size(n: int) -> int:
    return n // 2 + 1


def components_grudge(components: Sequence[Sequence[str]]) -> Grudge:
    comps = [tuple(sorted(c)) for c in components if c]
    every = sorted({n for c in comps for n in c})
    out: Grudge = {}
    for c in comps:
        others = tuple(m for m in every if m not in c)
        if others:
            for n in c:
                out[n] = others
    return dict(sorted(out.items()))


def one(nodes: Sequence[str], rng: random.Random) -> list[list[str]]:
    loner = rng.choice(sorted(nodes))
    return [[loner], [n for n in sorted(nodes) if n != loner]]


def majority(nodes: Sequence[str], rng: random.Random) -> list[list[str]]:
    shuffled = sorted(nodes)
    rng.shuffle(shuffled)
    k = majority_size(len(shuffled))
    return [sorted(shuffled[:k]), sorted(shuffled[k:])]


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    ring = sorted(nodes)
    rng.shuffle(ring)
    n = len(ring)
    m = majority_size(n)
    back = (m - 1) // 2
    out: Grudge = {}
    for i, node in enumerate(ring):
        sees = {ring[(i - back + j) % n] for j in range(m)}
        ignored = tuple(sorted(set(ring) - sees))
        if ignored:
            out[node] = ignored
    return dict(sorted(out.items()))


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    shuffled = sorted(nodes)
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    a, b = shuffled[:half], shuffled[half:]
    if not a or len(b) < 2:
        return {}
    rest = b[1:]  # b[0] is the bridge: it sees everyone
    g = components_grudge([a, rest])
    return dict(sorted(g.items()))


def isolate(nodes: Sequence[str], targets: Sequence[str]) -> list[list[str]]:
    rest = [n for n in sorted(nodes) if n not in targets]
    return [[t] for t in sorted(targets)] + [rest]


def with_zookeeper(components: list[list[str]], zk: str) -> list[list[str]]:
    """ZooKeeper joins the largest component (the first of the largest)."""
    if not components:
        return [[zk]]
    i = max(range(len(components)), key=lambda j: (len(components[j]), -j))
    return [[*c, zk] if j == i else c for j, c in enumerate(components)]


def isolate_from(targets: Sequence[str], other: str) -> Grudge:
    """Each target and `other` (e.g. ZooKeeper) ignore each other; nothing else is cut."""
    out: dict[str, set[str]] = {}
    for t in targets:
        out.setdefault(t, set()).add(other)
        out.setdefault(other, set()).add(t)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}
