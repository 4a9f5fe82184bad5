"""`hiwater campaign --repeat K`: K campaigns into one store, the seed +1 each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness import campaign
from harness.campaign import CampaignOptions
from harness.cli import app


def test_repeat_runs_k_campaigns_with_successive_seeds(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    seen: list[CampaignOptions] = []
    codes = iter([0, 1, 0])

    def fake_run(opts: CampaignOptions, progress: Any = None) -> Any:
        seen.append(opts)
        return campaign.CampaignResult(tmp_path, next(codes), "valid", [], {})

    monkeypatch.setattr(campaign, "run_campaign", fake_run)
    monkeypatch.setattr("harness.preflight.check_zookeeper", lambda: None)
    result = CliRunner().invoke(app, ["campaign", "--repeat", "3", "--seed", "10",
                                      "--store", str(tmp_path)])
    assert [o.seed for o in seen] == [10, 11, 12]
    assert {o.store for o in seen} == {tmp_path}
    assert result.exit_code == 1  # the worst run's code
