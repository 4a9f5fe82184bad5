"""A campaign reports the replication settings its topics really had (issue #13): brokers
with min.insync.replicas=1, the workload's topics created with min.insync.replicas=3;
results.json `topic_settings` and report.html must say 3 (read back from the leaders'
GET /replicas), not the broker option. No faults, a few seconds of load: bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from broker.runtime.zkserver import INSTALL_HINT, zookeeper_installed
from harness.campaign import CampaignOptions, run_campaign

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_campaign_reports_the_topics_effective_settings(tmp_path: Path) -> None:
    if not zookeeper_installed():
        why = f"ZooKeeper (Debian package `zookeeper`) is not installed: {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    opts = CampaignOptions(
        name="topic-settings", store=tmp_path, time_limit_s=6.0, nemesis=("none",),
        min_insync_replicas=1, topic_configs={"min.insync.replicas": "3"},
        recovery_wait_s=1.0, final_time_limit_s=30.0, check_time_limit_s=20.0)
    result = run_campaign(opts)
    results = json.loads((result.run_dir / "results.json").read_text())
    assert "error" not in results, results.get("error")
    settings = results["topic_settings"]
    # the queue workload's topics (t0, t1, ...), nothing else (no __consumer_offsets)
    assert settings and all(t.startswith("t") for t in settings), settings
    for topic, s in settings.items():
        assert s["min_insync_replicas"] == 3, (topic, s)
        assert s["unclean_leader_election_enable"] is False, (topic, s)
        assert s["topic_config"] == {"min.insync.replicas": 3}, (topic, s)
        assert s["consistent"] and s["samples"] >= 1, (topic, s)
    assert result.verdict == "valid", result.bad
    report = (result.run_dir / "report.html").read_text()
    assert "Topic replication settings (as the leaders reported them)" in report
