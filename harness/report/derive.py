"""Series and indices the report plots, derived from a history in a few linear passes.

Everything here is bounded: series are bucketed or downsampled to a fixed number of points,
per-key observations are collected only for the keys and offset windows an anomaly points at.
Keys are matched by `key_str` because `results.json` turns integer dict keys into strings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.history import FAIL, INFO, INVOKE, NEMESIS, OK, Op, sort_key

QUEUE_FS: Final = frozenset({"send", "poll", "txn"})
REGISTER_FS: Final = frozenset({"read", "write", "cas"})
NICE_BUCKETS_S: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
                         600, 1800, 3600)


def key_str(k: Any) -> str:
    """A key as results.json spells it (JSON object keys are strings)."""
    return k if isinstance(k, str) else str(k)


def is_client(p: Any) -> bool:
    return isinstance(p, int) and not isinstance(p, bool)


@dataclass(frozen=True, slots=True)
class Pair:
    """A client op: its invocation time, completion (or None if it never completed)."""

    process: Any
    f: str
    type: str  # ok | fail | info (info also for ops that never completed)
    t0_ns: int
    t1_ns: int | None
    invoke: Op | None
    complete: Op | None

    @property
    def op(self) -> Op:
        """The completion, or the invocation of an op that never completed."""
        o = self.complete if self.complete is not None else self.invoke
        assert o is not None
        return o


def pairs(history: Sequence[Op]) -> list[Pair]:
    """Client ops as invocation/completion pairs, in completion order (pending ones last)."""
    pending: dict[Any, Op] = {}
    out: list[Pair] = []
    for op in history:
        if not is_client(op.process):
            continue
        if op.type == INVOKE:
            pending[op.process] = op
            continue
        inv = pending.pop(op.process, None)
        t0 = inv.time_ns if inv is not None else op.time_ns
        out.append(Pair(op.process, op.f, op.type, t0, op.time_ns, inv, op))
    for p in sorted(pending, key=sort_key):
        inv = pending[p]
        out.append(Pair(p, inv.f, INFO, inv.time_ns, None, inv, None))
    return out


def span_ns(history: Sequence[Op]) -> tuple[int, int]:
    if not history:
        return (0, 0)
    return (min(history[0].time_ns, 0), max(op.time_ns for op in history))


def bucket_s(duration_s: float, target: int = 100) -> float:
    """A round bucket width giving about `target` buckets over `duration_s`."""
    want = max(duration_s, 1e-9) / target
    for b in NICE_BUCKETS_S:
        if b >= want:
            return float(b)
    return float(math.ceil(want / 3600) * 3600)


def stride_sample(n: int, cap: int) -> list[int]:
    """At most `cap` indices of range(n), evenly spread (first and last kept)."""
    if n <= cap:
        return list(range(n))
    if cap <= 1:
        return [0][:cap]
    step = (n - 1) / (cap - 1)
    return sorted({round(i * step) for i in range(cap)})


def nearest_rank(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


@dataclass
class TimeSeries:
    """x in seconds; named y columns."""

    x: list[float] = field(default_factory=list)
    ys: dict[str, list[float | None]] = field(default_factory=dict)


def latency_quantiles(ps: Iterable[Pair], bucket: float) -> dict[str, TimeSeries]:
    """Per f: p50 and p99 of ok latency (ms) per bucket of completion time (buckets with no ok
    op are left out)."""
    b_ns = bucket * 1e9
    samples: dict[str, dict[int, list[float]]] = {}
    for p in ps:
        if p.type != OK or p.t1_ns is None:
            continue
        samples.setdefault(p.f, {}).setdefault(int(p.t1_ns // b_ns), []).append(
            (p.t1_ns - p.t0_ns) / 1e6)
    out: dict[str, TimeSeries] = {}
    for f in sorted(samples):
        ts = TimeSeries(ys={"p50": [], "p99": []})
        for b in sorted(samples[f]):
            xs = samples[f][b]
            ts.x.append((b + 0.5) * bucket)
            ts.ys["p50"].append(nearest_rank(xs, 0.5))
            ts.ys["p99"].append(nearest_rank(xs, 0.99))
        out[f] = ts
    return out


def throughput(ps: Iterable[Pair], bucket: float, t_end_ns: int) -> TimeSeries:
    """Completions per second per bucket, one column per `f type` (e.g. `send ok`)."""
    b_ns = bucket * 1e9
    nb = int(t_end_ns // b_ns) + 1
    cols: dict[str, list[float | None]] = {}
    for p in ps:
        if p.t1_ns is None:
            continue
        col = cols.get(f"{p.f} {p.type}")
        if col is None:
            col = cols[f"{p.f} {p.type}"] = [0.0] * nb
        i = min(int(p.t1_ns // b_ns), nb - 1)
        col[i] = (col[i] or 0.0) + 1.0 / bucket
    return TimeSeries([(i + 0.5) * bucket for i in range(nb)],
                      {c: cols[c] for c in sorted(cols)})


def _send_pairs(x: Any) -> tuple[Any, Any]:
    """(offset, value) of a send micro-op's third element (a bare value has no offset)."""
    if isinstance(x, list | tuple) and len(x) == 2:
        return x[0], x[1]
    return None, x


