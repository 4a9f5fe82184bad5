"""The per-run work a Spark task does (`runs.analyse_table`, from the history file's columns)
equals the reference functions on the decoded `Op`s: the checker row (`check_run`, what
`hiwater check` and the campaign compute), fault windows, paired ops and unseen decay."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from harness.analysis import ProgressLine
from harness.analysis.pipeline import partition_dir
from harness.analysis.runs import (
    analyse_table,
    check_run,
    fault_rows,
    op_rows,
    ops_of_table,
    unseen_decay_columns,
    unseen_decay_ops,
)
from harness.analysis.synth import CONFIGS, _lose_one, _with_faults, write_run
from harness.checkers.columnar import from_arrow_table, write_columnar
from harness.checkers.synthetic import queue_history
from harness.history import INFO, Op, from_arrow, read_jsonl, write_parquet


def _both(run: Path) -> list[Path]:
    """The run's history as a plain Parquet and as a columnar one."""
    h = read_jsonl(run / "history.jsonl")
    write_parquet(h, run / "plain.parquet")
    write_columnar(h, run / "columnar.parquet")
    return [run / "plain.parquet", run / "columnar.parquet"]


@pytest.mark.parametrize(("config", "faults"), [
    (CONFIGS[0], ("partition", "kill")), (CONFIGS[1], ("kill",)), (CONFIGS[3], ()),
    (CONFIGS[2], ("pause", "partition"))])
def test_analyse_table_equals_the_reference(tmp_path: Path, config: Any, faults: Any) -> None:
    run = write_run(tmp_path, "c", "r", seed=7, n_ops=800, config=config, faults=faults)
    results = json.loads((run / "results.json").read_text())
    for path in _both(run):
        table = pq.read_table(path)
        h = from_arrow(table)
        assert ops_of_table(table) == h
        row, win, lat, unseen = analyse_table(table, ["assign"], results)
        assert row == check_run(h, ["assign"], results)
        assert row["verdict"] == results["verdict"]
        assert json.loads(row["anomaly_types"]) == sorted(results["queue"]["anomaly_types"])
        ws = fault_rows(h)
        assert [dict(zip(win, x, strict=True)) for x in zip(*win.values(), strict=True)] == ws
        ol = op_rows(h, ws)
        assert {k: list(v) for k, v in lat.items()} == ol
        heal = max((w["end_ns"] for w in ws), default=h[0].time_ns)
        assert (unseen["after_heal_s"], unseen["unseen"]) == unseen_decay_ops(
            h, heal, h[-1].time_ns)


def test_unseen_decay_columns_equal_the_report_series(tmp_path: Path) -> None:
    h = queue_history(1500, seed=3, keys=4, concurrency=4)
    h = _with_faults(_lose_one(h, random.Random(2)), ["kill"], random.Random(2))
    write_columnar(h, tmp_path / "h.parquet")
    cols = from_arrow_table(pq.read_table(tmp_path / "h.parquet"))
    got = unseen_decay_columns(cols, h[0].time_ns, h[-1].time_ns)
    assert got == unseen_decay_ops(h, h[0].time_ns, h[-1].time_ns)
    assert got[1][-1] > 0  # the lost write stays unseen


def test_ops_with_extra_keys_decode_alike(tmp_path: Path) -> None:
    h = queue_history(200, seed=1, keys=2, concurrency=2)
    h = [op._replace(extra={"error": "timeout", "time": 5}) if op.type == INFO else op
         for op in h] + [Op(len(h), h[-1].time_ns + 1, "nemesis", INFO, "kill", ["n1"])]
    write_parquet(h, tmp_path / "h.parquet")
    table = pq.read_table(tmp_path / "h.parquet")
    assert ops_of_table(table) == from_arrow(table)


def test_partition_dir_escapes_as_spark() -> None:
    assert partition_dir("run", "20260101T000000.000000Z") == "run=20260101T000000.000000Z"
    assert partition_dir("run", "a:b/c=d %") == "run=a%3Ab%2Fc%3Dd %25"


class _Stage:
    def __init__(self, done: int, total: int) -> None:
        self.numCompletedTasks, self.numTasks = done, total


class _Tracker:
    def getActiveStageIds(self) -> list[int]:
        return [1, 2]

    def getStageInfo(self, i: int) -> _Stage:
        return _Stage(i, 4)


def test_progress_line_shows_stage_and_tasks() -> None:
    line = ProgressLine(time.perf_counter())
    line.tracker = _Tracker()
    line.stage = "check runs: 8 runs"
    text = line._render()
    line.stop()
    assert "check runs: 8 runs" in text and "tasks 3/8" in text


def test_register_history_goes_to_check_whole(tmp_path: Path) -> None:
    from harness.checkers.synthetic import register_history

    h = register_history(300, seed=4)
    write_parquet(h, tmp_path / "h.parquet")
    table = pq.read_table(tmp_path / "h.parquet")
    facts = {"probes": {"valid?": True}, "workload": {"final_complete": True}}
    row = analyse_table(table, ["assign"], facts)[0]
    assert row == check_run(h, ["assign"], facts)
    assert row["linearizable"] in ("true", "false", "unknown")
