"""`run_nemesis` against the live runtime: a short composed schedule, then `heal_all`; the
history holds Jepsen's nemesis op pairs and the cluster is whole afterwards."""

from __future__ import annotations

import threading
import time

from harness.history import INFO, NEMESIS, pair_index
from harness.runtime.local import LocalRuntime
from harness.runtime.netfilter import unavailable_reason
from harness.workloads.recorder import Recorder
from nemesis.packages import compose, kill_package, partition_package, pause_package
from nemesis.runner import heal_all, run_nemesis


def test_run_nemesis_then_heal_all(rt: LocalRuntime) -> None:
    pkgs = [kill_package(("one",), interval_s=0.7), pause_package(("one",), interval_s=0.7)]
    if unavailable_reason() is None:
        pkgs.append(partition_package(("majority", "one"), interval_s=0.7))
    sink = Recorder()
    runner = run_nemesis(rt, compose(pkgs), sink.nemesis, threading.Event(),
                         time.monotonic() + 6, seed=2026)
    runner.join(120)
    assert not runner.is_alive() and runner.error is None
    report = heal_all(rt, sink.nemesis)
    ops = sink.ops()
    assert all(op.process == NEMESIS and op.type == INFO for op in ops)
    assert len(ops) % 2 == 0 and len(ops) >= 8
    pairs = pair_index(ops)
    for i in range(0, len(ops), 2):
        assert pairs[i] == i + 1 and ops[i].f == ops[i + 1].f
        assert "error" not in str(ops[i + 1].value), ops[i + 1]
    fs = {op.f for op in ops}
    assert {"kill", "start", "pause", "resume", "heal"} <= fs
    assert ops[-1].f == "heal" and ops[-1].value == report
    assert all(rt.is_running(n) and not rt.is_paused(n) for n in rt.nodes)
    assert rt.net is None or rt.net.listed() == []
    rt.wait_ready(30)
