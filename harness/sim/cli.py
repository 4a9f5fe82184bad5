"""`hiwater sim`: run seeds (one, a range, a swarm) over the cores, report the failures with
their seed, options and a replayable trace, or replay a trace bit for bit."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.sim.run import (
    ALL_FAULTS,
    WORKLOADS,
    SimOptions,
    SimResult,
    crash_line,
    read_trace,
    run_seed,
    scenario,
    settle_gc,
    write_trace,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 3


@dataclass(frozen=True)
class Summary:
    seed: int
    ok: bool
    failure: str | None
    events: int
    steps: int
    sim_ms: int
    faults: int
    trace_hash: str
    wall_s: float
    drawn_faults: tuple[str, ...]


def run_one(opts: SimOptions) -> Summary:
    """One seed's summary. Never raises: `run_seed` reports what escapes its event loop as
    the seed's failure, and anything raised around it (building the cluster, the checkers)
    becomes the failure line here. A worker's exception would otherwise cross the process
    pool, where one that does not unpickle killed the pool's result thread and hung the
    swarm (2026-11-27, an OffsetOutOfRangeError)."""
    t = time.perf_counter()
    try:
        r = run_seed(opts)
    except Exception as e:
        return Summary(opts.seed, False, crash_line(e), 0, 0, 0, 0, "",
                       time.perf_counter() - t, ())
    return Summary(opts.seed, r.ok, r.failure, r.events, r.steps, r.sim_ms, r.faults,
                   r.trace_hash, time.perf_counter() - t, r.drawn.faults)


def parse_seeds(seed: int | None, seeds: str | None, swarm: int | None) -> list[int]:
    given = sum(x is not None for x in (seeds, swarm))
    if given > 1:
        raise ValueError("give one of --seeds A..B and --swarm K")
    if seeds is not None:
        a, sep, b = seeds.partition("..")
        if not sep or not a.strip().isdigit() or not b.strip().isdigit():
            raise ValueError(f"--seeds wants A..B (non-negative integers); got {seeds!r}")
        lo, hi = int(a), int(b)
        if hi < lo:
            raise ValueError(f"--seeds {seeds}: the range is empty")
        return list(range(lo, hi + 1))
    start = seed if seed is not None else 0
    if seed is not None and seed < 0:
        raise ValueError("--seed must not be negative")
    if swarm is not None:
        if swarm < 1:
            raise ValueError("--swarm wants a positive number of seeds")
        return list(range(start, start + swarm))
    return [start]


def run_many(base: SimOptions, seeds: list[int], workers: int,
             on_result: Callable[[Summary], None] | None = None) -> list[Summary]:
    """Every seed, over `workers` processes; results in seed order."""
    opts = [replace(base, seed=s) for s in seeds]
    out: list[Summary] = []
    settle_gc()  # before the fork: the workers inherit it
    if workers <= 1 or len(opts) == 1:
        for o in opts:
            out.append(run_one(o))
            if on_result is not None:
                on_result(out[-1])
        return out
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        for s in pool.imap(run_one, opts, chunksize=1):
            out.append(s)
            if on_result is not None:
                on_result(s)
    return out


def seeds_to_find(base: SimOptions, max_seeds: int, workers: int) -> Summary | None:
    """The first failing seed from `base.seed` on (in seed order), or None within
    `max_seeds`."""
    opts = [replace(base, seed=base.seed + k) for k in range(max_seeds)]
    settle_gc()
    if workers <= 1:
        for o in opts:
            s = run_one(o)
            if not s.ok:
                return s
        return None
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        for s in pool.imap(run_one, opts, chunksize=1):
            if not s.ok:
                pool.terminate()
                return s
    return None


def write_run(directory: Path, r: SimResult) -> Path:
    """A campaign-like run directory: options, history, results, trace, report.html."""
    from harness.checkers import check
    from harness.history import write_jsonl
    from harness.report.page import render_html

    directory.mkdir(parents=True, exist_ok=True)
    options = {**r.options.to_json(), "drawn": r.drawn.to_json(), "runtime": "sim"}
    (directory / "options.json").write_text(json.dumps(options, indent=2))
    write_jsonl(r.history, directory / "history.jsonl")
    results = r.checked or check(r.history)
    results = {**results, "sim": {"ok": r.ok, "failure": r.failure, "trace_hash": r.trace_hash,
                                  "events": r.events, "steps": r.steps, "sim_ms": r.sim_ms,
                                  "faults": r.faults}}
    if not r.ok:
        results["valid?"] = False
    (directory / "results.json").write_text(json.dumps(results, indent=2, default=str))
    write_trace(directory / "trace.jsonl", r)
    (directory / "report.html").write_text(
        render_html(r.history, results, options, run_name=f"sim seed {r.options.seed}",
                    history_note="simulated time"), encoding="utf-8")
    return directory


def sim_command(*, seed: int | None, seeds: str | None, swarm: int | None, bug: str | None,
                nodes: int, time_s: float, liveness_s: float, no_swarm: bool,
                faults: str | None, workers: int | None, store: Path, replay: Path | None,
                echo: Callable[[str], None], workload: str = "any") -> int:
    if replay is not None:
        return replay_command(replay, store, echo)
    try:
        seed_list = parse_seeds(seed, seeds, swarm)
        if bug is not None:
            scenario(bug)
        if not 1 <= nodes <= 7:
            raise ValueError(f"--nodes must be 1..7; got {nodes}")
        if time_s <= 0 or liveness_s <= 0:
            raise ValueError("--time and --liveness must be positive")
        kinds = ALL_FAULTS if faults is None else tuple(
            f.strip() for f in faults.split(",") if f.strip() and f.strip() != "none")
        unknown = [f for f in kinds if f not in ALL_FAULTS]
        if unknown:
            raise ValueError(f"unknown fault {unknown[0]!r}; known: {', '.join(ALL_FAULTS)}")
        if workload not in (*WORKLOADS, "any"):
            raise ValueError(f"--workload must be one of {', '.join(WORKLOADS)}, any; "
                             f"got {workload!r}")
        n_workers = workers if workers is not None else (os.cpu_count() or 1)
        if n_workers < 1:
            raise ValueError("--workers must be at least 1")
    except ValueError as e:
        echo(f"hiwater sim: {e}")
        return EXIT_BAD_INPUT
    # The simulated brokers' own log lines (a torn tail truncated on recovery, a flipped
    # index rebuilt: thousands in a swarm) stay out of the terminal: what a seed's faults did
    # is in its history and trace, and a broker that fails fails its seed.
    logging.getLogger().addHandler(logging.NullHandler())
    base = SimOptions(seed=seed_list[0], nodes=nodes, time_s=time_s, liveness_s=liveness_s,
                      bug=bug, swarm=not no_swarm, faults=kinds, workload=workload)
    t0 = time.perf_counter()
    failed: list[Summary] = []

    def progress(s: Summary) -> None:
        if not s.ok:
            failed.append(s)
            echo(f"seed {s.seed}: FAILED: {s.failure}")

    results = run_many(base, seed_list, n_workers, progress)
    wall = time.perf_counter() - t0
    events = sum(s.events for s in results)
    sim_s = sum(s.sim_ms for s in results) / 1000
    n_faults = sum(s.faults for s in results)
    echo(f"{len(results)} seeds, {len(failed)} failed; {events} events "
         f"({events / wall:,.0f}/s), {sim_s:,.0f} simulated s ({sim_s / wall:,.1f}x), "
         f"{n_faults} faults, {wall:.1f} s on {n_workers} worker{'s' if n_workers != 1 else ''}")
    if len(results) == 1 and not failed:
        echo(f"seed {results[0].seed}: ok, trace hash {results[0].trace_hash}")
    for s in failed[:5]:
        r = run_seed(replace(base, seed=s.seed), keep_trace=True)
        d = write_run(store / f"seed{s.seed}", r)
        echo(f"seed {s.seed} options {json.dumps({**base.to_json(), 'seed': s.seed})}")
        echo(f"  drawn: {json.dumps(r.drawn.to_json())}")
        echo(f"  first failure: {r.failure}")
        echo(f"  trace: {d / 'trace.jsonl'} (hiwater sim --replay {d / 'trace.jsonl'}); "
             f"report: {d / 'report.html'}")
    if len(results) == 1 and not failed:
        r = run_seed(base, keep_trace=True)
        d = write_run(store / f"seed{base.seed}", r)
        echo(f"  run directory: {d}")
    return EXIT_FAILED if failed else EXIT_OK


def replay_command(path: Path, store: Path, echo: Callable[[str], None]) -> int:
    try:
        opts, head, lines = read_trace(path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        echo(f"hiwater sim --replay: cannot read {path}: {e}")
        return EXIT_BAD_INPUT
    r = run_seed(opts, keep_trace=True)
    mine = r.trace or []
    for k, (a, b) in enumerate(_pairs(lines, mine)):
        if a != b:
            echo(f"replay diverges at event line {k + 1}:\n  trace:  {a}\n  replay: {b}")
            return EXIT_FAILED
    same = r.trace_hash == head.get("trace_hash") and r.failure == head.get("failure")
    echo(f"replayed seed {opts.seed}: {len(mine)} lines, hash {r.trace_hash} "
         f"({'identical' if same else 'DIFFERENT'}); failure: {r.failure}")
    return EXIT_OK if same else EXIT_FAILED


def _pairs(a: list[str], b: list[str]) -> Iterator[tuple[str | None, str | None]]:
    for k in range(max(len(a), len(b))):
        yield (a[k] if k < len(a) else None, b[k] if k < len(b) else None)


def summary_json(s: Summary) -> dict[str, Any]:
    return {"seed": s.seed, "ok": s.ok, "failure": s.failure, "events": s.events,
            "sim_ms": s.sim_ms, "faults": s.faults, "trace_hash": s.trace_hash}
