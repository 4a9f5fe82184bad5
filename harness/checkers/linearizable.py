"""Linearizability of register histories: Wing & Gong / Lowe search, as Porcupine does it.

Algorithm (Porcupine `checkSingle`; Lowe, "Testing for linearizability", 2017):

- calls and returns of one partition are put in a doubly linked list in history order (the
  list position is the time; a call always precedes its own return);
- depth-first search: take the first call in the list and apply the model's step; if the step
  is legal and the pair (set of linearized ops, state) is **not in the cache**, push
  (call, previous state), *lift* the call and its return out of the list and restart from the
  head; otherwise try the next call;
- meeting a return whose call is not yet linearized means the current prefix cannot be
  extended: pop, restore the state, *unlift* and try the next call after the popped one;
- an empty list is a linearization; an empty stack at a return means there is none.

**P-compositionality**: a register history is linearizable iff each key's sub-history is
(Horn & Kroening), so each key is searched on its own, in sorted key order.

**Indefinite ops** (`info`, or an invocation that never completed) get an unknown output,
which every state accepts, and a return at +infinity: the op may take effect at any point
after its call, or never (it can always be linearized last). A `fail` op definitely did not
happen and is dropped; so is an indefinite read (it constrains nothing). Beyond Porcupine, an
indefinite write or cas of value v gets a *virtual* return just after the last return of an
op that can observe v (a read returning v, a cas expecting v), where the search *discards* it
if it is still unlinearized: placed after every observer it is unobservable, so removing it
keeps a linearization valid (an indefinite cas it turned into a no-op moves to the end). With
no observer after its call it is dropped outright. With unique written values this keeps
crashed writes from multiplying the search space; workloads should write unique values.

**Read-only ops** (`Model.read_only`, the register's reads) that are legal in the current
state are forced moves: a linearization placing one later stays valid with it moved to now,
so when its subtree fails the search backtracks past it without trying alternatives.

**Budget**: the search checks a deadline every few thousand steps; a key that runs out yields
`"unknown"` (Knossos/Porcupine), never a hang. Validity merges as Jepsen's: any False makes the
whole False, else any "unknown" makes it "unknown".

Ops: `write [k, v]`, `read [k, v]` (invocation `[k, null]`), `cas [k, [old, new]]`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.checkers.policy import merge_valid
from harness.history import FAIL, INFO, INVOKE, OK, Op, op_to_dict, sort_key


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


#: the output of an indefinite op: every state accepts it
UNKNOWN: Final = _Unknown()
#: what a step returns for an illegal transition
ILLEGAL: Final = object()

READ: Final = 0
WRITE: Final = 1
CAS: Final = 2
_F_CODES: Final = {"read": READ, "write": WRITE, "cas": CAS}


@dataclass(frozen=True)
class Model:
    """A sequential specification: `step(state, f, arg, out)` returns the next state or
    `ILLEGAL`; `out` is `UNKNOWN` for indefinite ops. States must be hashable. An op code in
    `read_only` must map every state to itself whenever it is legal."""

    name: str
    init: Hashable
    step: Callable[[Any, int, Any, Any], Any]
    #: op codes that never change the state (when legal); the search linearizes them eagerly
    read_only: frozenset[int] = frozenset()


def _register_step(state: Any, f: int, arg: Any, out: Any) -> Any:
    if f == WRITE:
        return arg
    if f == READ:
        return state if (out is UNKNOWN or out == state) else ILLEGAL
    old, new = arg
    if state == old:
        return new
    # a definite cas succeeded (failed ones are dropped), so it needed state == old
    return state if out is UNKNOWN else ILLEGAL


#: a read/write/cas register starting at None (Knossos `cas-register`)
REGISTER: Final = Model("register", None, _register_step, frozenset({READ}))


@dataclass
class _Partition:
    key: Any
    f: list[int]
    arg: list[Any]
    out: list[Any]
    ops: list[Op]  # the completion (or invocation, if none) of each op
    call_pos: list[int]
    ret_pos: list[float]
    discardable: list[bool]


def partitions(history: Sequence[Op]) -> tuple[dict[Any, _Partition], int]:
    """Split a register history per key; returns (key -> partition, dropped op count)."""
    pending: dict[Any, Op] = {}
    pending_pos: dict[Any, int] = {}
    parts: dict[Any, _Partition] = {}
    raw: list[tuple[Op, int, Op | None, float]] = []
    for pos, op in enumerate(history):
        if op.f not in _F_CODES:
            continue
        if op.type == INVOKE:
            pending[op.process] = op
            pending_pos[op.process] = pos
            continue
        inv = pending.pop(op.process, None)
        if inv is None:
            continue
        ipos = pending_pos.pop(op.process)
        raw.append((inv, ipos, op, float(pos) if op.type == OK else float("inf")))
    for p in sorted(pending, key=sort_key):
        raw.append((pending[p], pending_pos[p], None, float("inf")))
    raw.sort(key=lambda r: r[1])

    # observers, per key and value: the latest return position of an op that can see the
    # value (an ok read returning it, a cas expecting it; an indefinite cas never returns)
    last_seen: dict[Any, dict[Any, float]] = {}
    for inv, _ipos, comp, rpos in raw:
        k = inv.value[0]
        if inv.f == "read" and comp is not None and comp.type == OK:
            v = _h(comp.value[1])
        elif inv.f == "cas" and (comp is None or comp.type != FAIL):
            v = _h(inv.value[1][0])
        else:
            continue
        seen = last_seen.setdefault(k, {})
        if rpos > seen.get(v, -1.0):
            seen[v] = rpos

    dropped = 0
    for inv, ipos, comp, rpos in raw:
        k = inv.value[0]
        typ = comp.type if comp is not None else INFO
        f = _F_CODES[inv.f]
        if typ == FAIL:
            dropped += 1
            continue
        indefinite = typ == INFO
        if indefinite and f == READ:
            dropped += 1
            continue
        if indefinite:
            # Placed after every op that can observe the value it writes, an indefinite
            # write or cas is unobservable and may as well never have happened (an
            # indefinite cas that it turns into a no-op can move to the end). So it gets a
            # virtual return just after the last observer's return, where the search may
            # discard it; with no observer after its call it is dropped.
            written = _h(inv.value[1]) if f == WRITE else _h(inv.value[1][1])
            seen_at = last_seen.get(k, {}).get(written, -1.0)
            if seen_at < ipos:
                dropped += 1
                continue
            rpos = seen_at + 0.5
        part = parts.get(k)
        if part is None:
            part = parts[k] = _Partition(k, [], [], [], [], [], [], [])
        part.f.append(f)
        if f == CAS:
            arg: Any = (_h(inv.value[1][0]), _h(inv.value[1][1]))
        elif f == WRITE:
            arg = _h(inv.value[1])
        else:
            arg = None
        part.arg.append(arg)
        if indefinite:
            part.out.append(UNKNOWN)
        elif f == READ:
            assert comp is not None
            part.out.append(_h(comp.value[1]))
        else:
            part.out.append(True)
        part.ops.append(comp if comp is not None else inv)
        part.call_pos.append(ipos)
        part.ret_pos.append(rpos)
        part.discardable.append(indefinite)
    return parts, dropped


def _h(v: Any) -> Any:
    """Values as hashable states (JSON lists become tuples)."""
    if isinstance(v, list):
        return tuple(_h(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((k, _h(x)) for k, x in v.items()), key=lambda kv: sort_key(kv[0])))
    return v


class _Timeout(Exception):
    pass


def check_partition(
    part: _Partition, model: Model = REGISTER, deadline: float | None = None
) -> dict[str, Any]:
    """WGL search with state caching on one partition."""
    n = len(part.f)
    # list nodes: calls 0..n-1, returns n..2n-1, head 2n, tail 2n+1
    events = sorted(
        [(part.call_pos[i], 0, i) for i in range(n)]
        + [(part.ret_pos[i], 1, n + i) for i in range(n)]
    )
    head = 2 * n
    tail = head + 1
    nxt = [0] * (2 * n + 2)
    prv = [0] * (2 * n + 2)
    prev = head
    for _pos, _kind, node in events:
        nxt[prev] = node
        prv[node] = prev
        prev = node
    nxt[prev] = tail
    prv[tail] = prev

    fs, args, outs = part.f, part.arg, part.out
    step = model.step
    read_only = model.read_only
    discardable = part.discardable
    state: Any = model.init
    lin = 0
    cache: set[tuple[int, Any]] = set()
    # (call node, state before it, forced?)
    stack: list[tuple[int, Any, bool]] = []
    best: list[int] = []
    best_state: Any = model.init
    blocked = -1
    # `best` agrees with `stack` below `low`: the lowest the stack has been since the last
    # snapshot, so a new snapshot copies only what was pushed since (no O(depth) copies)
    low = 0
    steps = 0
    entry = nxt[head]
    while nxt[head] != tail:
        steps += 1
        if deadline is not None and not steps & 4095 and time.monotonic() > deadline:
            raise _Timeout
        if entry < n:
            new_state = step(state, fs[entry], args[entry], outs[entry])
            if new_state is ILLEGAL:
                entry = nxt[entry]
                continue
            # A read-only op (identity on every state) that is legal now can be linearized
            # now without loss of generality: any linearization placing it later stays
            # valid with it moved here (all ops that must precede it are linearized, or
            # their returns would come first in the list). So it is a forced move: if its
            # subtree fails (or is cached, i.e. failed before), so does ours.
            forced = fs[entry] in read_only
            new_lin = lin | (1 << entry)
            key = (new_lin, new_state)
            if key not in cache:
                cache.add(key)
                stack.append((entry, state, forced))
                state = new_state
                lin = new_lin
                # lift the call and its return
                r = entry + n
                a, b = prv[entry], nxt[entry]
                nxt[a] = b
                prv[b] = a
                a, b = prv[r], nxt[r]
                nxt[a] = b
                prv[b] = a
                entry = nxt[head]
                continue
            if not forced:
                entry = nxt[entry]
                continue
        elif discardable[entry - n]:
            # the virtual return of an indefinite write: from here on it is unobservable,
            # so discarding it (linearizing it as a no-op) is the only move needed
            j = entry - n
            new_lin = lin | (1 << j)
            key = (new_lin, state)
            if key not in cache:
                cache.add(key)
                stack.append((j, state, True))
                lin = new_lin
                a, b = prv[j], nxt[j]
                nxt[a] = b
                prv[b] = a
                a, b = prv[entry], nxt[entry]
                nxt[a] = b
                prv[b] = a
                entry = nxt[head]
                continue
        elif len(stack) > len(best) or blocked < 0:
            # a return whose call is not linearized: this prefix cannot be extended
            del best[low:]
            best.extend([e for e, _s, _f in stack[low:]])
            low = len(stack)
            best_state = state
            blocked = entry - n
        # backtrack: pop until a choice that was not forced, then try the next call
        while stack:
            entry, state, forced = stack.pop()
            lin ^= 1 << entry
            # unlift: the return first, then the call
            r = entry + n
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            if not forced:
                entry = nxt[entry]
                break
        else:
            break
        if len(stack) < low:
            low = len(stack)
    else:
        return {"key": part.key, "valid?": True, "ops": n, "steps": steps,
                "cache_size": len(cache)}
    return {
        "key": part.key,
        "valid?": False,
        "ops": n,
        "steps": steps,
        "cache_size": len(cache),
        # the longest linearizable prefix found, in linearization order
        "longest_prefix": [part.ops[i] for i in best],
        "state_after_prefix": best_state,
        # an op that had to be linearized next (its return came) but could not be
        "blocked_op": part.ops[blocked] if blocked >= 0 else None,
    }


def analysis(
    history: Sequence[Op], model: Model = REGISTER, time_limit_s: float | None = 10.0
) -> dict[str, Any]:
    """Check every key; `time_limit_s` bounds the whole check (None: no limit)."""
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s
    parts, dropped = partitions(history)
    per_key: list[dict[str, Any]] = []
    for k in sorted(parts, key=sort_key):
        try:
            per_key.append(check_partition(parts[k], model, deadline))
        except _Timeout:
            per_key.append({"key": k, "valid?": "unknown", "ops": len(parts[k].f),
                            "error": "time limit reached"})
    valid = merge_valid(r["valid?"] for r in per_key)
    return {
        "valid?": valid,
        "model": model.name,
        "keys": len(parts),
        "ops": sum(len(p.f) for p in parts.values()),
        "dropped_ops": dropped,
        "failures": [r for r in per_key if r["valid?"] is False],
        "unknown_keys": [r["key"] for r in per_key if r["valid?"] == "unknown"],
        "per_key": per_key,
        "time_s": time.monotonic() - start,
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, Op):
        return op_to_dict(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def check(
    history: Sequence[Op], model: Model = REGISTER, time_limit_s: float | None = 10.0
) -> dict[str, Any]:
    """Jepsen-shaped JSON-serialisable result (per-key details only for failures)."""
    a = analysis(history, model, time_limit_s)
    out = {k: v for k, v in a.items() if k != "per_key"}
    out["anomaly_types"] = ["nonlinearizable"] if a["failures"] else []
    return _jsonable(out)  # type: ignore[no-any-return]
