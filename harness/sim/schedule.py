"""A campaign's schedule on the simulator, through the `Runtime` interface.

`run_schedule(runtime, package, ...)` runs what `hiwater campaign` runs, in its phases, on any
runtime whose ports are the simulator's (`harness.sim.runtime.SimRuntime`): the workload's
clients from `runtime.clients()`, a nemesis `Package` (the campaign's own, e.g.
`nemesis.packages.package_for(("standard",))`) carried out by `nemesis.runner.NemesisRunner`
and `nemesis.executor` on the runtime's fault methods, time from `runtime.clock()`; then
`heal_all`, a recovery wait, the final reads, and the checkers. The nemesis's ops (an info
invocation and an info completion per fault, as in a live campaign) and the clients' ops go to
one history.

One thread: the runner's `run()` is called here, not started as a thread, and each of its
waits runs the simulation until the next fault is due, so the run is a function of the seed
(the runtime's options and `seed`, which drives the package's choices): the same seed gives
the same history and trace hash.

What differs from a live campaign: the clients are the simulator's (event-driven, on its one
watched partition), not the campaign's threaded Kafka-protocol workloads
(`harness.runtime.ports` says why); there is no `LiveProbe` thread, because the simulator
checks spec's invariants after every event (a break ends the run as its failure).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field

from harness.history import INFO, NEMESIS, Op, op_to_dict
from harness.runtime.base import Runtime
from harness.sim.cluster import Violation
from harness.sim.run import anomaly_line
from harness.sim.runtime import SimClients
from nemesis.faults import Fault, LeaderOf
from nemesis.packages import Package
from nemesis.runner import NemesisRunner, heal_all
from spec.world import TP

FINAL_POLL_S = 0.05  # how often the final phase looks whether the reads are done
FOCUS = LeaderOf(TP.topic, TP.partition)  # "leader" targets: the watched partition's leader


@dataclass
class ScheduleResult:
    history: list[Op]
    history_hash: str  # sha256 of the history's JSON lines
    trace_hash: str  # the simulation's event trace
    failure: str | None  # a broken invariant, a halt, "no convergence", or an anomaly
    faults: list[tuple[Fault, object]]  # what the nemesis did: (fault, completion value)
    checked: dict[str, object] = field(default_factory=dict)
    sim_s: float = 0.0  # simulated seconds at the end

    @property
    def ok(self) -> bool:
        return self.failure is None


def history_hash(history: list[Op]) -> str:
    h = hashlib.sha256()
    for op in history:
        h.update(json.dumps(op_to_dict(op), sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def run_schedule(runtime: Runtime, package: Package, *, time_s: float, seed: int,
                 recovery_s: float = 5.0, final_s: float = 60.0,
                 focus: LeaderOf | None = FOCUS,
                 check: bool = True) -> ScheduleResult:
    """The campaign's phases on a simulated runtime (see the module docstring): `time_s`
    simulated seconds of faults and client ops, heal, `recovery_s` quiet, then final reads
    bounded by `final_s` ("no convergence" when they do not finish)."""
    clients = runtime.clients()
    if not isinstance(clients, SimClients):
        raise ValueError("run_schedule drives simulated clients; a live runtime runs "
                         "`hiwater campaign`")
    clock = runtime.clock()
    runtime.start()
    w = clients.open()
    trace = w.c

    def record(f: str, value: object) -> None:
        trace.note(f"{f} {json.dumps(value, sort_keys=True, default=str)}")
        w.record(NEMESIS, INFO, f, value)

    stop = threading.Event()
    deadline = clock.monotonic() + time_s
    runner = NemesisRunner(runtime, package, record, stop, deadline, seed=seed, focus=focus,
                           final=True, clock=clock)
    failure: str | None = None
    w.start()
    try:
        runner.run()  # in this thread: its waits run the simulation
        if runner.error is not None:
            raise runner.error
        clock.wait(stop, deadline - clock.monotonic())  # a finite package ended early
        trace.note("heal")
        heal_all(runtime, record)
        clock.sleep(recovery_s)  # Jepsen's recovery wait
        w.start_final()
        end = clock.monotonic() + final_s
        while not w.converged() and clock.monotonic() < end:
            clock.sleep(FINAL_POLL_S)
        if not w.converged():
            failure = (f"no convergence: the final reads did not reach offset {w.max_offset} "
                       f"within {final_s:g} simulated seconds of healing")
    except Violation as v:
        failure = str(v)
    finally:
        w.stopped = True
        stop.set()
    checked: dict[str, object] = {}
    if check and failure is None:
        from harness.checkers import check as check_history

        checked = check_history(w.history)
        if checked.get("valid?") is not True:
            failure = anomaly_line(checked)
    return ScheduleResult(w.history, history_hash(w.history), trace.hash.hexdigest(), failure,
                          list(runner.results), checked, clock.monotonic())


__all__ = ["ScheduleResult", "history_hash", "run_schedule"]
