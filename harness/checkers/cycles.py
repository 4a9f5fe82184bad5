"""Cycle anomalies of queue histories, as Elle finds them: G0, G1c, G-single, G-nonadjacent,
G2-item and their `_process` / `_realtime` variants.

The dependency graph has one node per client completion of a `send`/`poll`/`txn` op (a
transaction — several send/poll micro-ops in one op — is one node) and labelled edges:

- `ww` (only with write-write inference, Jepsen's `--ww-deps`): for every key k and every two
  consecutive entries of VO(k), writer(v1) -> writer(v2) (`writer` covers ok, info and fail
  completions, as Jepsen's `writer-of`);
- `wr`: writer(v) -> every `ok` op that read (k, v) (one edge per writer and reader; when the
  graph has no rw, process or realtime edges, only into readers that also send: an op that
  sends nothing then has no out-edge and lies on no cycle);
- `rw` (optional): an `ok` op whose *last* read of k is v (the highest dense index it read)
  -> the writer of v's successor in VO(k). Jepsen's kafka checker leaves rw out (its docstring's
  idea was edges from each op's final read of a key only, which is what this does); an edge
  from every read value would make each poll of two consecutive values a spurious G-single;
- `process` (optional): consecutive `ok` ops of one process;
- `realtime` (optional): A -> B when `ok` op A completed before `ok` op B was invoked (in
  history order), as Elle's realtime graph: B links only to the *frontier* at its invocation
  (ops completed and not known to precede another completed op), a transitive reduction.

Self-edges are never made. Each labelled edge keeps one explanation (key, values).

A cycle's kind is Elle's explainer classification of its edges: with no rw edge it is `G0`
when every data edge is ww, else `G1c`; with exactly one rw, `G_single`; with two or more,
`G_nonadjacent` when no two rw edges are adjacent (cyclically; a process/realtime edge
between two rw edges separates them), else `G2_item`. (So "G2-item" here is Elle's
reported G2-item: >= 2 rw with some adjacent pair; every rw kind is a G2-item in Adya's wider
sense.) A cycle with a realtime edge is `<kind>_realtime`, else with a process edge
`<kind>_process`. Between two nodes a cycle takes any one of the edge's labels.

Search (`find_cycles`): strongly connected components (iterative Tarjan) of the graph
restricted to each kind's labels; then per SCC and kind the shortest witness:

- SCCs of at most `exhaustive_nodes` nodes: every simple cycle is enumerated (bounded) and
  classified over every label choice — exact;
- larger SCCs: a breadth-first search from each node over (node, automaton state), where the
  automaton tracks what the kind needs (rw count, adjacency, first/last edge, wr/process/
  realtime seen); the shortest closed walk of the kind that is a simple cycle wins. For G0,
  G1c and G_single (base kinds) the shortest qualifying closed walk over all starts is always
  simple, so this is exact; for the others a kind is found when some BFS walk is simple
  (sound, not complete). A work budget per (SCC, kind) bounds the search; running out is
  counted in `CycleReport.truncated`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.history import INVOKE, OK, Op

WW: Final = 1
WR: Final = 2
RW: Final = 4
PROCESS: Final = 8
REALTIME: Final = 16
LABEL_NAMES: Final = {WW: "ww", WR: "wr", RW: "rw", PROCESS: "process", REALTIME: "realtime"}
LABELS: Final = (WW, WR, RW, PROCESS, REALTIME)

BASES: Final = ("G0", "G1c", "G_single", "G_nonadjacent", "G2_item")
VARIANTS: Final = ("", "_process", "_realtime")
#: every cycle anomaly type, base kinds first
CYCLE_ANOMALIES: Final = tuple(b + v for v in VARIANTS for b in BASES)
_BASE_LABELS: Final = {"G0": WW, "G1c": WW | WR, "G_single": WW | WR | RW,
                       "G_nonadjacent": WW | WR | RW, "G2_item": WW | WR | RW}
_VARIANT_LABELS: Final = {"": 0, "_process": PROCESS, "_realtime": PROCESS | REALTIME}
#: kinds whose BFS search is exact (see the module docstring)
EXACT_BFS: Final = frozenset({"G0", "G1c", "G_single"})
EXHAUSTIVE_NODES: Final = 6
SEARCH_BUDGET: Final = 200_000

QUEUE_FS: Final = frozenset({"send", "poll", "txn"})


@dataclass(frozen=True)
class CycleOptions:
    """Which edges the dependency graph has."""

    ww: bool = True
    rw: bool = False
    process: bool = False
    realtime: bool = False

    @property
    def mask(self) -> int:
        return (WR | (WW if self.ww else 0) | (RW if self.rw else 0)
                | (PROCESS if self.process else 0) | (REALTIME if self.realtime else 0))


@dataclass
class DepGraph:
    """Nodes 0..n-1 (`ops[i]` is node i's completion); `edges[(a, b)]` = label bits;
    `why[(a, b, label)]` = that edge's explanation as a tuple (`why_dict` names it: ww/rw
    (key, value, value2), wr (key, value), process (process,), realtime ())."""

    ops: list[Op]
    edges: dict[tuple[int, int], int] = field(default_factory=dict)
    why: dict[tuple[int, int, int], tuple[Any, ...]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ops)

    def link(self, a: int, b: int, label: int, why: tuple[Any, ...] = ()) -> None:
        if a == b:
            return
        e = self.edges.get((a, b), 0)
        if not e & label:
            self.edges[(a, b)] = e | label
            self.why[(a, b, label)] = why

    def successors(self, mask: int) -> list[list[tuple[int, int]]]:
        """succ[a] = [(b, labels & mask), ...] for edges with some label in `mask`."""
        succ: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for (a, b), bits in self.edges.items():
            m = bits & mask
            if m:
                succ[a].append((b, m))
        for s in succ:
            s.sort()
        return succ


def kind_labels(kind: str) -> tuple[str, str, int]:
    """(base, variant, allowed label bits) of a cycle anomaly type."""
    for v in ("_process", "_realtime"):
        if kind.endswith(v):
            base = kind[: -len(v)]
            return base, v, _BASE_LABELS[base] | _VARIANT_LABELS[v]
    return kind, "", _BASE_LABELS[kind]


def classify(labels: Sequence[int]) -> str | None:
    """Elle's type of a cycle whose hops carry these labels (one per hop), or None."""
    n = len(labels)
    data = [x for x in labels if x & (WW | WR | RW)]
    if not data:
        return None
    nrw = sum(1 for x in labels if x == RW)
    if nrw == 0:
        base = "G0" if all(x == WW for x in data) else "G1c"
    elif nrw == 1:
        base = "G_single"
    else:
        adjacent = any(labels[i] == RW and labels[(i + 1) % n] == RW for i in range(n))
        base = "G2_item" if adjacent else "G_nonadjacent"
    if any(x == REALTIME for x in labels):
        return base + "_realtime"
    if any(x == PROCESS for x in labels):
        return base + "_process"
    return base


