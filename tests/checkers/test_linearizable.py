"""Linearizability checker: hand-made register histories, indefinite ops, budget, and a
brute-force oracle on small random histories."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from harness.checkers import linearizable as lin
from harness.checkers import synthetic
from harness.history import Op


class H:
    """Builds histories: `h.invoke(p, f, value)` / `h.complete(p, type, f, value)`."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, p: Any, typ: str, f: str, value: Any) -> H:
        self.ops.append(Op(len(self.ops), len(self.ops) * 10, p, typ, f, value))
        return self

    def w(self, p: int, k: Any, v: Any) -> H:
        return self.add(p, "invoke", "write", [k, v])

    def r(self, p: int, k: Any) -> H:
        return self.add(p, "invoke", "read", [k, None])

    def cas(self, p: int, k: Any, old: Any, new: Any) -> H:
        return self.add(p, "invoke", "cas", [k, [old, new]])

    def ok(self, p: int, f: str, value: Any) -> H:
        return self.add(p, "ok", f, value)


def test_sequential_history() -> None:
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).r(0, "x").ok(0, "read", ["x", 1])
         .cas(0, "x", 1, 2).ok(0, "cas", ["x", [1, 2]]).r(0, "x").ok(0, "read", ["x", 2]))
    res = lin.check(h.ops)
    assert res["valid?"] is True
    assert res["failures"] == []


def test_initial_state_is_none() -> None:
    h = H().r(0, "x").ok(0, "read", ["x", None])
    assert lin.check(h.ops)["valid?"] is True
    h = H().r(0, "x").ok(0, "read", ["x", 0])
    assert lin.check(h.ops)["valid?"] is False


def test_stale_read_after_write_completed() -> None:
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).w(0, "x", 2).ok(0, "write", ["x", 2])
         .r(1, "x").ok(1, "read", ["x", 1]))
    res = lin.check(h.ops)
    assert res["valid?"] is False
    (fail,) = res["failures"]
    assert fail["key"] == "x"
    assert [op["value"] for op in fail["longest_prefix"]] == [["x", 1], ["x", 2]]
    assert fail["blocked_op"]["value"] == ["x", 1]
    assert fail["blocked_op"]["f"] == "read"
    json.dumps(res)


def test_concurrent_write_may_be_seen_or_not() -> None:
    # w(2) overlaps both reads: r->1 then r->2 is fine, r->2 then r->1 is not
    base = H().w(0, "x", 1).ok(0, "write", ["x", 1]).w(1, "x", 2)
    good = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).w(1, "x", 2)
            .r(0, "x").ok(0, "read", ["x", 1]).r(0, "x").ok(0, "read", ["x", 2])
            .ok(1, "write", ["x", 2]))
    assert lin.check(good.ops)["valid?"] is True
    bad = (base.r(0, "x").ok(0, "read", ["x", 2]).r(0, "x").ok(0, "read", ["x", 1])
           .ok(1, "write", ["x", 2]))
    assert lin.check(bad.ops)["valid?"] is False


def test_failed_ops_did_not_happen() -> None:
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).w(0, "x", 2).add(0, "fail", "write", ["x", 2])
         .r(1, "x").ok(1, "read", ["x", 2]))
    assert lin.check(h.ops)["valid?"] is False
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).cas(0, "x", 5, 6)
         .add(0, "fail", "cas", ["x", [5, 6]]).r(1, "x").ok(1, "read", ["x", 1]))
    assert lin.check(h.ops)["valid?"] is True


def test_indefinite_write_later_read() -> None:
    # the info write may take effect long after its invocation...
    h = (H().w(0, "x", 1).add(0, "info", "write", ["x", 1])
         .w(1, "x", 2).ok(1, "write", ["x", 2]).r(1, "x").ok(1, "read", ["x", 2])
         .r(1, "x").ok(1, "read", ["x", 1]))
    res = lin.check(h.ops)
    assert res["valid?"] is True
    # ...or never
    h2 = (H().w(0, "x", 1).add(0, "info", "write", ["x", 1])
          .w(1, "x", 2).ok(1, "write", ["x", 2]).r(1, "x").ok(1, "read", ["x", 2]))
    assert lin.check(h2.ops)["valid?"] is True
    assert lin.check(h2.ops)["dropped_ops"] == 1  # unobserved: dropped outright
    # but not before its invocation
    h3 = (H().r(1, "x").ok(1, "read", ["x", 1]).w(0, "x", 1).add(0, "info", "write", ["x", 1]))
    assert lin.check(h3.ops)["valid?"] is False


def test_indefinite_write_discarded_after_its_observers() -> None:
    # w(1) crashed; a read saw 1 (so it did happen), then 2, then 1 again: impossible,
    # since w(1) can only take effect once
    h = (H().w(0, "x", 1).add(0, "info", "write", ["x", 1])
         .w(1, "x", 2).ok(1, "write", ["x", 2])
         .r(2, "x").ok(2, "read", ["x", 1])
         .r(2, "x").ok(2, "read", ["x", 2])
         .r(2, "x").ok(2, "read", ["x", 1]))
    assert lin.check(h.ops)["valid?"] is False


def test_missing_completion_is_indefinite() -> None:
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).w(1, "x", 3)
         .r(0, "x").ok(0, "read", ["x", 3]))
    assert lin.check(h.ops)["valid?"] is True


