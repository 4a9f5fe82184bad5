"""The recorder: indexes and times under concurrency, JSONL, pairing, process renumbering
after `info` / `end_process` (also through a queue `Worker` with a scripted client)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.clients.base import ClientSettings, Completion, TopicRegistry
from harness.history import JsonlWriter, pair_index, read_jsonl
from harness.workloads.queue import OpSpec, QueueOpts, Worker
from harness.workloads.recorder import Recorder


def test_indexes_times_and_file(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "h.jsonl")
    rec = Recorder(w, concurrency=4)
    n_threads, n_ops = 8, 200

    def work(p: int) -> None:
        for i in range(n_ops):
            inv = rec.invoke(p, "send", [["send", p, i]])
            rec.complete(inv, "ok", [["send", p, [i, i]]])

    ts = [threading.Thread(target=work, args=(p,)) for p in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    rec.nemesis("start-partition", ["isolated", {"n1": ["n2"]}])
    ops = rec.ops()
    assert len(ops) == len(rec) == 2 * n_threads * n_ops + 1
    assert [op.index for op in ops] == list(range(len(ops)))
    times = [op.time_ns for op in ops]
    assert times == sorted(times) and times[0] >= 0
    assert read_jsonl(tmp_path / "h.jsonl") == ops  # the file is the index order
    assert len(pair_index(ops)) == 2 * n_threads * n_ops
    assert ops[-1].process == "nemesis" and ops[-1].type == "info"
    assert rec.ops(len(ops) - 2) == ops[-2:]
    assert rec.pending() == []
    w.close()


def test_pairing_rules() -> None:
    rec = Recorder(concurrency=2)
    inv = rec.invoke(0, "poll", [["poll"]])
    with pytest.raises(RuntimeError):
        rec.invoke(0, "poll", [["poll"]])  # one outstanding op per process
    with pytest.raises(ValueError):
        rec.complete(inv, "invoke", None)
    done = rec.complete(inv, "ok", [["poll", {}]], {"poll_ms": 5})
    assert done.f == "poll" and done.process == 0 and done.get("poll_ms") == 5
    with pytest.raises(RuntimeError):
        rec.complete(inv, "ok", None)  # already completed
    assert rec.pending() == []


def test_process_renumbering() -> None:
    rec = Recorder(concurrency=3)
    ok = rec.complete(rec.invoke(1, "send", []), "ok", [])
    assert rec.process_after(ok) == 1
    fail = rec.complete(rec.invoke(1, "send", []), "fail", [], {"error": "x"})
    assert rec.process_after(fail) == 1
    info = rec.complete(rec.invoke(1, "send", []), "info", [], {"error": "timeout"})
    assert rec.process_after(info) == 4  # 1 + concurrency: thread = process mod 3
    ended = rec.complete(rec.invoke(4, "send", []), "fail", [], {"end_process": True})
    assert rec.process_after(ended) == 7
    assert rec.process_after(ended) % 3 == 1
    with pytest.raises(TypeError):
        rec.next_process("nemesis")


def test_keep_false_reads_back(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "h.jsonl")
    rec = Recorder(w, concurrency=1, keep=False)
    for i in range(10):
        rec.complete(rec.invoke(0, "poll", [["poll"]]), "ok", [["poll", {i: [[0, i]]}]])
    ops = rec.ops()
    assert len(ops) == 20 and ops[-1].value == [["poll", {9: [[0, 9]]}]]
    assert rec.ops(18) == ops[18:]
    with pytest.raises(ValueError):
        Recorder(None, keep=False)
    w.close()


class FakeClient:
    """Answers from a script of completions; remembers whether it was closed."""

    instances: ClassVar[list[FakeClient]] = []

    def __init__(self, process: int, script: list[Completion]) -> None:
        self.process = process
        self.client_id = f"fake-{process}"
        self.script = script
        self.closed = False
        FakeClient.instances.append(self)

    def invoke(self, f: str, value: Any, extra: Any = None) -> Completion:
        if f == "crash":
            return Completion("info", value)
        return self.script.pop(0)

    def close(self) -> None:
        self.closed = True


def test_worker_continues_as_new_process_after_info() -> None:
    FakeClient.instances = []
    script = [Completion("ok", [["send", 1, [0, 1]]]),
              Completion("info", [["send", 1, 2]], {"error": "timeout"}),
              Completion("fail", [["send", 1, 3]], {"error": "unknown-topic-or-partition"}),
              Completion("fail", [["send", 1, 4]], {"error": "x", "end_process": True}),
              Completion("ok", [["poll", {}]])]
    rec = Recorder(concurrency=5)

    def factory(_n: str, _s: ClientSettings, process: int, _t: TopicRegistry) -> Any:
        return FakeClient(process, script)

    w = Worker(2, QueueOpts(concurrency=5), ClientSettings(), rec, TopicRegistry(), factory)
    procs = []
    for v in range(1, 5):
        done = w.run_op(OpSpec("send", [["send", 1, v]]))
        procs.append(done.process)
    done = w.run_op(OpSpec("poll", [["poll"]], {"poll_ms": 1000}))
    procs.append(done.process)
    assert procs == [2, 2, 7, 7, 12]
    assert done.get("poll_ms") == 1000  # the invocation's extra keys stay on completion
    assert [c.process for c in FakeClient.instances] == [2, 7, 12]
    assert [c.closed for c in FakeClient.instances] == [True, True, False]
    assert all(op.process % 5 == 2 for op in rec.ops())


def test_worker_records_no_client_as_fail() -> None:
    rec = Recorder(concurrency=1)

    def factory(*_a: Any) -> Any:
        raise OSError("cannot connect")

    w = Worker(0, QueueOpts(concurrency=1), ClientSettings(), rec, TopicRegistry(), factory)
    done = w.run_op(OpSpec("send", [["send", 0, 1]]))
    assert done.type == "fail" and done.get("error")[0] == "no-client"
    assert w.process == 0


def test_worker_crash_renumbers_without_opening_a_client() -> None:
    FakeClient.instances = []
    rec = Recorder(concurrency=2)
    script = [Completion("ok", [["poll", {}]])]

    def factory(_n: str, _s: ClientSettings, process: int, _t: TopicRegistry) -> Any:
        return FakeClient(process, script)

    w = Worker(1, QueueOpts(concurrency=2), ClientSettings(), rec, TopicRegistry(), factory)
    done = w.run_op(OpSpec("crash", None))
    assert done.type == "info" and done.process == 1 and w.process == 3
    assert FakeClient.instances == []
    w.run_op(OpSpec("poll", [["poll"]]))
    done = w.run_op(OpSpec("crash", None))  # with a client: Jepsen's crash closes it
    assert done.type == "info" and w.process == 5
    assert [c.closed for c in FakeClient.instances] == [True]
