"""The vectorised queue fast path returns exactly the reference's results.

The fast path (`queue_fast.fast_results`) answers when it proves a history clean or finds
only the anomaly kinds it reports itself (`queue_fast.ANSWERED`: lost writes, unseen, poll
skips) and otherwise hands the history to the reference; `queue.check` (fast by default) must equal
`queue.check(..., fast=False)` on random synthetic histories with injected anomalies, and the
fast path must actually answer on clean ones.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checkers import queue, queue_fast, synthetic
from harness.history import Op

INJECTIONS = (
    "lost_write", "unseen", "duplicate", "inconsistent_offset", "skip_in_poll",
    "nonmonotonic_poll", "g1a", "nonmonotonic_send", "info_send_read", "info_lost_write",
    "int_nonmonotonic_send", "str_keys",
)


def _same(h: list[Op]) -> dict[str, Any]:
    ref = queue.check(h, fast=False, all_errors=True)
    got = queue.check(h, all_errors=True)
    assert json.dumps(got, sort_keys=True, default=repr) == json.dumps(
        ref, sort_keys=True, default=repr)
    assert queue.check(h) == queue.check(h, fast=False)
    return ref


def _ok_polls(h: list[Op]) -> list[int]:
    return [i for i, op in enumerate(h) if op.type == "ok" and op.f in ("poll", "txn")
            and any(m[0] == "poll" and len(m) > 1 and any(m[1].values()) for m in op.value)]


def _ok_sends(h: list[Op]) -> list[tuple[int, Any, int, Any]]:
    return [(i, m[1], m[2][0], m[2][1]) for i, op in enumerate(h)
            if op.type == "ok" and op.f in ("send", "txn")
            for m in op.value if m[0] == "send"]


def _append(h: list[Op], process: Any, typ: str, f: str, value: Any) -> None:
    t = h[-1].time_ns + 1
    h.append(Op(len(h), t, process, "invoke", f, value if f == "send" else [["poll"]]))
    h.append(Op(len(h), t + 1, process, typ, f, value))


def _map_polls(h: list[Op], fn: Any) -> list[Op]:
    out = []
    for op in h:
        if op.type != "invoke" and op.f in ("poll", "txn"):
            op = op._replace(value=[["poll", {k: fn(k, ps) for k, ps in m[1].items()}]
                                    if m[0] == "poll" and len(m) > 1 else m
                                    for m in op.value])
        out.append(op)
    return out


def inject(h: list[Op], what: str, r: Any) -> list[Op]:
    sends = _ok_sends(h)
    if not sends:
        return h
    _i, k, off, v = r.choice(sends)
    if what == "lost_write":
        return _map_polls(h, lambda kk, ps: [p for p in ps if not (kk == k and p[1] == v)])
    if what == "unseen":
        last = max((s for s in sends if s[1] == k), key=lambda s: s[2])
        return _map_polls(h, lambda kk, ps: [p for p in ps
                                             if not (kk == k and p[1] == last[3])])
    if what == "duplicate":
        _append(h, 10_000, "ok", "poll", [["poll", {k: [[10**6 + off, v]]}]])
    elif what == "inconsistent_offset":
        _append(h, 10_001, r.choice(["ok", "info", "fail"]), "poll",
                [["poll", {k: [[off, -7]]}]])
    elif what == "skip_in_poll":
        polls = _ok_polls(h)
        i = r.choice(polls)
        h[i] = h[i]._replace(value=[
            ["poll", {kk: ps[:1] + ps[2:] for kk, ps in m[1].items()}]
            if m[0] == "poll" and len(m) > 1 else m for m in h[i].value])
    elif what == "nonmonotonic_poll":
        polls = _ok_polls(h)
        i = r.choice(polls)
        op = h[i]
        m = next(m for m in op.value if m[0] == "poll" and len(m) > 1 and any(m[1].values()))
        kk, ps = next((kk, ps) for kk, ps in m[1].items() if ps)
        h.insert(i + 1, Op(op.index, op.time_ns, op.process, "ok", "poll",
                           [["poll", {kk: ps[-1:]}]]))
        h = [x._replace(index=j) for j, x in enumerate(h)]
    elif what == "g1a":
        _append(h, 10_002, "fail", "send", [["send", k, -99]])
        _append(h, 10_003, "ok", "poll", [["poll", {k: [[10**6 + 1, -99]]}]])
    elif what == "nonmonotonic_send":
        i = _i
        op = h[i]
        h.insert(i + 1, op._replace(value=[["send", k, [off, v]]]))
        h = [x._replace(index=j) for j, x in enumerate(h)]
    elif what == "info_send_read":
        _append(h, 10_004, "info", "send", [["send", k, [10**6 + 2, -5]]])
        _append(h, 10_005, r.choice(["ok", "info"]), "poll",
                [["poll", {k: [[10**6 + 2, -5]]}]])
    elif what == "info_lost_write":
        # an indefinite send, proven committed by a read of its second value: the first is lost
        _append(h, 10_006, "info", "send",
                [["send", k, [10**6 + 3, -11]], ["send", k, [10**6 + 4, -12]]])
        _append(h, 10_007, "ok", "poll", [["poll", {k: [[10**6 + 4, -12]]}]])
    elif what == "int_nonmonotonic_send":
        _append(h, 10_008, "ok", "send",
                [["send", k, [10**6 + 6, -20]], ["send", k, [10**6 + 5, -21]]])
        _append(h, 10_009, "ok", "poll", [["poll", {k: [[10**6 + 5, -21], [10**6 + 6, -20]]}]])
    elif what == "str_keys":
        h = [op._replace(value=[[m[0], f"k{m[1]}", *m[2:]] if m[0] == "send" else
                                (["poll", {f"k{kk}": ps for kk, ps in m[1].items()}]
                                 if len(m) > 1 else m) for m in op.value])
             if op.f in ("send", "poll", "txn") else op for op in h]
    return h


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(40, 1500),
    txn=st.booleans(),
    info_p=st.sampled_from([0.0, 0.03, 0.1]),
    assign_p=st.sampled_from([1 / 64, 1 / 8]),
    keys=st.integers(1, 6),
    what=st.lists(st.sampled_from(INJECTIONS), max_size=2),
    r=st.randoms(use_true_random=False),
)
def test_fast_path_equals_reference(
    seed: int, n: int, txn: bool, info_p: float, assign_p: float, keys: int,
    what: list[str], r: Any,
) -> None:
    h = synthetic.queue_history(n, seed=seed, txn=txn, info_p=info_p, assign_p=assign_p,
                                keys=keys)
    for w in what:
        h = inject(h, w, r)
    _same(h)


def test_fast_path_answers_on_clean_histories() -> None:
    answered = 0
    for seed in range(12):
        h = synthetic.queue_history(3000, seed=seed, info_p=0.03 if seed % 2 else 0.0,
                                    assign_p=1 / 16)
        fast = queue_fast.fast_results(h)
        ref = _same(h)
        assert ref["anomaly_types"] == []
        assert fast == queue.check(h, fast=False)
        answered += fast is not None
    assert answered == 12


def test_fast_path_answers_its_kinds_exactly_and_declines_the_rest() -> None:
    """Lost writes, unseen values, poll and send skips and reorders, aborted reads are
    answered with the reference's very details (all_errors or condensed); any other anomaly
    goes to the reference."""
    h = synthetic.queue_history(2000, seed=7)
    import random

    answered = set()
    for w in INJECTIONS[:-1]:
        h2 = inject(list(h), w, random.Random(w))
        ref = _same(h2)
        kinds = set(ref["anomaly_types"])
        fast = queue_fast.fast_results(h2, all_errors=True)
        if kinds and kinds <= queue_fast.ANSWERED:
            assert fast == ref, w
            assert queue_fast.fast_results(h2) == queue.check(h2, fast=False), w
            answered.add(w)
        elif kinds:
            assert fast is None, w
    assert answered == {"lost_write", "unseen", "skip_in_poll", "nonmonotonic_poll",
                        "info_lost_write", "g1a", "nonmonotonic_send",
                        "int_nonmonotonic_send"}
