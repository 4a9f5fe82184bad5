"""Explicit-state model checking of the real core.

Breadth-first (shortest counterexamples) or depth-first search over `spec.model.Model`,
with every state checked against `spec.invariants` and every transition against the step
invariants. States are stored by a canonical key: symmetric under renaming brokers when the
model is (every choice explored), so one representative per orbit is kept.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spec.invariants import NAMES, check_state, check_step, view
from spec.model import Action, Model
from spec.symmetry import Canonicalizer
from spec.world import World


@dataclass
class Result:
    violation: tuple[str, str] | None  # (invariant, what broke)
    trace: list[tuple[Action, World]]  # from the initial state (action () ) to the bad one
    states: int
    transitions: int
    depth: int
    seconds: float
    exhausted: bool  # the whole bounded state space was explored
    stopped_by: str | None = None  # "max_states" or "time_limit" when not exhausted
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The search allocates millions of tuples and keeps most of them (keys, parents, caches);
    CPython's cyclic collector would traverse that growing heap again and again (about a
    third of the CPU time). Nothing in a search builds reference cycles worth collecting
    (states are trees of immutable values), so the collector is off for its duration."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # Every object the search allocated and kept is still in the youngest
            # generation (nothing was collected), and the allocations counted meanwhile
            # trigger a collection of it at the next allocation: a traversal of the whole
            # search's heap that finds nothing (about a second at the bounds). Moved
            # to the oldest generation first (freeze, then unfreeze), as survivors of
            # collections would have been, so they wait for the next full collection.
            gc.freeze()
            gc.enable()
            gc.unfreeze()


def check(
    model: Model,
    strategy: str = "bfs",
    symmetry: bool = True,
    max_states: int | None = None,
    time_limit_s: float | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    invariants: tuple[str, ...] | None = None,
    workers: int = 1,
) -> Result:
    """Explore until a violation, exhaustion, or a limit. BFS returns a shortest trace.
    `invariants` restricts the check to the named properties (all by default). `workers`
    > 1 runs a breadth-first search over that many processes (`spec.parallel`), with the
    same states, transitions, depth, verdict and trace as one process."""
    if strategy not in ("bfs", "dfs"):
        raise ValueError("strategy must be 'bfs' or 'dfs'")
    with no_cyclic_gc():
        return _check(model, strategy, symmetry, max_states, time_limit_s, progress,
                      invariants, workers)


def _check(
    model: Model,
    strategy: str,
    symmetry: bool,
    max_states: int | None,
    time_limit_s: float | None,
    progress: Callable[[int, int, float], None] | None,
    invariants: tuple[str, ...] | None,
    workers: int,
) -> Result:
    only = None if invariants is None else frozenset(invariants)
    if only is not None and not only <= set(NAMES):
        raise ValueError(f"unknown invariants {sorted(only - set(NAMES))}; known: {NAMES}")
    start = time.perf_counter()
    n_brokers = model.bounds.brokers
    symmetry = symmetry and model.symmetric

    if workers < 1:
        raise ValueError("workers must be at least 1")
    if strategy == "bfs" and workers > 1:
        from spec import parallel

        bad_v, bad_k, ps, trans, dep, exhausted, stopped = parallel.bfs(
            model, workers, symmetry, only, max_states, time_limit_s, progress, start)
        trace = _trace(model, ps, bad_k) if bad_k is not None else []
        return Result(bad_v, trace, len(ps), trans, dep, time.perf_counter() - start,
                      exhausted, stopped)

    canon = Canonicalizer(n_brokers)
    tidy = model.tidy

    def key(w: World) -> object:
        return canon.key(w) if symmetry else w

    def key_tidy(w: World) -> tuple[object, World | None]:
        """The key of tidy(w), and tidy(w) when computed (`Canonicalizer.key_tidy`)."""
        if symmetry:
            return canon.key_tidy(w, tidy)
        t = tidy(w)
        return t, t

    init = model.initial()
    init_key = key(init)
    parents: dict[object, tuple[object, Action] | None] = {init_key: None}
    frontier: deque[tuple[World, object, int]] = deque([(init, init_key, 0)])
    transitions = 0
    depth = 0
    # State invariants are a function of `invariants.view`, which far fewer values take
    # than there are states.
    verdicts: dict[object, tuple[str, str] | None] = {}

    def state_violation(w: World) -> tuple[str, str] | None:
        v = view(w)
        if v in verdicts:
            return verdicts[v]
        if len(verdicts) >= 1_000_000:
            verdicts.clear()
        bad = verdicts[v] = check_state(w, only)
        return bad

    def result(violation: tuple[str, str] | None, bad: tuple[World, object] | None,
               exhausted: bool, stopped_by: str | None) -> Result:
        trace = _trace(model, parents, bad[1]) if bad is not None else []
        return Result(violation, trace, len(parents), transitions, depth,
                      time.perf_counter() - start, exhausted, stopped_by)

    bad = check_state(init, only)
    if bad is not None:
        return result(bad, (init, init_key), False, None)
    pop = frontier.popleft if strategy == "bfs" else frontier.pop
    while frontier:
        w, wk, d = pop()
        depth = max(depth, d)
        for action, nxt in model.successors_untidied(w):
            transitions += 1
            if nxt is w:  # an action that changed nothing (`Model.successors`)
                continue
            nk, tidied = key_tidy(nxt)
            if nk in parents:
                continue
            nxt = tidy(nxt) if tidied is None else tidied
            parents[nk] = (wk, action)
            violation = check_step(w, nxt, only) or state_violation(nxt)
            if violation is not None:
                depth = max(depth, d + 1)
                return result(violation, (nxt, nk), False, None)
            frontier.append((nxt, nk, d + 1))
        if progress is not None and len(parents) % 1000 < 20:
            progress(len(parents), depth, time.perf_counter() - start)
        if max_states is not None and len(parents) >= max_states:
            return result(None, None, False, "max_states")
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            return result(None, None, False, "time_limit")
    return result(None, None, True, None)


def _trace(
    model: Model,
    parents: Mapping[Any, tuple[Any, Action] | None],
    bad: object,
) -> list[tuple[Action, World]]:
    """Rebuild the path to the state with key `bad` by replaying actions from the initial
    state (the stored keys may be symmetric representatives; replaying yields the concrete
    worlds)."""
    actions: list[Action] = []
    k: object = bad
    while True:
        entry = parents[k]
        if entry is None:
            break
        k, action = entry
        actions.append(action)
    actions.reverse()
    return replay(model, actions)


def replay(
    model: Model, actions: list[Action], key: Callable[[World], object] | None = None
) -> list[tuple[Action, World]]:
    """Run a list of actions from the initial state. With a symmetry key, an action recorded
    on a representative is matched up to renaming: the successor whose key equals the key
    the checker stored is taken."""
    w = model.initial()
    out: list[tuple[Action, World]] = [((), w)]
    for action in actions:
        succs = model.successors(w)
        exact = [s for a, s in succs if a == action]
        if exact:
            w = exact[0]
        else:
            raise ValueError(f"action {action!r} is not enabled in the replayed state")
        out.append((action, w))
    return out
