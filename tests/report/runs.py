"""Hand-made run directories (history.jsonl, results.json, options.json) for report tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.checkers import QueuePolicy, check
from harness.checkers.policy import allowed_anomalies
from harness.checkers.synthetic import queue_history
from harness.history import Op, write_jsonl

S = 1_000_000_000
HOSTILE = "<script>alert(1)</script>"


class H:
    """A tiny history builder: times in seconds, indexes assigned in order."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, t: float, p: Any, typ: str, f: str, v: Any = None, **extra: Any) -> H:
        self.ops.append(Op(len(self.ops), int(t * S), p, typ, f, v, extra or None))
        return self


def _campaign_results(history: Sequence[Op], policy: QueuePolicy, faults: Any,
                      options: dict[str, Any]) -> dict[str, Any]:
    """What the campaign writes: the checkers' map plus verdict/bad/policy/options/faults."""
    r = check(history, policy)
    v = r["valid?"]
    bad: list[str] = list(r.get("queue", {}).get("bad_anomaly_types", []))
    if r.get("linearizable", {}).get("valid?") is False:
        bad.append("nonlinearizable")
    r["verdict"] = {True: "valid", False: "invalid"}.get(v, "unknown")
    r["bad"] = bad
    r["policy"] = {"sub_via": sorted(policy.sub_via), "ww_deps": policy.ww_deps,
                   "ignore": sorted(policy.ignore),
                   "allowed": sorted(allowed_anomalies(policy))}
    r["options"] = options
    r["faults"] = faults
    return r


