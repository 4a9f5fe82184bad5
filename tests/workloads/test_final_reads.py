"""The final reads' end-offset rule (harness.workloads.final_reads): a key whose partition
ends, stably at one leader epoch, at or below its target is done once read to that end;
a lagging or moving high watermark, an error or an epoch change never confirms an end.

The gate is tested with explicit times; the final-phase thread (`final_phase`) with a fake
client over an in-memory partition whose answers follow a script."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from harness.clients.base import (
    ClientSettings,
    Completion,
    EndOffset,
    QueueClient,
    TopicRegistry,
)
from harness.history import END_OFFSETS_F, Op
from harness.workloads.final_reads import TruncationGate
from harness.workloads.queue import QueueOpts, final_phase
from harness.workloads.recorder import Recorder

# -- the gate ----------------------------------------------------------------------------


def _feed(gate: TruncationGate, k: int, answers: list[tuple[float, EndOffset | None]]) -> None:
    for t, e in answers:
        gate.observe(k, e, t)


def test_stable_end_below_target_is_confirmed_once_read_to_it() -> None:
    g = TruncationGate(confirmations=3, stable_s=2.0)
    _feed(g, 8, [(0.0, EndOffset(0, 3, 7)), (1.0, EndOffset(0, 3, 7))])
    assert g.confirmed_end(8, target=5, read_to=2) is None  # two answers only
    g.observe(8, EndOffset(0, 3, 7), 2.0)
    assert g.confirmed_end(8, target=5, read_to=2) == 3
    # not read up to the end yet: offsets 0..2 exist, the thread has read only 0..1
    assert g.confirmed_end(8, target=5, read_to=1) is None
    # the target is 2: offset 2 exists below the end 3, so the normal rule must reach it
    assert g.confirmed_end(8, target=2, read_to=1) is None
    # an end exactly at the target: offset 3 does not exist
    assert g.confirmed_end(8, target=3, read_to=2) == 3


def test_answers_too_close_in_time_do_not_confirm() -> None:
    g = TruncationGate(confirmations=3, stable_s=2.0)
    _feed(g, 1, [(0.0, EndOffset(0, 3, 7)), (0.5, EndOffset(0, 3, 7)),
                 (1.0, EndOffset(0, 3, 7)), (1.5, EndOffset(0, 3, 7))])
    assert g.confirmed_end(1, target=9, read_to=2) is None
    g.observe(1, EndOffset(0, 3, 7), 2.0)
    assert g.confirmed_end(1, target=9, read_to=2) == 3


def test_a_partition_truncated_to_nothing_needs_no_read() -> None:
    g = TruncationGate(confirmations=2, stable_s=1.0)
    _feed(g, 4, [(0.0, EndOffset(0, 0, 3)), (1.0, EndOffset(0, 0, 3))])
    assert g.confirmed_end(4, target=11, read_to=-1) == 0
    # records deleted below the log start: nothing to read either
    _feed(g, 5, [(0.0, EndOffset(6, 6, 3)), (1.0, EndOffset(6, 6, 3))])
    assert g.confirmed_end(5, target=11, read_to=-1) == 6


@pytest.mark.parametrize(("third", "why"), [
    (EndOffset(0, 4, 7), "the high watermark moved (a follower caught up)"),
    (EndOffset(0, 3, 8), "a new leader epoch"),
    (None, "an error, e.g. OFFSET_NOT_AVAILABLE from a new leader"),
])
def test_any_change_restarts_the_streak(third: EndOffset | None, why: str) -> None:
    g = TruncationGate(confirmations=3, stable_s=2.0)
    _feed(g, 0, [(0.0, EndOffset(0, 3, 7)), (1.0, EndOffset(0, 3, 7)), (2.0, third),
                 (3.0, EndOffset(0, 3, 7)), (4.0, EndOffset(0, 3, 7))])
    assert g.confirmed_end(0, target=9, read_to=5) is None, why
    g.observe(0, EndOffset(0, 3, 7), 5.0)
    assert g.confirmed_end(0, target=9, read_to=5) == 3


def test_a_lagging_high_watermark_that_catches_up_is_never_an_end() -> None:
    """A new leader's high watermark climbs after the election (its followers fetch): each
    answer differs, so nothing is confirmed until it stops, and it stops at the target."""
    g = TruncationGate(confirmations=3, stable_s=2.0)
    target = 9
    for t, hw in enumerate([2, 4, 4, 7, 9, 10, 10, 10]):
        g.observe(0, EndOffset(0, hw, 7), float(t))
        assert g.confirmed_end(0, target, read_to=hw - 1) is None
    # the end settled above the target: the target exists and the normal rule applies


def test_an_unknown_epoch_never_confirms_unless_allowed() -> None:
    g = TruncationGate(confirmations=2, stable_s=1.0)
    _feed(g, 0, [(0.0, EndOffset(0, 3, None)), (1.0, EndOffset(0, 3, None)),
                 (2.0, EndOffset(0, 3, None))])
    assert g.confirmed_end(0, target=9, read_to=2) is None
    g2 = TruncationGate(confirmations=2, stable_s=1.0, need_epoch=False)
    _feed(g2, 0, [(0.0, EndOffset(0, 3, None)), (1.0, EndOffset(0, 3, None))])
    assert g2.confirmed_end(0, target=9, read_to=2) == 3


def test_gate_arguments() -> None:
    with pytest.raises(ValueError):
        TruncationGate(confirmations=1)
    with pytest.raises(ValueError):
        QueueOpts(final_end_confirmations=1)


# -- the end-offsets op ------------------------------------------------------------------


class _Answers(QueueClient):
    """A QueueClient whose only primitive is `end_offsets`, from a function."""

    def __init__(self, fn: Callable[[list[int]], dict[int, EndOffset | str]]) -> None:
        super().__init__(ClientSettings(), 0)
        self.fn = fn

    def end_offsets(self, keys: Any) -> dict[int, EndOffset | str]:
        return self.fn(list(keys))


def test_end_offsets_op_values() -> None:
    c = _Answers(lambda ks: {0: EndOffset(0, 5, 2), 1: "NOT_LEADER_OR_FOLLOWER"})
    r = c.invoke(END_OFFSETS_F, [0, 1])
    assert (r.type, r.value, r.extra) == ("ok", [[0, 0, 5, 2]],
                                         {"errors": [[1, "NOT_LEADER_OR_FOLLOWER"]]})
    assert not r.ends_process
    r = _Answers(lambda ks: {0: "OFFSET_NOT_AVAILABLE"}).invoke(END_OFFSETS_F, [0])
    assert r.type == "fail" and not r.ends_process

    def boom(ks: list[int]) -> dict[int, EndOffset | str]:
        raise TimeoutError("no answer")

    r = _Answers(boom).invoke(END_OFFSETS_F, [0])
    assert r.type == "fail" and not r.ends_process and "no answer" in r.extra["error"]


# -- the final-phase thread with a fake client --------------------------------------------


class FakePartitions:
    """Partitions as the fake clients see them: `logs[k]` the records, `answer(k, n)` the
    n-th end-offsets answer for k (EndOffset or an error text)."""

    def __init__(self, logs: dict[int, list[int]],
                 answer: Callable[[int, int], EndOffset | str]) -> None:
        self.logs = logs
        self.answer = answer
        self.asked: dict[int, int] = {}
        self.lock = threading.Lock()


class FakeFinalClient:
    """A client for the final phase: assign + seek to beginning, polls of 2 records per
    key, end-offsets answered by `FakePartitions.answer`."""

    def __init__(self, parts: FakePartitions, process: int) -> None:
        self.parts = parts
        self.client_id = f"fake-{process}"
        self.pos: dict[int, int] = {}

    def invoke(self, f: str, value: Any, extra: Any = None) -> Completion:
        p = self.parts
        if f == "crash":
            return Completion("info", value)
        if f == "debug-topic-partitions":
            return Completion("ok", {"partitions": []})
        if f == "assign":
            self.pos = dict.fromkeys(value, 0)
            return Completion("ok", value)
        if f == "poll":
            out = {}
            for k, o in self.pos.items():
                recs = p.logs.get(k, [])[o:o + 2]
                if recs:
                    out[k] = [[o + i, v] for i, v in enumerate(recs)]
                    self.pos[k] = o + len(recs)
            return Completion("ok", [["poll", out]])
        if f == END_OFFSETS_F:
            rows, errors = [], []
            with p.lock:
                for k in value:
                    n = p.asked[k] = p.asked.get(k, 0) + 1
                    a = p.answer(k, n)
                    if isinstance(a, str):
                        errors.append([k, a])
                    else:
                        rows.append([k, a.low, a.high, a.leader_epoch])
            if not rows:
                return Completion("fail", value, {"error": errors})
            return Completion("ok", rows, {"errors": errors} if errors else {})
        raise AssertionError(f)

    def close(self) -> None:
        pass


FAST = {"final_poll_interval_s": 0.001, "final_end_offset_interval_s": 0.01,
        "final_end_stable_s": 0.03, "final_round_s": 5.0}


def _final(parts: FakePartitions, targets: dict[int, int], **opts: Any) -> tuple[Any, list[Op]]:
    o = QueueOpts(concurrency=2, **{**FAST, "final_time_limit_s": 5.0, **opts})
    rec = Recorder(concurrency=2)

    def factory(_n: str, _s: ClientSettings, process: int, _t: TopicRegistry) -> Any:
        return FakeFinalClient(parts, process)

    run = final_phase("fake:9092", o, rec, targets, client_factory=factory)
    return run, rec.ops()


def _confirmations(ops: list[Op]) -> list[list[int]]:
    return [kv for op in ops if op.f == END_OFFSETS_F and op.type == "ok"
            for kv in op.get("truncated") or ()]


def test_final_reads_finish_a_truncated_key_at_its_end() -> None:
    """Key 8 was truncated to 3 records (target offset 6 gone), key 9 is whole: both
    threads finish, key 8 at its confirmed end, and the history says so."""
    parts = FakePartitions({8: [1, 2, 3], 9: [1, 2, 3, 4, 5]},
                           lambda k, n: EndOffset(0, 3, 4) if k == 8 else EndOffset(0, 5, 2))
    run, ops = _final(parts, {8: 6, 9: 4})
    assert run.final_complete, run.unreached
    assert run.truncated == {0: {8: 3}, 1: {8: 3}}
    assert sorted(_confirmations(ops)) == [[8, 3], [8, 3]]
    # each thread read key 8 up to its end (offset 2) before confirming it
    last_read = {op.process: max(o for o, _ in op.value[0][1][8]) for op in ops
                 if op.f == "poll" and op.type == "ok" and 8 in op.value[0][1]}
    assert set(last_read.values()) == {2}


def test_a_lagging_then_settling_high_watermark_is_read_to_the_target() -> None:
    """Key 0's high watermark lags after an election (1, 2, ... then 7): the reads wait and
    finish by reaching the target, with no truncation."""
    parts = FakePartitions({0: list(range(1, 8))},
                           lambda k, n: EndOffset(0, min(n, 7), 5))
    run, ops = _final(parts, {0: 6})
    assert run.final_complete and not run.truncated and not _confirmations(ops)


def test_an_end_that_keeps_failing_or_flipping_epochs_is_never_confirmed() -> None:
    """Answers alternate between an error and epochs 5/6: the key is never confirmed and the
    final reads end incomplete at their time limit, as they did before the rule."""

    def answer(k: int, n: int) -> EndOffset | str:
        return "OFFSET_NOT_AVAILABLE" if n % 3 == 0 else EndOffset(0, 2, 5 + n % 2)

    parts = FakePartitions({0: [1, 2]}, answer)
    run, ops = _final(parts, {0: 5}, final_time_limit_s=0.5)
    assert not run.final_complete and not run.truncated
    assert run.unreached == {0: {0: 5}, 1: {0: 5}}
    assert not _confirmations(ops)
    assert any(op.f == END_OFFSETS_F and op.type == "fail" for op in ops)


def test_without_the_rule_the_final_reads_wait_for_the_target() -> None:
    parts = FakePartitions({0: [1, 2]}, lambda k, n: EndOffset(0, 2, 5))
    run, ops = _final(parts, {0: 5}, final_time_limit_s=0.3, final_end_offsets=False)
    assert not run.final_complete and not any(op.f == END_OFFSETS_F for op in ops)
