"""Partition shapes and node targets."""

from __future__ import annotations

import random

import pytest

from harness.runtime.base import complete_grudge, normalize_grudge
from nemesis import grudges
from nemesis.faults import LeaderOf
from nemesis.targets import TargetError, choose, resolve
from tests.nemesis_faults.fake_runtime import FakeRuntime

NODES = ["n1", "n2", "n3", "n4", "n5"]


def _sees(g: dict[str, tuple[str, ...]], node: str, nodes: list[str]) -> set[str]:
    return set(nodes) - set(g.get(node, ()))


def test_one_and_majority() -> None:
    rng = random.Random(5)
    comps = grudges.one(NODES, rng)
    assert len(comps[0]) == 1 and len(comps[1]) == 4
    comps = grudges.majority(NODES, rng)
    assert sorted(map(len, comps)) == [2, 3]
    g = grudges.components_grudge(comps)
    for a in comps[0]:
        assert set(g[a]) == set(comps[1])


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_majorities_ring_every_node_sees_a_distinct_majority(n: int) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    g = grudges.majorities_ring(nodes, random.Random(n))
    views = [frozenset(_sees(g, x, nodes)) for x in nodes]
    for x, v in zip(nodes, views, strict=True):
        assert x in v
        assert len(v) == n // 2 + 1
    assert len(set(views)) == n


def test_bridge() -> None:
    g = grudges.bridge(NODES, random.Random(2))
    full = [x for x in NODES if x not in g]
    assert len(full) == 1  # the bridge sees everyone
    for ignored in g.values():
        assert full[0] not in ignored


def test_with_zookeeper_joins_largest() -> None:
    comps = grudges.with_zookeeper([["n1"], ["n2", "n3"]], "zk")
    assert comps == [["n1"], ["n2", "n3", "zk"]]
    g = grudges.components_grudge(comps)
    assert g["n1"] == ("n2", "n3", "zk") and g["zk"] == ("n1",)


def test_complete_and_normalized_grudges() -> None:
    g = complete_grudge([["n1"], ["n2", "n3"]])
    assert g == {"n1": ("n2", "n3"), "n2": ("n1",), "n3": ("n1",)}
    assert normalize_grudge({"n1": ["n1", "n2"], "n3": []}, NODES) == {"n1": ("n2",)}
    with pytest.raises(ValueError, match="unknown node"):
        normalize_grudge({"n9": ["n1"]}, NODES)


def test_choose_sizes_deterministic() -> None:
    rng = random.Random(1)
    assert len(choose("one", NODES, rng)) == 1
    assert len(choose("minority", NODES, rng)) == 2
    assert len(choose("majority", NODES, rng)) == 3
    assert len(choose("minority-third", NODES, rng)) == 1
    assert choose("all", NODES, rng) == tuple(NODES)
    assert choose(("n2", "n1"), NODES, rng) == ("n1", "n2")
    a = [choose("random", NODES, random.Random(9)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    with pytest.raises(TargetError):
        choose(("n8",), NODES, rng)


def test_resolve_leader_and_controller() -> None:
    rt = FakeRuntime(leader="n3", controller="n1")
    rng = random.Random(0)
    assert resolve("leader", rt, rng, LeaderOf("t", 0)) == ("n3",)
    assert resolve(LeaderOf("t", 1), rt, rng) == ("n3",)
    assert resolve("controller", rt, rng) == ("n1",)
    with pytest.raises(TargetError, match="focus"):
        resolve("leader", rt, rng)
    rt.leader = None
    with pytest.raises(TargetError, match="no leader"):
        resolve(LeaderOf("t", 0), rt, rng)