def write_run(d: Path, history: Sequence[Op], results: dict[str, Any] | None,
              options: dict[str, Any]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    write_jsonl(history, d / "history.jsonl")
    # results go through JSON exactly as the campaign stores them (int keys become strings)
    if results is not None:
        (d / "results.json").write_text(json.dumps(results, default=list))
    (d / "options.json").write_text(json.dumps(options))
    return d


def with_nemesis(history: list[Op], faults: Sequence[tuple[float, float, str, str, Any]]) \
        -> list[Op]:
    """Insert Jepsen-style nemesis op pairs (two info events each) and renumber."""
    extra: list[Op] = []
    for t0, t1, start_f, stop_f, value in faults:
        for t, f, v in ((t0, start_f, value), (t1, stop_f, None)):
            extra.append(Op(-1, int(t * S), "nemesis", "info", f, v))
            extra.append(Op(-1, int(t * S) + 1000, "nemesis", "info", f, v))
    merged = sorted([*history, *extra], key=lambda op: op.time_ns)
    return [op._replace(index=i) for i, op in enumerate(merged)]


def valid_run(d: Path) -> Path:
    h = queue_history(3000, seed=7, keys=4, concurrency=4)
    end = h[-1].time_ns / S
    h = with_nemesis(h, [(end * 0.2, end * 0.35, "start-partition", "stop-partition",
                          ["isolated", {"n1": ["n2", "n3"]}]),
                         (end * 0.6, end * 0.7, "kill-node", "start-node", "n2")])
    opts = {"workload": "queue", "time_limit_s": round(end), "concurrency": 4,
            "nemesis": ["partition", "kill"], "seed": 7}
    res = _campaign_results(h, QueuePolicy(), ["partition", "kill"], opts)
    assert res["verdict"] == "valid", res
    return write_run(d, h, res, opts)


def lost_write_run(d: Path) -> Path:
    """Key 0: v1@0, v2@1 (acked, never read), v3@2 and again @3 (duplicate); key 1 holds a
    hostile string value."""
    h = H()
    h.add(0.0, 0, "invoke", "assign", [0, 1]).add(0.01, 0, "ok", "assign", [0, 1])
    h.add(0.0, 1, "invoke", "assign", [0, 1]).add(0.01, 1, "ok", "assign", [0, 1])
    h.add(0.1, 0, "invoke", "send", [["send", 0, 1]])
    h.add(0.2, 0, "ok", "send", [["send", 0, [0, 1]]])
    h.add(0.3, "nemesis", "info", "start-partition", ["isolated", {"n1": [HOSTILE]}])
    h.add(0.31, "nemesis", "info", "start-partition", ["isolated", {"n1": [HOSTILE]}])
    h.add(0.4, 0, "invoke", "send", [["send", 0, 2]])
    h.add(0.5, 0, "ok", "send", [["send", 0, [1, 2]]])
    h.add(0.6, 0, "invoke", "send", [["send", 0, 3], ["send", 1, HOSTILE]])
    h.add(0.7, 0, "ok", "send", [["send", 0, [2, 3]], ["send", 1, [0, HOSTILE]]])
    h.add(0.8, 2, "invoke", "send", [["send", 0, 4]])
    h.add(1.8, 2, "info", "send", [["send", 0, 4]], error="timeout " + HOSTILE)
    h.add(1.9, "nemesis", "info", "stop-partition", None)
    h.add(1.91, "nemesis", "info", "stop-partition", "network-healed")
    h.add(2.0, 1, "invoke", "poll", [["poll"]])
    h.add(2.1, 1, "ok", "poll", [["poll", {0: [[0, 1], [2, 3], [3, 3]],
                                           1: [[0, HOSTILE]]}]])
    opts = {"workload": "queue", "time_limit_s": 2, "concurrency": 3, "note": HOSTILE}
    res = _campaign_results(h.ops, QueuePolicy(), ["partition"], opts)
    assert res["verdict"] == "invalid", res
    assert {"lost_write", "duplicate"} <= set(res["bad"]), res["bad"]
    return write_run(d, h.ops, res, opts)


def linearizability_run(d: Path) -> Path:
    """Key 0: write 1, write 2, then a read of 1 (stale); key 1 is fine."""
    h = H()
    h.add(0.0, 0, "invoke", "write", [0, 1]).add(0.1, 0, "ok", "write", [0, 1])
    h.add(0.05, 2, "invoke", "write", [1, 7]).add(0.15, 2, "ok", "write", [1, 7])
    h.add(0.2, 0, "invoke", "write", [0, 2]).add(0.3, 0, "ok", "write", [0, 2])
    h.add(0.25, 2, "invoke", "cas", [1, [7, 8]]).add(0.35, 2, "ok", "cas", [1, [7, 8]])
    h.add(0.4, 1, "invoke", "read", [0, None]).add(0.5, 1, "ok", "read", [0, 1])
    h.add(0.45, 3, "invoke", "write", [0, 3]).add(0.9, 3, "info", "write", [0, 3])
    h.add(0.55, 1, "invoke", "read", [1, None]).add(0.6, 1, "ok", "read", [1, 8])
    opts = {"workload": "register", "time_limit_s": 1, "concurrency": 4}
    res = _campaign_results(h.ops, QueuePolicy(), [], opts)
    assert res["verdict"] == "invalid", res
    return write_run(d, h.ops, res, opts)


def unknown_run(d: Path) -> Path:
    """The linearizability search ran out of time on one key."""
    h = H()
    h.add(0.0, 0, "invoke", "write", [3, 1]).add(0.1, 0, "ok", "write", [3, 1])
    h.add(0.2, 1, "invoke", "read", [3, None]).add(0.3, 1, "ok", "read", [3, 1])
    res = {
        "valid?": "unknown",
        "linearizable": {"valid?": "unknown", "model": "register", "keys": 1, "ops": 2,
                         "dropped_ops": 0, "failures": [], "unknown_keys": [3],
                         "time_s": 60.0, "anomaly_types": []},
        "verdict": "unknown", "bad": [], "policy": {}, "faults": [],
        "options": {"workload": "register"},
    }
    return write_run(d, h.ops, res, {"workload": "register", "time_limit_s": 1})