def test_indefinite_cas() -> None:
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).cas(1, "x", 1, 5)
         .add(1, "info", "cas", ["x", [1, 5]]).r(0, "x").ok(0, "read", ["x", 5]))
    assert lin.check(h.ops)["valid?"] is True
    # an info cas whose precondition never held cannot produce its value
    h = (H().w(0, "x", 1).ok(0, "write", ["x", 1]).cas(1, "x", 9, 5)
         .add(1, "info", "cas", ["x", [9, 5]]).r(0, "x").ok(0, "read", ["x", 5]))
    assert lin.check(h.ops)["valid?"] is False


def test_keys_are_independent_and_failures_reported_per_key() -> None:
    h = (H().w(0, "a", 1).ok(0, "write", ["a", 1]).w(1, "b", 1).ok(1, "write", ["b", 1])
         .r(0, "a").ok(0, "read", ["a", 1]).r(1, "b").ok(1, "read", ["b", 7]))
    res = lin.check(h.ops)
    assert res["valid?"] is False
    assert res["keys"] == 2
    assert [f["key"] for f in res["failures"]] == ["b"]


def test_nemesis_and_other_ops_ignored() -> None:
    h = (H().add("nemesis", "info", "start-partition", "majority")
         .w(0, "x", 1).ok(0, "write", ["x", 1])
         .add("nemesis", "info", "start-partition", [["n1"], ["n2", "n3"]])
         .r(0, "x").ok(0, "read", ["x", 1]))
    assert lin.check(h.ops)["valid?"] is True


def test_time_budget_yields_unknown() -> None:
    # many concurrent writes of few values, then an impossible read at the very end
    ops = synthetic.register_history(4000, seed=7, concurrency=30, values=3, info_p=0.05)
    ops.append(Op(len(ops), ops[-1].time_ns + 1, 999, "invoke", "read", [0, None]))
    ops.append(Op(len(ops), ops[-1].time_ns + 2, 999, "ok", "read", [0, 12345]))
    res = lin.check(ops, time_limit_s=0.2)
    assert res["valid?"] == "unknown"
    assert res["unknown_keys"] == [0]


def test_synthetic_linearizable_histories_pass() -> None:
    for seed in range(5):
        ops = synthetic.register_history(2000, seed=seed, keys=3, concurrency=5, unique=True)
        res = lin.check(ops)
        assert res["valid?"] is True, seed
        assert res["keys"] == 3


def _brute_force(ops: list[Op]) -> bool:
    """Oracle, independent of the checker's preprocessing: per key, some subset of the
    indefinite ops plus every ok op, in some order respecting real time, is legal."""
    pending: dict[Any, tuple[int, Op]] = {}
    calls: list[tuple[Any, int, float, str, Any, Any, bool]] = []  # k, call, ret, f, arg, out, info
    for pos, op in enumerate(ops):
        if op.type == "invoke":
            pending[op.process] = (pos, op)
            continue
        ipos, inv = pending.pop(op.process)
        if op.type == "fail":
            continue
        info = op.type == "info"
        out = op.value[1] if (op.f == "read" and not info) else lin.UNKNOWN
        calls.append((inv.value[0], ipos, float("inf") if info else pos, op.f,
                      inv.value[1], out, info))
    for ipos, inv in pending.values():
        calls.append((inv.value[0], ipos, float("inf"), inv.f, inv.value[1], lin.UNKNOWN, True))
    for k in {c[0] for c in calls}:
        cs = [c for c in calls if c[0] == k]
        infos = [i for i, c in enumerate(cs) if c[6]]
        found = False
        for r in range(len(infos) + 1):
            for omit in itertools.combinations(infos, r):
                kept = [c for i, c in enumerate(cs) if i not in omit]
                for perm in itertools.permutations(kept):
                    state: Any = None
                    ok = True
                    for i, c in enumerate(perm):
                        # real time: nothing later in the order returned before c's call
                        if any(d[2] < c[1] for d in perm[i + 1:]):
                            ok = False
                            break
                        f = {"read": lin.READ, "write": lin.WRITE, "cas": lin.CAS}[c[3]]
                        arg = tuple(c[4]) if f == lin.CAS else c[4]
                        new = lin.REGISTER.step(state, f, arg, c[5])
                        if new is lin.ILLEGAL:
                            ok = False
                            break
                        state = new
                    if ok:
                        found = True
                        break
                if found:
                    break
            if found:
                break
        if not found:
            return False
    return True


def test_matches_brute_force_on_small_random_histories() -> None:
    rng = random.Random(5)
    checked = 0
    outcomes = set()
    for seed in range(400):
        ops = synthetic.register_history(12, seed=seed, concurrency=3, values=3, info_p=0.2)
        # corrupt a read now and then
        if rng.random() < 0.5:
            reads = [i for i, op in enumerate(ops) if op.f == "read" and op.type == "ok"]
            if reads:
                i = rng.choice(reads)
                ops[i] = ops[i]._replace(value=[ops[i].value[0], rng.randrange(3)])
        if sum(op.type != "invoke" and op.type != "fail" for op in ops) > 7:
            continue
        checked += 1
        expected = _brute_force(ops)
        outcomes.add(expected)
        assert lin.check(ops)["valid?"] is expected, seed
    assert checked > 100
    assert outcomes == {True, False}
