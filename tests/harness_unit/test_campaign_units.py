"""Campaign pieces that need no cluster: live invariant probes, run directories, options."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness.campaign import CampaignOptions, LiveProbe, new_run_dir
from harness.probe import CHECKED, project
from spec import invariants


def sample(broker: int, *, pid: int = 100, cepoch: int = 1,
           replicas: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"broker_id": broker, "pid": pid, "controller_epoch": cepoch,
            "replicas": replicas or []}


def rep(role: str, epoch: int, leo: int = 5, hw: int = 5, store: int | None = 5,
        topic: str = "t", partition: int = 0) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "role": role, "leader_epoch": epoch,
            "log_end_offset": leo, "high_watermark": hw, "store_log_end_offset": store}


def probe() -> LiveProbe:
    return LiveProbe(runtime=None, stop=threading.Event())


def names(p: LiveProbe) -> list[str]:
    return [v["invariant"] for v in p.violations]


def test_a_consistent_cluster_has_no_violations() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 3)]))
    p.check("n2", sample(2, replicas=[rep("follower", 3, hw=4)]))
    p.check("n1", sample(1, cepoch=2, replicas=[rep("follower", 4)]))
    p.check("n2", sample(2, cepoch=2, replicas=[rep("leader", 4)]))
    assert p.violations == []


def test_two_leaders_in_one_epoch() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 3)]))
    p.check("n2", sample(2, replicas=[rep("leader", 3)]))
    assert names(p) == ["single_leader_per_epoch"]


def test_hw_beyond_leo_and_core_disagreeing_with_the_store() -> None:
    p = probe()
    p.check("n1", sample(1, replicas=[rep("leader", 1, leo=3, hw=4, store=2)]))
    assert sorted(names(p)) == ["high_watermark_le_log_end", "log_end_matches_disk"]


def test_epochs_going_backwards_within_one_process_but_not_across_restarts() -> None:
    p = probe()
    p.check("n1", sample(1, cepoch=5, replicas=[rep("follower", 7)]))
    p.check("n1", sample(1, cepoch=4, replicas=[rep("follower", 6)]))
    assert sorted(names(p)) == ["controller_epoch_monotonic", "leader_epoch_monotonic"]
    q = probe()
    q.check("n1", sample(1, pid=1, cepoch=5, replicas=[rep("follower", 7)]))
    q.check("n1", sample(1, pid=2, cepoch=-1, replicas=[rep("follower", -1)]))  # restarted
    assert q.violations == []


def test_run_dirs_are_unique_and_latest_links_follow(tmp_path: Path) -> None:
    a = new_run_dir(tmp_path, "queue")
    b = new_run_dir(tmp_path, "queue")
    assert a != b and a.parent == b.parent == tmp_path / "queue"
    assert (tmp_path / "latest").resolve() == b.resolve()
    assert (tmp_path / "queue" / "latest").resolve() == b.resolve()


@pytest.mark.parametrize("bad", [
    {"workload": "nope"}, {"time_limit_s": 0}, {"bootstrap": "no-port"}, {"brokers": 0}])
def test_bad_options_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        CampaignOptions(**bad)


def test_safe_defaults() -> None:
    o = CampaignOptions()
    props = o.server_properties()
    assert (o.acks, o.idempotence, o.replication_factor) == ("all", True, 3)
    assert props["min.insync.replicas"] == "2"
    assert props["unclean.leader.election.enable"] == "false"
    assert o.nemesis == ("standard",)


def test_probe_reports_spec_invariants_by_name_with_their_own_sentence() -> None:
    """The probe projects a sample into spec's World and asks spec.invariants: a broken
    invariant is reported under its name in spec, with the sentence spec gives."""
    s = sample(2, replicas=[rep("leader", 1, leo=3, hw=4, store=3)])
    w = project(s, s["replicas"][0], with_disk=True)
    assert [n.alive for n in w.nodes] == [False, False, True]
    assert invariants.high_watermark_le_log_end(w) == "broker 2: HW 4 > LEO 3"
    assert invariants.log_end_matches_disk(w) is None  # the disk is as long as the store
    p = probe()
    p.check("n2", s)
    assert p.violations == [{"invariant": "high_watermark_le_log_end",
                             "why": "broker 2: HW 4 > LEO 3", "node": "n2", "tp": ["t", 0]}]
    assert {v["invariant"] for v in p.violations} <= set(invariants.NAMES)


def test_probe_checks_only_what_a_sample_can_decide() -> None:
    """A follower far behind a leader, a leader whose ISR names absent brokers: nothing a
    single sample can judge (log_matching, strong_isr need the records and ZooKeeper)."""
    p = probe()
    p.check("n1", sample(1, replicas=[dict(rep("leader", 2, leo=9, hw=9, store=9),
                                           isr=[1, 2, 3], replicas=[1, 2, 3], leader=1)]))
    p.check("n3", sample(3, replicas=[dict(rep("follower", 2, leo=1, hw=1, store=1),
                                           isr=[], replicas=[1, 2, 3], leader=1)]))
    assert p.violations == [] and p.samples == 0  # check() is not a sampling round
    assert set(invariants.NAMES) >= CHECKED


def test_a_conflicting_leader_claim_is_reported_once_per_new_claimant() -> None:
    p = probe()
    for node, b in (("n1", 1), ("n2", 2), ("n2", 2), ("n1", 1)):
        p.check(node, sample(b, replicas=[rep("leader", 3)]))
    p.check("n3", sample(3, replicas=[rep("leader", 4)]))  # a later epoch: no conflict
    assert names(p) == ["single_leader_per_epoch"]
    assert p.violations[0]["why"] == "leader epoch 3 was led by both broker 1 and 2"


def test_an_unreadable_sample_is_a_probe_format_violation() -> None:
    class OneNode:
        nodes = ("n1",)

        def replica_states(self, node: str, timeout_s: float = 2.0) -> dict[str, Any]:
            return {"broker_id": 1, "replicas": []}  # no controller_epoch

    p = LiveProbe(runtime=OneNode(), stop=threading.Event())  # type: ignore[arg-type]
    p.sample_all(["n1"])
    assert p.samples == 1 and names(p) == ["probe_format"]


def test_the_campaign_module_is_typed_without_any() -> None:
    """harness/campaign.py names no `typing.Any` (issue #11): the runtime, the nemesis
    package, the workloads' runs and results are typed, and mypy --strict (scripts/test)
    checks them end to end."""
    import ast

    import harness.campaign as campaign

    tree = ast.parse(Path(campaign.__file__).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert "Any" not in names | attrs | imported
