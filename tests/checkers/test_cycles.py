"""Cycle anomalies (G0, G1c, G-single, G-nonadjacent, G2-item and variants): hand-made
histories of every kind, and random small graphs/histories against a brute-force definition
(every simple cycle, every label choice)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checkers import cycles, queue
from harness.checkers.cycles import PROCESS, REALTIME, RW, WR, WW, CycleOptions, DepGraph
from harness.checkers.policy import QueuePolicy
from harness.history import Op


class H:
    """A history builder: each `txn` is an invoke + completion pair of one process."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def txn(self, process: int, *mops: Any, type_: str = "ok") -> H:
        inv = []
        for m in mops:
            inv.append(["send", m[1], m[2][1]] if m[0] == "send" else ["poll"])
        f = ("send" if all(m[0] == "send" for m in mops)
             else "poll" if all(m[0] == "poll" for m in mops) else "txn")
        n = len(self.ops)
        self.ops.append(Op(n, n, process, "invoke", f, inv))
        self.ops.append(Op(n + 1, n + 1, process, type_, f, [list(m) for m in mops]))
        return self


def send(k: Any, o: int, v: Any) -> tuple[Any, ...]:
    return ("send", k, [o, v])


def poll(**reads: list[tuple[int, Any]]) -> tuple[Any, ...]:
    return ("poll", {k: [list(p) for p in ps] for k, ps in reads.items()})


def kinds(h: H, policy: QueuePolicy) -> dict[str, Any]:
    r = queue.check(h.ops, policy)
    json.dumps(r)
    return r


def g0() -> H:
    return (H().txn(0, send("x", 0, 1), send("y", 1, 2))
            .txn(1, send("x", 1, 3), send("y", 0, 4))
            .txn(2, poll(x=[(0, 1), (1, 3)], y=[(0, 4), (1, 2)])))


def g1c() -> H:
    return (H().txn(0, send("x", 0, 1), poll(y=[(0, 2)]))
            .txn(1, send("y", 0, 2), poll(x=[(0, 1)])))


def g_single() -> H:
    return (H().txn(0, send("x", 0, 0), send("y", 0, 0))
            .txn(1, send("x", 1, 1), send("y", 1, 1))
            .txn(2, poll(x=[(0, 0), (1, 1)], y=[(0, 0)]))
            .txn(3, poll(x=[(0, 0), (1, 1)], y=[(0, 0), (1, 1)])))


def g_nonadjacent() -> H:
    return (H().txn(0, send("x", 0, 0)).txn(0, send("y", 0, 0))
            .txn(1, send("x", 1, 1)).txn(1, send("y", 1, 1))
            .txn(2, poll(x=[(0, 0), (1, 1)], y=[(0, 0)]))
            .txn(3, poll(y=[(0, 0), (1, 1)], x=[(0, 0)]))
            .txn(4, poll(x=[(0, 0), (1, 1)], y=[(0, 0), (1, 1)])))


def g2_item() -> H:
    return (H().txn(0, send("x", 0, 0), send("y", 0, 0))
            .txn(1, poll(x=[(0, 0)]), send("y", 1, 1))
            .txn(2, poll(y=[(0, 0)]), send("x", 1, 1))
            .txn(3, poll(x=[(0, 0), (1, 1)], y=[(0, 0), (1, 1)])))


def test_g0_is_reported_and_allowed() -> None:
    r = kinds(g0(), QueuePolicy())
    assert r["anomaly_types"] == ["G0"]
    assert r["valid?"] is True
    e = r["anomalies"]["G0"]["errs"][0]
    assert [s["type"] for s in e["steps"]] == ["ww", "ww"]
    assert e["length"] == 2 and len(e["cycle"]) == 3
    assert {(s["key"], s["value"], s["value2"]) for s in e["steps"]} == {("x", 1, 3),
                                                                         ("y", 4, 2)}
    assert queue.check(g0().ops, QueuePolicy.of(ww_deps=False))["anomaly_types"] == []


def test_g1c_without_ww_inference_is_bad() -> None:
    r = kinds(g1c(), QueuePolicy.of(ww_deps=False))
    assert r["anomaly_types"] == ["G1c"]
    assert r["valid?"] is False and r["bad_anomaly_types"] == ["G1c"]
    steps = r["anomalies"]["G1c"]["errs"][0]["steps"]
    assert sorted((s["type"], s["key"]) for s in steps) == [("wr", "x"), ("wr", "y")]
    # with ww inference on, G1c is expected (no write isolation) and allowed
    r2 = kinds(g1c(), QueuePolicy())
    assert r2["anomaly_types"] == ["G1c"] and r2["valid?"] is True
    # cycles off: not searched
    assert kinds(g1c(), QueuePolicy.of(ww_deps=False, cycles=False))["anomaly_types"] == []


