"""Model-checker benchmark: states per second and time to exhaust bounds, next to a baseline
measured in the same run (a plain tuple BFS of Kip320.tla's actions, bench/hk_baseline.py).

    uv run python bench/spec_bench.py            # the default bounds (`hiwater spec check`)
    uv run python bench/spec_bench.py --full     # also exhaust the issue's bounds
    uv run python bench/spec_bench.py --workers 2   # processes for the parallel runs

Prints the machine's load average before and after: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hk_baseline import explore

from core.config import ProtocolConfig
from spec.checker import check
from spec.model import Bounds, Model


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the parallel search's workers):
    steadier than wall time on a shared machine."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def ours(bounds: Bounds, symmetry: bool, time_limit: float,
         workers: int) -> tuple[int, float, bool, int, int, float]:
    cpu = cpu_seconds()
    r = check(Model(ProtocolConfig(), bounds), symmetry=symmetry, time_limit_s=time_limit,
              workers=workers)
    assert r.violation is None, r.violation
    return r.states, r.seconds, r.exhausted, r.transitions, r.depth, cpu_seconds() - cpu


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="exhaust 3 brokers, 2 records, "
                    "3 leader epochs, 1 crash (the issue's bounds); may take many minutes")
    ap.add_argument("--time-limit", type=float, default=3600.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="processes for the parallel runs (default: the number of cores)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores, {load()}")

    cpu = cpu_seconds()
    b_states, b_secs, b_done = explore(3, 2, 2, 2, time_limit_s=120)
    cpu = cpu_seconds() - cpu
    base_rate = b_states / b_secs
    base_cpu_rate = b_states / cpu
    print(f"baseline  plain tuple BFS of Kip320.tla, 3 replicas 2 records 3 epochs: "
          f"{b_states:,} states in {b_secs:.1f} s ({b_states / cpu:,.0f} states per CPU-s) "
          f"= {base_rate:,.0f} states/s "
          f"({'exhausted' if b_done else 'time limit'})")

    default = Bounds(3, 1, 2, crashes=1)
    runs = [
        ("fixed protocol, 3 brokers 1 record 2 epochs 1 crash, 1 process", default, True, 1),
        ("same, without symmetry reduction", default, False, 1),
    ]
    if args.workers > 1:
        runs.append((f"same, with symmetry, {args.workers} processes", default, True,
                     args.workers))
    if args.full:
        runs.append(("fixed protocol, 3 brokers 2 records 3 epochs 1 crash (issue bounds), "
                     f"{args.workers} process(es)", Bounds(3, 2, 3, crashes=1), True,
                     args.workers))
    for name, bounds, sym, workers in runs:
        states, secs, done, trans, depth, cpu = ours(bounds, sym, args.time_limit, workers)
        rate = states / secs
        print(f"hiwater   {name}: {states:,} states, {trans:,} transitions, diameter {depth} "
              f"in {secs:.1f} s ({cpu:.1f} CPU-s, {states / cpu:,.0f} states per CPU-s) = "
              f"{rate:,.0f} states/s, {rate / base_rate:.3f}x the baseline's rate "
              f"({states / cpu / base_cpu_rate:.3f}x per CPU-s) "
              f"({'exhausted' if done else 'time limit'}); {load()}",
              flush=True)
    print("The baseline explores a 5-variable abstraction; hiwater runs the real core "
          "(replica and controller machines, ZooKeeper, crashes) for every transition.")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t:.0f} s")
