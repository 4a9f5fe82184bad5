"""The executor on a recording runtime, and the runner's history (Jepsen's nemesis op pairs)."""

from __future__ import annotations

import random
import threading
import time

from harness.history import INFO, NEMESIS, pair_index
from harness.runtime.existing import ExistingClusterRuntime
from harness.workloads.recorder import Recorder
from nemesis.executor import execute, partition_grudge
from nemesis.faults import (
    CleanRestart,
    CorruptSegment,
    HealNetwork,
    KillNode,
    LeaderOf,
    LoseUnflushed,
    PartitionNetwork,
    PauseNode,
    SlowLink,
    StartNode,
    WipeDisk,
    grudge_value,
)
from nemesis.packages import Package, compose, kill_package, partition_package
from nemesis.runner import heal_all, run_nemesis
from nemesis.schedule import Step, sequence
from tests.nemesis_faults.fake_runtime import FakeRuntime


def test_disk_faults_kill_change_start() -> None:
    for fault, what in ((WipeDisk(("n2",)), "wipe"), (LoseUnflushed(("n2",)), "lose-unflushed"),
                        (CorruptSegment(("n2",), "records"), "corrupt")):
        rt = FakeRuntime()
        value = execute(fault, rt, random.Random(0))
        assert [c[:2] for c in rt.calls] == [("kill", "n2"), (what, "n2"), ("start", "n2")]
        assert "n2" in value and "error" not in str(value)
    rt = FakeRuntime()
    execute(CleanRestart(("n1",)), rt, random.Random(0))
    assert rt.calls == [("stop", "n1"), ("start", "n1")]


def test_targets_leader_controller() -> None:
    rt = FakeRuntime(leader="n3", controller="n1")
    assert execute(KillNode("leader"), rt, random.Random(0), LeaderOf("t", 0)) == {
        "n3": "kill"}
    assert execute(PauseNode("controller"), rt, random.Random(0)) == {"n1": "pause"}
    assert execute(StartNode(), rt, random.Random(0)) == {
        "n1": "already-running", "n2": "already-running", "n3": "start"}
    assert "no target" in execute(KillNode("leader"), rt, random.Random(0))["error"]


def test_partition_shapes_on_runtime() -> None:
    rt = FakeRuntime(leader="n2")
    g = partition_grudge(PartitionNetwork("isolate-leader"), rt, random.Random(0),
                         LeaderOf("t", 0))
    assert g == {"n1": ("n2",), "n2": ("n1", "n3", "zk"), "n3": ("n2",), "zk": ("n2",)}
    g = partition_grudge(PartitionNetwork("isolate-from-zookeeper", targets=("n3",)), rt,
                         random.Random(0), None)
    assert g == {"n3": ("zk",), "zk": ("n3",)}
    g = partition_grudge(PartitionNetwork("majority", zookeeper=False), rt, random.Random(0),
                         None)
    assert "zk" not in g
    explicit = grudge_value({"n1": ("n2",)})
    assert partition_grudge(PartitionNetwork(explicit), rt, random.Random(0), None) == {
        "n1": ("n2",)}
    value = execute(PartitionNetwork("one"), rt, random.Random(1))
    assert set(value["isolated"]) == {"n1", "n2", "n3", "zk"}
    assert execute(HealNetwork(), rt, random.Random(1)) == "network-healed"


def test_unsupported_faults_are_values_not_crashes() -> None:
    rt = FakeRuntime(partitions=False)
    assert execute(PartitionNetwork("one"), rt, random.Random(0)) == {"unsupported": "not root"}
    ex = ExistingClusterRuntime("127.0.0.1:9")
    assert set(execute(KillNode("all"), ex, random.Random(0)) or {}) <= {"unsupported", "error"}
    assert "unsupported" in execute(PartitionNetwork(grudge_value({"n1": ("n2",)})), ex,
                                    random.Random(0))
    assert heal_all(ex)["toxics"] == {"removed": {}}


def test_runner_records_info_pairs_and_runs_finals() -> None:
    rt = FakeRuntime()
    script = Package("script", lambda _rng: sequence([
        Step(0.01, PartitionNetwork("majority")), Step(0.01, KillNode(("n1",))),
        Step(0.01, PauseNode(("n3",))), Step(0.01, SlowLink(("n2",))),
        Step(0.01, HealNetwork()), Step(60.0, KillNode("all"))]),
        final=(HealNetwork(), StartNode()))
    sink = Recorder()
    runner = run_nemesis(rt, script, sink.nemesis, threading.Event(), time.monotonic() + 1.0,
                         seed=1)
    runner.join(10)
    assert not runner.is_alive() and runner.error is None
    ops = sink.ops()
    assert all(op.process == NEMESIS and op.type == INFO for op in ops)
    assert [op.index for op in ops] == list(range(len(ops)))
    fs = [op.f for op in ops]
    assert fs == ["start-partition", "start-partition", "kill", "kill", "pause", "pause",
                  "toxic", "toxic", "stop-partition", "stop-partition",
                  "stop-partition", "stop-partition", "start", "start"]
    assert ops[0].value == "majority" and "isolated" in ops[1].value
    assert ops[2].value == ["n1"] and ops[3].value == {"n1": "kill"}
    pairs = pair_index(ops)
    assert all(pairs[i] == i + 1 for i in range(0, len(ops), 2))
    times = [op.time_ns for op in ops]
    assert times == sorted(times) and times[-1] < 5e9
    assert rt.down == set()  # the final StartNode ran; the 60 s kill never did


def test_runner_stops_on_event_and_deadline_bounded() -> None:
    rt = FakeRuntime()
    pkg = compose([kill_package(("one",), interval_s=0.05), partition_package(interval_s=0.05)])
    stop = threading.Event()
    sink = Recorder()
    runner = run_nemesis(rt, pkg, sink.nemesis, stop, time.monotonic() + 30, seed=4)
    time.sleep(0.5)
    stop.set()
    runner.join(5)
    assert not runner.is_alive()
    assert len(sink.ops()) >= 4 and len(sink.ops()) % 2 == 0
    assert rt.down == set() and rt.grudge == {}  # finals healed and restarted
    report = heal_all(rt, sink.nemesis)
    assert sink.ops()[-1].f == "heal" and sink.ops()[-1].value == report


def test_runner_same_seed_same_history_values() -> None:
    def run(seed: int) -> list[object]:
        rt = FakeRuntime(n=5)
        pkg = compose([kill_package(interval_s=0.01), partition_package(interval_s=0.01)])
        gen = pkg.generator
        steps = Package("fixed", lambda rng: (s for _, s in zip(range(30), gen(rng),
                                                              strict=False)), pkg.final)
        sink = Recorder()
        r = run_nemesis(rt, steps, sink.nemesis, threading.Event(), time.monotonic() + 30,
                        seed=seed)
        r.join(10)
        return [(op.f, op.value) for op in sink.ops()]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_isolate_from_zookeeper_fault() -> None:
    from nemesis.faults import IsolateFromZooKeeper

    rt = FakeRuntime()
    fault = IsolateFromZooKeeper(targets=("n1", "n3"))
    assert fault.f == "start-partition"
    assert fault.describe() == {"shape": "isolate-from-zookeeper", "targets": ["n1", "n3"]}
    value = execute(fault, rt, random.Random(0))
    assert value == {"isolated": {"n1": ["zk"], "n3": ["zk"], "zk": ["n1", "n3"]}}
