"""Queue checker on simulated histories: clean runs are clean, injected faults are found, and
results do not depend on PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from harness.checkers import queue, synthetic
from harness.history import Op


def test_clean_histories_have_no_anomalies() -> None:
    for seed, txn in ((1, False), (2, False), (3, True)):
        h = synthetic.queue_history(6000, seed=seed, txn=txn, info_p=0.02)
        errors = queue.analysis(h).errors
        # a txn that polls after its own send may see it in this simple simulation
        errors.pop("precommitted_read", None)
        assert errors == {}, (seed, sorted(errors))


def _drop_from_polls(h: list[Op], k: Any, v: Any) -> list[Op]:
    out = []
    for op in h:
        if op.type != "invoke" and op.f in ("poll", "txn"):
            value = []
            for mop in op.value:
                if mop[0] == "poll" and len(mop) > 1:
                    mop = ["poll", {kk: [p for p in ps if not (kk == k and p[1] == v)]
                                    for kk, ps in mop[1].items()}]
                value.append(mop)
            op = op._replace(value=value)
        out.append(op)
    return out


def test_injected_lost_write_is_found() -> None:
    h = synthetic.queue_history(4000, seed=4)
    # an acknowledged value of key 0 from the middle of its log
    sends = [(m[1], m[2][1]) for op in h if op.type == "ok" and op.f == "send"
             for m in op.value if m[1] == 0]
    k, v = sends[len(sends) // 2]
    a = queue.analysis(_drop_from_polls(h, k, v))
    assert [(e["key"], e["value"]) for e in a.errors["lost_write"]] == [(k, v)]
    assert a.errors["unseen"][0]["messages"] == {k: [v]}
    # the final reader skipped it too: an internal skip within its poll, or across polls
    assert "int_poll_skip" in a.errors or "poll_skip" in a.errors


def test_injected_duplicate_and_g1a() -> None:
    h = synthetic.queue_history(3000, seed=5)
    i = next(i for i, op in enumerate(h) if op.type == "ok" and op.f == "send")
    send = h[i]
    k, (off, v) = send.value[0][1], send.value[0][2]
    # the same value shows up again at a far offset in some later poll
    h.append(Op(len(h), h[-1].time_ns + 1, 999, "invoke", "poll", [["poll"]]))
    h.append(Op(len(h), h[-1].time_ns + 1, 999, "ok", "poll", [["poll", {k: [[10**6, v]]}]]))
    a = queue.analysis(h)
    assert a.errors["duplicate"] == [{"key": k, "value": v, "count": 2, "offsets": [off, 10**6]}]
    # and a failed send that someone read
    h.append(Op(len(h), h[-1].time_ns + 1, 998, "invoke", "send", [["send", k, "ghost"]]))
    h.append(Op(len(h), h[-1].time_ns + 1, 998, "fail", "send", [["send", k, "ghost"]]))
    h.append(Op(len(h), h[-1].time_ns + 1, 997, "invoke", "poll", [["poll"]]))
    h.append(Op(len(h), h[-1].time_ns + 1, 997, "ok", "poll",
                [["poll", {k: [[10**6 + 1, "ghost"]]}]]))
    res = queue.check(h)
    assert res["anomalies"]["G1a"]["count"] == 1
    assert res["valid?"] is False


SCRIPT = """
import json, sys
from harness.checkers import queue, synthetic
h = synthetic.queue_history(3000, seed=9, txn=True, info_p=0.05)
h = [op._replace(value=[[m[0], "k%d" % m[1], *m[2:]] if m[0] == "send" else
     (["poll", {"k%d" % k: ps for k, ps in m[1].items()}] if len(m) > 1 else m)
     for m in op.value]) if op.f in ("send", "poll", "txn") else op for op in h]
print(json.dumps(queue.check(h, all_errors=True), sort_keys=True))
"""


def test_results_independent_of_hash_seed() -> None:
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                           text=True, check=True, cwd=os.getcwd())
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["stats"]["keys"] > 1
