"""The replication settings a campaign reads back from the brokers' GET /replicas, as they go
to results.json (`topic_settings`) and the report."""

from __future__ import annotations

import threading
from typing import Any

from harness.campaign import CampaignOptions, LiveProbe, _workload_topic
from harness.report.page import render_html
from harness.topic_settings import TopicSettings, sample_cluster


def row(topic: str, role: str = "leader", min_isr: int = 3, unclean: bool = False,
        overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"topic": topic, "partition": 0, "role": role, "leader_epoch": 1,
            "log_end_offset": 0, "high_watermark": 0, "store_log_end_offset": 0,
            "min_insync_replicas": min_isr, "unclean_leader_election_enable": unclean,
            "topic_config": overrides if overrides is not None else {"min.insync.replicas": 3}}


def sample(broker: int, *rows: dict[str, Any]) -> dict[str, Any]:
    return {"broker_id": broker, "pid": 1, "controller_epoch": 1, "replicas": list(rows)}


def test_only_leaders_of_wanted_topics_count() -> None:
    ts = TopicSettings(lambda t: t.startswith("t"))
    ts.add(sample(1, row("t0"), row("t1", min_isr=2, overrides={}),
                  row("__consumer_offsets", min_isr=1)))
    # a follower (or a restarted replica before its LeaderAndIsr) does not count
    ts.add(sample(2, row("t0", role="none", min_isr=1, overrides={})))
    ts.add(sample(3, row("t0"), row("other")))
    out = ts.result()
    assert sorted(out) == ["t0", "t1"]
    assert out["t0"] == {"min_insync_replicas": 3, "unclean_leader_election_enable": False,
                         "topic_config": {"min.insync.replicas": 3}, "leaders": [1, 3],
                         "samples": 2, "consistent": True}
    assert out["t1"]["min_insync_replicas"] == 2 and out["t1"]["topic_config"] == {}


def test_values_that_differed_are_all_shown() -> None:
    ts = TopicSettings(lambda t: True)
    ts.add(sample(1, row("t0", min_isr=1, overrides={})))
    ts.add(sample(2, row("t0", min_isr=3)))
    out = ts.result()["t0"]
    assert out["min_insync_replicas"] == [1, 3] and not out["consistent"]
    assert out["topic_config"] == [{}, {"min.insync.replicas": 3}]


def test_old_brokers_without_the_fields_are_skipped() -> None:
    ts = TopicSettings(lambda t: True)
    ts.add({"broker_id": 1, "replicas": [{"topic": "t0", "role": "leader"}]})
    assert not ts and ts.result() == {}


def test_the_live_probe_collects_and_the_workload_filter_applies() -> None:
    p = LiveProbe(runtime=None, stop=threading.Event())
    p.settings.wanted = _workload_topic(CampaignOptions())
    p.check("n1", sample(1, row("t0"), row("__consumer_offsets")))
    assert list(p.settings.result()) == ["t0"] and not p.violations
    reg = _workload_topic(CampaignOptions(workload="register"))
    assert reg("jepsen-register") and not reg("t0")


class _Runtime:
    nodes = ("n1", "n2")

    def replica_states(self, node: str, timeout_s: float) -> dict[str, Any]:
        if node == "n2":
            raise OSError("down")
        return sample(1, row("t0"))


def test_sample_cluster_skips_nodes_that_do_not_answer() -> None:
    ts = TopicSettings(lambda t: True)
    assert sample_cluster(_Runtime(), ts) == 1
    assert ts.result()["t0"]["min_insync_replicas"] == 3


def test_campaign_options_carry_topic_configs() -> None:
    opts = CampaignOptions(topic_configs={"min.insync.replicas": "3"})
    assert opts.to_json()["topic_configs"] == {"min.insync.replicas": "3"}
    from harness.campaign import _queue_opts

    assert dict(_queue_opts(opts).topic_configs) == {"min.insync.replicas": "3"}


def test_the_report_shows_the_settings_read_back() -> None:
    ts = TopicSettings(lambda t: True)
    ts.add(sample(1, row("t0"), row("t1", min_isr=1, unclean=True, overrides={
        "unclean.leader.election.enable": True})))
    ts.add(sample(2, row("t1", min_isr=2, unclean=True, overrides={})))
    text = render_html([], {"valid?": True, "verdict": "valid",
                            "topic_settings": ts.result()})
    assert "Topic replication settings (as the leaders reported them)" in text
    assert "<td>t0</td><td>3</td><td>false</td>" in text.replace("\n", "")
    assert "differed:" in text
    assert "Topic replication settings" not in render_html([], {"verdict": "valid"})
