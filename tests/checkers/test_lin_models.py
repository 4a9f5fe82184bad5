"""Linearizability models as data (register, cas-register, kv, set, queue), per-key budgets
and deadlines, the EDN reader and Jepsen/Porcupine history files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from harness.checkers import check_command, edn, linearizable
from harness.history import Op


def seq(*ops: tuple[Any, ...]) -> list[Op]:
    """Sequential ops (process, f, invoke value, type, completion value), invoke + complete."""
    out: list[Op] = []
    for p, f, iv, typ, cv in ops:
        out.append(Op(len(out), len(out), p, "invoke", f, iv))
        out.append(Op(len(out), len(out), p, typ, f, cv))
    return out


def valid(h: list[Op], model: str) -> Any:
    return linearizable.check(h, model, time_limit_s=10)["valid?"]


def test_failed_cas_is_a_definite_outcome_in_cas_register() -> None:
    h = seq((0, "write", [0, 1], "ok", [0, 1]), (1, "cas", [0, [1, 2]], "fail", [0, [1, 2]]))
    assert valid(h, "register") is True  # a failed cas did not happen
    assert valid(h, "cas-register") is False  # the register held 1: the compare must succeed
    h2 = seq((0, "write", [0, 3], "ok", [0, 3]), (1, "cas", [0, [1, 2]], "fail", [0, [1, 2]]),
             (1, "read", [0, None], "ok", [0, 3]))
    assert valid(h2, "cas-register") is True


def test_kv_model() -> None:
    base = [(0, "put", ["x", "a"], "ok", ["x", "a"]), (1, "append", ["x", "b"], "ok", ["x", "b"])]
    assert valid(seq(*base, (2, "get", ["x", None], "ok", ["x", "ab"])), "kv") is True
    assert valid(seq(*base, (2, "get", ["x", None], "ok", ["x", "ba"])), "kv") is False
    assert valid(seq((2, "get", ["y", None], "ok", ["y", ""])), "kv") is True


def test_set_model() -> None:
    base = [(0, "add", [0, 1], "ok", [0, 1]), (1, "add", [0, 2], "ok", [0, 2])]
    assert valid(seq(*base, (2, "read", [0, None], "ok", [0, [2, 1]])), "set") is True
    assert valid(seq(*base, (2, "read", [0, None], "ok", [0, [2]])), "set") is False


def test_queue_model() -> None:
    base = [(0, "enqueue", [0, 1], "ok", [0, 1]), (1, "enqueue", [0, 2], "ok", [0, 2])]
    assert valid(seq(*base, (2, "dequeue", [0, None], "ok", [0, 1])), "queue") is True
    assert valid(seq(*base, (2, "dequeue", [0, None], "ok", [0, 2])), "queue") is False
    assert valid(seq((2, "dequeue", [0, None], "ok", [0, None])), "queue") is True
    # an indefinite dequeue may have taken the head
    h = seq(*base, (3, "dequeue", [0, None], "info", [0, None]),
            (2, "dequeue", [0, None], "ok", [0, 2]))
    assert valid(h, "queue") is True


def hard_queue_key(key: Any, n: int = 11) -> list[Op]:
    """n concurrent enqueues, then dequeues in an order no linearization has (the search must
    try every order of the enqueues)."""
    out: list[Op] = []
    for i in range(n):
        out.append(Op(0, 0, 100 + i, "invoke", "enqueue", [key, i]))
    for i in range(n):
        out.append(Op(0, 0, 100 + i, "ok", "enqueue", [key, i]))
    for i in [*range(n - 1), 99]:
        out.append(Op(0, 0, 200, "invoke", "dequeue", [key, None]))
        out.append(Op(0, 0, 200, "ok", "dequeue", [key, i]))
    return out


def reindex(ops: list[Op]) -> list[Op]:
    return [op._replace(index=i, time_ns=i) for i, op in enumerate(ops)]


def test_one_hard_key_does_not_hide_another_keys_verdict() -> None:
    easy = seq((0, "enqueue", [1, 1], "ok", [1, 1]), (0, "dequeue", [1, None], "ok", [1, 2]))
    h = reindex(hard_queue_key(0) + easy)
    t = time.monotonic()
    r = linearizable.check(h, "queue", time_limit_s=1.0)
    took = time.monotonic() - t
    assert r["valid?"] is False
    assert r["unknown_keys"] == [0]
    assert [f["key"] for f in r["failures"]] == [1]
    assert r["verdicts"][0].startswith("key 0: unknown after ")
    assert r["verdicts"][1] == "key 1: not linearizable"
    assert took < 1.5
    json.dumps(r)


def test_deadline_is_honoured() -> None:
    """The search stops soon after its deadline (it overshot by seconds when the clock was
    read every 4,096 steps). Wall-clock slack for a loaded machine: the 100 ms aim is a
    performance figure (measured 0.4-13 ms overshoot when quiet), not asserted here."""
    h = reindex(hard_queue_key(0, 12))
    lim = 0.3
    t = time.monotonic()
    r = linearizable.check(h, "queue", time_limit_s=lim)
    over = time.monotonic() - t - lim
    assert r["valid?"] == "unknown"
    assert over < 1.0


def test_key_time_limit() -> None:
    h = reindex(hard_queue_key(0) + hard_queue_key(1))
    r = linearizable.check(h, "queue", time_limit_s=None, key_time_limit_s=0.2)
    assert r["unknown_keys"] == [0, 1]
    assert all(k["time_s"] < 1.2 for k in r["per_key"])  # 0.2 s each, slack for load


# --- EDN and history files ----------------------------------------------------------------


def test_edn_reader() -> None:
    text = r'''; a comment
    {:type :invoke, :f :cas, :value [0 [1 2]], :process 3, :time 12N, :index 0,
     :s "a \"q\"\n", :set #{1 2}, :l (1 2.5 -3), :n nil, :b true, :tag #inst "2020",
     #_ :skipped :ns/kw \a}'''
    m = edn.loads(text)
    assert m["type"] == "invoke" and m["f"] == "cas" and m["value"] == [0, [1, 2]]
    assert m["time"] == 12 and m["s"] == 'a "q"\n' and m["set"] == frozenset({1, 2})
    assert m["l"] == [1, 2.5, -3] and m["n"] is None and m["b"] is True
    assert m["tag"] == "2020" and m["ns/kw"] == "a" and "skipped" not in m
    assert list(edn.iter_forms("1 [2] {:a 3}")) == [1, [2], {"a": 3}]
    with pytest.raises(edn.EdnError):
        edn.loads("[1 2")


KNOSSOS = """{:type :invoke, :f :write, :value 1, :process 0, :time 1, :index 0}
{:type :ok, :f :write, :value 1, :process 0, :time 2, :index 1}
{:type :invoke, :f :read, :value nil, :process 1, :time 3, :index 2}
{:type :ok, :f :read, :value %s, :process 1, :time 4, :index 3}
"""

PORCUPINE = """INFO  jepsen.util - 0	:invoke	:write	1
INFO  jepsen.util - 0	:ok	:write	1
INFO  jepsen.util - 1	:invoke	:cas	[1 4]
INFO  jepsen.util - 1	:ok	:cas	[1 4]
INFO  jepsen.util - 2	:invoke	:read	nil
INFO  jepsen.util - 2	:ok	:read	%s
"""


def test_jepsen_edn_and_porcupine_logs(tmp_path: Path) -> None:
    good = tmp_path / "history.edn"
    good.write_text(KNOSSOS % "1")
    bad = tmp_path / "bad.edn"
    bad.write_text(KNOSSOS % "2")
    ops = edn.read_jepsen_history(good)
    assert ops[0].value == [None, 1] and ops[3].type == "ok"
    out = tmp_path / "results.json"
    rep = tmp_path / "report.html"
    r = check_command(good, model="cas-register", out=out, report=rep)
    assert r["valid?"] is True and json.loads(out.read_text())["valid?"] is True
    assert "Linearizability" in rep.read_text()
    rb = check_command(bad, report=rep)
    assert rb["valid?"] is False
    assert "key None: not linearizable" in rep.read_text()
    log = tmp_path / "etcd.log"
    log.write_text(PORCUPINE % "4")
    assert check_command(log)["valid?"] is True
    log.write_text(PORCUPINE % "1")
    assert check_command(log)["linearizable"]["verdicts"] == ["key None: not linearizable"]
    with pytest.raises(ValueError):
        check_command(log, model="nope")
