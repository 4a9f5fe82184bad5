"""Stats over a history: counts, latency, throughput, availability per fault window.

- `by_f`: per client `f`, counts by completion type and ok-latency quantiles (ms) —
  Jepsen's `stats` checker plus `perf`'s latency quantiles. `valid?` follows Jepsen's stats
  checker (every `f` had some `ok`), ignoring `crash` and `debug-topic-partitions` as the
  kafka `stats-checker` does (and the final phase's `end-offsets` queries likewise); `check`
  reports it but does not fold it into the run's verdict.
- `throughput`: completions per second by `f` and type, in fixed buckets (Jepsen `rate.png`).
- `fault_windows`: each nemesis fault from its start op to the op that stops it (or the end of
  the history), with the client ops *invoked* inside it: counts, availability (ok / all
  completions), ok throughput and ok-latency quantiles; `no_fault` is the same outside every
  window. Start/stop pairs are Jepsen's (`start-partition`/`stop-partition`, `kill`/`start`,
  `pause`/`resume`, `start-packet`/`stop-packet`, `bump-clock`|`strobe-clock`/`reset-clock`)
  and hiwater's nemesis names (`partition-network`/`heal-network`, `kill-node`/`start-node`,
  `pause-node`/`resume-node`, ...); `start-X`/`stop-X` pair generically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from harness.history import END_OFFSETS_F, INFO, INVOKE, NEMESIS, OK, Op, sort_key

IGNORED_FS: Final = frozenset({"crash", "debug-topic-partitions", END_OFFSETS_F})
QUANTILES: Final = (0.5, 0.95, 0.99, 1.0)

#: fault start f -> the fs that end it
FAULT_PAIRS: Final[Mapping[str, frozenset[str]]] = {
    "start-partition": frozenset({"stop-partition"}),
    "kill": frozenset({"start"}),
    "pause": frozenset({"resume"}),
    "start-packet": frozenset({"stop-packet"}),
    "bump-clock": frozenset({"reset-clock"}),
    "strobe-clock": frozenset({"reset-clock"}),
    "partition-network": frozenset({"heal-network"}),
    "kill-node": frozenset({"start-node"}),
    "pause-node": frozenset({"resume-node"}),
    "isolate-from-zookeeper": frozenset({"heal-network"}),
    "slow-link": frozenset({"heal-network", "fast-link"}),
    "skew-clock": frozenset({"reset-clock"}),
    "clog-link": frozenset({"unclog-link", "heal-network"}),
    "toxic": frozenset({"stop-toxic", "heal"}),
}


def _norm(f: str) -> str:
    out = []
    for i, ch in enumerate(f):
        if ch.isupper() and i > 0 and f[i - 1].islower():
            out.append("-")
        out.append(ch.lower())
    return "".join(out).replace("_", "-")


_ALL_STOPPERS: Final = frozenset(f for fs in FAULT_PAIRS.values() for f in fs)


def _stoppers(f: str) -> frozenset[str] | None:
    if f in FAULT_PAIRS:
        return FAULT_PAIRS[f]
    if f.startswith("start-") and f not in _ALL_STOPPERS:
        return frozenset({"stop-" + f[6:]})
    return None


def quantiles(xs: list[int], qs: Sequence[float] = QUANTILES) -> dict[str, float]:
    """Nearest-rank quantiles of nanosecond samples, in milliseconds."""
    if not xs:
        return {}
    s = sorted(xs)
    n = len(s)
    out = {}
    for q in qs:
        name = "max" if q == 1.0 else f"p{round(q * 100):g}"
        out[name] = s[min(n - 1, max(0, int(q * n + 0.999999) - 1))] / 1e6
    return out


def fault_windows(history: Sequence[Op]) -> list[dict[str, Any]]:
    """Nemesis fault windows `{"f", "start_ns", "end_ns", "value"}`, in start order.

    Jepsen records a nemesis op as two `info` events with the same `f` (or an invoke and a
    completion); a fault starts at its first event and ends at the last event of the op that
    stops it. A lone event counts as both.
    """
    open_: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def handle(first: Op, last: Op) -> None:
        nonlocal open_
        f = _norm(first.f)
        stop = _stoppers(f)
        if stop is not None:
            open_.append({"f": f, "start_ns": first.time_ns, "end_ns": None,
                          "value": first.value, "stoppers": stop})
            return
        still = []
        for w in open_:
            if f in w["stoppers"]:
                w["end_ns"] = last.time_ns
                out.append(w)
            else:
                still.append(w)
        open_ = still

    prev: Op | None = None
    for op in history:
        if op.process != NEMESIS:
            continue
        if prev is not None and prev.f == op.f and op.type != INVOKE:
            handle(prev, op)
            prev = None
            continue
        if prev is not None:
            handle(prev, prev)
        prev = op
    if prev is not None:
        handle(prev, prev)
    end = history[-1].time_ns if history else 0
    for w in open_:
        w["end_ns"] = end
        out.append(w)
    for w in out:
        del w["stoppers"]
    out.sort(key=lambda w: (w["start_ns"], w["f"]))
    return out


def _completions(history: Sequence[Op]) -> list[tuple[Op, int]]:
    """(completion, invoke time) of client ops."""
    pending: dict[Any, int] = {}
    out = []
    for op in history:
        if op.process == NEMESIS:
            continue
        if op.type == INVOKE:
            pending[op.process] = op.time_ns
        else:
            t0 = pending.pop(op.process, None)
            if t0 is not None:
                out.append((op, t0))
    return out


def _window_stats(
    comps: list[tuple[Op, int]], start: int, end: int
) -> dict[str, Any]:
    counts = {OK: 0, "fail": 0, INFO: 0}
    lat: list[int] = []
    for op, t0 in comps:
        if start <= t0 < end and op.f not in IGNORED_FS:
            counts[op.type] = counts.get(op.type, 0) + 1
            if op.type == OK:
                lat.append(op.time_ns - t0)
    total = sum(counts.values())
    dur = max(end - start, 1) / 1e9
    return {
        "ops": total,
        "counts": counts,
        "availability": counts[OK] / total if total else None,
        "ok_per_s": counts[OK] / dur,
        "latency_ms": quantiles(lat),
    }


def stats(history: Sequence[Op], *, bucket_s: float = 10.0) -> dict[str, Any]:
    """JSON-serialisable stats of a history (see the module docstring)."""
    comps = _completions(history)
    by_f: dict[str, dict[str, Any]] = {}
    lats: dict[str, list[int]] = {}
    for op, t0 in comps:
        d = by_f.setdefault(op.f, {"count": 0, OK: 0, "fail": 0, INFO: 0})
        d["count"] += 1
        d[op.type] = d.get(op.type, 0) + 1
        if op.type == OK:
            lats.setdefault(op.f, []).append(op.time_ns - t0)
    for f, d in by_f.items():
        d["valid?"] = d[OK] > 0
        d["latency_ms"] = quantiles(lats.get(f, []))
    valid = all(d["valid?"] for f, d in by_f.items() if f not in IGNORED_FS)

    bucket_ns = max(1, int(bucket_s * 1e9))
    t_end = history[-1].time_ns if history else 0
    nb = t_end // bucket_ns + 1
    rate: dict[str, dict[str, list[float]]] = {}
    for op, _t0 in comps:
        series = rate.setdefault(op.f, {}).setdefault(op.type, [0.0] * nb)
        series[op.time_ns // bucket_ns] += 1.0
    for by_type in rate.values():
        for series in by_type.values():
            series[:] = [c / bucket_s for c in series]

    windows = fault_windows(history)
    fw = []
    for w in windows:
        fw.append({**w, **_window_stats(comps, w["start_ns"], w["end_ns"])})
    # outside every window
    outside = []
    spans = sorted((w["start_ns"], w["end_ns"]) for w in windows)
    for op, t0 in comps:
        if not any(s <= t0 < e for s, e in spans):
            outside.append((op, t0))
    t_start = history[0].time_ns if history else 0
    covered = _union_length(spans)
    no_fault = _window_stats(outside, -(1 << 62), 1 << 62)
    no_fault["ok_per_s"] = no_fault["counts"][OK] / max(
        (t_end - t_start - covered) / 1e9, 1e-9
    )
    return {
        "valid?": valid,
        "ops": len(history),
        "by_f": {f: by_f[f] for f in sorted(by_f, key=sort_key)},
        "throughput": {"bucket_s": bucket_s,
                       "by_f": {f: rate[f] for f in sorted(rate, key=sort_key)}},
        "fault_windows": fw,
        "no_fault": no_fault,
    }


def _union_length(spans: list[tuple[int, int]]) -> int:
    total = 0
    cur_s = cur_e = None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total
