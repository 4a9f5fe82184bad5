"""The columnar queue path gives exactly the reference's results, from every input.

Histories (synthetic ones, with anomalies injected, and small random ones full of collisions)
are checked by the reference (`queue.check(h, fast=False)`) and through columns decoded from
the `Op` list, a JSONL file, a plain history Parquet, a columnar Parquet and an Arrow IPC file
(`columnar.write_columnar`). `queue_fast.check_columns` must answer the reference's result or
`None`, and `columnar.check_file` (columns, else the reference) must equal the reference.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checkers import columnar, queue, queue_fast, synthetic
from harness.history import Op, read_history, read_parquet, write_jsonl, write_parquet
from tests.checkers.test_queue_fast import INJECTIONS, inject

EXTRA_INJECTIONS = (
    "precommitted", "unknown_offset_send", "none_poll_offset", "rebalance_log",
    "nemesis", "info_error", "empty_poll_run", "subscribe", "bool_key", "float_value",
    "sparse_offsets",
)


def _dump(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=repr)


def _sources(h: list[Op], d: Path) -> dict[str, Path]:
    paths = {
        "jsonl": d / "h.jsonl",
        "parquet": d / "h.parquet",
        "columnar": d / "h.columnar.parquet",
        "arrow": d / "h.arrow",
    }
    write_jsonl(h, paths["jsonl"])
    write_parquet(h, paths["parquet"])
    columnar.write_columnar(h, paths["columnar"])
    columnar.write_columnar(h, paths["arrow"])
    return paths


def _same_everywhere(h: list[Op]) -> tuple[dict[str, Any], dict[str, bool]]:
    """The reference's result, and which inputs the columnar path answered from."""
    ref = queue.check(h, fast=False)
    ref_all = queue.check(h, fast=False, all_errors=True)
    answered = {}
    r = queue_fast.check_columns(columnar.from_ops(h)) if _decodes(h) else None
    if r is not None:
        assert _dump(r) == _dump(ref)
    answered["ops"] = r is not None
    with tempfile.TemporaryDirectory() as tmp:
        for name, p in _sources(h, Path(tmp)).items():
            file_ref = queue.check(read_history(p) if name != "arrow"
                                   else columnar.read_history_file(p), fast=False)
            assert _dump(file_ref) == _dump(ref), name
            try:
                cols = columnar.read_columns(p)
            except columnar.Fallback:
                cols = None
            r = queue_fast.check_columns(cols) if cols is not None else None
            if r is not None:
                assert _dump(r) == _dump(ref), name
            answered[name] = r is not None
            assert _dump(columnar.check_file(p)) == _dump(ref), name
            assert _dump(columnar.check_file(p, all_errors=True)) == _dump(ref_all), name
    return ref, answered


def _decodes(h: list[Op]) -> bool:
    try:
        columnar.from_ops(h)
    except columnar.Fallback:
        return False
    return True


def _t(h: list[Op]) -> int:
    return h[-1].time_ns + 1 if h else 0


def _sparse(h: list[Op], f: int) -> list[Op]:
    """Offsets times f: holes everywhere (as transaction markers make). VO indices are
    unchanged, but the (key, offset) table and the expiry table give way to sorts and
    searches."""
    def mop(m: Any) -> Any:
        if m[0] == "send" and isinstance(m[2], list) and m[2][0] is not None:
            return ["send", m[1], [m[2][0] * f, m[2][1]]]
        if m[0] == "poll" and len(m) > 1:
            # (a `None` offset, from the none_poll_offset injection, stays None)
            return ["poll", {k: [[o if o is None else o * f, v] for o, v in ps]
                             for k, ps in m[1].items()}]
        return m

    return [op._replace(value=[mop(m) for m in op.value])
            if op.type != "invoke" and op.f in ("send", "poll", "txn") else op for op in h]


