"""One verdict rule (`harness.checkers.policy.run_verdict`) for the campaign's results.json and
for `hiwater analyze`'s own check of the same history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.runs import check_run
from harness.analysis.synth import _lose_one
from harness.campaign import CampaignOptions, _conclude
from harness.checkers import check
from harness.checkers.policy import QueuePolicy, run_verdict
from harness.checkers.synthetic import queue_history
from harness.history import write_jsonl


def _checked(valid: Any, bad: list[str], lin: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"valid?": valid, "queue": {"bad_anomaly_types": bad}}
    if lin is not None:
        out["linearizable"] = {"valid?": lin}
    return out


@pytest.mark.parametrize(("checked", "facts", "want"), [
    (_checked(True, []), {}, ("valid", [])),
    (_checked(False, ["lost_write"]), {}, ("invalid", ["lost_write"])),
    (_checked(False, ["lost_write"]), {"error": "boom"}, ("unknown", [])),
    (_checked("unknown", []), {}, ("unknown", [])),
    (_checked(True, []), {"workload": {"final_complete": False}}, ("unknown", [])),
    (_checked(False, ["unseen"]), {"workload": {"final_complete": False}},
     ("invalid", ["unseen"])),
    (_checked(True, [], lin=False), {}, ("invalid", ["nonlinearizable"])),
    (_checked(True, []), {"probes": {"valid?": False}}, ("invalid", ["live-invariant"])),
    (_checked(True, []), {"probes": None, "workload": None}, ("valid", [])),
])
def test_run_verdict(checked: dict[str, Any], facts: dict[str, Any],
                     want: tuple[str, list[str]]) -> None:
    assert run_verdict(checked, facts) == want


@pytest.mark.parametrize(("lossy", "probes_ok"), [(False, True), (True, True), (False, False)])
def test_campaign_and_analysis_conclude_alike(tmp_path: Path, lossy: bool, probes_ok: bool
                                              ) -> None:
    """The campaign's `_conclude` on a run directory and the analysis' `check_run` on the same
    history and facts: the same verdict, bad types and exit code."""
    h = queue_history(300, seed=3, keys=3, concurrency=3)
    if lossy:
        import random

        h = _lose_one(h, random.Random(1))
    write_jsonl(h, tmp_path / "history.jsonl")
    facts = {"probes": {"valid?": probes_ok}, "workload": {"final_complete": True}}
    res = _conclude(CampaignOptions(report=False), tmp_path, dict(facts))
    recorded = json.loads((tmp_path / "results.json").read_text())
    mine = check_run(h, ["assign"], facts)
    assert (recorded["verdict"], sorted(recorded["bad"])) == (mine["verdict"],
                                                             json.loads(mine["bad"]))
    want = run_verdict(check(h, QueuePolicy.of(["assign"])), facts)
    assert (res.verdict, res.bad) == want
    assert res.exit_code == {"valid": 0, "invalid": 1, "unknown": 2}[res.verdict]
    assert res.verdict == ("invalid" if lossy or not probes_ok else "valid")
    assert (tmp_path / "history.parquet").exists()
