"""The simulator as a `Runtime`: the campaign's nemesis code (packages, executor, runner) on the
simulated cluster through the Runtime interface and its clock and client ports."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.runtime.base import NodeStateError, Runtime
from harness.runtime.ports import KafkaClients
from harness.sim.cluster import ZK
from harness.sim.runtime import SimClients, SimClock, SimRuntime
from harness.sim.schedule import ScheduleResult, run_schedule
from nemesis.executor import execute
from nemesis.faults import CleanRestart, CorruptSegment, KillNode, Toxic
from nemesis.packages import package_for
from nemesis.port import WALL_CLOCK
from spec.world import TP

STANDARD = ("standard",)  # the campaign's default mix: partition, kill, pause
ROOT = Path(__file__).resolve().parents[2]


def _schedule(seed: int, workload: str = "queue", names: tuple[str, ...] = STANDARD,
              time_s: float = 12.0) -> ScheduleResult:
    """A campaign's schedule: the nemesis package the campaign builds for `names`, on a
    simulated runtime of `seed`."""
    rt = SimRuntime.of_seed(seed, workload=workload)
    return run_schedule(rt, package_for(names, interval_s=1.5), time_s=time_s, seed=seed)


def test_a_campaign_schedule_runs_on_the_simulator_deterministically() -> None:
    a = _schedule(21)
    b = _schedule(21)
    assert a.failure is None, a.failure
    # the same seed: the same history, op for op, and the same event trace
    assert a.history_hash == b.history_hash and a.trace_hash == b.trace_hash
    assert len(a.history) == len(b.history)
    # the campaign's nemesis ran: faults of the standard mix, each an info pair, then heal
    fs = {op.f for op in a.history if op.process == "nemesis"}
    assert {"kill", "start-partition", "pause"} & fs, fs
    assert "heal" in fs
    done = [r for _, r in a.faults if isinstance(r, dict)]
    assert any(v in ("killed", "paused") for r in done for v in r.values()), a.faults
    # the clients ran alongside: acknowledged sends and a final read that saw them
    sends = [op for op in a.history if op.f == "send" and op.type == "ok"]
    # (20 of them since session 14's controller fix, 32 before: a broker killed and started
    # again while no controller watched now leaves the ISR and catches up before rejoining)
    assert len(sends) >= 10
    assert a.checked.get("valid?") is True
    assert a.sim_s > 12.0
    # another seed: another history
    c = _schedule(22)
    assert c.history_hash != a.history_hash


def test_the_schedule_is_the_same_under_another_hash_seed() -> None:
    mine = _schedule(21, time_s=6.0)
    code = ("from harness.sim.runtime import SimRuntime\n"
            "from harness.sim.schedule import run_schedule\n"
            "from nemesis.packages import package_for\n"
            "r = run_schedule(SimRuntime.of_seed(21), package_for(('standard',), "
            "interval_s=1.5), time_s=6.0, seed=21)\n"
            "print(r.history_hash, r.trace_hash)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "PYTHONHASHSEED": "4242"},
                         timeout=300, check=True)
    assert out.stdout.split() == [mine.history_hash, mine.trace_hash]


def test_the_register_workload_runs_through_the_same_ports() -> None:
    a = _schedule(5, workload="register", names=("kill",), time_s=8.0)
    b = _schedule(5, workload="register", names=("kill",), time_s=8.0)
    assert a.failure is None, a.failure
    assert a.history_hash == b.history_hash
    assert any(op.f == "write" and op.type == "ok" for op in a.history)
    assert "linearizable" in a.checked


def test_a_campaign_scenario_picks_its_victims_on_the_simulator() -> None:
    """The campaign's scripted nemesis reads the brokers' replica states to pick X (a leader
    with exposed committed records) and Y (its successor), waiting on the runtime's clock
    for a moment when the crash can hurt: on the simulator that wait runs the simulation."""
    from harness import campaign

    opts = campaign.CampaignOptions(scenario="crash-leader-then-successor",
                                    nemesis_interval_s=2.0, seed=3)
    runs = [run_schedule(SimRuntime.of_seed(3), campaign._package(opts), time_s=15.0, seed=3)
            for _ in range(2)]
    a, b = runs
    assert a.failure is None, a.failure
    assert a.history_hash == b.history_hash
    (f1, first), (f2, second) = a.faults[:2]
    assert f1.f == f2.f == "kill"
    assert isinstance(first, dict) and isinstance(second, dict)
    picked = first["picked"]
    assert isinstance(picked, dict) and picked["X"] != picked["Y"]
    assert picked["exposed"] >= 1  # it waited (in simulated time) for committed records
    assert first[picked["X"]] == "killed" and second[picked["Y"]] == "killed"


def test_faults_the_simulator_cannot_do_are_recorded_as_unsupported() -> None:
    import random

    rt = SimRuntime.of_seed(3).start()
    rt.clock().sleep(3.0)
    rng = random.Random(0)
    caps = rt.capabilities()
    assert caps["stop"] and caps["corrupt"] and caps["kill"] is None
    assert execute(CleanRestart(("n1",)), rt, rng) == {"unsupported": caps["stop"]}
    assert execute(CorruptSegment(("n2",)), rt, rng) == {"unsupported": caps["corrupt"]}
    # a toxic other than latency is refused by the call, per node
    out = execute(Toxic(targets=("n1",), toxic_type="bandwidth", attributes=(("rate", 1),)),
                  rt, rng)
    assert isinstance(out, dict) and "unsupported" in str(out["n1"])


def test_the_runtime_views_and_faults_act_on_the_simulated_cluster() -> None:
    rt = SimRuntime.of_seed(4)
    assert isinstance(rt, Runtime)
    assert rt.nodes == ("n1", "n2", "n3") and rt.zookeeper_node == "zk"
    assert isinstance(rt.clock(), SimClock) and isinstance(rt.clients(), SimClients)
    rt.start()
    clock = rt.clock()
    t0 = clock.monotonic()
    clock.sleep(4.0)  # elections happen while the clock waits
    assert clock.monotonic() == pytest.approx(t0 + 4.0)
    c = rt.cluster
    # the views speak node names: the simulator's broker b is n<b+1>
    leader = rt.leader_of(TP.topic, TP.partition)
    assert c.zk.partition is not None and leader == f"n{c.zk.partition.leader + 1}"
    assert rt.controller() == f"n{c.zk.controller + 1}"
    st = rt.replica_states(leader)
    assert st["broker_id"] == c.zk.partition.leader + 1
    assert sorted(st["replicas"][0]["isr"]) == [1, 2, 3]
    # a partition cuts the simulated links the grudge names; heal restores them
    rep = rt.partition({"n1": ["n2", "zk"]})
    assert rep == {"isolated": {"n1": ["n2", "zk"]}}
    assert c.down == {(1, 0), (ZK, 0)}
    assert rt.heal() == {"healed": 2} and not c.down
    # process faults, and a disk fault that needs the node down
    with pytest.raises(NodeStateError):
        rt.wipe("n2")
    assert rt.kill("n2")["result"] == "killed" and not rt.is_running("n2")
    old_disk = c.brokers[1].fs
    assert isinstance(rt.wipe("n2")["files"], int)  # (no client wrote: empty segments only)
    assert c.brokers[1].fs is not old_disk and c.brokers[1].mirror == []
    assert rt.start_node("n2")["result"] == "started"
    assert rt.pause("n3")["result"] == "paused" and rt.is_paused("n3")
    with pytest.raises(Exception, match="does not answer"):
        rt.replica_states("n3")
    assert rt.resume("n3")["result"] == "resumed"
    # a latency toxic is a clogged link, removed by remove_toxics
    rt.add_toxic("n1", "latency", {"latency": 200}, source="n2")
    assert c.clogged == {(0, 1): 200_000}
    assert rt.remove_toxics(None) == {"removed": {"n1": ["latency_downstream_from_n2"]}}
    assert not c.clogged
    rt.clock().sleep(10.0)  # the cluster carries on (invariants checked after each event)
    assert all(rt.is_running(n) for n in rt.nodes)


def test_the_clock_wait_ends_when_a_callback_sets_the_event() -> None:
    rt = SimRuntime.of_seed(6).start()
    clock = rt.clock()
    stop = threading.Event()
    rt.cluster.sched.after_us(1_500_000, stop.set)
    assert clock.wait(stop, 10.0)
    assert clock.monotonic() == pytest.approx(1.5)


def test_live_runtimes_hand_out_the_wall_clock_and_kafka_clients(tmp_path: Path) -> None:
    from harness.runtime.existing import ExistingClusterRuntime

    rt = ExistingClusterRuntime("127.0.0.1:9")
    assert rt.clock() is WALL_CLOCK
    assert rt.clients() == KafkaClients("127.0.0.1:9")


def test_a_campaign_refuses_simulated_clients(tmp_path: Path) -> None:
    from harness import campaign

    opts = campaign.CampaignOptions(time_limit_s=1.0, seed=1, store=tmp_path)
    with pytest.raises(ValueError, match="simulated"):
        campaign._main_phase(opts, SimRuntime.of_seed(1), tmp_path, {}, None)


def test_kill_is_a_kill_9_through_the_executor() -> None:
    import random

    rt = SimRuntime.of_seed(8).start()
    rt.clock().sleep(3.0)
    assert execute(KillNode(("n1",)), rt, random.Random(0)) == {"n1": "killed"}
    assert rt.cluster.brokers[0].node is None