# ---------------------------------------------------------------------------------------
# the graph of a history


def _reads_writes(value: Any) -> tuple[dict[Any, list[Any]], dict[Any, list[Any]]]:
    reads: dict[Any, list[Any]] = {}
    writes: dict[Any, list[Any]] = {}
    for mop in value or ():
        if not mop:
            continue
        if mop[0] == "send" and len(mop) > 2:
            x = mop[2]
            v = x[1] if isinstance(x, list | tuple) else x
            writes.setdefault(mop[1], []).append(v)
        elif mop[0] == "poll" and len(mop) > 1:
            pm = mop[1]
            for k, pairs in (pm.items() if isinstance(pm, Mapping) else pm):
                reads.setdefault(k, []).extend(p[1] for p in pairs)
    return reads, writes


def graph_of(
    history: Iterable[Op],
    by_index: Mapping[Any, Sequence[Any]],
    by_value: Mapping[Any, Mapping[Any, int]],
    opts: CycleOptions | None = None,
) -> DepGraph:
    """The dependency graph of a queue history, given its version orders (per key: values
    by dense index, and value -> dense index)."""
    opts = opts or CycleOptions()
    g = DepGraph([])
    writer_of: dict[tuple[Any, Any], int] = {}
    ok_reads: list[tuple[int, dict[Any, list[Any]]]] = []
    last_ok: dict[Any, int] = {}
    inv_preds: dict[Any, list[int]] = {}  # process -> frontier at its pending invocation
    frontier: list[int] = []
    preds_of: dict[int, list[int]] = {}
    for op in history:
        if op.f not in QUEUE_FS:
            continue
        if op.type == INVOKE:
            if opts.realtime:
                inv_preds[op.process] = list(frontier)
            continue
        node = g.n
        g.ops.append(op)
        reads, writes = _reads_writes(op.value)
        for k, vs in writes.items():
            for v in vs:
                writer_of[(k, v)] = node
        preds = inv_preds.pop(op.process, None)
        if op.type != OK:
            continue
        if reads:
            ok_reads.append((node, reads))
        if opts.process:
            prev = last_ok.get(op.process)
            if prev is not None:
                g.link(prev, node, PROCESS, (op.process,))
            last_ok[op.process] = node
        if opts.realtime:
            preds = preds or []
            preds_of[node] = preds
            drop = set(preds)
            frontier = [x for x in frontier if x not in drop]
            frontier.append(node)
    if opts.realtime:
        for b, ps in preds_of.items():
            for a in ps:
                g.link(a, b, REALTIME)
    if opts.ww:
        for k, vals in by_index.items():
            for i in range(1, len(vals)):
                wa = writer_of.get((k, vals[i - 1]))
                wb = writer_of.get((k, vals[i]))
                if wa is not None and wb is not None:
                    g.link(wa, wb, WW, (k, vals[i - 1], vals[i]))
    edges = g.edges
    why = g.why
    get_writer = writer_of.get
    # without rw/process/realtime edges an op that sends nothing has no out-edge, so it is on
    # no cycle: its wr in-edges are not needed
    only_writers = not (opts.rw or opts.process or opts.realtime)
    writers = set(writer_of.values()) if only_writers else set()
    for node, reads in ok_reads:
        if only_writers and node not in writers:
            continue
        linked: set[int] = set()  # one wr edge (and explanation) per writer
        for k, vs in reads.items():
            for v in vs:
                w = get_writer((k, v))
                if w is None or w == node or w in linked:
                    continue
                linked.add(w)
                e = edges.get((w, node), 0)
                if not e & WR:
                    edges[(w, node)] = e | WR
                    why[(w, node, WR)] = (k, v)
            if opts.rw:
                bv = by_value.get(k)
                kvals = by_index.get(k)
                if not bv or kvals is None:
                    continue
                i = max((bv.get(v, -1) for v in vs), default=-1)
                if 0 <= i < len(kvals) - 1:
                    w = writer_of.get((k, kvals[i + 1]))
                    if w is not None:
                        g.link(node, w, RW, (k, kvals[i], kvals[i + 1]))
    return g