def inject_more(h: list[Op], what: str, r: random.Random) -> list[Op]:
    """Cases beyond test_queue_fast's injections: things the columns cannot express, or
    that only some decoders see."""
    t = _t(h)
    if what == "precommitted":
        h.append(Op(len(h), t, 20_000, "invoke", "txn", [["send", 0, -31], ["poll"]]))
        h.append(Op(len(h), t + 1, 20_000, "ok", "txn",
                    [["send", 0, [10**6 + 40, -31]], ["poll", {0: [[10**6 + 40, -31]]}]]))
    elif what == "unknown_offset_send":
        h.append(Op(len(h), t, 20_001, "invoke", "send", [["send", 0, -32]]))
        h.append(Op(len(h), t + 1, 20_001, "info", "send", [["send", 0, -32]]))
    elif what == "none_poll_offset":
        h.append(Op(len(h), t, 20_002, "invoke", "poll", [["poll"]]))
        h.append(Op(len(h), t + 1, 20_002, "ok", "poll", [["poll", {0: [[None, -33]]}]]))
    elif what == "rebalance_log":
        ok = [i for i, op in enumerate(h) if op.type == "ok" and op.f == "poll"]
        if ok:
            i = r.choice(ok)
            h[i] = h[i]._replace(extra={"rebalance_log": [{"type": "assigned", "keys": [0]}]})
    elif what == "nemesis":
        for j in range(2):
            h.insert(r.randrange(len(h) + 1),
                     Op(0, 0, "nemesis", "info", "start-partition", ["n1", j]))
        h = [op._replace(index=i) for i, op in enumerate(h)]
    elif what == "info_error":
        infos = [i for i, op in enumerate(h) if op.type == "info"]
        for i in infos[:3]:
            h[i] = h[i]._replace(extra={"error": ["timeout", r.randrange(3)], "poll_ms": 5})
    elif what == "empty_poll_run":
        h.append(Op(len(h), t, 20_003, "invoke", "poll", [["poll"]]))
        h.append(Op(len(h), t + 1, 20_003, "ok", "poll", [["poll", {0: []}]]))
    elif what == "subscribe":
        h.append(Op(len(h), t, 20_004, "invoke", "subscribe", [0, 1]))
        h.append(Op(len(h), t + 1, 20_004, "ok", "subscribe", [0, 1]))
        h.append(Op(len(h), t + 2, 20_004, "invoke", "poll", [["poll"]]))
        h.append(Op(len(h), t + 3, 20_004, "ok", "poll", [["poll", {}]]))
    elif what == "bool_key":
        h.append(Op(len(h), t, 20_005, "invoke", "send", [["send", True, -34]]))
        h.append(Op(len(h), t + 1, 20_005, "fail", "send", [["send", True, -34]]))
    elif what == "sparse_offsets":
        h = _sparse(h, r.choice([7, 1000, 10**6 + 3]))
    elif what == "float_value":
        h.append(Op(len(h), t, 20_006, "invoke", "send", [["send", 0, 1.5]]))
        h.append(Op(len(h), t + 1, 20_006, "fail", "send", [["send", 0, 1.5]]))
    return h


ALL = INJECTIONS + EXTRA_INJECTIONS


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(40, 1200),
    txn=st.booleans(),
    info_p=st.sampled_from([0.0, 0.03, 0.1]),
    assign_p=st.sampled_from([1 / 64, 1 / 8]),
    keys=st.integers(1, 6),
    what=st.lists(st.sampled_from(ALL), max_size=2),
    r=st.randoms(use_true_random=False),
)
def test_columnar_equals_reference_on_synthetic_histories(
    seed: int, n: int, txn: bool, info_p: float, assign_p: float, keys: int,
    what: list[str], r: Any,
) -> None:
    h = synthetic.queue_history(n, seed=seed, txn=txn, info_p=info_p, assign_p=assign_p,
                                keys=keys)
    for w in what:
        h = inject(h, w, r) if w in INJECTIONS else inject_more(h, w, r)
    _same_everywhere(h)


