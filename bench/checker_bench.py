"""Checker throughput, as ratios to simple baselines measured in the same run.

    uv run python bench/checker_bench.py [--quick]

Queue checker (`harness.checkers.queue.analysis`) on synthetic correct Kafka-like histories of
1e5 and 1e6 events (invocations + completions; 10 keys, concurrency 10, 1-4 micro-ops per
op, polls of up to 8 records per key), against the simplest possible checker measured on the
same history: the NATS-style set check (acknowledged sends minus polled values, one pass).
Reports events/s, micro-op elements/s, the ratio to the baseline, and how throughput grows
from 1e5 to 1e6 (time exponent: 1.0 is linear).

Linearizability (`harness.checkers.linearizable`) on one-key register histories of 1k and
10k operations (read/write/cas, concurrency 5, 1 % crashed ops, unique written values),
against a baseline that pairs invocations with completions and replays completions in
order against a register (the cost of touching every op once; no search).

Bounded: well under 3 minutes on one core (`--quick`: 1e5 and 1k only).
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.checkers import linearizable, queue, synthetic
from harness.history import Op


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def set_baseline(history: Sequence[Op]) -> int:
    """NATS-style: acknowledged sends minus values any ok poll returned."""
    sent: set[tuple[Any, Any]] = set()
    read: set[tuple[Any, Any]] = set()
    for op in history:
        if op.type != "ok" or op.f not in ("send", "poll", "txn"):
            continue
        for mop in op.value:
            if mop[0] == "send":
                x = mop[2]
                sent.add((mop[1], x[1] if isinstance(x, list) else x))
            elif len(mop) > 1:
                for k, pairs in mop[1].items():
                    for _o, v in pairs:
                        read.add((k, v))
    return len(sent - read)


def elements(history: Sequence[Op]) -> int:
    n = 0
    for op in history:
        if op.type != "invoke" and op.f in ("send", "poll", "txn"):
            for mop in op.value:
                if mop[0] == "send":
                    n += 1
                elif len(mop) > 1:
                    n += sum(len(p) for p in mop[1].values())
    return n


def replay_baseline(history: Sequence[Op]) -> int:
    """Pair invocations and completions; replay ok completions in order (no search)."""
    pending: dict[Any, Op] = {}
    state: dict[Any, Any] = {}
    mismatches = 0
    for op in history:
        if op.type == "invoke":
            pending[op.process] = op
            continue
        inv = pending.pop(op.process, None)
        if inv is None or op.type != "ok":
            continue
        k, v = op.value
        if op.f == "write":
            state[k] = v
        elif op.f == "read":
            mismatches += state.get(k) != v
        elif state.get(k) == v[0]:
            state[k] = v[1]
    return mismatches


def bench_queue(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        h = synthetic.queue_history(n, seed=1)
        repeat = 2 if n <= 200_000 else 1
        t_check = best_of(lambda h=h: queue.analysis(h), repeat)
        t_base = best_of(lambda h=h: set_baseline(h), repeat)
        a = queue.analysis(h)
        assert not a.errors, sorted(a.errors)
        el = elements(h)
        rows.append({"events": len(h), "elements": el, "t": t_check, "t_base": t_base})
        print(
            f"queue   {len(h):>9,} events  {el:>9,} elements  check {t_check:6.2f} s "
            f"= {len(h) / t_check / 1e6:5.2f} M events/s, {el / t_check / 1e6:5.2f} M elem/s"
            f"  | baseline {t_base:5.2f} s  ratio {t_check / t_base:4.1f}x",
            flush=True,
        )
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        exp = math.log(b["t"] / a["t"]) / math.log(b["events"] / a["events"])
        gain = (b["events"] / b["t"]) / (a["events"] / a["t"])
        print(f"queue   growth {a['events']:,} -> {b['events']:,} events: time exponent "
              f"{exp:.2f} (1.00 = linear); throughput x{gain:.2f}")
    return rows


def bench_linearizable(sizes: list[int]) -> None:
    for n_ops in sizes:
        h = synthetic.register_history(2 * n_ops, seed=3, concurrency=5, info_p=0.01,
                                       unique=True)
        res = linearizable.analysis(h, time_limit_s=60)
        assert res["valid?"] is True, res["valid?"]
        t_check = best_of(lambda h=h: linearizable.analysis(h, time_limit_s=60), 3)
        t_base = best_of(lambda h=h: replay_baseline(h), 3)
        pk = res["per_key"][0]
        print(
            f"linear  {n_ops:>9,} ops (1 key, c=5)  check {t_check:6.3f} s "
            f"({pk['steps']:,} search steps, {pk['cache_size']:,} cached)"
            f"  | baseline {t_base:6.4f} s  ratio {t_check / t_base:5.1f}x",
            flush=True,
        )
    # the same 10k-op history with a stale read injected: the search must prove failure
    n_ops = sizes[-1]
    h = synthetic.register_history(2 * n_ops, seed=3, concurrency=5, info_p=0.01, unique=True)
    reads = [i for i, op in enumerate(h) if op.f == "read" and op.type == "ok"
             and op.value[1] is not None]
    i = reads[len(reads) // 2]
    h[i] = h[i]._replace(value=[h[i].value[0], h[i].value[1] - 40])
    t = time.perf_counter()
    res = linearizable.analysis(h, time_limit_s=30)
    t = time.perf_counter() - t
    print(f"linear  {n_ops:>9,} ops, stale read mid-history: valid?={res['valid?']} in {t:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    bench_queue([100_000] if args.quick else [100_000, 1_000_000])
    bench_linearizable([1_000] if args.quick else [1_000, 10_000])
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
