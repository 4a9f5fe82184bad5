"""Lossy histories: the columnar fast path answers them itself, with the reference's results.

The fast path (`queue_fast`) reports lost writes, unseen values and poll skips (its
`ANSWERED` kinds) with the same details as the reference (`queue.analysis`): keys, values,
VO indices, the ops each anomaly names, the condensed examples and the verdict. Here the full
result maps are compared on the benchmark's own synthetic runs (`harness.analysis.synth`:
one acknowledged value dropped from every poll, nemesis windows), on histories losing several
values, re-delivering a poll and reordering records (Hypothesis), from every decoder (`Op`s,
JSONL, plain and columnar Parquet, Arrow) and through `hiwater analyze`'s per-run function.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis import synth
from harness.analysis.runs import check_table
from harness.checkers import columnar, queue, queue_fast, synthetic
from harness.checkers.policy import QueuePolicy
from harness.history import Op
from tests.checkers.test_columnar import _dump, _same_everywhere


def _synth_run(seed: int, n: int, config: tuple[Any, ...], faults: list[str]) -> list[Op]:
    """The history `synth.write_run` writes for a run (before its results.json)."""
    rng = random.Random(seed)
    h = synthetic.queue_history(n, seed=seed, keys=6, concurrency=5)
    if synth.lossy(config):
        h = synth._lose_one(h, rng)
    return synth._with_faults(h, faults, rng)


def test_benchmark_runs_answered_by_the_fast_path_equal_the_reference() -> None:
    answered_lossy = 0
    for seed in range(1, 25):
        cfg = synth.CONFIGS[seed % len(synth.CONFIGS)]
        h = _synth_run(seed, 1500, cfg, [["partition"], ["kill"], ["partition", "kill"],
                                         []][seed % 4])
        for all_errors in (False, True):
            ref = queue.check(h, fast=False, all_errors=all_errors)
            fast = queue_fast.fast_results(h, all_errors=all_errors)
            if fast is not None:
                assert _dump(fast) == _dump(ref), seed
            assert _dump(queue.check(h, all_errors=all_errors)) == _dump(ref), seed
        if synth.lossy(cfg):
            assert "lost_write" in ref["anomaly_types"], seed
            answered_lossy += fast is not None
    # the lossy runs are the benchmark's bulk: the fast path must answer (nearly) all of them
    assert answered_lossy >= 16


def test_lossy_run_from_the_parquet_file_and_the_analysis_task() -> None:
    """What `hiwater analyze` runs per run (`check_table` on the file's columns) and what
    `hiwater check` runs on the file equal the reference on the decoded `Op`s."""
    h = _synth_run(7, 3000, synth.CONFIGS[1], ["partition"])
    ref = queue.check(h, fast=False)
    assert set(ref["anomaly_types"]) >= {"lost_write", "unseen"}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "history.parquet"
        columnar.write_columnar(h, p)
        cols = columnar.read_columns(p)
        assert _dump(queue_fast.check_columns(cols, QueuePolicy.of(["assign"]))) == _dump(ref)
        assert _dump(columnar.check_file(p)) == _dump(ref)
        checked, cols2 = check_table(pq.read_table(str(p)), ["assign"])
        assert cols2 is not None
        assert _dump(checked["queue"]) == _dump(ref)


def _drop(h: list[Op], lost: set[tuple[Any, Any]]) -> list[Op]:
    out = []
    for op in h:
        if op.type == "ok" and op.f in ("poll", "txn"):
            op = op._replace(value=[
                ["poll", {k: [p for p in ps if (k, p[1]) not in lost]
                          for k, ps in m[1].items()}] if m[0] == "poll" and len(m) > 1 else m
                for m in op.value])
        out.append(op)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(60, 1500),
    keys=st.integers(1, 6),
    n_lost=st.integers(0, 4),
    redeliver=st.booleans(),
    reorder=st.booleans(),
    r=st.randoms(use_true_random=False),
)
def test_lossy_duplicated_reordered_histories_equal_the_reference(
    seed: int, n: int, keys: int, n_lost: int, redeliver: bool, reorder: bool, r: Any,
) -> None:
    h = synthetic.queue_history(n, seed=seed, keys=keys, info_p=0.03, assign_p=1 / 16)
    sent = [(m[1], m[2][1]) for op in h if op.type == "ok" and op.f in ("send", "txn")
            for m in op.value if m[0] == "send"]
    if sent and n_lost:
        h = _drop(h, set(r.sample(sent, min(n_lost, len(sent)))))
    polls = [i for i, op in enumerate(h) if op.type == "ok" and op.f == "poll"]
    if redeliver and polls:
        # a poll's records delivered again to another process, later: nonmonotonic reads
        op = h[r.choice(polls)]
        t = h[-1].time_ns + 1
        h.append(Op(len(h), t, 99, "invoke", "poll", [["poll"]]))
        h.append(Op(len(h), t + 1, 99, "ok", "poll", op.value))
    if reorder and polls:
        # one poll's records of a key out of order: an internal nonmonotonic poll
        i = r.choice(polls)
        op = h[i]
        vals = [["poll", {k: list(reversed(ps)) for k, ps in m[1].items()}]
                if m[0] == "poll" and len(m) > 1 else m for m in op.value]
        h[i] = op._replace(value=vals)
    # every decoder's fast answer (when it gives one) equals the reference, condensed and
    # with all errors; answers with another anomaly kind are impossible
    ref, answered = _same_everywhere(h)
    if not set(ref["anomaly_types"]) <= queue_fast.ANSWERED:
        assert not any(answered.values()), (ref["anomaly_types"], answered)


DATA = Path(__file__).parent / "data"


def _real_history(name: str) -> list[Op]:
    import gzip

    from harness.history import read_jsonl

    p = DATA / name
    if name.endswith(".gz"):
        with tempfile.TemporaryDirectory() as tmp:
            q = Path(tmp) / name.removesuffix(".gz")
            q.write_bytes(gzip.decompress(p.read_bytes()))
            return read_jsonl(q)
    return read_jsonl(p)


def test_real_campaign_histories_equal_the_reference() -> None:
    """Histories recorded by real local/Docker campaigns (two stopped mid-run, so with
    unseen values; one clean): every decoder's fast answer is the reference's, and the fast
    path answers them all."""
    kinds = []
    for name in ("real_campaign_stopped_unseen.jsonl", "real_campaign_clean.jsonl",
                 "real_campaign_stopped_unseen_long.jsonl.gz"):
        h = _real_history(name)
        ref, answered = _same_everywhere(h)
        assert all(answered.values()), (name, answered)
        kinds.append(ref["anomaly_types"])
    assert kinds == [["unseen"], [], ["unseen"]]
