"""Running a package against a runtime, recording every fault in the history as Jepsen does:
an `info` invocation and an `info` completion with process `"nemesis"`.

    stop = threading.Event()
    runner = run_nemesis(runtime, package, sink, stop, deadline=time.monotonic() + 60, seed=7)
    ...                                   # clients run meanwhile
    runner.join(timeout=120)              # it ends by itself at the deadline, then runs finals
    heal_all(runtime, sink)               # the campaign's final phase (records one "heal" pair)

The sink receives `Op`s with `index=-1` (the sink numbers them, as `JsonlWriter.append` does)
and `time_ns` measured from `t0_ns` (`time.monotonic_ns()` at the test's start; pass the
clients' origin so times line up). Clients append to the same sink from other threads: give
every writer one `LockedSink`. `MemorySink` keeps ops in a list (tests).

Bounds: each wait ends at the deadline or when `stop_event` is set; each fault is bounded by the
runtime's own timeouts (a clean stop waits at most 30 s, then SIGKILL); after the main phase
the package's final faults run once each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from harness.history import INFO, NEMESIS, Op
from harness.runtime.base import Runtime
from nemesis import executor
from nemesis.faults import Fault, HealAll, LeaderOf
from nemesis.packages import Package, split_seed


class Sink(Protocol):
    def append(self, op: Op) -> Op: ...


class LockedSink:
    """Serialises appends to a sink (e.g. a `harness.history.JsonlWriter`) across threads."""

    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self._lock = threading.Lock()

    def append(self, op: Op) -> Op:
        with self._lock:
            return self.inner.append(op)


class MemorySink:
    """Ops in a list; numbers ops given with index -1."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def append(self, op: Op) -> Op:
        with self._lock:
            if op.index < 0:
                op = op._replace(index=len(self.ops))
            self.ops.append(op)
            return op


class _Recorder:
    def __init__(self, sink: Sink | Callable[[Op], Any] | None, t0_ns: int) -> None:
        self.sink = sink
        self.t0_ns = t0_ns

    def __call__(self, f: str, value: Any) -> None:
        if self.sink is None:
            return
        op = Op(-1, time.monotonic_ns() - self.t0_ns, NEMESIS, INFO, f, value)
        if hasattr(self.sink, "append"):
            self.sink.append(op)
        else:
            self.sink(op)


def apply_recorded(fault: Fault, runtime: Runtime, rng: Any, focus: LeaderOf | None,
                   record: Callable[[str, Any], None],
                   execute: Callable[..., Any] = executor.execute) -> Any:
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

    def __init__(self, runtime: Runtime, package: Package,
                 sink: Sink | Callable[[Op], Any] | None, stop_event: threading.Event,
                 deadline: float, *, seed: int = 0, focus: LeaderOf | None = None,
                 t0_ns: int | None = None, final: bool = True) -> None:
        super().__init__(name=f"nemesis-{package.name}", daemon=True)
        self.runtime = runtime
        self.package = package
        self.stop_event = stop_event
        self.deadline = deadline
        self.focus = focus
        self.final = final
        self.gen_rng, self.exec_rng = split_seed(seed)
        self.record = _Recorder(sink, time.monotonic_ns() if t0_ns is None else t0_ns)
        self.results: list[tuple[Fault, Any]] = []
        self.error: BaseException | None = None

    def _apply(self, fault: Fault) -> None:
        result = apply_recorded(fault, self.runtime, self.exec_rng, self.focus, self.record,
                                self.package.executor)
        self.results.append((fault, result))

    def run(self) -> None:
        try:
            generator = self.package.generator(self.gen_rng)
            for step in generator:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0 or self.stop_event.is_set():
                    break
                if step.delay_s >= remaining:
                    self.stop_event.wait(remaining)
                    break
                if self.stop_event.wait(step.delay_s):
                    break
                self._apply(step.fault)
            if self.final:
                for fault in self.package.final:
                    self._apply(fault)
        except BaseException as e:  # recorded; the campaign decides
            self.error = e


def run_nemesis(runtime: Runtime, package: Package,
                history_sink: Sink | Callable[[Op], Any] | None,
                stop_event: threading.Event, deadline: float, *, seed: int = 0,
                focus: LeaderOf | None = None, t0_ns: int | None = None,
                final: bool = True) -> NemesisRunner:
    """Start the nemesis thread: the package's faults until `deadline` (a `time.monotonic()`
    value) or `stop_event`, then (if `final`) the package's final faults. Returns the started
    thread; `join()` it."""
    runner = NemesisRunner(runtime, package, history_sink, stop_event, deadline, seed=seed,
                           focus=focus, t0_ns=t0_ns, final=final)
    runner.start()
    return runner


def heal_all(runtime: Runtime, history_sink: Sink | Callable[[Op], Any] | None = None,
             t0_ns: int | None = None) -> Any:
    """Resume paused nodes, start stopped ones, heal the network, remove toxics; recorded as
    one `heal` info pair when a sink is given. Returns the report."""
    record = _Recorder(history_sink, time.monotonic_ns() if t0_ns is None else t0_ns)
    return apply_recorded(HealAll(), runtime, None, None, record)


__all__ = ["LockedSink", "MemorySink", "NemesisRunner", "Sink", "heal_all", "run_nemesis"]
