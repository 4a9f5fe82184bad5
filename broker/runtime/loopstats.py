"""Event-loop stall diagnostics, off unless HIWATER_LOOPSTATS names a directory.

Once a second the broker appends one JSON line to DIR/broker-<pid>.jsonl: the busy time of
every event-loop iteration (the iteration minus its selector wait) as a histogram; the
callbacks that ran in iterations over STALL_MS, by name, each with its wall and its CPU time
(a callback whose wall time is many times its CPU was descheduled, not slow); the garbage
collector's pauses per generation (gc.callbacks); each thread's CPU and run-queue wait
(/proc/self/task/*/schedstat: time runnable but not running, i.e. waiting for a CPU); and each
Produce's residence in the broker, request read to response built (for acks=all: the wait for
the followers); and every segment roll's wall and CPU time (a roll fsyncs the old segment).
It answers "what did the slowest requests wait for" with figures that a busy
machine does not blur (bench/README.md, "What the slowest acks=all records wait for").

Diagnostics only: it wraps asyncio's private `_run_once`, the selector's `select` and
`Handle._run` (a few microseconds per callback) and two methods of the produce handler.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

STALL_MS = 2.0
BUCKETS_MS = (0.5, 1, 2, 5, 10, 20, 50, 100)


def _thread_names() -> dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def _schedstat() -> dict[int, tuple[int, int, int]]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            run, wait, slices = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(run), int(wait), int(slices))
    return out


class LoopStats:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._prev_sched = _schedstat()
        self.uninstall: Callable[[], None] = lambda: None
        self._reset()

    def _reset(self) -> None:
        """The counters of one second."""
        self.hist = [0] * (len(BUCKETS_MS) + 1)
        self.busy_s = 0.0
        self.iters = 0
        self.stalls: list[tuple[float, list[tuple[str, float, float]]]] = []
        self.stall_cpu_s = 0.0
        self.stall_wall_s = 0.0
        self.stall_callbacks: Counter[str] = Counter()
        self.gc_start = 0.0
        self.gc: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._handles: list[tuple[str, float, float]] = []
        self.residence: list[float] = []  # produce: request read to response built (ms)
        self.rolls: list[tuple[float, float]] = []  # segment rolls: wall, CPU (ms)

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        stats = self
        selector = loop._selector  # type: ignore[attr-defined]
        orig_select = selector.select
        waited = [0.0]

        def select(timeout: float | None = None) -> Any:
            t = time.perf_counter()
            try:
                return orig_select(timeout)
            finally:
                waited[0] += time.perf_counter() - t

        selector.select = select
        orig_run_once = loop._run_once  # type: ignore[attr-defined]

        def run_once() -> None:
            waited[0] = 0.0
            stats._handles = []
            t = time.perf_counter()
            orig_run_once()
            stats.iteration(time.perf_counter() - t - waited[0])

        loop._run_once = run_once  # type: ignore[attr-defined]
        orig_handle_run = asyncio.events.Handle._run

        def handle_run(h: asyncio.events.Handle) -> None:
            t, c = time.perf_counter(), time.thread_time()
            orig_handle_run(h)
            dt = time.perf_counter() - t
            if dt > 0.0005:
                stats._handles.append((_name(h), dt, time.thread_time() - c))

        asyncio.events.Handle._run = handle_run  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self.on_gc)
        from broker.runtime import handlers

        started_init = handlers._ProduceStarted.__init__
        started_finish = handlers._ProduceStarted.finish
        born: dict[int, float] = {}

        def init(self: Any, *a: Any, **k: Any) -> None:
            born[id(self)] = time.perf_counter()
            started_init(self, *a, **k)

        def finish(self: Any) -> Any:
            t = born.pop(id(self), None)
            if t is not None:
                stats.residence.append((time.perf_counter() - t) * 1000)
            return started_finish(self)

        handlers._ProduceStarted.__init__ = init  # type: ignore[method-assign]
        handlers._ProduceStarted.finish = finish  # type: ignore[method-assign]

        from broker.store.log import Log

        orig_roll = Log.roll

        def roll(log: Log, now_ms: int) -> Any:
            t, c = time.perf_counter(), time.thread_time()
            try:
                return orig_roll(log, now_ms)
            finally:
                stats.rolls.append((round((time.perf_counter() - t) * 1000, 2),
                                    round((time.thread_time() - c) * 1000, 2)))

        Log.roll = roll  # type: ignore[method-assign,assignment]

        def uninstall() -> None:
            Log.roll = orig_roll  # type: ignore[method-assign]
            asyncio.events.Handle._run = orig_handle_run  # type: ignore[method-assign]
            handlers._ProduceStarted.__init__ = started_init  # type: ignore[method-assign]
            handlers._ProduceStarted.finish = started_finish  # type: ignore[method-assign]
            if self.on_gc in gc.callbacks:
                gc.callbacks.remove(self.on_gc)
            selector.select = orig_select
            loop._run_once = orig_run_once  # type: ignore[attr-defined]

        self.uninstall = uninstall
        loop.call_later(1.0, self.dump, loop)

    def iteration(self, busy: float) -> None:
        self.iters += 1
        self.busy_s += busy
        ms = busy * 1000
        i = 0
        while i < len(BUCKETS_MS) and ms > BUCKETS_MS[i]:
            i += 1
        self.hist[i] += 1
        if ms > STALL_MS:
            hs = sorted(self._handles, key=lambda x: -x[1])[:4]
            self.stall_wall_s += sum(h[1] for h in self._handles)
            self.stall_cpu_s += sum(h[2] for h in self._handles)
            self.stalls.append((round(ms, 2), [(n, round(d * 1000, 2), round(c * 1000, 2))
                                               for n, d, c in hs]))
            for n, _, _ in hs[:1]:
                self.stall_callbacks[n] += 1

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.gc_start = time.perf_counter()
        else:
            self.gc[info["generation"]].append(time.perf_counter() - self.gc_start)

    def dump(self, loop: asyncio.AbstractEventLoop) -> None:
        sched = _schedstat()
        names = _thread_names()
        threads = {}
        for tid, (run, wait, slices) in sched.items():
            p = self._prev_sched.get(tid, (0, 0, 0))
            if run - p[0] or wait - p[1]:
                threads[names.get(tid, str(tid))] = {
                    "cpu_ms": round((run - p[0]) / 1e6, 1),
                    "runq_wait_ms": round((wait - p[1]) / 1e6, 1),
                    "slices": slices - p[2]}
        self._prev_sched = sched
        line = {
            "t": time.time(), "iters": self.iters, "busy_ms": round(self.busy_s * 1000, 1),
            "hist": self.hist, "stalls": self.stalls[:30], "n_stalls": len(self.stalls),
            "stall_wall_ms": round(self.stall_wall_s * 1000, 1),
            "stall_cpu_ms": round(self.stall_cpu_s * 1000, 1),
            "stall_top": self.stall_callbacks.most_common(8),
            "gc": {g: [len(v), round(sum(v) * 1000, 2), round(max(v, default=0) * 1000, 2)]
                   for g, v in self.gc.items()},
            "threads": threads,
            "residence": sorted(round(x, 2) for x in self.residence),
            "rolls": self.rolls,
        }
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")
        self._reset()
        loop.call_later(1.0, self.dump, loop)


def _name(h: asyncio.events.Handle) -> str:
    cb = h._callback  # type: ignore[attr-defined]
    owner = getattr(cb, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = f":{frame.f_lineno}" if frame is not None else ""
        return f"task {getattr(coro, '__qualname__', coro)}{where}"
    return getattr(cb, "__qualname__", repr(cb))


def maybe_install(loop: asyncio.AbstractEventLoop) -> LoopStats | None:
    d = os.environ.get("HIWATER_LOOPSTATS")
    if not d:
        return None
    if not hasattr(loop, "_run_once") or not hasattr(loop, "_selector"):
        # it instruments asyncio's own loop; uvloop runs its iterations in C
        logging.getLogger("hiwater.broker").warning(
            "HIWATER_LOOPSTATS ignored: it needs asyncio's event loop "
            "(hiwater.event.loop=asyncio), this broker runs %s", type(loop).__module__)
        return None
    stats = LoopStats(Path(d) / f"broker-{os.getpid()}.jsonl")
    stats.install(loop)
    return stats