# ---------------------------------------------------------------------------------------
# strongly connected components


def tarjan(n: int, succ: Sequence[Sequence[int]]) -> list[list[int]]:
    """Strongly connected components with >= 2 nodes (iterative Tarjan; each sorted)."""
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0 or not succ[root]:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            sv = succ[v]
            if i < len(sv):
                work[-1] = (v, i + 1)
                w = sv[i]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, 0))
                elif on[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comp.sort()
                    out.append(comp)
    return out


def has_cycle(n: int, succ: Sequence[Sequence[int]]) -> bool:
    return bool(tarjan(n, succ))


# ---------------------------------------------------------------------------------------
# witness search

# automaton state: (rw count capped at 2, first hop rw, last hop rw, two adjacent rw seen,
# wr seen, process seen, realtime seen, started, ww seen)
_State = tuple[int, bool, bool, bool, bool, bool, bool, bool, bool]
_INIT: Final[_State] = (0, False, False, False, False, False, False, False, False)


def _step(base: str, st: _State, label: int) -> _State | None:
    rw, first, last, adj, wr, p, rt, started, ww = st
    is_rw = label == RW
    if is_rw:
        rw = min(rw + 1, 2)
        if base == "G_single" and rw > 1:
            return None
        if last:
            if base == "G_nonadjacent":
                return None
            adj = True
    if not started:
        first = is_rw
    return (rw, first, is_rw, adj, wr or label == WR, p or label == PROCESS,
            rt or label == REALTIME, True, ww or label == WW)


def _accept(base: str, variant: str, st: _State) -> bool:
    rw, first, last, adj, wr, p, rt, _, ww = st
    if variant == "_process" and (not p or rt):
        return False
    if variant == "_realtime" and not rt:
        return False
    if base == "G0":
        return ww
    if base == "G1c":
        return wr
    if base == "G_single":
        return rw == 1
    if base == "G_nonadjacent":
        return rw == 2 and not adj and not (first and last)
    return rw == 2 and (adj or (first and last))


Witness = list[tuple[int, int]]  # [(node, label of the hop to the next node), ...]


def _bfs_from(s: int, base: str, variant: str, allowed: int,
              succ: Sequence[Sequence[tuple[int, int]]], members: set[int],
              budget: list[int]) -> Witness | None:
    """The shortest closed walk from s of the kind that is a simple cycle (BFS order)."""
    parent: dict[tuple[int, _State], tuple[tuple[int, _State], int] | None] = {(s, _INIT): None}
    q: deque[tuple[int, _State]] = deque([(s, _INIT)])
    while q:
        if budget[0] <= 0:
            return None
        cur = q.popleft()
        u, st = cur
        for w, bits in succ[u]:
            if w not in members:
                continue
            b = bits & allowed
            while b:
                label = b & -b
                b ^= label
                budget[0] -= 1
                nst = _step(base, st, label)
                if nst is None:
                    continue
                if w == s:
                    if _accept(base, variant, nst):
                        path = _unwind(parent, cur)
                        path.append((u, label))
                        if len({x for x, _ in path}) == len(path):
                            return path
                    continue
                key = (w, nst)
                if key not in parent:
                    parent[key] = (cur, label)
                    q.append(key)
    return None


def _unwind(parent: Mapping[tuple[int, _State], tuple[tuple[int, _State], int] | None],
            cur: tuple[int, _State]) -> Witness:
    out: Witness = []
    p = parent[cur]
    while p is not None:
        prev, label = p
        out.append((prev[0], label))
        p = parent[prev]
    out.reverse()
    return out


def _exhaustive(comp: list[int], succ: Sequence[Sequence[tuple[int, int]]],
                kinds: Sequence[str], budget: list[int]) -> dict[str, Witness]:
    """Shortest simple cycle of each kind in a small SCC: every simple cycle, every label
    choice (bounded by `budget`)."""
    members = set(comp)
    best: dict[str, Witness] = {}
    want = set(kinds)
    mask = 0
    for k in kinds:
        mask |= kind_labels(k)[2]

    def classify_choices(nodes: list[int], hops: list[int]) -> None:
        # every label choice along the cycle
        choices: list[list[int]] = []
        for bits in hops:
            b = bits & mask
            lst = []
            while b:
                lab = b & -b
                b ^= lab
                lst.append(lab)
            choices.append(lst)
        stack: list[list[int]] = [[]]
        while stack:
            labs = stack.pop()
            if len(labs) == len(choices):
                budget[0] -= 1
                kind = classify(labs)
                if kind in want:
                    cur = best.get(kind)
                    if cur is None or len(cur) > len(nodes):
                        best[kind] = list(zip(nodes, labs, strict=True))
                continue
            for lab in choices[len(labs)]:
                stack.append([*labs, lab])

    for s in comp:
        # DFS over simple paths s -> ... through members > s, closing back at s
        path = [s]
        hops: list[int] = []
        iters = [iter(succ[s])]
        on_path = {s}
        while iters:
            if budget[0] <= 0:
                return best
            nxt = next(iters[-1], None)
            if nxt is None:
                iters.pop()
                on_path.discard(path.pop())
                if hops:
                    hops.pop()
                continue
            w, bits = nxt
            if not bits & mask or w not in members:
                continue
            budget[0] -= 1
            if w == s:
                classify_choices(list(path), [*hops, bits])
            elif w > s and w not in on_path:
                path.append(w)
                hops.append(bits)
                on_path.add(w)
                iters.append(iter(succ[w]))
    return best


@dataclass
class CycleReport:
    """Per kind, the witnesses (one per SCC where found) as (SCC size, witness)."""

    found: dict[str, list[tuple[int, Witness]]]
    truncated: int = 0
    sccs: int = 0


def _may_have_cycle(g: DepGraph, mask: int) -> bool:
    """Whether the graph restricted to `mask` has a cycle (numpy peeling and chain
    contraction, then Tarjan on what is left: `queue_fast._has_cycle`)."""
    import numpy as np

    from harness.checkers.queue_fast import _has_cycle

    pairs = [ab for ab, bits in g.edges.items() if bits & mask]
    if not pairs:
        return False
    arr = np.array(pairs, dtype=np.int64)
    return _has_cycle(np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1]), g.n)


