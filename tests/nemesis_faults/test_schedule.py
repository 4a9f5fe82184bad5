"""Schedules and packages: deterministic for a seed, the op sequences Jepsen's generators make."""

from __future__ import annotations

import itertools
import random

import pytest

from nemesis import schedule
from nemesis.faults import (
    CorruptSegment,
    HealNetwork,
    KillNode,
    PartitionNetwork,
    PauseNode,
    RemoveToxics,
    ResumeNode,
    SlowLink,
    StartNode,
    WipeDisk,
)
from nemesis.packages import (
    compose,
    kill_package,
    package_for,
    partition_package,
    pause_package,
    plan,
    rotating_package,
    toxic_package,
    wipe_package,
)


def test_same_seed_same_plan_other_seed_other_plan() -> None:
    pkg = package_for(["partition", "kill", "pause"], interval_s=5)
    a = plan(pkg, 42, 600)
    b = plan(package_for(["partition", "kill", "pause"], interval_s=5), 42, 600)
    c = plan(pkg, 43, 600)
    assert a == b
    assert a != c
    assert len(a) > 50


def test_flip_flop_alternates_with_staggered_delays() -> None:
    starts = (PartitionNetwork("one"), PartitionNetwork("majority"))
    steps = list(zip(range(200), schedule.flip_flop(starts, HealNetwork(), 10.0,
                                                     random.Random(1)), strict=False))
    faults = [s.fault for _, s in steps]
    assert all(f in starts for f in faults[0::2])
    assert all(f == HealNetwork() for f in faults[1::2])
    delays = [s.delay_s for _, s in steps]
    assert all(0 <= d < 20.0 for d in delays)
    assert 7.0 < sum(delays) / len(delays) < 13.0  # uniform on [0, 2 × interval)
    assert {f for f in faults[0::2]} == set(starts)  # the mix draws both


def test_kill_package_ops_sequence() -> None:
    steps = plan(kill_package(("one",), interval_s=1.0), 7, 30)
    fs = [f.f for _, f in steps]
    assert fs[:6] == ["kill", "start", "kill", "start", "kill", "start"]
    assert [f for _, f in steps][:2] == [KillNode("one"), StartNode("all")]
    times = [t for t, _ in steps]
    assert times == sorted(times)


def test_compose_merges_by_time_and_orders_finals() -> None:
    pkg = compose([pause_package(interval_s=2), partition_package(interval_s=3),
                   toxic_package(interval_s=4)])
    steps = plan(pkg, 3, 120)
    times = [t for t, _ in steps]
    assert times == sorted(times)
    kinds = {f.f for _, f in steps}
    assert {"pause", "resume", "start-partition", "stop-partition", "toxic",
            "stop-toxic"} <= kinds
    assert pkg.final == (HealNetwork(), RemoveToxics(), ResumeNode())
    # each sub-package keeps its own start/stop alternation inside the merge
    pauses = [f.f for _, f in steps if f.f in ("pause", "resume")]
    assert all(a != b for a, b in itertools.pairwise(pauses))


def test_repeating_packages_and_their_finals() -> None:
    pkg = wipe_package(interval_s=1)
    steps = plan(pkg, 1, 20)
    assert steps and all(f == WipeDisk("one") for _, f in steps)
    assert pkg.final == (StartNode(),)
    corrupt = package_for(["corrupt"], interval_s=1)
    assert all(isinstance(f, CorruptSegment) for _, f in plan(corrupt, 1, 10))


def test_rotating_periods_quiet_and_finals_at_period_ends() -> None:
    # two repeating packages whose only final is StartNode, so a StartNode is always a final
    pkg = rotating_package([wipe_package(interval_s=1), package_for(["corrupt"], 1)],
                           period_s=10.0, quiet_probability=0.25)
    steps = plan(pkg, 11, 400)
    assert steps == plan(pkg, 11, 400)
    by_period: dict[int, list[str]] = {}
    final_periods = []
    for t, f in steps:
        if f == StartNode():
            assert abs(t / 10.0 - round(t / 10.0)) < 1e-6, (t, f)  # on a period's end
            final_periods.append(round(t / 10.0) - 1)
        else:
            by_period.setdefault(int(t // 10.0), []).append(f.f)
    assert set(by_period) <= set(final_periods)  # each period with faults ends with its final
    quiet = [p for p in range(40) if p not in by_period]
    assert quiet, "some periods have no faults (quiet_probability)"
    assert len(quiet) < 30
    assert any({"wipe", "corrupt"} <= set(fs) for fs in by_period.values())
    assert any(set(fs) == {"wipe"} for fs in by_period.values())


def test_package_for_names() -> None:
    assert package_for([]).name == "none"
    assert plan(package_for(["none"]), 1, 100) == []
    assert package_for(["standard"]).name == "partition+kill+pause"
    with pytest.raises(ValueError, match="unknown nemesis"):
        package_for(["flood"])
    tox = plan(package_for(["toxic"], interval_s=1), 5, 10)
    assert tox[0][1] == SlowLink()


def test_pause_package_targets_one_or_all() -> None:
    starts = {f for _, f in plan(pause_package(interval_s=1), 9, 200) if f.f == "pause"}
    assert starts == {PauseNode("one"), PauseNode("all")}