def _poll_items(pm: Any) -> Iterable[tuple[Any, Any]]:
    if isinstance(pm, Mapping):
        return pm.items()
    if isinstance(pm, list):
        return [tuple(kv) for kv in pm if isinstance(kv, list | tuple) and len(kv) == 2]
    return ()


def micro_ops(op: Op) -> Iterable[tuple[str, Any, Any, Any]]:
    """(`w`|`r`, key, offset, value) of a queue op's sends and polls."""
    if op.f not in QUEUE_FS or not isinstance(op.value, list):
        return
    for mop in op.value:
        if not isinstance(mop, list | tuple) or not mop:
            continue
        if mop[0] == "send" and len(mop) >= 3:
            o, v = _send_pairs(mop[2])
            yield ("w", mop[1], o, v)
        elif mop[0] == "poll" and len(mop) >= 2:
            for k, prs in _poll_items(mop[1]):
                for pr in prs or ():
                    if isinstance(pr, list | tuple) and len(pr) == 2:
                        yield ("r", k, pr[0], pr[1])


@dataclass
class Unseen:
    """Unseen (acknowledged, not yet polled) message counts over time."""

    x: list[float]  # seconds
    total: list[int]
    per_key: dict[str, tuple[list[float], list[int]]]  # the keys with the largest peaks
    source: str  # "checker" or "computed"
    final: dict[str, int]


def _unseen_events(history: Sequence[Op]) -> list[tuple[int, str, int]]:
    """(time, key, count) each time a key's unseen count changes (Jepsen `unseen`, §3.3):
    only ok send/poll/txn ops, in history order; unseen(k) = acknowledged(k) - polled(k).
    (A hot loop: raw keys inside, strings only in the output.)"""
    polled: dict[Any, set[Any]] = {}
    unseen: dict[Any, set[Any]] = {}
    out: list[tuple[int, Any, int]] = []
    for op in history:
        if op.type != OK or op.f not in QUEUE_FS or op.value.__class__ is not list:
            continue
        touched: list[Any] = []
        for mop in op.value:
            if mop.__class__ is not list or not mop:
                continue
            m0 = mop[0]
            if m0 == "send" and len(mop) >= 3:
                k = _h(mop[1])
                x = mop[2]
                v = _h(x[1] if (x.__class__ is list and len(x) == 2) else x)
                pk = polled.get(k)
                if pk is not None and v in pk:
                    continue
                uk = unseen.get(k)
                if uk is None:
                    uk = unseen[k] = set()
                if v not in uk:
                    uk.add(v)
                    touched.append(k)
            elif m0 == "poll" and len(mop) >= 2:
                for k0, prs in _poll_items(mop[1]):
                    k = _h(k0)
                    pk = polled.get(k)
                    if pk is None:
                        pk = polled[k] = set()
                    uk = unseen.get(k)
                    for pr in prs or ():
                        v = _h(pr[1])
                        pk.add(v)
                        if uk and v in uk:
                            uk.discard(v)
                            touched.append(k)
        if touched:
            for k in dict.fromkeys(touched):
                out.append((op.time_ns, k, len(unseen[k])))
    return [(t, key_str(k), n) for t, k, n in out]


