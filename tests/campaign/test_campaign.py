"""`hiwater campaign` end to end: `harness.campaign.run_campaign` on a local 3-broker cluster
with real confluent-kafka clients, the way `hiwater campaign ...` runs it (docs/recipes.md).

Safe configuration (acks=all, RF 3, min.insync.replicas 2, unclean election off, idempotent
producers): no anomaly outside the policy (exit 0, final reads complete) under the standard
mix (partitions, kills, pauses, overlapping), under disk wipes of one node at a time, and under
corrupted segments of one stopped node at a time (it rejoins and fetches again).

Sensitivity (each a recipe of docs/recipes.md; exit 1 with the anomaly it must find):

- acks=1, kills of the partition leader (followers fetching in 2 s batches): lost writes;
- unclean election with min.insync.replicas=1, brokers cut from each other (ZooKeeper kept)
  until each leader is alone in its ISR, then the busiest leader crashes: lost writes;
- lose-unflushed of all brokers at once (a power failure, nothing fsynced): lost writes;
- `--bug truncate_to_hw`, scenario crash-leader-then-successor: lost writes;
- `--bug offsets_before_epoch_start`, register workload, scenario crash-leader-then-follower:
  a stale read (not linearizable). This one needs a client read to land in a ~6 s window on
  the key of the records the new leader's high watermark does not cover yet: one campaign
  found it in 10 of 12 tries here (about half as often with a 4 s ZooKeeper session), so
  the test retries it up to 3 times.

Every campaign must write results.json and report.html. The campaigns run one after another
in this one test (each starts its own ZooKeeper and brokers; the suite runs under pytest-xdist,
and separate tests could land on different workers and overlap). Measured here on a heavily
loaded 2-core machine: 30-40 s per campaign, 235-267 s for the whole test (with one retry).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.runtime.zkserver import INSTALL_HINT, zookeeper_installed
from harness.campaign import EXIT_INVALID, EXIT_VALID, CampaignOptions, run_campaign
from harness.runtime.netfilter import cgroup_unavailable_reason, unavailable_reason

pytestmark = pytest.mark.slow

LOSS = frozenset({"lost_write", "unseen", "inconsistent_offsets", "truncated_write"})
COMMON: dict[str, Any] = {"recovery_wait_s": 3.0, "check_time_limit_s": 30.0}
SAFE_FINAL_S = 40.0  # the final reads must finish: a safe campaign that cannot is "unknown"
LOSSY_FINAL_S = 8.0  # after a loss the final reads cannot reach the lost offsets: bounded
# followers fetch in ~2 s batches, so a leader holds acks=1 writes its followers lack
LAGGING_FOLLOWERS = {"replica.fetch.min.bytes": "1000000", "replica.fetch.wait.max.ms": "2000"}


@dataclass(frozen=True)
class Recipe:
    name: str
    expect: str  # "valid" | "loss" | "nonlinearizable"
    opts: dict[str, Any]
    # nemesis fs that must have happened (a completion without error) during the run
    faults: frozenset[str] = frozenset()
    attempts: int = 1


RECIPES = (
    Recipe("safe-standard", "valid", {
        "nemesis": ("standard",), "nemesis_interval_s": 3.0, "time_limit_s": 25.0,
        "final_time_limit_s": SAFE_FINAL_S},
        frozenset({"start-partition", "kill", "pause"})),
    Recipe("safe-wipe-one", "valid", {
        "nemesis": ("wipe",), "nemesis_interval_s": 5.0, "time_limit_s": 20.0,
        "final_time_limit_s": SAFE_FINAL_S},
        frozenset({"wipe"})),
    # issue #16's replicated safety as a campaign: a broker is killed, a closed segment of
    # its data dir corrupted while it is down, and it starts again: it truncates at the
    # damage, rejoins as a follower and fetches the rest again; nothing acknowledged is lost
    Recipe("safe-corrupt-one", "valid", {
        "nemesis": ("corrupt",), "nemesis_interval_s": 5.0, "time_limit_s": 20.0,
        "final_time_limit_s": SAFE_FINAL_S},
        frozenset({"corrupt"})),
    Recipe("acks-1-leader-kills", "loss", {
        "acks": "1", "idempotence": False, "nemesis": ("kill",), "target_leader": True,
        "nemesis_targets": ("leader",), "nemesis_interval_s": 3.0, "time_limit_s": 20.0,
        "broker_overrides": LAGGING_FOLLOWERS, "final_time_limit_s": LOSSY_FINAL_S},
        frozenset({"kill"})),
    # One try: when the unclean election truncates a key that nobody writes again, the final
    # reads confirm the partition's end below the offsets seen and stop there, and the checker
    # reports the truncated writes (before, they waited for an offset that no longer existed
    # and the run ended "unknown": seen once in CI, key 8's five acknowledged records gone)
    Recipe("unclean-min-isr-1", "loss", {
        "min_insync_replicas": 1, "unclean_leader_election": True,
        "scenario": "isolated-leaders-crash", "nemesis_interval_s": 8.0, "time_limit_s": 20.0,
        "final_time_limit_s": LOSSY_FINAL_S},
        frozenset({"start-partition", "kill"})),
    # A second try: when the fault lands before anything was flushed, every record is gone
    # and the final reads, finding no offsets to reach, end "unknown" (seen once in CI).
    Recipe("lose-unflushed-all", "loss", {
        "nemesis": ("lose-unflushed",), "nemesis_targets": ("all",), "nemesis_interval_s": 5.0,
        "time_limit_s": 15.0, "final_time_limit_s": LOSSY_FINAL_S},
        frozenset({"lose-unflushed"}), attempts=2),
    # A second try: the loss needs the successor to crash before it has fetched what the HW
    # covers, a race the scripted rounds usually but not always win (one miss in CI, with
    # both rounds landing on exposed partitions; the Docker test gives it three)
    Recipe("bug-truncate-to-hw", "loss", {
        "bugs": ("truncate_to_hw",), "scenario": "crash-leader-then-successor",
        "nemesis_interval_s": 3.0, "time_limit_s": 20.0, "final_time_limit_s": LOSSY_FINAL_S},
        frozenset({"kill"}), attempts=2),
    Recipe("bug-offsets-before-epoch-start", "nonlinearizable", {
        "workload": "register", "concurrency": 16, "rate": 10.0,
        "bugs": ("offsets_before_epoch_start",), "scenario": "crash-leader-then-follower",
        "nemesis_interval_s": 3.0, "time_limit_s": 25.0,
        "broker_overrides": {"zookeeper.session.timeout.ms": "8000"}},
        frozenset({"kill"}), attempts=3),
)


@dataclass
class Outcome:
    recipe: str
    attempt: int
    seconds: float
    exit_code: int
    bad: list[str]
    run_dir: Path
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        verdict = "ok" if not self.problems else "; ".join(self.problems)
        return (f"{self.recipe} (try {self.attempt}): exit {self.exit_code}, bad {self.bad}, "
                f"{self.seconds:.0f} s, {self.run_dir}: {verdict}")


def _faults_done(history: Path) -> set[str]:
    """The nemesis fs whose completion reported no error."""
    done: set[str] = set()
    seen: set[str] = set()
    for line in history.read_text().splitlines():
        op = json.loads(line)
        if op["process"] != "nemesis":
            continue
        if op["f"] not in seen:  # the invocation; the next op with this f completes it
            seen.add(op["f"])
            continue
        seen.discard(op["f"])
        text = json.dumps(op["value"])
        if '"error"' not in text and '"unsupported"' not in text:
            done.add(op["f"])
    return done


def _check(recipe: Recipe, result: Any) -> list[str]:
    r = result.results
    problems: list[str] = []
    if "error" in r:
        return [f"error: {r['error']}"]
    for name in ("results.json", "report.html", "history.jsonl"):
        if not (result.run_dir / name).is_file():
            problems.append(f"no {name}")
    missing = recipe.faults - _faults_done(result.run_dir / "history.jsonl")
    if missing:
        problems.append(f"faults that never happened: {sorted(missing)}")
    queue_types = set(r.get("queue", {}).get("anomaly_types", []))
    if recipe.expect == "valid":
        if result.exit_code != EXIT_VALID or result.bad:
            why = "final reads incomplete" if r.get("workload", {}).get(
                "final_complete") is False else "anomalies"
            problems.append(f"expected valid, got exit {result.exit_code} ({why})")
    elif recipe.expect == "loss":
        if result.exit_code != EXIT_INVALID or not LOSS & set(result.bad):
            problems.append(f"expected a loss in {sorted(LOSS)}, got exit {result.exit_code}")
        elif not LOSS & queue_types:
            problems.append(f"queue anomaly types {sorted(queue_types)} name no loss")
    else:
        if result.exit_code != EXIT_INVALID or "nonlinearizable" not in result.bad:
            problems.append(f"expected nonlinearizable, got exit {result.exit_code}")
        elif r.get("linearizable", {}).get("valid?") is not False:
            problems.append("the linearizability checker did not say invalid")
    return problems


# what a broker's state-change log says about leaderships, elections and truncations
_STORY = re.compile(r"ControllerElection: won|BrokersChanged|BrokerRegistered|truncated to|"
                    r"proposes|write of |halting")
STORY_LINES = 120  # the last this many of them, all brokers merged by time


def _diagnosis(run_dir: Path, results: dict[str, Any]) -> str:
    """What a wrong outcome needs to be understood from CI's output alone (the run directory
    is gone with the runner): the nemesis's completed faults, the first anomalies of each
    type, and the brokers' story of the workload's partitions in their own log lines (the
    one CI failure of `safe-wipe-one`, stop 25, had to be reasoned out without them)."""
    out = [f"--- diagnosis of {run_dir.name}"]
    history = run_dir / "history.jsonl"
    if history.is_file():
        for line in history.read_text().splitlines():
            op = json.loads(line)
            if op["process"] == "nemesis" and not isinstance(op["value"], str):
                out.append(f"nemesis {op['time_ns'] / 1e9:7.2f}s {op['f']}: "
                           f"{json.dumps(op['value'])[:160]}")
    anomalies = results.get("queue", {}).get("anomalies", {})
    for kind, cases in sorted(anomalies.items()):
        out.append(f"{kind}: {len(cases)}; first {json.dumps(cases[:2])[:300]}")
    story: list[str] = []
    for log in sorted((run_dir / "logs").glob("n*.log")):
        story += [ln for ln in log.read_text(errors="replace").splitlines()
                  if _STORY.search(ln) and "__consumer_offsets" not in ln]
    story.sort()  # each line starts with its timestamp
    if len(story) > STORY_LINES:
        out.append(f"({len(story) - STORY_LINES} earlier state-change lines left out)")
    out += [ln[:220] for ln in story[-STORY_LINES:]]
    return "\n".join(out)


def _require_cluster() -> None:
    why = None
    if not zookeeper_installed():
        why = f"ZooKeeper (Debian package `zookeeper`) is not installed: {INSTALL_HINT}"
    else:
        why = unavailable_reason() or cgroup_unavailable_reason()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def test_campaign_recipes(tmp_path: Path) -> None:
    """Every recipe in turn (see the module docstring); all outcomes are reported together."""
    _require_cluster()
    outcomes: list[Outcome] = []
    failed: list[Outcome] = []
    t_all = time.monotonic()
    for recipe in RECIPES:
        for attempt in range(1, recipe.attempts + 1):
            opts = CampaignOptions(name=recipe.name, store=tmp_path, **COMMON, **recipe.opts)
            t0 = time.monotonic()
            result = run_campaign(opts)
            out = Outcome(recipe.name, attempt, time.monotonic() - t0, result.exit_code,
                          list(result.bad), result.run_dir, _check(recipe, result))
            outcomes.append(out)
            print(out.line())
            if not out.problems:
                break
            try:
                print(_diagnosis(result.run_dir, result.results))
            except Exception as e:  # the outcome above is what fails the test, not this
                print(f"(no diagnosis of {result.run_dir}: {e!r})")
        else:
            failed.append(outcomes[-1])
    print(f"all campaigns: {time.monotonic() - t_all:.0f} s")
    assert not failed, "\n".join(o.line() for o in failed)


def test_a_wrong_outcome_is_diagnosed_from_the_run_directory(tmp_path: Path) -> None:
    """`_diagnosis` (printed for every wrong outcome above): completed faults, anomalies and
    the workload partitions' state changes by time, without the group coordinator's."""
    (tmp_path / "logs").mkdir()
    ops = [{"index": 0, "time_ns": 1_000_000_000, "process": "nemesis", "type": "info",
            "f": "wipe", "value": "one"},
           {"index": 1, "time_ns": 5_000_000_000, "process": "nemesis", "type": "info",
            "f": "wipe", "value": {"n3": {"files": 17, "bytes": 1172}}},
           {"index": 2, "time_ns": 6_000_000_000, "process": 1, "type": "ok", "f": "send",
            "value": [["send", 0, [0, 1]]]}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    (tmp_path / "logs" / "n1.log").write_text(
        "2026-11-27 04:54:52,990 INFO hiwater.state_change: broker 1: BrokerRegistered\n"
        "2026-11-27 04:54:53,000 INFO broker.runtime.peers: broker 1: fetch from 3 failed\n")
    (tmp_path / "logs" / "n3.log").write_text(
        "2026-11-27 04:54:44,180 INFO hiwater.state_change: broker 3: proposes t0-0 "
        "[leader 1 epoch 1 isr [1, 3]] (zk version 0)\n"
        "2026-11-27 04:54:44,181 INFO hiwater.state_change: broker 3: proposes "
        "__consumer_offsets-0 [leader 3 epoch 1 isr [3, 1]] (zk version 0)\n")
    results = {"queue": {"anomalies": {"lost_write": [{"key": 0, "value": 7}]}}}
    lines = _diagnosis(tmp_path, results).splitlines()
    assert lines[1] == 'nemesis    5.00s wipe: {"n3": {"files": 17, "bytes": 1172}}'
    assert lines[2] == 'lost_write: 1; first [{"key": 0, "value": 7}]'
    assert [ln.split(": ", 1)[1] for ln in lines[3:]] == [
        "broker 3: proposes t0-0 [leader 1 epoch 1 isr [1, 3]] (zk version 0)",
        "broker 1: BrokerRegistered"]
