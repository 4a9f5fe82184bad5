"""`hiwater analyze` end to end on Spark local[*] next to the single-process checker looping
over the same runs, measured in the same run; prints the scale used and the ratio.

    uv run python bench/analysis_bench.py                  # 24 runs x 2,000 ops
    uv run python bench/analysis_bench.py --runs 1000 --ops 10000 --master local[*]   # the issue's

The store is synthetic (harness.analysis.synth: four configurations, two of them losing
writes, four fault mixes; results.json from the real checker). Half the runs keep only
history.jsonl, so the analysis converts them on first use as it does for old runs; the
baseline reads the same history files (Parquet where there is one) and runs
`harness.checkers.check` with the campaign's verdict rule, one run after another.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--master", default="local[*]")
    a = ap.parse_args()

    from harness.analysis.pipeline import analyze, discover
    from harness.analysis.runs import check_run
    from harness.analysis.spark import session
    from harness.analysis.synth import make_store
    from harness.history import read_parquet

    with tempfile.TemporaryDirectory(prefix="hiwater-bench-") as tmp:
        store = Path(tmp) / "store"
        t = time.perf_counter()
        make_store(store, a.runs, a.ops)
        print(f"scale: {a.runs} runs x {a.ops:,} ops (synthetic store built in "
              f"{time.perf_counter() - t:.1f} s)")

        # baseline: the single-process checker over the same runs (after the JSONL→Parquet
        # conversion, which discover() does once and the Spark run then reuses)
        t = time.perf_counter()
        infos, problems = discover([store])
        t_conv = time.perf_counter() - t
        assert not problems, problems
        t = time.perf_counter()
        base = {}
        for i in infos:
            assert i.history is not None
            base[i.run_id] = check_run(read_parquet(i.history), ["assign"], i.results)["verdict"]
        t_base = time.perf_counter() - t
        print(f"conversion of {sum(1 for _ in store.rglob('history.parquet'))} histories "
              f"to Parquet (first analysis): {t_conv:.1f} s")
        print(f"single-process checker loop: {t_base:.1f} s ({t_base / len(infos):.2f} s/run)")

        t = time.perf_counter()
        spark = session(a.master, Path(tmp) / "out", shuffle_partitions=4)
        t_start = time.perf_counter() - t
        t = time.perf_counter()
        res = analyze([store], Path(tmp) / "out", spark)
        t_an = time.perf_counter() - t
        cores = os.cpu_count()
        spark.stop()
        assert res.verdicts == base and not res.mismatches, res.mismatches
        print(f"spark {a.master} ({cores} cpus, load {os.getloadavg()[0]:.1f}): "
              f"startup {t_start:.1f} s, analyze {t_an:.1f} s "
              f"(all tables and aggregates; the checks stage, one task per run, "
              f"{res.seconds.get('checks', 0):.1f} s)")
        print("phases: " + ", ".join(f"{k} {v:.1f}" for k, v in res.seconds.items()))
        print(f"ratio analyze / single-process loop: {t_an / t_base:.2f} "
              f"(with startup {(t_an + t_start) / t_base:.2f}); verdicts equal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