def _h(v: Any) -> Any:
    """v itself when hashable (the common case: ints), else a hashable copy."""
    if v.__class__ is int or v.__class__ is str:
        return v
    return _hashable(v)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _hashable(x)) for k, x in v.items()))
    return v


def _checker_unseen(series: Any) -> list[tuple[int, str, int]] | None:
    """The checker's series, if results carry one: {time_ns, key, count} columns or
    [times, keys, counts]."""
    try:
        if isinstance(series, Mapping):
            cols = (series["time_ns"], series["key"], series["count"])
        elif isinstance(series, list | tuple) and len(series) == 3:
            cols = (series[0], series[1], series[2])
        else:
            return None
        return [(int(t), key_str(k), int(n)) for t, k, n in zip(*cols, strict=True)]
    except (KeyError, TypeError, ValueError):
        return None


def unseen(history: Sequence[Op], results_queue: Mapping[str, Any] | None,
           *, cap: int = 1500, top_keys: int = 8) -> Unseen:
    events = None
    source = "computed"
    if results_queue:
        raw = results_queue.get("unseen_series")
        if raw is not None:
            events = _checker_unseen(raw)
            if events is not None:
                source = "checker"
    if events is None:
        events = _unseen_events(history)
    cur: dict[str, int] = {}
    total = 0
    tx: list[int] = []
    ty: list[int] = []
    peaks: dict[str, int] = {}
    for t, k, n in events:
        total += n - cur.get(k, 0)
        cur[k] = n
        if n > peaks.get(k, 0):
            peaks[k] = n
        if tx and tx[-1] == t:
            ty[-1] = total
        else:
            tx.append(t)
            ty.append(total)
    x, y = downsample_step(tx, ty, cap)
    keys = sorted(peaks, key=lambda k: (-peaks[k], sort_key(k)))[:top_keys]
    per_key: dict[str, tuple[list[float], list[int]]] = {}
    if keys:
        want = set(keys)
        kt: dict[str, list[int]] = {k: [] for k in keys}
        kn: dict[str, list[int]] = {k: [] for k in keys}
        for t, k, n in events:
            if k in want:
                kt[k].append(t)
                kn[k].append(n)
        for k in keys:
            per_key[k] = downsample_step(kt[k], kn[k], cap)
    final = {k: n for k, n in sorted(cur.items(), key=lambda kv: sort_key(kv[0])) if n}
    return Unseen(x, y, per_key, source, final)


