"""Synthetic stores for tests and benchmarks: run directories with options.json, a history
(harness.checkers.synthetic plus nemesis fault windows, with injected write loss for unsafe
configurations) and results.json made by the real single-process checker.

Three of the four configurations lose a write in their synthetic runs (acks=1, unclean
election with min ISR 1, a bug switch): lost_write, unseen and poll skips in three runs of
four, which the columnar fast path reports itself (`queue_fast.ANSWERED`)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from harness.history import INFO, NEMESIS, Op, write_jsonl

FAULT_OPS: Final = {"partition": ("start-partition", "stop-partition"),
                    "kill": ("kill", "start"), "pause": ("pause", "resume")}

#: (acks, min ISR, unclean, idempotence, bugs) — the last two lose writes in synthetic runs
CONFIGS: Final = (
    ("all", 2, False, True, ()),
    ("1", 2, False, False, ()),
    ("all", 1, True, True, ()),
    ("all", 2, False, True, ("truncate_to_hw",)),
)


def lossy(config: Sequence[Any]) -> bool:
    acks, min_isr, unclean, _idem, bugs = config
    return acks != "all" or bool(bugs) or (unclean and min_isr < 2)


def _with_faults(history: list[Op], kinds: Sequence[str], rng: random.Random) -> list[Op]:
    if not kinds or not history:
        return history
    t_end = history[-1].time_ns
    events: list[tuple[int, str, Any]] = []
    n = 2 * len(kinds)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        start, stop = FAULT_OPS[kind]
        t0 = int(t_end * (i + 0.3) / (n + 1))
        t1 = t0 + int(t_end * rng.uniform(0.2, 0.6) / (n + 1))
        events += [(t0, start, ["n1"]), (t0 + 1000, start, ["n1"]),
                   (t1, stop, ["n1"]), (t1 + 1000, stop, ["n1"])]
    merged: list[tuple[int, int, Op]] = [(op.time_ns, 0, op) for op in history]
    merged += [(t, 1, Op(-1, t, NEMESIS, INFO, f, v)) for t, f, v in events]
    merged.sort(key=lambda x: (x[0], x[1]))
    return [op._replace(index=i) for i, (_t, _o, op) in enumerate(merged)]


def _lose_one(history: list[Op], rng: random.Random) -> list[Op]:
    """Drop one acknowledged value from every poll result: a lost write."""
    sent = [(m[1], m[2][1]) for op in history if op.type == "ok" and op.f in ("send", "txn")
            for m in op.value if m[0] == "send"]
    if not sent:
        return history
    k, v = sent[len(sent) // 3]
    out = []
    for op in history:
        if op.type == "ok" and op.f in ("poll", "txn"):
            val = []
            for m in op.value:
                if m[0] == "poll":
                    pm = {kk: [p for p in ps if not (kk == k and p[1] == v)]
                          for kk, ps in m[1].items()}
                    m = ["poll", {kk: ps for kk, ps in pm.items() if ps}]
                val.append(m)
            op = op._replace(value=val)
        out.append(op)
    return out


def write_run(store: Path, campaign: str, stamp: str, *, seed: int, n_ops: int,
              config: Sequence[Any], faults: Sequence[str], parquet: bool = False,
              report: bool = False) -> Path:
    """One run directory store/campaign/stamp, as a campaign would leave it."""
    from harness.checkers import check
    from harness.checkers.policy import QueuePolicy, run_verdict
    from harness.checkers.synthetic import queue_history

    rng = random.Random(seed)
    h = queue_history(n_ops, seed=seed, keys=6, concurrency=5)
    if lossy(config):
        h = _lose_one(h, rng)
    h = _with_faults(h, list(faults), rng)
    acks, min_isr, unclean, idem, bugs = config
    opts = {"name": campaign, "workload": "queue", "seed": seed, "acks": acks,
            "min_insync_replicas": min_isr, "unclean_leader_election": unclean,
            "idempotence": idem, "bugs": list(bugs), "nemesis": list(faults) or ["none"],
            "sub_via": ["assign"], "store": str(store)}
    run = store / campaign / stamp
    run.mkdir(parents=True, exist_ok=True)
    (run / "options.json").write_text(json.dumps(opts, indent=2))
    write_jsonl(h, run / "history.jsonl")
    if parquet:  # as a campaign writes it: the fixed schema plus the checker's side columns
        from harness.checkers.columnar import write_columnar

        write_columnar(h, run / "history.parquet")
    results: dict[str, Any] = {"seed": seed, "options": opts, "probes": {"valid?": True},
                               "workload": {"final_complete": True}}
    policy = QueuePolicy.of(["assign"])
    results.update(check(h, policy))
    verdict, bad = run_verdict(results, results)
    results.update(verdict=verdict, bad=bad, exit_code={"valid": 0, "invalid": 1}.get(verdict, 2))
    (run / "results.json").write_text(json.dumps(results, indent=2, default=str))
    if report:
        (run / "report.html").write_text("<html><body>synthetic run</body></html>\n")
    return run


def _plan(runs: int) -> list[tuple[str, str, int, tuple[Any, ...], tuple[str, ...], bool]]:
    """(campaign, stamp, seed, config, faults, parquet?) of each run: CONFIGS × fault mixes,
    seeds 1..; every other run written with history.parquet, the rest JSONL only."""
    mixes: list[tuple[str, ...]] = [("partition",), ("kill",), ("partition", "kill"), ()]
    out = []
    for i in range(runs):
        cfg = CONFIGS[i % len(CONFIGS)]
        mix = mixes[(i + i // len(CONFIGS)) % len(mixes)]
        camp = "safe" if not lossy(cfg) else "unsafe"
        stamp = f"20260101T{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}.{i // 86400:06d}Z"
        out.append((camp, stamp, i + 1, tuple(cfg), mix, i % 2 == 0))
    return out


def _write_planned(args: tuple[Path, int, tuple[Any, ...]]) -> Path:
    store, n_ops, (camp, stamp, seed, cfg, mix, parquet) = args
    return write_run(store, camp, stamp, seed=seed, n_ops=n_ops, config=cfg, faults=mix,
                     parquet=parquet, report=True)


def make_store(store: Path, runs: int, n_ops: int, *, distinct: int | None = None,
               workers: int = 1) -> list[Path]:
    """`runs` runs over CONFIGS × fault mixes, seeds 1... With `distinct` < runs, only the
    first `distinct` runs are generated and checked; run i ≥ distinct is a copy of run
    i mod distinct's files (options, history, results: the same seed, so the same history)
    under its own stamp — each still a separate run to analyse and check. `workers` processes
    generate (the checker makes each results.json: the slow part)."""
    plan = _plan(runs)
    d = runs if distinct is None else max(1, min(distinct, runs))
    jobs = [(store, n_ops, p) for p in plan[:d]]
    if workers > 1 and d > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(workers) as pool:
            out = pool.map(_write_planned, jobs, chunksize=1)
    else:
        out = [_write_planned(j) for j in jobs]
    import shutil

    for i in range(d, runs):
        src = out[i % d]
        camp, stamp = plan[i % d][0], plan[i][1]
        dst = store / camp / stamp
        shutil.copytree(src, dst)
        out.append(dst)
    return out
