"""Many campaign runs → answers, on Spark (`hiwater analyze`; see `pipeline`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness.analysis.spark import SparkUnavailable

__all__ = ["SparkUnavailable", "main"]


def main(stores: Sequence[Path], out: Path, master: str = "local[*]") -> int:
    """The command: analyse, write tables and index.html, print a summary. Exit 0 all runs
    analysed and equal to their results.json, 1 some verdict differs, 2 some runs could not be
    analysed (each named), 3 Spark unavailable or nothing to analyse."""
    from harness.analysis.page import render
    from harness.analysis.pipeline import analyze
    from harness.analysis.spark import session

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    try:
        spark = session(master, out)
    except SparkUnavailable as e:
        print(f"hiwater analyze: {e}", file=sys.stderr)
        return 3
    try:
        res = analyze(stores, out, spark)
    except Exception as e:  # Spark's own errors: one line here, the rest in spark.log
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print(f"hiwater analyze: failed: {type(e).__name__}: {msg} (see {out / 'spark.log'})",
              file=sys.stderr)
        return 3
    finally:
        spark.stop()
    for where, what in res.problems:
        print(f"skipped {where}: {what}", file=sys.stderr)
    for run, what in res.mismatches:
        print(f"MISMATCH {run}: {what}", file=sys.stderr)
    if res.runs == 0:
        print("hiwater analyze: no run to analyse", file=sys.stderr)
        return 3
    page = render(out, res.problems, res.mismatches)
    counts: dict[str, int] = {}
    for v in res.verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    print(f"{res.runs} run(s) analysed in {time.perf_counter() - t0:.1f} s: "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
          + f"; {len(res.problems)} skipped; {len(res.mismatches)} differ from results.json")
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in res.seconds.items()))
    print(f"tables: {out / 'tables'}  aggregates: {out / 'aggregates'}  page: {page}")
    return res.exit_code
