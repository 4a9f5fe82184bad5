"""`truncated_write`: committed writes at or past a key's confirmed final end offset.

The history of an unclean election that truncates a key nobody writes again: every value
was acknowledged and read before the truncation, so Jepsen's checks (lost_write, unseen)
find nothing; only the final reads' confirmed end offset shows the loss. Every input the
checkers take (Op lists, JSONL, Parquet, columnar Parquet/Arrow) gives the reference's
answer: the fast path declines such histories."""

from __future__ import annotations

import json
from typing import Any

from harness.analysis.runs import check_run
from harness.checkers import check, queue
from harness.checkers.policy import run_verdict
from harness.history import END_OFFSETS_F, Op
from tests.checkers.test_columnar import _same_everywhere


def o(index: int, process: Any, type_: str, f: str, value: Any, **extra: Any) -> Op:
    return Op(index, index * 1000, process, type_, f, value, extra or None)


def truncated_history(confirm: list[list[int]] | None = [[8, 2]]) -> list[Op]:  # noqa: B006
    """Key 8: values 1..5 acknowledged at offsets 0..4 and read; key 9: one value. Then the
    final phase: key 8 reads back offsets 0..1 only, and (with `confirm`) its end offset 2
    is confirmed; v6 was an info send at offset 5 never read (never proven committed)."""
    h: list[Op] = []

    def add(process: Any, typ: str, f: str, value: Any, **extra: Any) -> None:
        h.append(o(len(h), process, typ, f, value, **extra))

    for v in range(1, 6):
        add(0, "invoke", "send", [["send", 8, v]])
        add(0, "ok", "send", [["send", 8, [v - 1, v]]])
    add(0, "invoke", "send", [["send", 8, 6]])
    add(0, "info", "send", [["send", 8, [5, 6]]], error="timeout")
    add(1, "invoke", "send", [["send", 9, 1]])
    add(1, "ok", "send", [["send", 9, [0, 1]]])
    add(2, "invoke", "poll", [["poll"]])
    add(2, "ok", "poll", [["poll", {8: [[o_, o_ + 1] for o_ in range(5)], 9: [[0, 1]]}]])
    # the final phase (process 5: thread 2's next process after its crash)
    add(5, "invoke", "assign", [8, 9], seek_to_beginning=True)
    add(5, "ok", "assign", [8, 9], seek_to_beginning=True)
    add(5, "invoke", "poll", [["poll"]], poll_ms=1000)
    add(5, "ok", "poll", [["poll", {8: [[0, 1], [1, 2]], 9: [[0, 1]]}]], poll_ms=1000)
    add(5, "invoke", END_OFFSETS_F, [8])
    extra = {"truncated": confirm} if confirm else {}
    add(5, "ok", END_OFFSETS_F, [[8, 0, 2, 4]], **extra)
    return h


def test_confirmed_end_shows_the_truncated_writes() -> None:
    h = truncated_history()
    a = queue.analysis(h)
    errs = a.errors["truncated_write"]
    assert [(e["key"], e["value"], e["offset"], e["end_offset"]) for e in errs] == [
        (8, 3, 2, 2), (8, 4, 3, 2), (8, 5, 4, 2)]
    assert all(e["confirmed_by"].f == END_OFFSETS_F for e in errs)
    assert [e["writer"].index for e in errs] == [5, 7, 9]
    # Jepsen's own checks see nothing: everything was read before the truncation
    assert set(a.errors) == {"truncated_write"}
    r = check(h)
    assert r["valid?"] is False and r["queue"]["bad_anomaly_types"] == ["truncated_write"]
    facts = {"workload": {"final_complete": True}}
    assert run_verdict(r, facts) == ("invalid", ["truncated_write"])


def test_without_a_confirmation_the_loss_is_invisible() -> None:
    """What the checker said before the final reads confirmed ends: valid (the campaign
    only called it unknown because the final reads never completed)."""
    h = truncated_history(confirm=None)
    assert "truncated_write" not in queue.analysis(h).errors
    assert check(h)["valid?"] is True


def test_info_send_read_by_an_ok_poll_counts_as_committed() -> None:
    h = truncated_history(confirm=[[8, 5]])
    assert "truncated_write" not in queue.analysis(h).errors  # v6 (info) was never read
    # now some ok poll read v6 at offset 5: its writer must have committed
    h = h[:-2] + [o(len(h) - 2, 3, "invoke", "poll", [["poll"]]),
                  o(len(h) - 1, 3, "ok", "poll", [["poll", {8: [[5, 6]]}]])] + [
        o(len(h) + i, op.process, op.type, op.f, op.value, **(op.extra or {}))
        for i, op in enumerate(h[-2:])]
    errs = queue.analysis(h).errors["truncated_write"]
    assert [(e["value"], e["offset"]) for e in errs] == [(6, 5)]


def test_the_highest_confirmed_end_counts() -> None:
    h = truncated_history(confirm=[[8, 2]])
    n = len(h)
    h += [o(n, 6, "invoke", END_OFFSETS_F, [8]),
          o(n + 1, 6, "ok", END_OFFSETS_F, [[8, 0, 4, 4]], truncated=[[8, 4]])]
    errs = queue.analysis(h).errors["truncated_write"]
    assert [(e["value"], e["end_offset"], e["confirmed_by"].index) for e in errs] == [
        (5, 4, n + 1)]


def test_every_input_gives_the_reference_answer() -> None:
    ref, answered = _same_everywhere(truncated_history())
    assert ref["bad_anomaly_types"] == ["truncated_write"]
    assert not any(answered.values()), answered  # the fast path declined everywhere
    # without the confirmation the fast path answers (valid) as before
    ref, answered = _same_everywhere(truncated_history(confirm=None))
    assert ref["valid?"] is True and all(answered.values()), answered


def test_analysis_of_a_run_agrees() -> None:
    facts = {"probes": {"valid?": True}, "workload": {"final_complete": True}}
    r = check_run(truncated_history(), ["assign"], facts)
    assert (r["verdict"], json.loads(r["bad"])) == ("invalid", ["truncated_write"])


def test_report_line() -> None:
    from harness.report.explain import explain
    from harness.report.page import describe_err

    q = check(truncated_history())["queue"]
    lines = [describe_err("truncated_write", e)
             for e in q["anomalies"]["truncated_write"]["errs"]]
    assert lines[0] == ("key 8: value 3 at offset 2, but the partition ends at 2 (op #21); "
                        "written by op #5")
    assert explain("truncated_write").title == "Truncated write"
