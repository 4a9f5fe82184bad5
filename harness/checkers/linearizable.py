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

**Budgets**: each key gets its own time budget — its fair share of what is left of
`time_limit_s` (and at most `key_time_limit_s`), so one hard key never hides another key's
verdict; keys that ran out are retried with the time the others left over. The search reads
the clock every 256 steps, so a deadline is honoured within a few milliseconds (a step is a
model step and a cache probe); a timed-out search's cache is kept (`release()`, or the next
`analysis` before its clock starts, frees it), since freeing millions of entries would
itself overrun the deadline by up to seconds; the cyclic GC is paused during a search (and
what it allocated is frozen out of the next collections' way until `release`). A key that
runs out yields `"unknown"` (Knossos/Porcupine), never a hang. Validity merges as Jepsen's:
any False makes the whole False, else any "unknown" makes it "unknown". Results list each
key's verdict ("key 3: not linearizable", "key 7: unknown after 20.0 s").

**Models as data** (`MODELS`, by name): each `Model` names its op `f`s, which are read-only,
which take their output from the completion, which failed ops are definite outcomes, and a
`step`. Values are `[key, arg]` (per-key partitions):

- `register`: `write [k, v]`, `read [k, v]` (invocation `[k, null]`), `cas [k, [old, new]]`; a
  failed cas did not happen (dropped, as Knossos);
- `cas-register`: the same, but a `fail` cas is a definite outcome — the compare failed, so
  the register did not hold `old` at that point (Porcupine's etcd model);
- `kv`: `get [k, v]`, `put [k, v]`, `append [k, v]` on one map (Porcupine's kv model; a key
  starts as `""`, append concatenates strings, else appends to a tuple);
- `set`: `add [k, v]`, `read [k, [v...]]` (a grow-only set per key, starts empty);
- `queue`: `enqueue [k, v]`, `dequeue [k, v]` (FIFO per key; `v` null when empty).

The virtual-return trick for indefinite writes (above) applies to the registers only;
elsewhere an indefinite op returns at +infinity (Porcupine).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
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
    `ILLEGAL`; `out` is `UNKNOWN` for indefinite ops, `False` for a kept failed op, `True`
    for an ok op without output. States must be hashable. An op code in `read_only` must map
    every state to itself whenever it is legal."""

    name: str
    init: Hashable
    step: Callable[[Any, int, Any, Any], Any]
    #: op codes that never change the state (when legal); the search linearizes them eagerly
    read_only: frozenset[int] = frozenset()
    #: op f name -> code
    codes: Mapping[str, int] = field(default_factory=lambda: dict(_F_CODES))
    #: codes whose output is the completion's value (`[k, out]`)
    outputs: frozenset[int] = frozenset({READ})
    #: codes whose `fail` completion is a definite outcome (kept, output False)
    keep_failed: frozenset[int] = frozenset()
    #: the register-only virtual returns of indefinite writes (see the module docstring)
    virtual_returns: bool = False
    #: converts an output as read from the history (hashable) before the search
    convert_out: Callable[[Any], Any] | None = None
    description: str = ""


def _register_step(state: Any, f: int, arg: Any, out: Any) -> Any:
    if f == WRITE:
        return arg
    if f == READ:
        return state if (out is UNKNOWN or out == state) else ILLEGAL
    old, new = arg
    if out is False:
        # a definite failed compare: the register did not hold `old`
        return state if state != old else ILLEGAL
    if state == old:
        return new
    # a definite cas succeeded, so it needed state == old
    return state if out is UNKNOWN else ILLEGAL


#: a read/write/cas register starting at None (Knossos `cas-register`); failed cas dropped
REGISTER: Final = Model("register", None, _register_step, frozenset({READ}),
                        virtual_returns=True,
                        description="read/write/cas register; a failed cas did not happen")
#: the same register, with a failed cas as a definite outcome (the compare failed)
CAS_REGISTER: Final = Model("cas-register", None, _register_step, frozenset({READ}),
                            keep_failed=frozenset({CAS}), virtual_returns=True,
                            description="read/write/cas register; a failed cas means the "
                                        "register did not hold the expected value")


def _kv_step(state: Any, f: int, arg: Any, out: Any) -> Any:
    if f == 0:  # get
        return state if (out is UNKNOWN or out == state or (out is None and state == ""))\
            else ILLEGAL
    if f == 1:  # put
        return arg
    if isinstance(state, str) and isinstance(arg, str):
        return state + arg
    return (*(state if isinstance(state, tuple) else (state,) if state else ()), arg)


KV: Final = Model("kv", "", _kv_step, frozenset({0}), {"get": 0, "put": 1, "append": 2},
                  frozenset({0}), description="key-value map: get/put/append per key")


def _set_step(state: Any, f: int, arg: Any, out: Any) -> Any:
    if f == 0:  # read
        return state if (out is UNKNOWN or out == state) else ILLEGAL
    return state | {arg}


def _as_set(out: Any) -> Any:
    if out is None:
        return frozenset()
    if isinstance(out, tuple | list | set | frozenset):
        return frozenset(out)
    return out


SET: Final = Model("set", frozenset(), _set_step, frozenset({0}), {"read": 0, "add": 1},
                   frozenset({0}), convert_out=_as_set,
                   description="grow-only set per key: add/read")


def _queue_step(state: Any, f: int, arg: Any, out: Any) -> Any:
    if f == 1:  # enqueue
        return (*state, arg)
    if out is UNKNOWN:
        return state[1:]
    if not state:
        return state if out is None else ILLEGAL
    return state[1:] if out == state[0] else ILLEGAL


QUEUE: Final = Model("queue", (), _queue_step, frozenset(), {"dequeue": 0, "enqueue": 1},
                     frozenset({0}), description="FIFO queue per key: enqueue/dequeue")

#: every model, by name (`hiwater check --model NAME`)
MODELS: Final[dict[str, Model]] = {m.name: m for m in (REGISTER, CAS_REGISTER, KV, SET, QUEUE)}


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


def partitions(history: Sequence[Op], model: Model | None = None
               ) -> tuple[dict[Any, _Partition], int]:
    """Split a history per key; returns (key -> partition, dropped op count)."""
    model = model or REGISTER
    codes = model.codes
    pending: dict[Any, Op] = {}
    pending_pos: dict[Any, int] = {}
    parts: dict[Any, _Partition] = {}
    raw: list[tuple[Op, int, Op | None, float]] = []
    for pos, op in enumerate(history):
        if op.f not in codes:
            continue
        if op.type == INVOKE:
            pending[op.process] = op
            pending_pos[op.process] = pos
            continue
        inv = pending.pop(op.process, None)
        if inv is None:
            continue
        ipos = pending_pos.pop(op.process)
        raw.append((inv, ipos, op, float(pos) if op.type in (OK, FAIL) else float("inf")))
    for p in sorted(pending, key=sort_key):
        raw.append((pending[p], pending_pos[p], None, float("inf")))
    raw.sort(key=lambda r: r[1])

    # observers, per key and value: the latest return position of an op that can see the
    # value (an ok read returning it, a cas expecting it; an indefinite cas never returns)
    last_seen: dict[Any, dict[Any, float]] = {}
    for inv, _ipos, comp, rpos in raw:
        if not model.virtual_returns:
            break
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
        f = codes[inv.f]
        failed = typ == FAIL
        if failed and f not in model.keep_failed:
            dropped += 1
            continue
        indefinite = typ == INFO
        if indefinite and f in model.read_only:
            dropped += 1
            continue
        if indefinite and model.virtual_returns:
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
        arg: Any = None if f in model.outputs else _h(inv.value[1])
        part.arg.append(arg)
        if indefinite:
            part.out.append(UNKNOWN)
        elif failed:
            part.out.append(False)
        elif f in model.outputs:
            assert comp is not None
            o = _h(comp.value[1])
            part.out.append(model.convert_out(o) if model.convert_out else o)
        else:
            part.out.append(True)
        part.ops.append(comp if comp is not None else inv)
        part.call_pos.append(ipos)
        part.ret_pos.append(rpos)
        part.discardable.append(indefinite and model.virtual_returns)
    return parts, dropped


def _h(v: Any) -> Any:
    """Values as hashable states (JSON lists become tuples)."""
    if isinstance(v, list):
        return tuple(_h(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((k, _h(x)) for k, x in v.items()), key=lambda kv: sort_key(kv[0])))
    return v


class _Timeout(Exception):
    """The search ran out of time; carries its cache, whose freeing would overrun the
    deadline (a million entries take about a second to free on a loaded machine)."""

    def __init__(self, cache: object = None) -> None:
        super().__init__("time limit reached")
        self.cache = cache


#: caches of searches that timed out, freed when the next `analysis` starts (before its
#: clock does) or by `release()`, so a timeout returns within the deadline
_GRAVEYARD: list[object] = []


def release() -> None:
    """Free the caches that timed-out searches left behind; unfreeze what the searches
    froze out of the garbage collector's way."""
    _GRAVEYARD.clear()
    gc.unfreeze()


def check_partition(
    part: _Partition, model: Model = REGISTER, deadline: float | None = None
) -> dict[str, Any]:
    """WGL search with state caching on one partition. The cyclic garbage collector is
    paused meanwhile: the cache's millions of tuples hold no cycles, and a full collection
    over them would stall the search (and its deadline) for a long time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _search(part, model, deadline)
    finally:
        if was_enabled:
            # the objects allocated meanwhile would make the first collection after
            # re-enabling traverse them all (hundreds of ms): move them out of its way
            # (`release` puts them back)
            gc.freeze()
            gc.enable()


def _search(part: _Partition, model: Model, deadline: float | None) -> dict[str, Any]:
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
        if deadline is not None and not steps & 255 and time.monotonic() > deadline:
            raise _Timeout(cache)
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
    history: Sequence[Op],
    model: Model = REGISTER,
    time_limit_s: float | None = 10.0,
    *,
    key_time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Check every key. `time_limit_s` bounds the whole check (None: no limit); each key gets
    its fair share of the time left (at most `key_time_limit_s`), keys that ran out are
    retried with the time left over."""
    release()
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s
    parts, dropped = partitions(history, model)
    keys = sorted(parts, key=sort_key)
    results: dict[int, dict[str, Any]] = {}
    budget_of: dict[int, float | None] = {}

    def run(i: int, budget: float | None) -> None:
        k = keys[i]
        t0 = time.monotonic()
        kd = None if budget is None else t0 + budget
        try:
            r = check_partition(parts[k], model, kd)
        except _Timeout as e:
            _GRAVEYARD.append(e.cache)
            e.cache = None
            r = {"key": k, "valid?": "unknown", "ops": len(parts[k].f),
                 "error": "time limit reached"}
        r["time_s"] = time.monotonic() - t0
        results[i] = r
        budget_of[i] = budget

    def share(left: int) -> float | None:
        cands = []
        if deadline is not None:
            cands.append(max(0.0, deadline - time.monotonic()) / max(1, left))
        if key_time_limit_s is not None:
            cands.append(key_time_limit_s)
        return min(cands) if cands else None

    for i in range(len(keys)):
        run(i, share(len(keys) - i))
    # keys that ran out get another try with what the others left, when that is more
    for _round in range(3):
        unknown = [i for i, r in results.items() if r["valid?"] == "unknown"]
        if not unknown or deadline is None:
            break
        b = share(len(unknown))
        if b is None or b < 1.5 * max((budget_of[i] or 0.0) for i in unknown) or b < 0.05:
            break
        for j, i in enumerate(unknown):
            spent = results[i]["time_s"]
            run(i, share(len(unknown) - j))
            results[i]["time_s"] += spent
    per_key = [results[i] for i in range(len(keys))]
    valid = merge_valid(r["valid?"] for r in per_key)
    return {
        "valid?": valid,
        "model": model.name,
        "keys": len(parts),
        "ops": sum(len(p.f) for p in parts.values()),
        "dropped_ops": dropped,
        "failures": [r for r in per_key if r["valid?"] is False],
        "unknown_keys": [r["key"] for r in per_key if r["valid?"] == "unknown"],
        "verdicts": [verdict_line(r) for r in per_key if r["valid?"] is not True],
        "per_key": per_key,
        "time_s": time.monotonic() - start,
    }
    # (the caches of timed-out keys stay in the graveyard until the next check)


def verdict_line(r: Mapping[str, Any]) -> str:
    """'key 3: not linearizable', 'key 7: unknown after 20.0 s', 'key 1: linearizable'."""
    v = r["valid?"]
    if v is True:
        what = "linearizable"
    elif v is False:
        what = "not linearizable"
    else:
        what = f"unknown after {r.get('time_s', 0.0):.1f} s"
    return f"key {r['key']}: {what}"


def _jsonable(x: Any) -> Any:
    if isinstance(x, Op):
        return op_to_dict(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def check(
    history: Sequence[Op],
    model: Model | str = REGISTER,
    time_limit_s: float | None = 10.0,
    *,
    key_time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Jepsen-shaped JSON-serialisable result: per-key verdicts (`per_key`: key, valid?, ops,
    time_s for every key not found linearizable, `verdicts` as text), failure details."""
    m = MODELS[model] if isinstance(model, str) else model
    a = analysis(history, m, time_limit_s, key_time_limit_s=key_time_limit_s)
    out = {k: v for k, v in a.items() if k != "per_key"}
    out["per_key"] = [{"key": r["key"], "valid?": r["valid?"], "ops": r["ops"],
                       "time_s": round(r["time_s"], 3)}
                      for r in a["per_key"] if r["valid?"] is not True]
    out["linearizable_keys"] = sum(1 for r in a["per_key"] if r["valid?"] is True)
    out["anomaly_types"] = ["nonlinearizable"] if a["failures"] else []
    return _jsonable(out)  # type: ignore[no-any-return]
