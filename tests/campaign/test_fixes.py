"""Regressions for the bugs the campaign tests found (no cluster; fast).

- core: a follower's lag timer that fires while an ISR write is in flight is re-armed, not
  dropped (afdb292): two followers cut off together both leave the ISR;
- nemesis: a disk fault on several nodes takes them all down before changing any disk (c8a6f45):
  `lose-unflushed` of `all` is a correlated power failure;
- campaign: the per-run log handler leaves the root logger when the run ends (d92b8a4);
- the campaign options the recipes use (docs/recipes.md): node targets for the node faults,
  scripted scenarios and how they pick their victims.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest

from core import effects as fx
from core import events as ev
from core.config import ProtocolConfig
from core.node import replica, step
from core.timers import ReplicaLagTimer
from harness import campaign
from harness.campaign import SCENARIOS, CampaignOptions, _package, _victims
from nemesis.executor import execute
from nemesis.faults import KillNode, LoseUnflushed, WipeDisk
from nemesis.packages import plan
from tests.core.test_replica import TP, leader_and_isr, registered
from tests.nemesis_faults.fake_runtime import FakeRuntime


def test_second_lagging_follower_leaves_the_isr_after_a_write_in_flight() -> None:
    cfg = ProtocolConfig()
    s, _ = step(registered(0), leader_and_isr(0, 0, (0, 1, 2)))
    s, _ = step(s, ev.ProduceReceived(7, TP, -1, 1, b"x"))  # followers 1 and 2 never fetch it
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 1)))
    writes = [e for e in out if isinstance(e, fx.ZkWritePartitionState)]
    assert [w.proposed.isr for w in writes] == [(0, 2)]
    # follower 2's timer fires while that shrink is in flight: looked at again later
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 2)))
    assert fx.SetTimer(ReplicaLagTimer(TP, 2), cfg.replica_lag_time_max_ms // 2) in out
    s, _ = step(s, ev.PartitionStateWritten(TP, writes[0].proposed, False, True, False, None))
    s, out = step(s, ev.TimerFired(ReplicaLagTimer(TP, 2)))
    assert [e.proposed.isr for e in out if isinstance(e, fx.ZkWritePartitionState)] == [(0,)]
    r = replica(s, TP)
    assert r is not None and r.isr == (0, 2) and r.pending_isr == (0,)


@pytest.mark.parametrize("fault, what", [(LoseUnflushed(("n1", "n3")), "lose-unflushed"),
                                         (WipeDisk("all"), "wipe")])
def test_disk_fault_on_several_nodes_is_one_correlated_failure(fault: Any, what: str) -> None:
    rt = FakeRuntime()
    value = execute(fault, rt, random.Random(0))
    nodes = sorted(value)
    assert "error" not in str(value)
    assert rt.calls == ([("kill", n) for n in nodes] + [(what, n) for n in nodes]
                        + [("start", n) for n in nodes])


def test_run_log_handler_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before = list(root.handlers)

    def no_main_phase(*_a: Any) -> None:
        raise RuntimeError("no cluster in this test")

    monkeypatch.setattr(campaign, "_runtime", no_main_phase)
    r = campaign.run_campaign(CampaignOptions(store=tmp_path, report=False))
    assert r.exit_code == campaign.EXIT_ERROR
    assert root.handlers == before


def test_options_validate_targets_and_scenarios() -> None:
    with pytest.raises(ValueError):
        CampaignOptions(nemesis_targets=("nobody",))
    with pytest.raises(ValueError):
        CampaignOptions(scenario="no-such-scenario")
    for name in SCENARIOS:
        runtime = "docker" if name == "slow-follower" else "local"  # a proxy link per pair
        opts = CampaignOptions(scenario=name, runtime=runtime)
        assert _package(opts).name == f"scenario:{name}"
    with pytest.raises(ValueError, match="needs --runtime docker"):
        CampaignOptions(scenario="slow-follower")
    # defaults: the same package as before the options existed
    assert _package(CampaignOptions()).name == "partition+kill+pause"


def test_nemesis_targets_aim_the_node_faults() -> None:
    pkg = _package(CampaignOptions(nemesis=("partition", "kill"), nemesis_targets=("leader",),
                                   nemesis_interval_s=1.0))
    kills = [f for _, f in plan(pkg, 7, 30.0) if isinstance(f, KillNode)]
    assert kills and {k.targets for k in kills} == {"leader"}
    assert {f.f for _, f in plan(pkg, 7, 30.0)} >= {"start-partition", "kill"}


class _States(FakeRuntime):
    """Replica states of one partition t0-0 led by n1 (assignment 1, 2, 3)."""

    def __init__(self, hws: dict[int, int], leos: dict[int, int]) -> None:
        super().__init__(controller="n3")
        self.hws, self.leos = hws, leos

    def replica_states(self, node: str, timeout_s: float = 2.0) -> dict[str, Any]:
        b = int(node[1:])
        return {"replicas": [{
            "topic": "t0", "partition": 0, "role": "leader" if b == 1 else "follower",
            "leader": 1, "leader_epoch": 3, "isr": [1, 2, 3], "replicas": [1, 2, 3],
            "high_watermark": self.hws[b], "log_end_offset": self.leos[b]}]}


def test_victims_are_the_pair_that_exposes_committed_records() -> None:
    rt = _States(hws={1: 10, 2: 9, 3: 7}, leos={1: 10, 2: 10, 3: 10})
    # n2 succeeds n1; n3 (the third replica) would truncate to its HW 7 under truncate_to_hw
    assert _victims(rt, "t", "crash-leader-then-successor") == {
        "X": "n1", "Y": "n2", "partitions": 1, "exposed": 3}
    # the successor n2 leads with HW 9 while Y (n3, the controller here) stays in its ISR:
    # Y may not be the controller, so nothing qualifies
    assert _victims(rt, "t", "crash-leader-then-follower")["partitions"] == 0
    rt.ctrl = "n2"
    assert _victims(rt, "t", "crash-leader-then-follower") == {
        "X": "n1", "Y": "n3", "partitions": 1, "exposed": 1}
    rt = _States(hws={1: 12, 2: 9, 3: 9}, leos={1: 12, 2: 10, 3: 9})
    assert _victims(rt, "t", "isolated-leaders-crash") == {
        "X": "n1", "partitions": 1, "exposed": 2}


def test_every_documented_recipe_command_parses(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """docs/recipes.md's `hiwater campaign ...` lines give the options the live test runs."""
    import shlex

    from typer.testing import CliRunner

    from harness.cli import app
    from tests.campaign.test_campaign import RECIPES

    seen: list[CampaignOptions] = []

    def fake_run(opts: CampaignOptions, progress: Any = None) -> Any:
        seen.append(opts)
        return campaign.CampaignResult(tmp_path, 0, "valid", [], {})

    monkeypatch.setattr(campaign, "run_campaign", fake_run)
    doc = (Path(__file__).parents[2] / "docs" / "recipes.md").read_text()
    commands = [ln.strip() for ln in doc.splitlines()
                if ln.startswith("    uv run hiwater campaign ")]
    assert len(commands) == len(RECIPES)
    for cmd in commands:
        args = shlex.split(cmd)[3:]  # after `uv run hiwater`
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (cmd, result.output)
    # the same faults and switches as the live test's recipes, in the same order
    for opts, recipe in zip(seen, RECIPES, strict=True):
        for key, value in recipe.opts.items():
            if key not in ("final_time_limit_s", "time_limit_s"):
                assert getattr(opts, key) == value, (recipe.name, key)
