"""The deterministic simulator against the live campaign, measured in the same run.

    uv run python bench/sim_bench.py                 # 6 seeds in-process, 20 over 2 workers,
                                                      # and one 20 s live campaign
    uv run python bench/sim_bench.py --no-live        # the simulator alone
    uv run python bench/sim_bench.py --seeds 40 --live-time 30
    uv run python bench/sim_bench.py --no-live --code /tmp/main-export   # a same-run baseline:
                                                      # another checkout's harness, this bench

Prints simulated events per wall second (one core), simulated seconds per wall second, seeds
and faults per hour over the workers, the live campaign's faults per hour, and issue #11's
aims as ratios: >= 50,000 events/s per core and >= 100x the live campaign's faults per hour.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# --code DIR: measure the simulator of another checkout (e.g. `git archive main`) with this
# bench, for a baseline in the same run
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))

import harness.sim.run as sim_run  # noqa: E402
from harness.sim.cli import run_many  # noqa: E402
from harness.sim.run import SimOptions, run_seed  # noqa: E402

AIM_EVENTS_PER_S = 50_000
AIM_FAULT_RATIO = 100.0
FAULT_STARTS = ("kill", "start-partition", "pause", "expire-session", "clog", "move-leader")


def one_core(seeds: int) -> tuple[float, float, float, int]:
    """Events per wall second, events per CPU second of this process (what a core does
    when other work shares the machine) and simulated seconds per wall second, in this
    process. A first short seed is not timed: it imports what the seeds use (the checkers
    load numpy, about a second), once per process."""
    # A seed that passes and draws the queue workload, so the queue checker runs untimed:
    # its fast path imports numpy, and `np.unique` imports `numpy.ma` on its first call
    # (0.1-0.2 CPU-s where bytecode is not written, PYTHONDONTWRITEBYTECODE: a tenth of the
    # six seeds; the warm-up seed 1 of 1 s never converged, so that was timed).
    run_seed(SimOptions(seed=4, time_s=3.0, liveness_s=10.0))
    with contextlib.suppress(ImportError):  # a checkout without it
        importlib.import_module("harness.checkers.queue_fast")
    settle = getattr(sim_run, "settle_gc", None)
    if settle is not None:  # what run_many does in that checkout
        settle()
    events = sim_ms = 0
    t, cpu = time.perf_counter(), time.process_time()
    for s in range(seeds):
        r = run_seed(SimOptions(seed=50_000 + s))
        events += r.events
        sim_ms += r.sim_ms
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    return events / wall, events / cpu, sim_ms / 1000 / wall, events


def many(seeds: int, workers: int) -> tuple[float, float, int]:
    """Seeds per hour and faults per hour over `workers` processes."""
    t = time.perf_counter()
    out = run_many(SimOptions(seed=60_000), list(range(60_000, 60_000 + seeds)), workers)
    wall = time.perf_counter() - t
    failed = sum(not s.ok for s in out)
    return seeds / wall * 3600, sum(s.faults for s in out) / wall * 3600, failed


def live_faults_per_hour(time_limit_s: float) -> tuple[float, int, float]:
    """One local campaign (ZooKeeper + 3 brokers, standard faults), start to report. Every
    fault-starting nemesis line of its history counts (a campaign may log a fault more than
    once: this overstates the live rate, so the ratio printed is a lower bound)."""
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "hiwater"), "campaign", "--time-limit",
             str(time_limit_s),
             "--store", tmp], cwd=ROOT, capture_output=True, text=True, timeout=900,
            check=False)
        wall = time.perf_counter() - t
        hist = sorted(Path(tmp).glob("**/history.jsonl"))
        if not hist:
            raise RuntimeError(f"campaign wrote no history: {proc.stderr[-500:]}")
        faults = 0
        for line in hist[0].read_text().splitlines():
            op = json.loads(line)
            if op["process"] == "nemesis" and op["type"] == "info" and str(op["f"]).startswith(
                    FAULT_STARTS):
                faults += 1
    return faults / wall * 3600, faults, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds over the workers")
    ap.add_argument("--one-core-seeds", type=int, default=6)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--live-time", type=float, default=20.0, help="live campaign, seconds")
    ap.add_argument("--no-live", action="store_true")
    ap.add_argument("--code", type=Path, default=ROOT,
                    help="the checkout whose simulator is measured (default: this one)")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; code {CODE}")
    ev_s, ev_cpu, sim_x, events = one_core(a.one_core_seeds)
    print(f"one core: {events} events, {ev_s:,.0f} events/s ({ev_cpu:,.0f} per CPU second), "
          f"{sim_x:.1f} simulated s per wall s")
    seeds_h, faults_h, failed = many(a.seeds, a.workers)
    print(f"{a.workers} workers: {seeds_h:,.0f} seeds/h, {faults_h:,.0f} faults/h "
          f"({failed} of {a.seeds} seeds failed)")
    print(f"aim events/s per core: {ev_s / AIM_EVENTS_PER_S:.3f} of {AIM_EVENTS_PER_S:,} "
          f"({'meets' if ev_s >= AIM_EVENTS_PER_S else 'MISSES'}; per CPU second "
          f"{ev_cpu / AIM_EVENTS_PER_S:.3f})")
    if not a.no_live:
        live_h, n, wall = live_faults_per_hour(a.live_time)
        ratio = faults_h / live_h if live_h else float("inf")
        print(f"live campaign: {n} faults in {wall:.0f} s wall = {live_h:,.0f} faults/h")
        print(f"aim faults/h vs live: {ratio:.1f}x of {AIM_FAULT_RATIO:.0f}x "
              f"({'meets' if ratio >= AIM_FAULT_RATIO else 'MISSES'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