# small random histories: few keys, offsets and values, so collisions (duplicates,
# inconsistent offsets, skips, lost writes) are everywhere
_small = st.integers(0, 3)
_pair = st.tuples(st.integers(0, 5), st.integers(0, 6)).map(list)
_send = st.tuples(st.just("send"), _small,
                  st.one_of(st.tuples(st.integers(0, 5), st.integers(0, 6)).map(list),
                            st.integers(0, 6)))
_poll = st.tuples(st.just("poll"),
                  st.dictionaries(_small, st.lists(_pair, max_size=3), max_size=3))
_mop = st.one_of(_send.map(list), _poll.map(list))
_event = st.one_of(
    st.tuples(st.integers(0, 3), st.sampled_from(["ok", "ok", "info", "fail"]),
              st.sampled_from(["send", "poll", "txn"]), st.lists(_mop, min_size=1, max_size=3)),
    st.tuples(st.integers(0, 3), st.sampled_from(["ok", "info"]),
              st.sampled_from(["assign", "subscribe"]), st.lists(_small, max_size=3)),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=st.lists(_event, min_size=1, max_size=14))
def test_columnar_equals_reference_on_small_random_histories(events: list[Any]) -> None:
    h: list[Op] = []
    for p, typ, f, value in events:
        h.append(Op(len(h), 10 * len(h), p, "invoke", f, value))
        h.append(Op(len(h), 10 * len(h), p, typ, f, value))
    _same_everywhere(h)


def test_columnar_answers_on_clean_histories() -> None:
    for seed in range(6):
        h = synthetic.queue_history(2500, seed=seed, info_p=0.03 if seed % 2 else 0.0,
                                    assign_p=1 / 16)
        if seed >= 4:  # sparse offsets: sorts and searches instead of dense tables
            h = _sparse(h, 1000 if seed == 4 else 10**6 + 3)
        ref, answered = _same_everywhere(h)
        assert ref["anomaly_types"] == []
        assert all(answered.values()), answered


def test_columnar_answers_its_kinds_and_declines_every_other_injected_anomaly() -> None:
    """From every decoder: the fast path's kinds (lost writes, unseen, poll skips) answered
    equal to the reference (`_same_everywhere` compares), every other anomaly declined."""
    h = synthetic.queue_history(2000, seed=7)
    n_answered = 0
    for w in ALL:
        h2 = inject(list(h), w, random.Random(w)) if w in INJECTIONS else \
            inject_more(list(h), w, random.Random(w))
        ref, answered = _same_everywhere(h2)
        kinds = set(ref["anomaly_types"])
        if kinds and kinds <= queue_fast.ANSWERED:
            assert all(answered.values()), (w, answered)
            n_answered += 1
        elif kinds:
            assert not any(answered.values()), (w, answered)
    assert n_answered >= 4


def test_columnar_file_is_a_history_parquet() -> None:
    h = synthetic.queue_history(1500, seed=2, info_p=0.05)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "h.parquet"
        columnar.write_columnar(h, p)
        assert read_parquet(p) == h
        meta = pq.read_schema(p).metadata
        assert meta[columnar.COLUMNAR_VERSION_KEY] == b"1"
        # string keys: no side columns, still a history, still checked exactly
        hs = inject(list(h), "str_keys", random.Random(0))
        columnar.write_columnar(hs, p)
        assert pq.read_schema(p).metadata[columnar.COLUMNAR_VERSION_KEY] == b"0"
        assert read_parquet(p) == hs
        assert _dump(columnar.check_file(p)) == _dump(queue.check(hs, fast=False))


def test_torn_jsonl_tail_is_ignored() -> None:
    h = synthetic.queue_history(800, seed=4)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "h.jsonl"
        write_jsonl(h, p)
        with open(p, "a", encoding="utf-8") as fh:
            fh.write('{"index": 9999, "time_ns": 1, "proc')
        ref = queue.check(read_history(p), fast=False)
        cols = columnar.from_jsonl(p)
        assert cols.n_events == len(h)
        assert _dump(queue_fast.check_columns(cols)) == _dump(ref)
        assert _dump(columnar.check_file(p)) == _dump(ref)
