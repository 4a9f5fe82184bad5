"""Breadth-first search over several processes, with the sequential search's results.

The search runs level by level. Worker processes (forked, so they share the model and the
caches built so far) each hold part of the current level's worlds and expand them: every
successor gets its canonical key, and a key the worker has met before (in any level) is
dropped there; for the others the worker evaluates the invariants and keeps the world,
sending the coordinator only (parent position, successor index, key, action, verdict).
The coordinator merges the workers' lists in the order the sequential search would meet
them (by parent position in the level, then successor index) and keeps the first
occurrence of each key not visited before; it tells each worker which of its worlds
survive and their positions in the next level. Worlds never cross processes.

Why the results equal the sequential search's (`checker.check`): the sequential FIFO
frontier is exactly the levels in discovery order, and discovery order is the merge order.
A worker drops a key only when it met it earlier in its own (increasing) order, so the
first occurrence in merge order is always reported, with the verdict of that very
transition. Hence the same visited set, the same parent of each state, the same first
violation and its shortest trace, whatever the number of workers. Keys are content
digests (`Canonicalizer(fingerprints=True)`), so the processes agree on them; their order
depends on PYTHONHASHSEED, the set of orbits does not.

Balance: the first levels run in the coordinator until the level is wide enough; then the
level is dealt round-robin to the workers. A survivor stays with the worker that found it,
so each worker's share of the next level follows its share of this one.

Transfers: what crosses the pipes is the candidates (small tuples with a 128-bit key and an
action label whose strings pickle once per message) and the survivors' positions. At the
issue's bounds the coordinator used 0.7 CPU-s of the run's 95.7 (2026-11-26), pickling and
merging included: compressing them or sending deltas would not pay; the workers' expansion
is the cost.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Callable, Hashable
from multiprocessing.connection import Connection
from typing import Any

from spec.invariants import check_state, check_step, view
from spec.model import Action, Model
from spec.symmetry import Canonicalizer
from spec.world import World

# (parent position, successor index, key, action, violation)
Candidate = tuple[int, int, Hashable, Action, tuple[str, str] | None]

_MIN_WIDTH = 64  # per worker: levels narrower than this run in the coordinator


class _Expander:
    """Expands worlds, remembering every key it has met and the verdicts of views."""

    def __init__(self, model: Model, canon: Canonicalizer,
                 only: frozenset[str] | None, seen: set[Hashable]) -> None:
        self.model, self.canon, self.only, self.seen = model, canon, only, seen
        self.verdicts: dict[object, tuple[str, str] | None] = {}

    def state_violation(self, w: World) -> tuple[str, str] | None:
        v = view(w)
        if v in self.verdicts:
            return self.verdicts[v]
        if len(self.verdicts) >= 1_000_000:
            self.verdicts.clear()
        bad = self.verdicts[v] = check_state(w, self.only)
        return bad

    def expand(self, level: list[tuple[int, World]]) -> tuple[
            list[int], list[Candidate], list[World]]:
        """Per parent, its number of successors; the candidates in order; their worlds."""
        counts: list[int] = []
        cands: list[Candidate] = []
        worlds: list[World] = []
        key, seen = self.canon.key, self.seen
        for pos, w in level:
            succs = self.model.successors(w)
            counts.append(len(succs))
            for j, (action, nxt) in enumerate(succs):
                if nxt is w:  # an action that changed nothing: w's own key, met before
                    continue
                nk = key(nxt)
                if nk in seen:
                    continue
                seen.add(nk)
                bad = check_step(w, nxt, self.only) or self.state_violation(nxt)
                cands.append((pos, j, nk, action, bad))
                worlds.append(nxt)
        return counts, cands, worlds


def _serve(conn: Connection, ex: _Expander, level: list[tuple[int, World]]) -> None:
    """A worker: expand the level, report, learn the survivors; until told to stop."""
    try:
        while True:
            counts, cands, worlds = ex.expand(level)
            conn.send(([pos for pos, _ in level], counts, cands))
            keep = conn.recv()
            if keep is None:
                return
            level = [(new_pos, worlds[i]) for i, new_pos in keep]
    finally:
        conn.close()


def bfs(
    model: Model,
    workers: int,
    symmetry: bool,
    only: frozenset[str] | None,
    max_states: int | None,
    time_limit_s: float | None,
    progress: Callable[[int, int, float], None] | None,
    start: float,
) -> tuple[tuple[str, str] | None, Hashable | None, dict[Hashable, tuple[Hashable, Action] | None],
           int, int, bool, str | None]:
    """(violation, key of the bad state, parents, transitions, depth, exhausted, stopped_by).
    Limits are checked between levels, so a limited search may overshoot `max_states`."""
    canon = Canonicalizer(model.bounds.brokers, fingerprints=True, symmetry=symmetry)
    init = model.initial()
    init_key = canon.key(init)
    parents: dict[Hashable, tuple[Hashable, Action] | None] = {init_key: None}
    bad = check_state(init, only)
    if bad is not None:
        return bad, init_key, parents, 0, 0, False, None
    ex = _Expander(model, canon, only, {init_key})
    level_keys: list[Hashable] = [init_key]
    level: list[tuple[int, World]] = [(0, init)]
    transitions = 0
    depth = 0
    conns: list[Connection] = []
    procs: list[Any] = []
    local_worlds: list[World] = []
    try:
        while level_keys:
            if progress is not None:
                progress(len(parents), depth, time.perf_counter() - start)
            if max_states is not None and len(parents) >= max_states:
                return None, None, parents, transitions, depth, False, "max_states"
            if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
                return None, None, parents, transitions, depth, False, "time_limit"
            if not procs and len(level) >= _MIN_WIDTH * workers:
                ctx = mp.get_context("fork")
                for wid in range(workers):
                    mine, theirs = ctx.Pipe()
                    share = level[wid::workers]
                    p = ctx.Process(target=_serve, args=(theirs, ex, share), daemon=True)
                    p.start()
                    theirs.close()
                    conns.append(mine)
                    procs.append(p)
                level = []
            if procs:
                reports = []
                for c in conns:
                    try:
                        reports.append(c.recv())
                    except EOFError:
                        raise RuntimeError("a model-checking worker died") from None
            else:
                counts, cands, local_worlds = ex.expand(level)
                reports = [([pos for pos, _ in level], counts, cands)]
            # successors per parent position, for exact transition counts at a violation
            n_succ = [0] * len(level_keys)
            for positions, counts, _ in reports:
                for pos, c in zip(positions, counts, strict=True):
                    n_succ[pos] = c
            # Each worker's list is in (position, successor index) order and every parent
            # position belongs to one worker: sorting the concatenation merges the runs (in
            # C, which heapq.merge's generator is not).
            merged = [(c[0], c[1], wid, i) for wid, r in enumerate(reports)
                      for i, c in enumerate(r[2])]
            merged.sort()
            keep: list[list[tuple[int, int]]] = [[] for _ in reports]
            next_keys: list[Hashable] = []
            done_before = 0  # transitions of parents before the current one in this level
            last_pos = 0
            for pos, j, wid, i in merged:
                _, _, nk, action, violation = reports[wid][2][i]
                if nk in parents:
                    continue
                parents[nk] = (level_keys[pos], action)
                if violation is not None:
                    while last_pos < pos:
                        done_before += n_succ[last_pos]
                        last_pos += 1
                    return (violation, nk, parents, transitions + done_before + j + 1,
                            depth + 1, False, None)
                keep[wid].append((i, len(next_keys)))
                next_keys.append(nk)
            transitions += sum(n_succ)
            if next_keys:
                depth += 1
            level_keys = next_keys
            if procs:
                if not next_keys:
                    break
                for c, k in zip(conns, keep, strict=True):
                    c.send(k)
            else:
                level = [(new_pos, local_worlds[i]) for i, new_pos in keep[0]]
        return None, None, parents, transitions, depth, True, None
    finally:
        # Workers waiting for the survivors stop at None; one still expanding (a limit
        # stopped the search mid-level) is killed.
        for c in conns:
            with contextlib.suppress(OSError):
                c.send(None)
        for p in procs:
            p.join(timeout=1)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()
