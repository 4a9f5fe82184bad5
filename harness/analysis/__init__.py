"""Many campaign runs → answers, on Spark (`hiwater analyze`; see `pipeline`)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.analysis.spark import SparkUnavailable

__all__ = ["ProgressLine", "SparkUnavailable", "main"]


class ProgressLine:
    """One live line on stderr (rich): the stage, its tasks done/total from Spark's status
    tracker, the time spent. Nothing when stderr is not a terminal (pipes and logs get the
    summary only)."""

    def __init__(self, t0: float) -> None:
        from rich.console import Console

        self.t0 = t0
        self.stage = ""
        self.tracker: Any = None
        self.console = Console(stderr=True)
        self.status: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.console.is_terminal:
            self.status = self.console.status("")
            self.status.start()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

    def _tasks(self) -> str:
        try:
            ids = self.tracker.getActiveStageIds() if self.tracker is not None else []
            infos = [self.tracker.getStageInfo(i) for i in ids]
            done = sum(i.numCompletedTasks for i in infos if i)
            total = sum(i.numTasks for i in infos if i)
        except Exception:  # the session is stopping: no counts
            return ""
        return f" — tasks {done}/{total}" if total else ""

    def _render(self) -> str:
        return f"[bold]analyze[/] {self.stage}{self._tasks()} " \
               f"[dim]({time.perf_counter() - self.t0:.0f} s)[/]"

    def _poll(self) -> None:
        while not self._stop.wait(0.5):  # bounded: ends with stop()
            if self.status is not None:
                self.status.update(self._render())

    def set(self, stage: str) -> None:
        self.stage = stage
        if self.status is not None:
            self.status.update(self._render())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.status is not None:
            self.status.stop()
            self.status = None


def main(stores: Sequence[Path], out: Path, master: str = "local[*]") -> int:
    """The command: analyse, write tables and index.html, print a summary. Exit 0 all runs
    analysed and equal to their results.json, 1 some verdict differs, 2 some runs could not be
    analysed (each named), 3 Spark unavailable or nothing to analyse."""
    from harness.analysis.page import render
    from harness.analysis.pipeline import analyze
    from harness.analysis.spark import session

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    line = ProgressLine(t0)
    line.set("spark: starting the session (" + master + ")")
    try:
        spark = session(master, out)
    except SparkUnavailable as e:
        line.stop()
        print(f"hiwater analyze: {e}", file=sys.stderr)
        return 3
    line.tracker = spark.sparkContext.statusTracker()
    try:
        res = analyze(stores, out, spark, progress=line.set)
    except Exception as e:  # Spark's own errors: one line here, the rest in spark.log
        line.stop()
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print(f"hiwater analyze: failed: {type(e).__name__}: {msg} (see {out / 'spark.log'})",
              file=sys.stderr)
        return 3
    finally:
        line.stop()
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
