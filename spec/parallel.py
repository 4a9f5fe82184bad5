"""Breadth-first search over several processes, with the sequential search's results.

The search runs level by level. Worker processes (forked, so they share the model and the
caches built so far) each hold part of the current level's worlds and expand them: every
successor gets its canonical key, and a key the worker has met before (in any level), or
that any worker found in an earlier level (the coordinator passes those on), is dropped
there; for the others the worker evaluates the invariants and keeps the world,
sending the coordinator only (parent position, successor index, key, action, verdict).
The coordinator merges the workers' lists in the order the sequential search would meet
them (by parent position in the level, then successor index) and keeps the first
occurrence of each key not visited before; it tells each worker which of its worlds
survive and their positions in the next level. Worlds cross processes only to balance the
levels (below).

Why the results equal the sequential search's (`checker.check`): the sequential FIFO
frontier is exactly the levels in discovery order, and discovery order is the merge order.
A worker drops a key only when it met it earlier in its own (increasing) order or when an
earlier level holds it already (which the coordinator would skip), so the first
occurrence in merge order is always reported, with the verdict of that very
transition. Hence the same visited set, the same parent of each state, the same first
violation and its shortest trace, whatever the number of workers. Keys are content
digests (`Canonicalizer(fingerprints=True)`), so the processes agree on them; their order
depends on PYTHONHASHSEED, the set of orbits does not.

Balance: the first levels run in the coordinator until the level is wide enough; then the
level is dealt round-robin to the workers. A survivor stays with the worker that found it
unless the shares are uneven: then the coordinator tells the worker with more survivors to
hand its last ones (pickled, once) to the one with fewer (`_balance`), which interns what
it receives (`model.adopt`) and expands its level in position order as before. Without
this the shares drifted to 57:43 at the issue's bounds (the sequential order of discovery
decides who finds a state first), and at the end of every level one worker sat idle: 8% of
the wall time. A moved world is equal to the one left behind, so its successors, their
order and the results are the same.

Transfers: what crosses the pipes is the candidates (small tuples with a 128-bit key and an
action label whose strings pickle once per message), the survivors' positions, the keys
the other workers found (which spares a worker about two thirds of the candidates it used
to check and report again: 94,356 candidates for 75,726 states at the default bounds
before, 82,824 after) and the moved worlds, pickled in one batch per level (equal broker
states and messages pickle once). At the
issue's bounds the coordinator used 0.7 CPU-s of the run's 95.7 (2026-11-26), pickling and
merging included: compressing them or sending deltas would not pay; the workers' expansion
is the cost.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import time
from collections.abc import Callable, Hashable
from multiprocessing.connection import Connection
from operator import itemgetter
from typing import Any

from spec.invariants import check_state, check_step, view
from spec.model import Action, Model, adopt
from spec.symmetry import Canonicalizer
from spec.world import World

# (parent position, successor index, key, action, violation)
Candidate = tuple[int, int, Hashable, Action, tuple[str, str] | None]

_MIN_WIDTH = 64  # per worker: levels narrower than this run in the coordinator
_MIN_MOVE = 16  # worlds: a smaller imbalance is not worth pickling worlds for


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
        key_tidy, seen = self.canon.key_tidy, self.seen
        successors, tidy = self.model.successors_untidied, self.model.tidy
        for pos, w in level:
            succs = successors(w)
            counts.append(len(succs))
            for j, (action, nxt) in enumerate(succs):
                if nxt is w:  # an action that changed nothing: w's own key, met before
                    continue
                # the key of the tidy world, without tidying when the key is known
                nk, tidied = key_tidy(nxt, tidy)
                if nk in seen:
                    continue
                seen.add(nk)
                nxt = tidy(nxt) if tidied is None else tidied
                bad = check_step(w, nxt, self.only) or self.state_violation(nxt)
                cands.append((pos, j, nk, action, bad))
                worlds.append(nxt)
        return counts, cands, worlds


# What the coordinator tells a worker after a level: its surviving worlds (index among its
# candidates, position in the next level); the survivors to hand to other workers instead
# (per receiving worker); and the pickled worlds other workers hand to it.
# Also the keys of the states other workers found in this level, so that it drops them when
# it meets them later instead of checking and reporting them again.
Orders = tuple[list[tuple[int, int]], list[tuple[int, list[tuple[int, int]]]], list[bytes],
               list[Hashable]]


def _serve(conn: Connection, ex: _Expander, level: list[tuple[int, World]]) -> None:
    """A worker: expand the level, report, learn the survivors (and hand some over or take
    some in); until told to stop."""
    try:
        while True:
            counts, cands, worlds = ex.expand(level)
            conn.send(([pos for pos, _ in level], counts, cands))
            orders: Orders | None = conn.recv()
            if orders is None:
                return
            keep, give, taken, found = orders
            ex.seen.update(found)
            for _, items in give:
                conn.send_bytes(pickle.dumps([(new_pos, worlds[i]) for i, new_pos in items],
                                             protocol=pickle.HIGHEST_PROTOCOL))
            level = [(new_pos, worlds[i]) for i, new_pos in keep]
            if taken:
                for blob in taken:
                    level += [(pos, adopt(w)) for pos, w in pickle.loads(blob)]
                # in position order, as `_Expander.expand` needs: a worker drops a key only
                # when it met it earlier in that order
                level.sort(key=itemgetter(0))
    finally:
        conn.close()


def _balance(keep: list[list[tuple[int, int]]]) -> list[list[tuple[int, list[tuple[int, int]]]]]:
    """Which survivors each worker hands to which other one so that the next level is
    shared evenly: a survivor stays with the worker that found it, and the sequential
    order of discovery decides who that is, which drifted to 57:43 at the issue's bounds
    (one worker idle at the end of every level). A giver hands over its last survivors."""
    n = len(keep)
    total = sum(map(len, keep))
    target = [total // n + (1 if w < total % n else 0) for w in range(n)]
    deficit = [(w, target[w] - len(keep[w])) for w in range(n) if len(keep[w]) < target[w]]
    give: list[list[tuple[int, list[tuple[int, int]]]]] = [[] for _ in range(n)]
    if sum(d for _, d in deficit) < _MIN_MOVE:
        return give
    for w in range(n):
        surplus = len(keep[w]) - target[w]
        while surplus > 0 and deficit:
            r, d = deficit[0]
            moved = min(surplus, d)
            give[w].append((r, keep[w][len(keep[w]) - moved:]))
            del keep[w][len(keep[w]) - moved:]
            surplus -= moved
            if moved == d:
                deficit.pop(0)
            else:
                deficit[0] = (r, d - moved)
    return give


def _send_orders(conns: list[Connection], keep: list[list[tuple[int, int]]],
                 found: list[list[Hashable]]) -> None:
    """The next level's survivors to the workers, balanced (`_balance`): givers first, then
    what they hand over goes on to its receivers (pickled once, by the giver)."""
    give = _balance(keep)
    taken: list[list[bytes]] = [[] for _ in conns]
    others = [[k for v, f in enumerate(found) if v != w for k in f] for w in range(len(conns))]
    for c, k, g, o in zip(conns, keep, give, others, strict=True):
        if g:
            c.send((k, g, [], o))
            for r, _ in g:
                taken[r].append(c.recv_bytes())
    for c, k, g, t, o in zip(conns, keep, give, taken, others, strict=True):
        if not g:
            c.send((k, [], t, o))


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
            found: list[list[Hashable]] = [[] for _ in reports]
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
                found[wid].append(nk)
                next_keys.append(nk)
            transitions += sum(n_succ)
            if next_keys:
                depth += 1
            level_keys = next_keys
            if procs:
                if not next_keys:
                    break
                _send_orders(conns, keep, found)
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
