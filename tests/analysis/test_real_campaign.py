"""One real short local campaign (ZooKeeper, 3 brokers, kill + partition faults): it writes
history.parquet beside history.jsonl, and the analysis agrees with its results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.analysis.pipeline import analyze
from harness.campaign import CampaignOptions, run_campaign
from tests.campaign.test_campaign import _require_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_real_campaign_analysed(spark: Any, tmp_path: Path) -> None:
    _require_cluster()
    store = tmp_path / "store"
    opts = CampaignOptions(name="real", time_limit_s=15, seed=41, store=store,
                           nemesis=("partition", "kill"), report=False)
    result = run_campaign(opts)
    assert (result.run_dir / "history.parquet").exists()
    res = analyze([store], tmp_path / "out", spark)
    assert res.problems == [] and res.mismatches == []
    run_id = result.run_dir.relative_to(store).as_posix()
    assert res.verdicts == {run_id: result.verdict}
