"""A thread-safe history recorder shared by workload workers, the nemesis and the campaign.

    rec = Recorder(JsonlWriter(run_dir / "history.jsonl"), concurrency=5)
    inv = rec.invoke(0, "send", [["send", 3, 7]])
    done = rec.complete(inv, "ok", [["send", 3, [12, 7]]])
    rec.info("nemesis", "start-partition", ["isolated", {...}])   # twice: start, then result
    process = rec.process_after(done)      # 0, or 0 + concurrency after an info / end_process

Every event gets the next `index` and `time_ns` (nanoseconds since the recorder started, on
the monotonic clock) under one lock, and is appended to the writer under the same lock, so
the file's order is the index order and times never go backwards.

Process numbering is Jepsen's (`context/with-next-process`): worker thread t starts as
process t; when one of its ops ends `info` or carries `end_process`, it continues as
`process + concurrency`, so `thread = process mod concurrency` and one process id is one
client instance.

Memory: with `keep=True` (the default) every op also stays in memory for `ops()` — about a
few hundred bytes per op, so ~0.5 GB per million ops. Long runs pass `keep=False`: only the
outstanding invocations are held, and `ops()` reads the JSONL file back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from harness.history import FAIL, INFO, INVOKE, NEMESIS, OK, JsonlWriter, Op, read_jsonl

COMPLETION_TYPES = (OK, FAIL, INFO)


class Recorder:
    def __init__(
        self,
        writer: JsonlWriter | None = None,
        *,
        concurrency: int = 1,
        keep: bool = True,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if writer is None and not keep:
            raise ValueError("keep=False needs a writer to read the history back from")
        self.writer = writer
        self.concurrency = concurrency
        self.keep = keep
        self._clock = clock_ns
        self._t0 = clock_ns()
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._next_index = writer.next_index if writer is not None else 0
        self._last_time = 0
        self._count = 0
        #: process -> its outstanding invocation
        self._pending: dict[Any, Op] = {}

    # -- time ------------------------------------------------------------------------------

    def elapsed_ns(self) -> int:
        """Nanoseconds since the recorder started (the history's clock)."""
        return self._clock() - self._t0

    # -- recording -------------------------------------------------------------------------

    def _append(self, process: Any, type_: str, f: str, value: Any,
                extra: Mapping[str, Any] | None) -> Op:
        # the lock is held by the caller
        t = max(self._clock() - self._t0, self._last_time)
        self._last_time = t
        op = Op(self._next_index, t, process, type_, f, value, dict(extra) if extra else None)
        if self.writer is not None:
            op = self.writer.append(op)
        self._next_index = op.index + 1
        self._count += 1
        if self.keep:
            self._ops.append(op)
        return op

    def invoke(self, process: int, f: str, value: Any,
               extra: Mapping[str, Any] | None = None) -> Op:
        """Record an invocation; a process has at most one outstanding op."""
        with self._lock:
            if process in self._pending:
                raise RuntimeError(f"process {process} already has an outstanding op "
                                   f"{self._pending[process]}")
            op = self._append(process, INVOKE, f, value, extra)
            self._pending[process] = op
            return op

    def complete(self, invoke_op: Op, type: str, value: Any,
                 extra: Mapping[str, Any] | None = None) -> Op:
        """Record the completion (`ok`, `fail` or `info`) of `invoke_op`."""
        if type not in COMPLETION_TYPES:
            raise ValueError(f"a completion is ok, fail or info, not {type!r}")
        with self._lock:
            pending = self._pending.get(invoke_op.process)
            if pending is None or pending.index != invoke_op.index:
                raise RuntimeError(f"no outstanding invocation {invoke_op}")
            del self._pending[invoke_op.process]
            return self._append(invoke_op.process, type, invoke_op.f, value, extra)

    def info(self, process: Any, f: str, value: Any,
             extra: Mapping[str, Any] | None = None) -> Op:
        """One `info` event outside the invoke/complete pairing: nemesis ops, recorded
        Jepsen-style as two `info` events (the start, then the result), process `nemesis`."""
        with self._lock:
            return self._append(process, INFO, f, value, extra)

    def nemesis(self, f: str, value: Any, extra: Mapping[str, Any] | None = None) -> Op:
        return self.info(NEMESIS, f, value, extra)

    # -- processes -------------------------------------------------------------------------

    def next_process(self, process: int | str) -> int:
        """The worker's next process id (Jepsen `with-next-process`)."""
        if not isinstance(process, int):
            raise TypeError(f"only client processes are renumbered, not {process!r}")
        return process + self.concurrency

    def process_after(self, completion: Op) -> Any:
        """The process id the completion's worker continues as."""
        if completion.type == INFO or completion.get("end_process"):
            return self.next_process(completion.process)
        return completion.process

    def pending(self) -> list[Op]:
        """Invocations without a completion (yet)."""
        with self._lock:
            return sorted(self._pending.values(), key=lambda o: o.index)

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def ops(self, start: int = 0) -> list[Op]:
        """The history so far, in index order (a copy), from the `start`-th recorded op on
        (a progress display polls `ops(seen)` and copies only what is new)."""
        with self._lock:
            if self.keep:
                return self._ops[start:]
            assert self.writer is not None
            path = self.writer.path  # the writer flushes every line
        return read_jsonl(path)[start:]
