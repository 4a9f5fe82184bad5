"""The failover race CI's `safe-wipe-one` campaign found, scripted on the simulator (the
third driver of the core; tests/broker/test_failover_restarted_live.py is the same on real
brokers). The swarm's own disk faults cannot reach it: they wait until their victim has left
ZooKeeper's ISR, to stay clear of last-replica-standing.

Seed 3's controller, broker 1 (0-based 0), also leads the watched partition t-0. At 3 s the
two others are paused; broker 1 is killed, its ZooKeeper session expired at once, its disk
wiped, and it starts again. Alone awake, it registers and wins the controller election while
ZooKeeper's state still names it leader and ISR member. Then the others resume.

With `failover-trusts-restarted` (ZooKeeper-era Kafka) the empty broker leads its old epoch
again: `leader_completeness` (a ZooKeeper leader lacks acknowledged records). With the fix
(core/controller.py `on_elected`) another ISR member leads, and the run is valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from harness.sim.run import SimOptions
from harness.sim.runtime import SimRuntime
from harness.sim.schedule import ScheduleResult, run_schedule
from nemesis.faults import Fault
from nemesis.packages import Package
from nemesis.schedule import Step, sequence

SEED = 3


@dataclass(frozen=True, slots=True)
class WipedControllerBack(Fault):
    f: ClassVar[str] = "wiped-controller-back"


def _package(rt: SimRuntime) -> Package:
    def execute(_fault: Fault, _runtime: Any, _rng: Any, _focus: Any) -> object:
        c = rt.cluster
        (x,) = [b for b in range(c.n) if (n := c.brokers[b].node) is not None
                and n.state.controller is not None]
        led = sorted(str(r.tp) for r in c.brokers[x].node.state.replicas  # type: ignore[union-attr]
                     if r.role.name == "LEADER")
        others = [f"n{b + 1}" for b in range(c.n) if b != x]
        for o in others:
            rt.pause(o)
        rt.kill(f"n{x + 1}")
        c.zk.expire_broker(x)  # its old registration goes now, not a session timeout later
        rt.wipe(f"n{x + 1}")
        rt.start_node(f"n{x + 1}")
        clock = rt.clock()
        end = clock.monotonic() + 10.0
        while clock.monotonic() < end:
            n = c.brokers[x].node
            if n is not None and n.state.controller is not None:
                break
            clock.sleep(0.01)
        won = (n := c.brokers[x].node) is not None and n.state.controller is not None
        for o in others:
            rt.resume(o)
        return {"controller": x + 1, "led": led, "won": won}

    return Package("wiped-controller-back",
                   lambda _rng: sequence([Step(3.0, WipedControllerBack())]),
                   executor=execute, fs=frozenset({"wiped-controller-back"}))


def _run(bug: str | None) -> ScheduleResult:
    rt = SimRuntime(SimOptions(seed=SEED, nodes=3, swarm=False, faults=(), workload="queue",
                               bug=bug))
    return run_schedule(rt, _package(rt), time_s=8.0, seed=SEED)


@pytest.mark.parametrize("bug", [None, "failover-trusts-restarted"], ids=["fixed", "kafka"])
def test_a_wiped_controller_that_wins_the_next_election_is_not_trusted(bug: str | None) -> None:
    r = _run(bug)
    done = [v for _, v in r.faults if isinstance(v, dict)]
    if bug is None:
        assert done == [{"controller": 1, "led": ["t-0"], "won": True}], r.faults
        assert r.failure is None, r.failure
        assert r.checked.get("valid?") is True
    else:
        # the violation stops the run inside the scripted fault, before its value is recorded
        assert r.failure is not None and "leader_completeness" in r.failure, r.failure
