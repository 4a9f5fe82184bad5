"""Stats: latency quantiles, throughput buckets, availability per fault window."""

from __future__ import annotations

import json

from harness.checkers.stats import fault_windows, quantiles, stats
from harness.history import Op

S = 1_000_000_000


def test_quantiles_nearest_rank_in_ms() -> None:
    xs = [i * 1_000_000 for i in range(1, 101)]  # 1..100 ms
    assert quantiles(xs) == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
    assert quantiles([]) == {}


def _history() -> list[Op]:
    ops: list[Op] = []

    def add(t: float, p: object, typ: str, f: str, v: object = None) -> None:
        ops.append(Op(len(ops), int(t * S), p, typ, f, v))  # type: ignore[arg-type]

    # 0-10 s healthy: 10 ok sends of 100 ms
    for i in range(10):
        add(i, 0, "invoke", "send", [["send", 0, i]])
        add(i + 0.1, 0, "ok", "send", [["send", 0, [i, i]]])
    add(10, "nemesis", "info", "start-partition", "majority")
    add(10.5, "nemesis", "info", "start-partition", [["n1"], ["n2", "n3"]])
    # 11-15 s partitioned: 2 ok (1 s each), 2 info
    for i in range(11, 15):
        add(i, 1, "invoke", "send", [["send", 0, i]])
        add(i + (1 if i < 13 else 0.5), 1, "ok" if i < 13 else "info", "send", [["send", 0, i]])
    add(15, "nemesis", "info", "stop-partition", None)
    add(15.2, "nemesis", "info", "stop-partition", "network-healed")
    add(16, 2, "invoke", "crash", None)
    add(16.1, 2, "info", "crash", None)
    add(17, 3, "invoke", "poll", [["poll"]])
    add(17.2, 3, "ok", "poll", [["poll", {}]])
    return ops


def test_fault_windows_and_availability() -> None:
    h = _history()
    (w,) = fault_windows(h)
    assert (w["f"], w["start_ns"], w["end_ns"]) == ("start-partition", 10 * S, int(15.2 * S))
    st = stats(h)
    (fw,) = st["fault_windows"]
    assert fw["counts"] == {"ok": 2, "fail": 0, "info": 2}
    assert fw["availability"] == 0.5
    assert fw["latency_ms"]["max"] == 1000.0
    nf = st["no_fault"]
    # crash ops are not client traffic for availability
    assert nf["counts"] == {"ok": 11, "fail": 0, "info": 0}
    assert nf["availability"] == 1.0
    assert st["by_f"]["send"]["ok"] == 12 and st["by_f"]["send"]["info"] == 2
    assert st["by_f"]["send"]["latency_ms"]["p50"] == 100.0
    # crash never succeeds, but that does not make stats invalid (kafka stats-checker)
    assert st["valid?"] is True
    assert st["throughput"]["by_f"]["send"]["ok"][0] == 1.0  # 10 oks in the first 10 s
    json.dumps(st)


def test_hiwater_nemesis_names_and_open_windows() -> None:
    h = [
        Op(0, 0, "nemesis", "info", "KillNode", 1),
        Op(1, 1 * S, "nemesis", "info", "KillNode", 1),
        Op(2, 2 * S, "nemesis", "info", "pause-node", 2),
        Op(3, 3 * S, "nemesis", "info", "pause-node", 2),
        Op(4, 4 * S, "nemesis", "info", "StartNode", 1),
        Op(5, 5 * S, "nemesis", "info", "StartNode", 1),
        Op(6, 9 * S, 0, "invoke", "poll", [["poll"]]),
    ]
    ws = fault_windows(h)
    assert [(w["f"], w["start_ns"], w["end_ns"]) for w in ws] == [
        ("kill-node", 0, 5 * S),
        ("pause-node", 2 * S, 9 * S),  # never resumed: open until the end
    ]
