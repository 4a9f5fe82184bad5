"""Synthetic histories from simulated correct systems, for benchmarks and checker tests.

`queue_history` simulates a Kafka-like log (per-key offsets, per-process consumer positions,
assign, send/poll/txn micro-op batches, a final read-everything phase) and returns a history
that a correct checker must find clean. `register_history` simulates a linearizable
read/write/cas register per key (each op takes effect at one instant between its invocation
and completion; some ops crash as `info`, taking effect or not).
"""

from __future__ import annotations

import random
from typing import Any

from harness.history import FAIL, INFO, INVOKE, OK, Op


def queue_history(
    n_ops: int,
    *,
    seed: int = 0,
    keys: int = 10,
    concurrency: int = 10,
    max_txn_length: int = 4,
    max_poll_records: int = 8,
    txn: bool = False,
    assign_p: float = 1 / 64,
    info_p: float = 0.0,
) -> list[Op]:
    """About `n_ops` history events (invocations + completions) from a correct log."""
    rng = random.Random(seed)
    logs: dict[int, list[int]] = {k: [] for k in range(keys)}
    counters = dict.fromkeys(range(keys), 1)
    assigned: dict[int, list[int]] = {}
    positions: dict[int, dict[int, int]] = {}
    pending: dict[int, tuple[str, Any, int]] = {}  # thread -> (f, invoke value, process)
    procs = list(range(concurrency))  # thread -> current process id
    next_proc = concurrency
    out: list[Op] = []
    t = 0

    def emit(process: int, typ: str, f: str, value: Any) -> None:
        nonlocal t
        t += rng.randrange(50_000, 150_000)
        out.append(Op(len(out), t, process, typ, f, value))

    def assign(thread: int, ks: list[int]) -> None:
        p = procs[thread]
        old = positions.get(p, {})
        # a fresh assignment starts from the beginning (auto.offset.reset=earliest)
        positions[p] = {k: old.get(k, 0) for k in ks}
        assigned[p] = ks

    for th in range(concurrency):
        ks = sorted(rng.sample(range(keys), min(keys, 3)))
        emit(procs[th], INVOKE, "assign", ks)
        assign(th, ks)
        emit(procs[th], OK, "assign", ks)

    while len(out) < n_ops:
        th = rng.randrange(concurrency)
        p = procs[th]
        if th not in pending:
            r = rng.random()
            if r < assign_p:
                ks = sorted(rng.sample(range(keys), min(keys, rng.randint(1, 4))))
                pending[th] = ("assign", ks, p)
                emit(p, INVOKE, "assign", ks)
                continue
            n = rng.randint(1, max_txn_length)
            mops: list[Any] = []
            for _ in range(n):
                if (txn and rng.random() < 0.5) or (not txn and r < 0.5):
                    mops.append(["poll"])
                else:
                    k = min(int(rng.expovariate(0.3)), keys - 1)
                    mops.append(["send", k, counters[k]])
                    counters[k] += 1
            kinds = {m[0] for m in mops}
            f = "txn" if len(kinds) > 1 else mops[0][0]
            pending[th] = (f, mops, p)
            emit(p, INVOKE, f, mops)
            continue
        f, inv, p = pending.pop(th)
        if f == "assign":
            assign(th, inv)
            emit(p, OK, "assign", inv)
            continue
        crashed = rng.random() < info_p
        done: list[Any] = []
        saved = dict(positions[p])  # a non-ok op rewinds the consumer afterwards
        for mop in inv:
            if mop[0] == "send":
                k, v = mop[1], mop[2]
                logs[k].append(v)
                done.append(["send", k, [len(logs[k]) - 1, v]])
            else:
                pos = positions[p]
                res: dict[int, list[list[int]]] = {}
                for k in assigned[p]:
                    start = pos[k]
                    end = min(len(logs[k]), start + rng.randint(0, max_poll_records))
                    if end > start:
                        res[k] = [[off, logs[k][off]] for off in range(start, end)]
                        pos[k] = end
                done.append(["poll", res])
        if crashed:
            positions[p] = saved
            emit(p, INFO, f, done)
            procs[th] = next_proc
            next_proc += 1
            assign(th, list(assigned[p]))
        else:
            emit(p, OK, f, done)

    # complete what is pending, then read everything back (fresh process, assign all keys)
    for th in sorted(pending):
        f, inv, p = pending[th]
        emit(p, FAIL, f, inv)
    reader = next_proc
    allk = list(range(keys))
    emit(reader, INVOKE, "assign", allk)
    emit(reader, OK, "assign", allk)
    pos = dict.fromkeys(allk, 0)
    while any(pos[k] < len(logs[k]) for k in allk):
        emit(reader, INVOKE, "poll", [["poll"]])
        res = {}
        for k in allk:
            end = min(len(logs[k]), pos[k] + 64)
            if end > pos[k]:
                res[k] = [[off, logs[k][off]] for off in range(pos[k], end)]
                pos[k] = end
        emit(reader, OK, "poll", [["poll", res]])
    return out


