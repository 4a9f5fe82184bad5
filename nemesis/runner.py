"""Running a package against a cluster, recording every fault as Jepsen does: an `info`
invocation and an `info` completion with process `"nemesis"`.

    stop = threading.Event()
    runner = run_nemesis(cluster, package, record, stop, deadline=time.monotonic() + 60, seed=7)
    ...                                   # clients run meanwhile
    runner.join(timeout=120)              # it ends by itself at the deadline, then runs finals
    heal_all(cluster, record)             # the campaign's final phase (records one "heal" pair)

`record(f, value)` (a `nemesis.port.Record`) is called twice per fault: with the fault's
description when it starts and with what happened when it ends. The nemesis knows no history
format: the harness passes its recorder's `nemesis` method (`harness.workloads.recorder`),
which numbers and timestamps the ops under the same lock as the clients' ops.

Time comes from a `nemesis.port.Clock` (the wall clock unless `clock` is given; a runtime
hands out its own as `Runtime.clock()`). On a simulated cluster, whose clock runs the
simulation while it waits, the runner's `run()` is called in the caller's thread instead of
`start()`: one thread, one seed, one history.

Bounds: each wait ends at the deadline or when `stop_event` is set; each fault is bounded by the
cluster's own timeouts (a clean stop waits at most 30 s, then SIGKILL); after the main phase
the package's final faults run once each.
"""

from __future__ import annotations

import random
import threading

from nemesis import executor
from nemesis.faults import Fault, HealAll, LeaderOf
from nemesis.packages import Executor, Package, split_seed
from nemesis.port import WALL_CLOCK, Clock, Cluster, Record


def _ignore(f: str, value: object) -> None:
    pass


def apply_recorded(fault: Fault, runtime: Cluster, rng: random.Random,
                   focus: LeaderOf | None, record: Record,
                   execute: Executor = executor.execute) -> object:
    record(fault.f, fault.describe())
    try:
        result = execute(fault, runtime, rng, focus)
    except BaseException as e:
        record(fault.f, {"error": f"{type(e).__name__}: {e}"})
        raise
    record(fault.f, result)
    return result


class NemesisRunner(threading.Thread):
    """The nemesis thread. `results` lists (fault, completion value) in order."""

    def __init__(self, runtime: Cluster, package: Package, record: Record | None,
                 stop_event: threading.Event, deadline: float, *, seed: int = 0,
                 focus: LeaderOf | None = None, final: bool = True,
                 clock: Clock = WALL_CLOCK) -> None:
        super().__init__(name=f"nemesis-{package.name}", daemon=True)
        self.runtime = runtime
        self.clock = clock
        self.package = package
        self.stop_event = stop_event
        self.deadline = deadline
        self.focus = focus
        self.final = final
        self.gen_rng, self.exec_rng = split_seed(seed)
        self.record: Record = record if record is not None else _ignore
        self.results: list[tuple[Fault, object]] = []
        self.error: BaseException | None = None

    def _apply(self, fault: Fault) -> None:
        result = apply_recorded(fault, self.runtime, self.exec_rng, self.focus, self.record,
                                self.package.executor)
        self.results.append((fault, result))

    def run(self) -> None:
        try:
            generator = self.package.generator(self.gen_rng)
            clock, stop = self.clock, self.stop_event
            for step in generator:
                remaining = self.deadline - clock.monotonic()
                if remaining <= 0 or stop.is_set():
                    break
                if step.delay_s >= remaining:
                    clock.wait(stop, remaining)
                    break
                if clock.wait(stop, step.delay_s):
                    break
                self._apply(step.fault)
            if self.final:
                for fault in self.package.final:
                    self._apply(fault)
        except BaseException as e:  # recorded; the campaign decides
            self.error = e


def run_nemesis(runtime: Cluster, package: Package, record: Record | None,
                stop_event: threading.Event, deadline: float, *, seed: int = 0,
                focus: LeaderOf | None = None, final: bool = True,
                clock: Clock = WALL_CLOCK) -> NemesisRunner:
    """Start the nemesis thread: the package's faults until `deadline` (a `clock.monotonic()`
    value) or `stop_event`, then (if `final`) the package's final faults. Returns the started
    thread; `join()` it."""
    runner = NemesisRunner(runtime, package, record, stop_event, deadline, seed=seed,
                           focus=focus, final=final, clock=clock)
    runner.start()
    return runner


def heal_all(runtime: Cluster, record: Record | None = None) -> object:
    """Resume paused nodes, start stopped ones, heal the network, remove toxics; recorded as
    one `heal` info pair when `record` is given. Returns the report."""
    return apply_recorded(HealAll(), runtime, random.Random(0), None,
                          record if record is not None else _ignore)


__all__ = ["NemesisRunner", "apply_recorded", "heal_all", "run_nemesis"]