def test_g_single() -> None:
    p = QueuePolicy.of(rw_deps=True)
    r = kinds(g_single(), p)
    assert "G_single" in r["anomaly_types"] and r["valid?"] is True
    e = r["anomalies"]["G_single"]["errs"][0]
    assert sorted(s["type"] for s in e["steps"]) == ["rw", "wr"]
    assert kinds(g_single(), QueuePolicy.of(rw_deps=True, forbid=["G_single"]))["valid?"] is False
    assert kinds(g_single(), QueuePolicy())["anomaly_types"] == []


def test_g_nonadjacent() -> None:
    r = kinds(g_nonadjacent(), QueuePolicy.of(rw_deps=True))
    assert r["anomaly_types"] == ["G_nonadjacent"]
    e = r["anomalies"]["G_nonadjacent"]["errs"][0]
    assert [s["type"] for s in e["steps"]].count("rw") == 2 and e["length"] == 4


def test_g2_item() -> None:
    r = kinds(g2_item(), QueuePolicy.of(rw_deps=True))
    assert "G2_item" in r["anomaly_types"]
    e = r["anomalies"]["G2_item"]["errs"][0]
    assert [s["type"] for s in e["steps"]] == ["rw", "rw"]


def test_serial_history_has_no_cycles() -> None:
    h = (H().txn(0, send("x", 0, 0), send("y", 0, 0))
         .txn(1, poll(x=[(0, 0)], y=[(0, 0)]), send("x", 1, 1))
         .txn(2, poll(x=[(1, 1)]), send("y", 1, 1))
         .txn(3, poll(x=[(0, 0), (1, 1)], y=[(0, 0), (1, 1)])))
    pol = QueuePolicy.of(rw_deps=True, process_order=True, realtime_order=True)
    r = kinds(h, pol)
    assert r["anomaly_types"] == [] and r["valid?"] is True


def test_realtime_variant() -> None:
    # T0 sends x; T1 (invoked after T0 completed) reads nothing new of x, T0 reads y from T1
    # is impossible in real time: T1 -> T0 by wr, T0 -> T1 by realtime
    h = (H().txn(0, send("x", 0, 0), poll(y=[(0, 5)]))
         .txn(1, send("y", 0, 5))
         .txn(2, poll(x=[(0, 0)])))
    pol = QueuePolicy.of(realtime_order=True)
    r = kinds(h, pol)
    assert "G1c_realtime" in r["anomaly_types"]
    e = r["anomalies"]["G1c_realtime"]["errs"][0]
    assert sorted(s["type"] for s in e["steps"]) == ["realtime", "wr"]
    lines = cycles.describe(e)
    assert lines[0].startswith("op ")


def test_fast_path_declines_cyclic_and_agrees() -> None:
    from harness.checkers.queue_fast import fast_results

    for h, pol in ((g0(), QueuePolicy()), (g1c(), QueuePolicy.of(ww_deps=False))):
        assert fast_results(h.ops, pol) is None
    acyclic = (H().txn(0, send(1, 0, 0)).txn(1, ("poll", {1: [[0, 0]]}))
               .txn(1, ("poll", {1: []}), send(2, 0, 0)).txn(2, ("poll", {2: [[0, 0]]})))
    pol = QueuePolicy.of(rw_deps=True, process_order=True)
    r = fast_results(acyclic.ops, pol)
    assert r is not None and r == queue.check(acyclic.ops, pol, fast=False)


# --- brute force -------------------------------------------------------------------------


def brute(g: DepGraph, mask: int) -> dict[str, int]:
    """kind -> length of its shortest simple cycle, by enumeration."""
    best: dict[str, int] = {}
    n = g.n
    for size in range(2, n + 1):
        for perm in itertools.permutations(range(n), size):
            if perm[0] != min(perm):
                continue
            hops = []
            for i in range(size):
                bits = g.edges.get((perm[i], perm[(i + 1) % size]), 0) & mask
                if not bits:
                    break
                hops.append([b for b in cycles.LABELS if bits & b])
            else:
                for labs in itertools.product(*hops):
                    k = cycles.classify(labs)
                    if k is not None and k not in best:
                        best[k] = size
    return best


edge_lists = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from(
        [WW, WR, RW, PROCESS, REALTIME, WW | RW, WR | RW, WW | WR])),
    max_size=12)


def make_graph(n: int, es: list[tuple[int, int, int]]) -> DepGraph:
    g = DepGraph([Op(i, i, 0, "ok", "txn", []) for i in range(n)])
    for a, b, bits in es:
        if a < n and b < n:
            for lab in cycles.LABELS:
                if bits & lab:
                    g.link(a, b, lab)
    return g


