"""Model-checker benchmark: states per second and time to exhaust bounds, next to a baseline
measured in the same run (a plain tuple BFS of Kip320.tla's actions, bench/hk_baseline.py).

    uv run python bench/spec_bench.py            # medium bounds, about 3 minutes
    uv run python bench/spec_bench.py --full     # also exhaust the issue's bounds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hk_baseline import explore

from core.config import ProtocolConfig
from spec.checker import check
from spec.model import Bounds, Model


def ours(bounds: Bounds, symmetry: bool, time_limit: float) -> tuple[int, float, bool, int]:
    r = check(Model(ProtocolConfig(), bounds), symmetry=symmetry, time_limit_s=time_limit)
    assert r.violation is None, r.violation
    return r.states, r.seconds, r.exhausted, r.transitions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="exhaust 3 brokers, 2 records, "
                    "3 leader epochs, 1 crash (the issue's bounds); may take many minutes")
    ap.add_argument("--time-limit", type=float, default=3600.0)
    args = ap.parse_args()

    b_states, b_secs, b_done = explore(3, 2, 2, 2, time_limit_s=120)
    base_rate = b_states / b_secs
    print(f"baseline  plain tuple BFS of Kip320.tla, 3 replicas 2 records 3 epochs: "
          f"{b_states:,} states in {b_secs:.1f} s = {base_rate:,.0f} states/s "
          f"({'exhausted' if b_done else 'time limit'})")

    runs = [
        ("fixed protocol, 3 brokers 1 record 2 epochs 1 crash", Bounds(3, 1, 2, crashes=1),
         True),
        ("same, without symmetry reduction", Bounds(3, 1, 2, crashes=1), False),
    ]
    if args.full:
        runs.append(("fixed protocol, 3 brokers 2 records 3 epochs 1 crash (issue bounds)",
                     Bounds(3, 2, 3, crashes=1), True))
    for name, bounds, sym in runs:
        states, secs, done, trans = ours(bounds, sym, args.time_limit)
        rate = states / secs
        print(f"hiwater   {name}: {states:,} states, {trans:,} transitions in {secs:.1f} s = "
              f"{rate:,.0f} states/s, {rate / base_rate:.3f}x the baseline's rate "
              f"({'exhausted' if done else 'time limit'})")
    print("The baseline explores a 5-variable abstraction; hiwater runs the real core "
          "(replica and controller machines, ZooKeeper, crashes) for every transition.")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - t:.0f} s")
