"""Two real short local campaigns (ZooKeeper, 3 brokers): a safe one under kill + partition
faults and an unsafe one (acks=1 without idempotence, the leader killed while its followers
lag). Each writes history.parquet beside history.jsonl; one analysis of the store gives each
run's verdict and anomaly set equal to its results.json (the single-process checker's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis.pipeline import analyze
from harness.analysis.runs import recorded_check
from harness.campaign import CampaignOptions, run_campaign
from tests.campaign.test_campaign import LAGGING_FOLLOWERS, _require_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_real_campaigns_analysed(spark: Any, tmp_path: Path) -> None:
    _require_cluster()
    store = tmp_path / "store"
    safe = run_campaign(CampaignOptions(
        name="safe", time_limit_s=15, seed=41, store=store, nemesis=("partition", "kill"),
        recovery_wait_s=3.0, report=False))
    unsafe = run_campaign(CampaignOptions(
        name="unsafe", time_limit_s=20, seed=42, store=store, acks="1", idempotence=False,
        nemesis=("kill",), target_leader=True, nemesis_targets=("leader",),
        nemesis_interval_s=3.0, broker_overrides=LAGGING_FOLLOWERS, recovery_wait_s=3.0,
        final_time_limit_s=8.0, report=False))
    for r in (safe, unsafe):
        assert (r.run_dir / "history.parquet").exists()
    for r in (safe, unsafe):
        # the columnar fast path's full result on the real history (clean or lossy) is the
        # Op-based reference's, condensed and with all errors
        from harness.checkers import columnar, queue
        from harness.history import read_parquet

        p = r.run_dir / "history.parquet"
        for all_errors in (False, True):
            ref = queue.check(read_parquet(p), fast=False, all_errors=all_errors)
            got = columnar.check_file(p, all_errors=all_errors)
            assert json.dumps(got, sort_keys=True, default=repr) == json.dumps(
                ref, sort_keys=True, default=repr)
    res = analyze([store], tmp_path / "out", spark)
    assert res.problems == [] and res.mismatches == []
    ids = {r.run_dir.relative_to(store).as_posix(): r for r in (safe, unsafe)}
    assert res.verdicts == {i: r.verdict for i, r in ids.items()}
    checks = pd.read_parquet(tmp_path / "out" / "tables" / "checks")
    for i, r in ids.items():
        want = recorded_check(json.loads((r.run_dir / "results.json").read_text()))
        got = checks[checks["run_id"] == i].iloc[0]
        assert json.loads(got["anomaly_types"]) == want["anomaly_types"]
        assert json.loads(got["bad"]) == want["bad"]
        assert json.loads(got["counts"]) == want["counts"]
    runs = pd.read_parquet(tmp_path / "out" / "tables" / "runs")
    assert set(runs["acks"]) == {"all", "1"}