def check_witness(g: DepGraph, kind: str, w: list[tuple[int, int]]) -> None:
    nodes = [x for x, _ in w]
    assert len(set(nodes)) == len(nodes)
    for i, (a, lab) in enumerate(w):
        assert g.edges[(a, nodes[(i + 1) % len(nodes)])] & lab
    assert cycles.classify([lab for _, lab in w]) == kind


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 5), edge_lists)
def test_exhaustive_search_equals_brute_force(n: int, es: list[tuple[int, int, int]]) -> None:
    g = make_graph(n, es)
    mask = WW | WR | RW | PROCESS | REALTIME
    rep = cycles.find_cycles(g, mask)
    want = brute(g, mask)
    got = {k: min(len(w) for _, w in ws) for k, ws in rep.found.items()}
    assert got == want
    for k, ws in rep.found.items():
        for _, w in ws:
            check_witness(g, k, w)


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 5), edge_lists)
def test_bfs_search_is_sound_and_exact_for_base_kinds(n: int,
                                                      es: list[tuple[int, int, int]]) -> None:
    g = make_graph(n, es)
    mask = WW | WR | RW | PROCESS | REALTIME
    rep = cycles.find_cycles(g, mask, exhaustive_nodes=0)
    want = brute(g, mask)
    for k, ws in rep.found.items():
        assert k in want
        for _, w in ws:
            check_witness(g, k, w)
    for k in cycles.EXACT_BFS:
        if k in want:
            assert min(len(w) for _, w in rep.found[k]) == want[k]
        else:
            assert k not in rep.found


@st.composite
def small_histories(draw: Any) -> list[Op]:
    """Random txns over keys x, y: sends at fresh offsets, polls of log prefixes/suffixes."""
    h = H()
    logs: dict[int, list[int]] = {0: [], 1: []}
    nxt = 0
    sends: list[tuple[str, int]] = []
    for _ in range(draw(st.integers(1, 5))):
        mops: list[Any] = []
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.sampled_from([0, 1]))
            if draw(st.booleans()):
                nxt += 1
                logs[k].append(nxt)
                sends.append((k, nxt))
                mops.append(send(k, len(logs[k]) - 1, nxt))
            elif logs[k]:
                a = draw(st.integers(0, len(logs[k]) - 1))
                b = draw(st.integers(a, len(logs[k]) - 1))
                mops.append(("poll", {k: [[o, logs[k][o]] for o in range(a, b + 1)]}))
        if mops:
            h.txn(draw(st.integers(0, 2)), *mops)
    h.txn(9, ("poll", {k: [list(p) for p in enumerate(v)] for k, v in logs.items() if v}))
    return h.ops


@settings(max_examples=200, deadline=None)
@given(small_histories(), st.booleans(), st.booleans())
def test_random_histories_equal_brute_force(h: list[Op], ww: bool, rw: bool) -> None:
    from harness.checkers.queue_fast import fast_results

    pol = QueuePolicy.of(ww_deps=ww, rw_deps=rw, process_order=True)
    ref = queue.check(h, pol, fast=False)
    fast = fast_results(h, pol)
    assert fast is None or fast == ref
    if any(t in cycles.CYCLE_ANOMALIES for t in ref["anomaly_types"]):
        assert fast is None
    opts = CycleOptions(ww=ww, rw=rw, process=True, realtime=True)
    a = queue.analysis(h, opts)
    g = cycles.graph_of(h, {k: ko.by_index for k, ko in a.orders.items()},
                        {k: ko.by_value for k, ko in a.orders.items()}, opts)
    if g.n > 7:
        return
    want = brute(g, opts.mask)
    got = {k: min(e["length"] for e in es) for k, es in a.errors.items()
           if k in cycles.CYCLE_ANOMALIES}
    assert got == want


def test_report_lists_and_draws_each_cycle() -> None:
    from harness.checkers import check
    from harness.report.page import render_html

    h = g1c()
    res = json.loads(json.dumps(check(h.ops, QueuePolicy.of(ww_deps=False))))
    page = render_html(h.ops, res)
    assert "G1c (circular information flow)" in page
    assert '<ol class="cycle">' in page and "<svg" in page
    assert "<li>op #1 -wr(key x: 1)-&gt; op #3</li>" in page
    assert "<li>op #3 -wr(key y: 2)-&gt; op #1</li>" in page


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 9), st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)),
                                   max_size=16))
def test_columnar_acyclicity_check_equals_tarjan(n: int, es: list[tuple[int, int]]) -> None:
    import numpy as np

    from harness.checkers.queue_fast import _has_cycle

    es = [(a, b) for a, b in es if a != b and a < n and b < n]
    succ = [[b for a, b in es if a == x] for x in range(n)]
    src = np.array([a for a, _ in es], dtype=np.int64)
    dst = np.array([b for _, b in es], dtype=np.int64)
    assert _has_cycle(src, dst, n) == cycles.has_cycle(n, succ)
    # the same graph inside long chains: every edge becomes a path of 50 one-in one-out nodes
    m = n
    s2: list[int] = []
    d2: list[int] = []
    for a, b in es:
        prev = a
        for _ in range(50):
            s2.append(prev)
            d2.append(m)
            prev = m
            m += 1
        s2.append(prev)
        d2.append(b)
    assert _has_cycle(np.array(s2, dtype=np.int64), np.array(d2, dtype=np.int64), m) == \
        cycles.has_cycle(n, succ)
