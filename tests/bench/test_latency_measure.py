"""bench/broker_bench.py's half-load latency figures: the per-batch correction of the
delivery-report dispatch, and the median over paced runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import broker_bench as bb


def test_a_batch_is_acknowledged_at_its_first_report() -> None:
    # two batches of partition 0 (offsets 0-2, then 3-4 after partition 1's batch), the
    # reports of each served one callback after another: a record's latency grew with the
    # callbacks before it in its batch, and loses exactly that
    marks = [
        (10.000, 0, 0, 0.004), (10.001, 0, 1, 0.005), (10.002, 0, 2, 0.006),
        (10.003, 1, 0, 0.003),
        (10.010, 0, 3, 0.007), (10.0105, 0, 4, 0.0075),
    ]
    assert bb.batch_acked_ms(marks) == pytest.approx(sorted([4.0, 4.0, 4.0, 3.0, 7.0, 7.0]))


def test_a_gap_in_offsets_starts_a_new_batch() -> None:
    # offsets 0 and 2 of one partition in a row are two responses, not one batch
    assert bb.batch_acked_ms([(1.0, 0, 0, 0.002), (1.001, 0, 2, 0.003)]) == pytest.approx(
        [2.0, 3.0])


def run(p50: float, p99: float) -> bb.ProduceResult:
    lat = sorted([p50] * 60 + [p99] * 40)  # pct(.5) == p50 ... pct(.99) == p99
    return bb.ProduceResult(100, 1.0, lat, 0, acked_ms=[x - 0.25 for x in lat])


def test_paced_runs_report_the_median_run_and_the_range() -> None:
    runs = bb.PacedRuns([run(5.9, 99.5), run(5.4, 12.7), run(5.5, 131.5)])
    assert runs.pct(0.5) == 5.5
    assert runs.pct(0.99) == 99.5
    assert runs.span(0.5) == "5.4-5.9"
    assert runs.pct_acked(0.5) == pytest.approx(5.25)