def searchable_kinds(mask: int) -> list[str]:
    """The cycle kinds a graph with these labels can have."""
    out = []
    for kind in CYCLE_ANOMALIES:
        base, variant, _ = kind_labels(kind)
        if base == "G0" and not mask & WW:
            continue
        if base == "G1c" and not mask & WR:
            continue
        if base not in ("G0", "G1c") and not mask & RW:
            continue
        if variant == "_process" and not mask & PROCESS:
            continue
        if variant == "_realtime" and not mask & REALTIME:
            continue
        out.append(kind)
    return out


def find_cycles(
    g: DepGraph,
    mask: int,
    *,
    kinds: Sequence[str] | None = None,
    exhaustive_nodes: int = EXHAUSTIVE_NODES,
    budget: int = SEARCH_BUDGET,
) -> CycleReport:
    """The shortest witness of each kind in each SCC of the kind's labelled subgraph."""
    kinds = list(kinds) if kinds is not None else searchable_kinds(mask)
    by_labels: dict[int, list[str]] = {}
    for kind in kinds:
        allowed = kind_labels(kind)[2] & mask
        by_labels.setdefault(allowed, []).append(kind)
    found: dict[str, list[tuple[int, Witness]]] = {}
    rep = CycleReport(found)
    union = 0
    for allowed in by_labels:
        union |= allowed
    if not _may_have_cycle(g, union):
        return rep  # acyclic: nothing to search
    for allowed, ks in by_labels.items():
        succ = g.successors(allowed)
        plain = [[b for b, _ in s] for s in succ]
        comps = tarjan(g.n, plain)
        rep.sccs = max(rep.sccs, len(comps))
        for comp in comps:
            members = set(comp)
            if len(comp) <= exhaustive_nodes:
                bud = [budget]
                best = _exhaustive(comp, succ, ks, bud)
                if bud[0] <= 0:
                    rep.truncated += 1
                for kind in ks:
                    if kind in best:
                        found.setdefault(kind, []).append((len(comp), best[kind]))
                continue
            for kind in ks:
                base, variant, _ = kind_labels(kind)
                bud = [budget]
                best_w: Witness | None = None
                for s in comp:
                    w = _bfs_from(s, base, variant, allowed, succ, members, bud)
                    if w is not None and (best_w is None or len(w) < len(best_w)):
                        best_w = w
                        if len(w) == 2:
                            break
                    if bud[0] <= 0:
                        rep.truncated += 1
                        break
                if best_w is not None:
                    found.setdefault(kind, []).append((len(comp), best_w))
    return rep