def register_history(
    n_ops: int,
    *,
    seed: int = 0,
    keys: int = 1,
    concurrency: int = 5,
    values: int = 5,
    info_p: float = 0.01,
    cas: bool = True,
    unique: bool = False,
) -> list[Op]:
    """About `n_ops` events of linearizable register ops (`[key, v]` values). Written values
    are drawn from `range(values)`, or with `unique` a per-history counter (as a workload
    should do: unique values keep indefinite writes cheap to check)."""
    rng = random.Random(seed)
    state: dict[int, Any] = dict.fromkeys(range(keys))
    # thread -> [f, key, arg, process, result or _PENDING]
    pending: dict[int, list[Any]] = {}
    procs = list(range(concurrency))
    next_proc = concurrency
    out: list[Op] = []
    t = 0
    unapplied = object()

    def emit(process: int, typ: str, f: str, value: Any) -> None:
        nonlocal t
        t += rng.randrange(1, 1000)
        out.append(Op(len(out), t, process, typ, f, value))

    while len(out) < n_ops:
        th = rng.randrange(concurrency)
        if th not in pending:
            k = rng.randrange(keys)
            r = rng.random()
            arg: Any
            val: Any
            if r < 0.45:
                f, arg, val = "read", None, [k, None]
            elif r < 0.85 or not cas:
                v = len(out) if unique else rng.randrange(values)
                f, arg, val = "write", v, [k, v]
            else:
                cur = state[k]
                old = cur if (unique and rng.random() < 0.5) else rng.randrange(values)
                pair = [old, len(out) if unique else rng.randrange(values)]
                f, arg, val = "cas", pair, [k, pair]
            pending[th] = [f, k, arg, procs[th], unapplied]
            emit(procs[th], INVOKE, f, val)
            continue
        f, k, arg, p, res = pending[th]
        if res is unapplied and rng.random() < 0.5:
            # take effect now (the linearization point), complete later
            if f == "read":
                res = state[k]
            elif f == "write":
                state[k] = arg
                res = True
            else:
                res = state[k] == arg[0]
                if res:
                    state[k] = arg[1]
            pending[th][4] = res
            continue
        if res is unapplied:
            if rng.random() < info_p:
                # crash before taking effect: indefinite, never applied
                del pending[th]
                emit(p, INFO, f, [k, arg] if f != "read" else [k, None])
                procs[th] = next_proc
                next_proc += 1
            continue
        del pending[th]
        if rng.random() < info_p and f != "read":
            emit(p, INFO, f, [k, arg])  # applied, but the client never heard back
            procs[th] = next_proc
            next_proc += 1
        elif f == "read":
            emit(p, OK, f, [k, res])
        elif f == "write" or res:
            emit(p, OK, f, [k, arg])
        else:
            emit(p, FAIL, f, [k, arg])
    for th in sorted(pending):
        f, k, arg, p, _res = pending[th]
        emit(p, INFO, f, [k, arg] if f != "read" else [k, None])
    return out
