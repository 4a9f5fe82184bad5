"""History model: JSONL and Parquet round trips, torn tails, pairing, the check entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checkers import check, check_file, synthetic
from harness.history import (
    JsonlWriter,
    Op,
    client_ops,
    jsonl_to_parquet,
    nemesis_ops,
    op_from_json,
    op_to_json,
    pair_index,
    parquet_schema,
    read_history,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
)

OPS = [
    Op(0, 10, 0, "invoke", "send", [["send", 3, 1], ["poll"]]),
    Op(1, 20, "nemesis", "info", "start-partition", "majority"),
    Op(2, 30, 0, "ok", "send", [["send", 3, [0, 1]], ["poll", {3: [[0, 1]], 4: []}]],
       {"rebalance_log": [{"type": "assigned", "keys": [3]}]}),
    Op(3, 40, "nemesis", "info", "start-partition", [["n1"], ["n2", "n3"]]),
    Op(4, 50, 1, "invoke", "assign", [3, 4]),
    Op(5, 60, 1, "info", "assign", [3, 4], {"error": ["timeout", "10s"], "end_process": True}),
    Op(6, 70, 2, "invoke", "read", [3, None]),
    Op(7, 80, 2, "ok", "read", [3, "x"]),
]


def test_json_round_trip_restores_int_poll_keys() -> None:
    for op in OPS:
        line = op_to_json(op)
        assert "\n" not in line
        assert op_from_json(line) == op
    d = json.loads(op_to_json(OPS[2]))
    assert d["rebalance_log"] == [{"type": "assigned", "keys": [3]}]
    assert d["value"][1] == ["poll", {"3": [[0, 1]], "4": []}]


def test_extra_keys_are_top_level_and_accessible() -> None:
    assert OPS[5].get("error") == ["timeout", "10s"]
    assert OPS[0].get("error", "none") == "none"
    with pytest.raises(ValueError):
        op_to_json(Op(0, 0, 0, "ok", "send", [], {"index": 3}))
    with pytest.raises(ValueError):
        op_from_json('{"index":0,"time_ns":0,"process":0,"type":"done","f":"x","value":1}')


def test_jsonl_writer_assigns_indices_and_flushes(tmp_path: Path) -> None:
    p = tmp_path / "history.jsonl"
    with JsonlWriter(p) as w:
        a = w.append(Op(-1, 5, 0, "invoke", "poll", [["poll"]]))
        # readable before close: each line is flushed
        assert read_jsonl(p) == [a]
        b = w.append(Op(-1, 6, 0, "ok", "poll", [["poll", {}]]))
    assert (a.index, b.index) == (0, 1)
    assert read_jsonl(p) == [a, b]


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "history.jsonl"
    write_jsonl(OPS, p)
    with open(p, "a") as fh:
        fh.write('{"index": 8, "time_ns": 9')
    assert read_jsonl(p) == OPS
    with open(p, "w") as fh:
        fh.write('{"index": 8\n' + op_to_json(OPS[0]) + "\n")
    with pytest.raises(json.JSONDecodeError):
        read_jsonl(p)


def test_parquet_round_trip_fixed_schema(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    p = tmp_path / "history.parquet"
    write_parquet(OPS, p)
    assert read_parquet(p) == OPS
    table = pq.read_table(p)
    assert table.schema.equals(parquet_schema(), check_metadata=False)
    assert table.column("process").to_pylist() == [0, None, 0, None, 1, 1, 2, 2]
    assert table.column("process_name").to_pylist()[1] == "nemesis"
    src = tmp_path / "h.jsonl"
    write_jsonl(OPS, src)
    assert jsonl_to_parquet(src, tmp_path / "h.parquet") == len(OPS)
    assert read_history(tmp_path / "h.parquet") == read_history(src) == OPS


def test_pairs_and_filters() -> None:
    pairs = pair_index(OPS)
    assert pairs[0] == 2 and pairs[2] == 0
    assert pairs[1] == 3 and pairs[3] == 1  # nemesis info pair
    assert pairs[4] == 5 and pairs[6] == 7
    assert [op.index for op in nemesis_ops(OPS)] == [1, 3]
    assert [op.index for op in client_ops(OPS)] == [0, 2, 4, 5, 6, 7]


def test_check_file_runs_the_applicable_checkers(tmp_path: Path) -> None:
    q = synthetic.queue_history(2000, seed=1)
    p = tmp_path / "history.jsonl"
    write_jsonl(q, p)
    res = check_file(p)
    assert res["valid?"] is True
    assert set(res) == {"valid?", "queue", "stats"}
    json.dumps(res)
    r = synthetic.register_history(400, seed=2, keys=2, unique=True)
    res = check(r)
    assert set(res) == {"valid?", "linearizable", "stats"}
    assert res["valid?"] is True
    # a bad read flips the verdict
    i = next(i for i, op in enumerate(r) if op.f == "read" and op.type == "ok")
    r[i] = r[i]._replace(value=[r[i].value[0], "never-written"])
    assert check(r)["valid?"] is False