def downsample_step(t_ns: list[int], y: list[int], cap: int) -> tuple[list[float], list[int]]:
    """A step series reduced to at most about `cap` points, keeping each time bucket's peak
    and its last value (so plateaus and spikes both survive)."""
    n = len(t_ns)
    if n <= cap:
        return [t / 1e9 for t in t_ns], list(y)
    lo, hi = t_ns[0], t_ns[-1]
    nb = max(1, cap // 2)
    width = max(1, (hi - lo) / nb)
    xs: list[float] = []
    ys: list[int] = []
    i = 0
    while i < n:
        b = int((t_ns[i] - lo) // width)
        j = i
        peak_i = i
        while j < n and int((t_ns[j] - lo) // width) == b:
            if y[j] > y[peak_i]:
                peak_i = j
            j += 1
        last = j - 1
        for k in sorted({peak_i, last}):
            xs.append(t_ns[k] / 1e9)
            ys.append(y[k])
        i = j
    return xs, ys


# ---------------------------------------------------------------------------------------
# per-key observations for the offset diagrams


@dataclass(frozen=True, slots=True)
class Obs:
    """One op's view of one key: which values it saw or wrote at which offsets."""

    op: Op
    cells: tuple[tuple[str, Any, Any], ...]  # (w|r, offset, value)


@dataclass
class Focus:
    """What an anomaly points at on one key."""

    key: str
    offsets: set[int] = field(default_factory=set)
    values: set[Any] = field(default_factory=set)


def locate_values(history: Sequence[Op], wanted: Mapping[str, set[Any]]) -> dict[str, set[int]]:
    """key -> offsets at which any wanted value of that key was seen or written."""
    out: dict[str, set[int]] = {}
    if not wanted:
        return out
    for op in history:
        if op.type == INVOKE or op.f not in QUEUE_FS:
            continue
        for _kind, k, o, v in micro_ops(op):
            if o is None:
                continue
            ks = key_str(k)
            w = wanted.get(ks)
            if w and _hashable(v) in w:
                out.setdefault(ks, set()).add(o)
    return out


def observations(history: Sequence[Op], windows: Mapping[str, tuple[int, int]],
                 wanted_values: Mapping[str, set[Any]]) -> dict[str, list[Obs]]:
    """key -> every non-invoke op touching an offset of the key's window (inclusive), or one
    of its wanted values (sends whose offset is unknown included), in history order."""
    out: dict[str, list[Obs]] = {k: [] for k in windows}
    if not windows:
        return out
    for op in history:
        if op.type == INVOKE or op.f not in QUEUE_FS:
            continue
        cells: dict[str, list[tuple[str, Any, Any]]] = {}
        for kind, k, o, v in micro_ops(op):
            ks = key_str(k)
            win = windows.get(ks)
            if win is None:
                continue
            inside = o is not None and isinstance(o, int) and win[0] <= o <= win[1]
            if inside or _hashable(v) in wanted_values.get(ks, ()):
                cells.setdefault(ks, []).append((kind, o, v))
        for ks, cs in cells.items():
            out[ks].append(Obs(op, tuple(cs)))
    return out


# ---------------------------------------------------------------------------------------
# register ops per key (linearizability view)


@dataclass(frozen=True, slots=True)
class RegOp:
    process: Any
    f: str
    type: str
    t0_ns: int
    t1_ns: int | None
    index: int  # the completion's index (the invocation's if it never completed)
    arg: Any  # write: v; cas: [old, new]; read: the value read (None unless ok)


def register_ops(history: Sequence[Op], keys: set[str]) -> dict[str, list[RegOp]]:
    pending: dict[Any, Op] = {}
    out: dict[str, list[RegOp]] = {k: [] for k in keys}

    def add(inv: Op, comp: Op | None) -> None:
        if not isinstance(inv.value, list | tuple) or len(inv.value) < 2:
            return
        ks = key_str(inv.value[0])
        if ks not in out:
            return
        typ = comp.type if comp is not None else INFO
        if inv.f == "read":
            arg = comp.value[1] if (comp is not None and typ == OK
                                    and isinstance(comp.value, list | tuple)
                                    and len(comp.value) >= 2) else None
        else:
            arg = inv.value[1]
        out[ks].append(RegOp(inv.process, inv.f, typ, inv.time_ns,
                             comp.time_ns if comp is not None else None,
                             comp.index if comp is not None else inv.index, arg))

    for op in history:
        if op.f not in REGISTER_FS or not is_client(op.process):
            continue
        if op.type == INVOKE:
            pending[op.process] = op
            continue
        inv = pending.pop(op.process, None)
        if inv is not None:
            add(inv, op)
    for p in sorted(pending, key=sort_key):
        add(pending[p], None)
    for lst in out.values():
        lst.sort(key=lambda r: r.t0_ns)
    return out


def nemesis_events(history: Sequence[Op]) -> list[Op]:
    return [op for op in history if op.process == NEMESIS]


def counts_by_type(history: Iterable[Op]) -> dict[str, int]:
    c = {OK: 0, FAIL: 0, INFO: 0}
    for op in history:
        if op.type != INVOKE and is_client(op.process):
            c[op.type] = c.get(op.type, 0) + 1
    return c
