"""The campaign's live progress display: plain lines off a terminal, a rich panel on one."""

from __future__ import annotations

import io

from rich.console import Console

from harness.report.progress import Progress, describe_nemesis, totals


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_totals_flat_and_per_f() -> None:
    assert totals({"ok": 3, "fail": 1, "info": 2})[0] == {"ok": 3, "fail": 1, "info": 2}
    tot, by_f = totals({"send": {"ok": 5, "info": 1}, "poll": {"ok": 2, "fail": 4}})
    assert tot == {"ok": 7, "fail": 4, "info": 1}
    assert by_f["send"] == {"ok": 5, "fail": 0, "info": 1}


def test_describe_nemesis() -> None:
    assert describe_nemesis(None) == "no fault"
    assert describe_nemesis([]) == "no fault"
    assert describe_nemesis("kill-node n2") == "kill-node n2"
    assert describe_nemesis(["partition", "pause"]) == "partition, pause"
    assert describe_nemesis({"partition": ["n1"]}) == "partition=n1"


def test_plain_lines_when_not_a_tty() -> None:
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, width=200)
    clock = Clock()
    with Progress(60, title="queue", console=con, interval_s=10, clock=clock) as p:
        assert not p.live
        p.update({"ok": 0, "fail": 0, "info": 0})  # first update prints
        clock.t += 2
        p.update({"ok": 100, "fail": 2, "info": 1})  # within the interval: quiet
        clock.t += 1
        p.update({"ok": 130, "fail": 2, "info": 1}, "partition-network [n1] [n2 n3]")
        clock.t += 12
        p.update({"ok": 400, "fail": 5, "info": 3}, "partition-network [n1] [n2 n3]",
                 anomalies={"lost_write": 2, "duplicate": 0})
        assert p.remaining_s == 45
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4, lines  # first, fault change, interval, final
    assert "elapsed 00:00/01:00" in lines[0] and "nemesis: no fault" in lines[0]
    assert "nemesis: partition-network [n1] [n2 n3]" in lines[1]
    assert "ok 400 fail 5 info 3" in lines[2]
    assert "anomalies: lost_write=2" in lines[2] and "duplicate" not in lines[2]
    assert "ops/s" in lines[2]
    assert lines[3].startswith("[queue] done 00:15/01:00")
    assert "\x1b[" not in buf.getvalue()  # no terminal escapes in a log


def test_rate_over_window() -> None:
    clock = Clock()
    p = Progress(100, console=Console(file=io.StringIO()), live=False, clock=clock,
                 rate_window_s=10)
    p.start()
    for i in range(30):
        p.update({"ok": 50 * i, "fail": 0, "info": 0})
        clock.t += 1
    ops, ok = p.rates()
    assert abs(ops - 50) < 1e-9 and abs(ok - 50) < 1e-9
    p.stop()


def test_live_panel_on_a_terminal() -> None:
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=120, color_system=None)
    clock = Clock()
    with Progress(30, title="register", console=con, clock=clock) as p:
        assert p.live
        clock.t += 3
        p.update({"write": {"ok": 7, "fail": 1, "info": 0}, "read": {"ok": 9}},
                 ["kill-node n2"], anomalies={"nonlinearizable": 1})
    out = buf.getvalue()
    for s in ("register", "00:03 / 00:30", "remaining 00:27", "ok 16", "fail 1",
              "nemesis: kill-node n2", "anomalies so far: nonlinearizable=1", "write"):
        assert s in out, (s, out)
