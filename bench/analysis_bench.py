"""`hiwater analyze` end to end on Spark local[N] next to the single-process checker looping
over the same runs, measured in the same run; prints the scale, the machine's load and the
ratios.

    uv run python bench/analysis_bench.py                  # 24 runs x 2,000 ops, local[2]
    nice -n 10 uv run python bench/analysis_bench.py --runs 1000 --ops 10000 --distinct 100 \\
        --cores 2,1 --store /tmp/bench-store         # the issue's scale (the store is kept)

The store is synthetic (harness.analysis.synth: four configurations, three of them losing a
write, four fault mixes; results.json from the real checker). Half the runs keep only
history.jsonl, so the analysis converts them on first use as it does for old runs (timed
apart; the loops then read the same Parquet files). `--distinct D` generates D runs and
copies them to the rest (same seed, same history, each still analysed as its own run): the
checker makes each results.json, so generating 1,000 x 10,000 distinct runs takes hours here.

Two single-process loops over the same runs:
- `check loop`: `harness.checkers.check` on each run's decoded `Op`s with the campaign's
  verdict rule — what `hiwater check` and a campaign do per run (the baseline of the issue);
  `--loop-sample N` times it on N runs spread over the store and scales the time to all runs
  (it is linear in runs; on a busy machine the whole loop would take an hour);
- `task loop`: the function each Spark task runs per run (`runs.analyse_table`: the same
  checkers from the file's int columns, plus fault windows, latencies and unseen decay), in
  one process: Spark's own overhead and parallel gain are what lies between it and analyze.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--distinct", type=int, default=None)
    ap.add_argument("--cores", default="2", help="executor cores to try: local[N] each")
    ap.add_argument("--master", default=None, help="a Spark master instead of local[N]")
    ap.add_argument("--store", type=Path, default=None,
                    help="build the store here once and reuse it (copied for each run)")
    ap.add_argument("--in-place", action="store_true",
                    help="analyse --store itself (its JSONL-only runs stay converted)")
    ap.add_argument("--skip-task-loop", action="store_true")
    ap.add_argument("--loop-sample", type=int, default=None,
                    help="time the check loop on N runs spread over the store (every "
                         "len/N-th) and extrapolate its total (on a busy machine: the "
                         "loop is linear in runs)")
    ap.add_argument("--spark-first", action="store_true",
                    help="Spark before the loops (at a large scale: its figure comes first)")
    a = ap.parse_args()

    import pyarrow.parquet as pq

    from harness.analysis.pipeline import analyze, discover
    from harness.analysis.runs import analyse_table, check_run
    from harness.analysis.spark import session
    from harness.analysis.synth import make_store
    from harness.history import read_parquet

    print(f"cpus {os.cpu_count()}, load {_load()} at start")
    with tempfile.TemporaryDirectory(prefix="hiwater-bench-") as tmp:
        store = Path(tmp) / "store"
        t = time.perf_counter()
        if a.store is not None and (a.store / "done").exists() and a.in_place:
            store = a.store
            how = f"used in place at {a.store}"
        elif a.store is not None and (a.store / "done").exists():
            shutil.copytree(a.store, store, ignore=shutil.ignore_patterns("done"))
            how = f"copied from {a.store}"
        else:
            make_store(a.store or store, a.runs, a.ops, distinct=a.distinct, workers=2)
            if a.store is not None:
                (a.store / "done").write_text("")
                shutil.copytree(a.store, store, ignore=shutil.ignore_patterns("done"))
            how = "built"
        print(f"scale: {a.runs} runs x {a.ops:,} ops, {a.distinct or a.runs} distinct "
              f"(store {how} in {time.perf_counter() - t:.1f} s)")

        t = time.perf_counter()
        infos, problems = discover([store])
        t_conv = time.perf_counter() - t
        assert not problems, problems
        print(f"conversion of the JSONL-only runs to Parquet (first analysis): {t_conv:.1f} s")

        loop_infos = infos
        if a.loop_sample and a.loop_sample < len(infos):
            loop_infos = infos[::max(1, len(infos) // a.loop_sample)][:a.loop_sample]

        def check_loop() -> None:
            t = time.perf_counter()
            for n, i in enumerate(loop_infos, 1):
                assert i.history is not None
                base[i.run_id] = check_run(read_parquet(i.history), ["assign"],
                                           i.results)["verdict"]
                if n % 100 == 0 and n < len(loop_infos):
                    el = time.perf_counter() - t
                    print(f"  check loop: {n} runs in {el:.1f} s ({el / n:.3f} s/run), "
                          f"load {_load()}", flush=True)
            took = time.perf_counter() - t
            times["check loop"] = took * len(infos) / len(loop_infos)
            sampled = ("" if len(loop_infos) == len(infos) else
                       f" (extrapolated from {len(loop_infos)} runs in {took:.1f} s)")
            print(f"check loop (single process): {times['check loop']:.1f} s{sampled} "
                  f"({took / len(loop_infos):.3f} s/run), load {_load()}", flush=True)
            if not a.skip_task_loop:
                t = time.perf_counter()
                for i in loop_infos:
                    row = analyse_table(pq.read_table(str(i.history)), ["assign"], i.results)[0]
                    assert row["verdict"] == base[i.run_id], i.run_id
                times["task loop"] = time.perf_counter() - t
                print(f"task loop (single process): {times['task loop']:.1f} s "
                      f"({times['task loop'] / len(infos):.3f} s/run), load {_load()}",
                      flush=True)

        def spark_runs() -> None:
            masters = [a.master] if a.master else [f"local[{n}]" for n in a.cores.split(",")]
            for m in masters:
                out = Path(tmp) / f"out-{len(figures)}"
                t = time.perf_counter()
                spark = session(m, out, shuffle_partitions=4)
                t_start = time.perf_counter() - t
                t = time.perf_counter()
                res = analyze([store], out, spark)
                t_an = time.perf_counter() - t
                spark.stop()
                assert not res.mismatches and not res.problems, (res.mismatches[:5],
                                                                 res.problems[:5])
                verdicts[m] = res.verdicts
                figures[m] = t_an
                print(f"spark {m}: startup {t_start:.1f} s, analyze {t_an:.1f} s "
                      f"(every table and aggregate), load {_load()}")
                print("  phases: " + ", ".join(f"{k} {v:.1f}" for k, v in res.seconds.items()))
                print("  verdicts and anomaly sets equal to results.json", flush=True)
            if len(figures) > 1:
                ms = list(figures)
                print("scaling: " + ", ".join(f"{m} {figures[m]:.1f} s" for m in ms)
                      + f"; {ms[-1]} / {ms[0]} = {figures[ms[-1]] / figures[ms[0]]:.2f}")

        base: dict[str, str] = {}
        times: dict[str, float] = {}
        verdicts: dict[str, dict[str, str]] = {}
        figures: dict[str, float] = {}
        if a.spark_first:
            spark_runs()
            check_loop()
        else:
            check_loop()
            spark_runs()
        t_base = times["check loop"]
        for m, v in verdicts.items():
            assert {r: v[r] for r in base} == base, m
            print(f"ratio analyze {m} / check loop: {figures[m] / t_base:.2f}")
        if "task loop" in times:
            print(f"ratio task loop / check loop: {times['task loop'] / t_base:.2f}")
        print(json.dumps({"runs": a.runs, "ops": a.ops, "check_loop_s": round(t_base, 1),
                          "analyze_s": {m: round(v, 1) for m, v in figures.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