def explain(g: DepGraph, found: Mapping[str, list[tuple[int, Witness]]]
            ) -> dict[str, list[dict[str, Any]]]:
    """Error entries per kind: the cycle's ops (first repeated at the end), its labelled
    steps with their explanations, its length and its SCC's size; shortest first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in CYCLE_ANOMALIES:
        ws = found.get(kind)
        if not ws:
            continue
        errs: list[dict[str, Any]] = []
        for size, w in ws:
            nodes = [x for x, _ in w]
            steps = []
            for i, (a, label) in enumerate(w):
                b = nodes[(i + 1) % len(nodes)]
                steps.append(why_dict(label, g.why.get((a, b, label), ())))
            errs.append({
                "cycle": [g.ops[x] for x in [*nodes, nodes[0]]],
                "steps": steps,
                "length": len(w),
                "scc_size": size,
            })
        errs.sort(key=lambda e: (e["length"], e["cycle"][0].index))
        out[kind] = errs
    return out


def why_dict(label: int, why: tuple[Any, ...]) -> dict[str, Any]:
    """An edge's explanation as a step of a cycle error entry."""
    d: dict[str, Any] = {"type": LABEL_NAMES[label]}
    if len(why) == 3:
        d.update(key=why[0], value=why[1], value2=why[2])
    elif len(why) == 2:
        d.update(key=why[0], value=why[1])
    elif len(why) == 1:
        d["process"] = why[0]
    return d


def describe(err: Mapping[str, Any]) -> list[str]:
    """'op 12 -ww(key 3: 5 -> 6)-> op 14' lines for a cycle error entry."""
    ops = err["cycle"]
    lines = []
    for i, st in enumerate(err["steps"]):
        a = ops[i]
        b = ops[i + 1]
        ai = a.index if isinstance(a, Op) else a["index"]
        bi = b.index if isinstance(b, Op) else b["index"]
        lines.append(f"op {ai} -{step_label(st)}-> op {bi}")
    return lines


def step_label(st: Mapping[str, Any]) -> str:
    t = str(st["type"])
    if t in ("ww", "rw"):
        return f"{t}(key {st['key']}: {st['value']!r} -> {st['value2']!r})"
    if t == "wr":
        return f"wr(key {st['key']}: {st['value']!r})"
    if t == "process":
        return f"process({st['process']})"
    return t
