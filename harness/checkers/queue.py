"""The queue checker: Jepsen's `jepsen.tests.kafka` analysis, in one pass plus per-key work.

Notation (as in Jepsen): *VO(k)* is key k's version order, inferred from offsets; *idx(v)* is
v's **dense** index in it (holes — offsets nobody observed, e.g. transaction markers — are
dropped). When an index is unknown a delta is taken to be 1, i.e. no error.

How VO(k) is built (`version-orders`, K l.908): every poll micro-op contributes its
`[offset, value]` pairs, whatever the op's type (pollers must return true log contents even in
aborted transactions); a send contributes `(offset, value)` only when the offset is known and
the op *must have committed* — it was `ok`, or `info` with at least one of its sends read by
an `ok` poll/txn (K `must-have-committed?` l.788). `fail` sends never contribute. Each offset
keeps the set of values seen there; `by_index` takes one value per non-hole offset (the first
observed one, where Jepsen takes an arbitrary member) and `by_value` maps each of those to its
dense index (the last index wins for a value at several offsets).

Anomalies (names underscored; definitions from K and its tests):

- `inconsistent_offsets` — some offset of k holds >= 2 different values (reported with the
  offset, its dense index and the sorted values).
- `duplicate` — one value appears at more than one offset of k (count and offsets).
- `lost_write` — a send that must have committed is never read by an `ok` poll although some
  `ok` poll read a later position of that key. Per key: `bound` = the highest *first*
  appearance index among values read by `ok` polls; the values whose *last* appearance is at
  or below `bound` must have been read; what was not read, and whose writer must have
  committed, is lost. (First/last indices keep this conservative under inconsistent offsets.)
- `G1a` (aborted read) — an `ok` poll/txn read a value whose writer definitely failed.
- `precommitted_read` — an op read a value it sent itself (sends are invisible until commit).
- `poll_skip` / `nonmonotonic_poll` — within one process, two successive ops read k (no
  assign/subscribe in between dropped k) and the second op's first read of k is more than one
  index past (skip) or at/before (nonmonotonic) the first op's last read of k. Only `ok` ops
  move a process's position; `fail`/`info` ops are compared but move nothing (the consumer
  must rewind after a non-ok op).
- `int_poll_skip` / `int_nonmonotonic_poll` — inside one op, two consecutive reads of k
  (across all its poll micro-ops) are more than one index apart / go backwards or repeat.
  Keys in the op's `rebalance_log` are exempt.
- `nonmonotonic_send` — within one process, the first send to k of a later op (ok or info)
  lands at or before the last send to k of the previous such op. External send skips are
  deliberately not checked.
- `int_send_skip` / `int_nonmonotonic_send` — inside one op, consecutive sends to k have
  other values between them in VO / land at or before the previous one.
- `unseen` — values acknowledged (`ok` send/txn) but not polled by any `ok` poll by the end of
  the history (a lost write and a very delayed one look the same here).
- `truncated_write` (not Jepsen's) — a write that must have committed sits at an offset of k
  at or past k's *confirmed final end offset* E: an ok `end-offsets` op of the final phase
  whose completion says `truncated [[k, E], ...]` (the workload saw k's end offset stable
  at E, at one leader epoch, below offsets ops had seen, and read k up to E:
  `harness.workloads.final_reads`). Nothing is written in the final phase, so those offsets
  are gone: the partition was truncated below acknowledged (or read) records. Reported per
  (key, value) with its offset, E, the writer and the confirming op; with several
  confirmations of one key the highest E counts. This is the loss Jepsen's checker misses
  when nobody writes to the key again (no later read shows the gap, and the values were read
  before the truncation, so they are not unseen).
- `empty_history` — no `ok` send/poll/txn at all (Jepsen's empty history is invalid).

Realtime lag (K `realtime-lag` l.1639) is a measurement, not an anomaly: for a poll by process
p with position o on key k, lag = max(0, invoke_time - expired[k][o + 1]) where
`expired[k][i]` is the earliest completion time of an `ok`/`info` op proving offset i existed.
`assign` keeps the offsets of still-assigned keys and puts new keys at -1; `subscribe` clears.

Deliberate differences from Jepsen: `unseen` is exactly acknowledged − polled (Jepsen's map
merge can briefly count polled-but-unacknowledged values); a send whose offset is unknown does
not hide the op's other send offsets in realtime lag; a value read but never sent is not a
lost-write candidate (Jepsen throws `:no-writer-of`); `precommitted_read` is reported per
(op, key) rather than once per op.

Cycle anomalies (G0, G1c, G_single, G_nonadjacent, G2_item and their `_process`/`_realtime`
variants) come from `harness.checkers.cycles` over the dependency graph of the history's
completions (ww from VO, wr from ok reads, optionally rw, process and realtime edges), when
`analysis` gets `CycleOptions` (`check` takes them from the policy: on by default).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.checkers.cycles import CYCLE_ANOMALIES, CycleOptions, explain, find_cycles, graph_of
from harness.checkers.policy import QueuePolicy, Validity, verdict
from harness.history import END_OFFSETS_F, FAIL, INFO, INVOKE, OK, Op, op_to_dict, sort_key

QUEUE_FS: Final = frozenset({"send", "poll", "txn"})
SUB_FS: Final = frozenset({"assign", "subscribe"})

#: Jepsen's `condense-error` limits: (how many, sort key, take the largest?)
_CONDENSE: Final[dict[str, tuple[int, str, bool]]] = {
    "duplicate": (32, "count", False),
    "inconsistent_offsets": (32, "nvalues", False),
    "int_nonmonotonic_poll": (8, "delta", False),
    "int_nonmonotonic_send": (8, "delta", False),
    "int_poll_skip": (8, "delta", True),
    "int_send_skip": (8, "delta", True),
    "nonmonotonic_poll": (8, "delta", False),
    "nonmonotonic_send": (8, "delta", False),
    "poll_skip": (8, "delta", True),
    "truncated_write": (32, "offset", False),
    # Jepsen keeps the 8 shortest G0/G1c cycles
    **{c: (8, "length", False) for c in CYCLE_ANOMALIES},
}
UNSEEN_MESSAGES_PER_KEY: Final = 32
#: offsets above this are not tracked for realtime lag (a vector per key up to the offset)
MAX_LAG_OFFSET: Final = 1 << 24

_MISSING: Final = object()


@dataclass
class KeyOrder:
    """VO(k): raw offsets, dense order and conflicts for one key."""

    offsets: list[int]  # sorted non-hole offsets; offsets[i] is dense index i
    by_index: list[Any]  # one value per dense index
    by_value: dict[Any, int]  # value -> dense index (last wins)
    conflicts: dict[int, list[Any]]  # offset -> every distinct value seen there (>= 2)

    def values_at(self, i: int, log: Mapping[int, Any]) -> list[Any]:
        o = self.offsets[i]
        c = self.conflicts.get(o)
        return c if c is not None else [log[o]]


@dataclass
class QueueAnalysis:
    """Everything the queue checker derived from a history (for reports and plots)."""

    errors: dict[str, list[dict[str, Any]]]
    orders: dict[Any, KeyOrder]
    logs: dict[Any, dict[int, Any]]
    #: unseen counts over time: parallel columns, one row each time a key's count changes
    unseen_series: tuple[list[int], list[Any], list[int]]
    #: final unseen values per key (only keys with some)
    unseen_final: dict[Any, list[Any]]
    #: realtime lag samples: parallel columns (invoke time ns, process, key, lag ns)
    lag_series: tuple[list[int], list[Any], list[Any], list[int]]
    worst_realtime_lag: dict[str, Any]
    info_txn_causes: list[Any]
    op_count: int
    counts: dict[str, int] = field(default_factory=dict)


class _Rec:
    """A client completion the per-op/per-process checks need (slotted; few per history)."""

    __slots__ = ("op", "process", "reads", "type", "writes")

    def __init__(
        self,
        op: Op,
        type_: str,
        process: Any,
        reads: dict[Any, list[Any]] | None,
        writes: dict[Any, list[Any]] | None,
    ) -> None:
        self.op = op
        self.type = type_
        self.process = process
        self.reads = reads
        self.writes = writes


def _items(pm: Any) -> Any:
    return pm.items() if isinstance(pm, Mapping) else pm


def analysis(history: Sequence[Op], cycles: CycleOptions | None = None) -> QueueAnalysis:
    """Derive version orders and every queue anomaly from a history (client and nemesis ops
    mixed; nemesis and unknown `f`s are ignored); with `cycles`, the cycle anomalies too."""
    logs: dict[Any, dict[int, Any]] = {}
    conflicts: dict[Any, dict[int, list[Any]]] = {}
    ok_reads: dict[Any, set[Any]] = {}
    failed_writes: dict[Any, set[Any]] = {}
    recs: list[_Rec] = []
    subs: list[tuple[int, Op]] = []  # assign/subscribe completions, by rec position
    deferred: list[tuple[_Rec, list[tuple[Any, int, Any]]]] = []  # info sends with offsets
    precommitted: list[dict[str, Any]] = []
    pending_invoke: dict[Any, int] = {}
    expired: dict[Any, list[int | None]] = {}
    proc_offsets: dict[Any, dict[Any, int]] = {}
    lag_t: list[int] = []
    lag_p: list[Any] = []
    lag_k: list[Any] = []
    lag_l: list[int] = []
    worst: tuple[int, int, Any, Any] | None = None  # (lag, time, process, key)
    unseen: dict[Any, set[Any]] = {}
    us_t: list[int] = []
    us_k: list[Any] = []
    us_n: list[int] = []
    info_causes: dict[str, Any] = {}
    final_ends: dict[Any, tuple[int, Op]] = {}  # key -> (confirmed end offset, its op)
    n_ok = n_client = 0

    def observe(k: Any, o: int, v: Any) -> None:
        lk = logs.get(k)
        if lk is None:
            logs[k] = {o: v}
            return
        cur = lk.get(o, _MISSING)
        if cur is _MISSING:
            lk[o] = v
        elif cur != v:
            ck = conflicts.setdefault(k, {})
            vs = ck.get(o)
            if vs is None:
                ck[o] = [cur, v]
            elif v not in vs:
                vs.append(v)

    for op in history:
        _index, time_ns, process, typ, f, value, extra = op
        if typ == INVOKE:
            pending_invoke[process] = time_ns
            continue
        if f in SUB_FS:
            pending_invoke.pop(process, None)
            if typ in (OK, INFO):
                subs.append((len(recs), op))
            if typ == OK:
                keys = value or ()
                if f == "assign":
                    old = proc_offsets.get(process, {})
                    proc_offsets[process] = {k: old.get(k, -1) for k in keys}
                else:
                    proc_offsets[process] = {}
            continue
        if f not in QUEUE_FS:
            pending_invoke.pop(process, None)
            if f == END_OFFSETS_F and typ == OK and extra:
                for k, e in extra.get("truncated") or ():
                    if k not in final_ends or e > final_ends[k][0]:
                        final_ends[k] = (e, op)
            continue
        n_client += 1
        inv_t = pending_invoke.pop(process, time_ns)
        is_ok = typ == OK
        if is_ok:
            n_ok += 1
        reads: dict[Any, list[Any]] | None = None
        writes: dict[Any, list[Any]] | None = None
        maxo: dict[Any, int] | None = None
        triples: list[tuple[Any, int, Any]] | None = None
        for mop in value or ():
            m0 = mop[0]
            if m0 == "send":
                k = mop[1]
                x = mop[2]
                if x.__class__ is list or x.__class__ is tuple:
                    o = x[0]
                    v = x[1]
                else:
                    o = None
                    v = x
                if writes is None:
                    writes = {k: [v]}
                else:
                    wk = writes.get(k)
                    if wk is None:
                        writes[k] = [v]
                    else:
                        wk.append(v)
                if o is not None and typ != FAIL:
                    if is_ok:
                        observe(k, o, v)
                    else:
                        if triples is None:
                            triples = []
                        triples.append((k, o, v))
                    if maxo is None:
                        maxo = {k: o}
                    elif o > maxo.get(k, -1):
                        maxo[k] = o
            elif m0 == "poll" and len(mop) > 1:
                pm = mop[1]
                if reads is None:
                    reads = {}
                if maxo is None:
                    maxo = {}
                for k, pairs in pm.items() if pm.__class__ is dict else _items(pm):
                    vals = [p[1] for p in pairs]
                    rk = reads.get(k)
                    if rk is None:
                        reads[k] = vals
                    else:
                        rk.extend(vals)
                    mk = maxo.get(k, -1)
                    lk = logs.get(k)
                    if lk is None:
                        lk = logs[k] = {}
                    put = lk.setdefault
                    # hot loop: one C call per record; a conflict is a rare slow path
                    for o, v in pairs:
                        if o is None:
                            continue
                        if put(o, v) != v:
                            observe(k, o, v)
                        if o > mk:
                            mk = o
                    maxo[k] = mk
        rec = _Rec(op, typ, process, reads, writes)
        recs.append(rec)
        if triples is not None:
            deferred.append((rec, triples))
        if typ == FAIL:
            if writes:
                for k, vs in writes.items():
                    fk = failed_writes.get(k)
                    if fk is None:
                        failed_writes[k] = set(vs)
                    else:
                        fk.update(vs)
        elif typ == INFO:
            err = extra.get("error") if extra else None
            if err is not None:
                info_causes.setdefault(repr(err), err)
        if reads and writes:
            for k, vs in writes.items():
                rk = reads.get(k)
                if rk:
                    bad = set(vs).intersection(rk)
                    if bad:
                        first_bad = next(v for v in vs if v in bad)
                        precommitted.append({"op": op, "key": k, "value": first_bad})
        # realtime lag, online: expired[k][i] = first time offset i was known to exist
        if maxo and typ != FAIL:
            for k, o in maxo.items():
                if o < 0 or o >= MAX_LAG_OFFSET:
                    continue
                ek = expired.get(k)
                if ek is None:
                    ek = expired[k] = []
                if o >= len(ek):
                    ek.extend([None] * (o + 1 - len(ek)))
                i = o
                while i >= 0 and ek[i] is None:
                    ek[i] = time_ns
                    i -= 1
        if is_ok:
            if f != "send":
                po = proc_offsets.get(process)
                if po is None:
                    po = proc_offsets[process] = {}
                if maxo:
                    for k, o in maxo.items():
                        if o > po.get(k, -1):
                            po[k] = o
                        elif k not in po:
                            po[k] = -1
                for k, o in po.items():
                    ek = expired.get(k)
                    i = o + 1
                    lag = 0
                    if ek is not None and i < len(ek):
                        e = ek[i]
                        if e is not None and inv_t > e:
                            lag = inv_t - e
                    lag_t.append(inv_t)
                    lag_p.append(process)
                    lag_k.append(k)
                    lag_l.append(lag)
                    if worst is None or lag > worst[0]:
                        worst = (lag, inv_t, process, k)
            # unseen = acknowledged - polled, tracked per key
            touched: list[Any] = []
            if writes:
                for k, vs in writes.items():
                    pk = ok_reads.get(k)
                    uk = unseen.get(k)
                    if uk is None:
                        uk = unseen[k] = set()
                    before = len(uk)
                    if pk is None:
                        uk.update(vs)
                    else:
                        uk.update(v for v in vs if v not in pk)
                    if len(uk) != before:
                        touched.append(k)
            if reads:
                for k, vs in reads.items():
                    pk = ok_reads.get(k)
                    if pk is None:
                        ok_reads[k] = set(vs)
                    else:
                        pk.update(vs)
                    uk = unseen.get(k)
                    if uk:
                        before = len(uk)
                        uk.difference_update(vs)
                        if len(uk) != before:
                            touched.append(k)
            for k in touched:
                us_t.append(time_ns)
                us_k.append(k)
                us_n.append(len(unseen[k]))

    # info sends: their offsets count once some send of theirs was read by an ok op
    def committed(rec: _Rec) -> bool:
        if rec.type == OK:
            return True
        if rec.type != INFO or not rec.writes:
            return False
        for k, vs in rec.writes.items():
            okr = ok_reads.get(k)
            if okr is not None and not okr.isdisjoint(vs):
                return True
        return False

    for rec, triples in deferred:
        if committed(rec):
            for k, o, v in triples:
                observe(k, o, v)

    # dense version orders
    orders: dict[Any, KeyOrder] = {}
    for k, lk in logs.items():
        offs = sorted(lk)
        by_index = [lk[o] for o in offs]
        orders[k] = KeyOrder(offs, by_index, {v: i for i, v in enumerate(by_index)},
                             conflicts.get(k, {}))

    errors: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, errs: list[dict[str, Any]]) -> None:
        if errs:
            errors[name] = errs

    keys_sorted = sorted(orders, key=sort_key)

    # inconsistent offsets
    inc: list[dict[str, Any]] = []
    for k in keys_sorted:
        ko = orders[k]
        for o in sorted(ko.conflicts):
            inc.append({
                "key": k,
                "offset": o,
                "index": bisect.bisect_left(ko.offsets, o),
                "values": sorted(ko.conflicts[o], key=sort_key),
            })
    add("inconsistent_offsets", inc)

    # duplicates (and the first/last appearance indices lost-write needs when VO is unclean)
    dup: list[dict[str, Any]] = []
    unclean: dict[Any, tuple[dict[Any, int], dict[Any, int]]] = {}
    for k in keys_sorted:
        ko = orders[k]
        if not ko.conflicts and len(ko.by_value) == len(ko.by_index):
            continue
        lk = logs[k]
        first: dict[Any, int] = {}
        last: dict[Any, int] = {}
        where: dict[Any, list[int]] = {}
        for i, o in enumerate(ko.offsets):
            for v in ko.values_at(i, lk):
                first.setdefault(v, i)
                last[v] = i
                where.setdefault(v, []).append(o)
        unclean[k] = (first, last)
        for v, offs in sorted(where.items(), key=lambda kv: kv[1][0]):
            if len(offs) > 1:
                dup.append({"key": k, "value": v, "count": len(offs), "offsets": offs})
    add("duplicate", dup)

    # G1a: ok reads of values whose writer failed
    g1a_pairs: set[tuple[Any, Any]] = set()
    for k, fk in failed_writes.items():
        okr = ok_reads.get(k)
        if okr:
            for v in fk.intersection(okr):
                g1a_pairs.add((k, v))

    # lost writes: candidates first, writers resolved in one scan
    lost_cands: list[tuple[Any, Any, int, int, Any]] = []  # k, v, index, bound, bound value
    for k in sorted(ok_reads, key=sort_key):
        ko2 = orders.get(k)
        if ko2 is None:
            continue
        okr = ok_reads[k]
        if k in unclean:
            first, last = unclean[k]
            bound = -1
            for v in okr:
                i = first.get(v, -1)
                if i > bound:
                    bound = i
            if bound < 0:
                continue
            lk = logs[k]
            must: list[Any] = []
            seen: set[Any] = set()
            for i in range(bound + 1):
                for v in ko2.values_at(i, lk):
                    if last[v] == i and v not in seen:
                        seen.add(v)
                        must.append(v)
            bvals = sorted((v for v in okr if first.get(v) == bound), key=sort_key)
            bval = bvals[0]
            for v in must:
                if v not in okr:
                    lost_cands.append((k, v, first[v], bound, bval))
        else:
            bv = ko2.by_value
            bound = max((bv.get(v, -1) for v in okr), default=-1)
            if bound < 0:
                continue
            prefix = ko2.by_index[: bound + 1]
            if len(okr) >= len(prefix) and okr.issuperset(prefix):
                continue
            for i, v in enumerate(prefix):
                if v not in okr:
                    lost_cands.append((k, v, i, bound, prefix[bound]))

    # truncated writes: what VO(k) holds at or past k's confirmed final end offset
    trunc_cands: list[tuple[Any, Any, int, int, Op]] = []  # k, v, offset, end, end op
    for k in sorted(final_ends, key=sort_key):
        e, eop = final_ends[k]
        lk = logs.get(k, {})
        ck = conflicts.get(k, {})
        done: set[Any] = set()
        for o in sorted(o for o in lk if o >= e):
            for v in ck.get(o, [lk[o]]):
                if v not in done:
                    done.add(v)
                    trunc_cands.append((k, v, o, e, eop))

    need_writer = {(k, v) for k, v, *_ in lost_cands} | g1a_pairs | {
        (c[0], c[1]) for c in trunc_cands}
    writer_of: dict[tuple[Any, Any], _Rec] = {}
    need_reader = {(c[0], c[4]) for c in lost_cands} | g1a_pairs
    readers: dict[tuple[Any, Any], list[_Rec]] = {}
    if need_writer or need_reader:
        for rec in recs:
            if rec.writes:
                for k, vs in rec.writes.items():
                    for v in vs:
                        if (k, v) in need_writer:
                            writer_of[(k, v)] = rec
            if rec.reads and rec.type == OK:
                for k, vs in rec.reads.items():
                    for v in vs:
                        if (k, v) in need_reader:
                            lst = readers.setdefault((k, v), [])
                            if not lst or lst[-1] is not rec:
                                lst.append(rec)

    lost: list[dict[str, Any]] = []
    for k, v, idx, bound, bval in lost_cands:
        w = writer_of.get((k, v))
        if w is None or not committed(w):
            continue
        rs = readers.get((k, bval))
        lost.append({
            "key": k,
            "value": v,
            "index": idx,
            "max_read_index": bound,
            "writer": w.op,
            "max_read": rs[0].op if rs else None,
        })
    add("lost_write", lost)

    truncated: list[dict[str, Any]] = []
    for k, v, o, e, eop in trunc_cands:
        w = writer_of.get((k, v))
        if w is None or not committed(w):
            continue  # never acknowledged nor proven committed (or read but never sent)
        truncated.append({"key": k, "value": v, "offset": o, "end_offset": e,
                          "writer": w.op, "confirmed_by": eop})
    add("truncated_write", truncated)

    g1a: list[dict[str, Any]] = []
    for k, v in sorted(g1a_pairs, key=lambda kv: (sort_key(kv[0]), sort_key(kv[1]))):
        w = writer_of.get((k, v))
        for r in readers.get((k, v), ()):
            g1a.append({"key": k, "value": v, "writer": w.op if w else None, "reader": r.op})
    g1a.sort(key=lambda e: e["reader"].index)
    add("G1a", g1a)
    add("precommitted_read", precommitted)

    _per_op_checks(recs, subs, orders, errors)

    unseen_final = {
        k: sorted(unseen[k], key=sort_key)
        for k in sorted(unseen, key=sort_key)
        if unseen[k]
    }
    if unseen_final:
        errors["unseen"] = [{
            "time_ns": history[-1].time_ns if history else 0,
            "unseen": {k: len(vs) for k, vs in unseen_final.items()},
            "messages": unseen_final,
        }]
    if n_ok == 0:
        errors["empty_history"] = [{"client_ops": n_client}]
    counts = {"client_ops": n_client, "ok": n_ok, "keys": len(orders)}
    if cycles is not None:
        g = graph_of(history, {k: ko.by_index for k, ko in orders.items()},
                     {k: ko.by_value for k, ko in orders.items()}, cycles)
        rep = find_cycles(g, cycles.mask)
        errors.update(explain(g, rep.found))
        if rep.truncated:
            counts["cycle_search_truncated"] = rep.truncated

    if worst is None:
        worst_d: dict[str, Any] = {"time_ns": 0, "lag_ns": 0, "process": None, "key": None}
    else:
        worst_d = {"time_ns": worst[1], "lag_ns": worst[0], "process": worst[2], "key": worst[3]}
    worst_d["time"] = worst_d["time_ns"] / 1e9
    worst_d["lag"] = worst_d["lag_ns"] / 1e9

    return QueueAnalysis(
        errors=errors,
        orders=orders,
        logs=logs,
        unseen_series=(us_t, us_k, us_n),
        unseen_final=unseen_final,
        lag_series=(lag_t, lag_p, lag_k, lag_l),
        worst_realtime_lag=worst_d,
        info_txn_causes=[info_causes[c] for c in sorted(info_causes)],
        op_count=len(history),
        counts=counts,
    )


def _per_op_checks(
    recs: list[_Rec],
    subs: list[tuple[int, Op]],
    orders: dict[Any, KeyOrder],
    errors: dict[str, list[dict[str, Any]]],
) -> None:
    """poll_skip, nonmonotonic_poll, int_poll_skip, int_nonmonotonic_poll, nonmonotonic_send,
    int_send_skip, int_nonmonotonic_send: one walk over the completions in history order."""
    empty: dict[Any, int] = {}
    bvs = {k: ko.by_value for k, ko in orders.items()}
    bis = {k: ko.by_index for k, ko in orders.items()}
    poll_skip: list[dict[str, Any]] = []
    nm_poll: list[dict[str, Any]] = []
    int_skip: list[dict[str, Any]] = []
    int_nm: list[dict[str, Any]] = []
    nm_send: list[dict[str, Any]] = []
    int_send_skip: list[dict[str, Any]] = []
    int_nm_send: list[dict[str, Any]] = []
    last_reads: dict[Any, dict[Any, tuple[_Rec, Any]]] = {}
    last_sends: dict[Any, dict[Any, tuple[_Rec, Any]]] = {}
    si = 0
    nsubs = len(subs)

    def internal(
        rec: _Rec, k: Any, vs: list[Any], skips: list[dict[str, Any]],
        nms: list[dict[str, Any]],
    ) -> None:
        bv = bvs.get(k, empty)
        idx = [bv.get(v) for v in vs]
        i0 = idx[0]
        if i0 is not None and None not in idx and idx == list(range(i0, i0 + len(idx))):
            return
        for j in range(1, len(vs)):
            i1 = idx[j - 1]
            i2 = idx[j]
            if i1 is None or i2 is None:
                continue
            delta = i2 - i1
            if delta > 1:
                skips.append({"key": k, "values": [vs[j - 1], vs[j]], "delta": delta,
                              "skipped": bis[k][i1 + 1:i2], "op": rec.op})
            elif delta < 1:
                nms.append({"key": k, "values": [vs[j - 1], vs[j]], "delta": delta,
                            "op": rec.op})

    for pos, rec in enumerate(recs):
        while si < nsubs and subs[si][0] <= pos:
            sop = subs[si][1]
            keep = set(sop.value or ())
            p = sop.process
            lr = last_reads.get(p)
            if lr:
                last_reads[p] = {k: x for k, x in lr.items() if k in keep}
            ls = last_sends.get(p)
            if ls:
                last_sends[p] = {k: x for k, x in ls.items() if k in keep}
            si += 1
        reads = rec.reads
        if reads:
            proc = rec.process
            extra = rec.op.extra
            rebalanced: set[Any] | frozenset[Any] = frozenset()
            if extra and extra.get("rebalance_log"):
                rebalanced = {k for ev in extra["rebalance_log"] for k in ev.get("keys", ())}
            lr = last_reads.get(proc)
            for k, vs in reads.items():
                if len(vs) > 1 and k not in rebalanced:
                    internal(rec, k, vs, int_skip, int_nm)
                if lr is not None and vs:
                    prev = lr.get(k)
                    if prev is not None:
                        bv = bvs.get(k, empty)
                        i1 = bv.get(prev[1])
                        i2 = bv.get(vs[0])
                        if i1 is not None and i2 is not None:
                            delta = i2 - i1
                            if delta > 1:
                                poll_skip.append({"key": k, "delta": delta,
                                                  "skipped": bis[k][i1 + 1:i2],
                                                  "ops": [prev[0].op, rec.op]})
                            elif delta < 1:
                                nm_poll.append({"key": k, "values": [prev[1], vs[0]],
                                                "delta": delta, "ops": [prev[0].op, rec.op]})
            if rec.type == OK:
                if lr is None:
                    lr = last_reads[proc] = {}
                for k, vs in reads.items():
                    lr[k] = (rec, vs[-1] if vs else None)
        writes = rec.writes
        if writes:
            for k, vs in writes.items():
                if len(vs) > 1:
                    internal(rec, k, vs, int_send_skip, int_nm_send)
            if rec.type == OK or rec.type == INFO:
                proc = rec.process
                ls = last_sends.get(proc)
                if ls is None:
                    ls = last_sends[proc] = {}
                for k, vs in writes.items():
                    prev = ls.get(k)
                    if prev is not None:
                        bv = bvs.get(k, empty)
                        i1 = bv.get(prev[1])
                        i2 = bv.get(vs[0])
                        if i1 is not None and i2 is not None and i2 - i1 < 1:
                            nm_send.append({"key": k, "values": [prev[1], vs[0]],
                                            "delta": i2 - i1, "ops": [prev[0].op, rec.op]})
                    ls[k] = (rec, vs[-1])
    for name, errs in (
        ("poll_skip", poll_skip),
        ("nonmonotonic_poll", nm_poll),
        ("int_poll_skip", int_skip),
        ("int_nonmonotonic_poll", int_nm),
        ("nonmonotonic_send", nm_send),
        ("int_send_skip", int_send_skip),
        ("int_nonmonotonic_send", int_nm_send),
    ):
        if errs:
            errors[name] = errs


# ---------------------------------------------------------------------------------------
# results


def condense(name: str, errs: list[dict[str, Any]], all_errors: bool = False) -> dict[str, Any]:
    """Jepsen's `condense-error`: the count plus the most interesting examples."""
    if name == "unseen":
        e = dict(errs[-1])
        if not all_errors:
            e["messages"] = {k: vs[:UNSEEN_MESSAGES_PER_KEY] for k, vs in e["messages"].items()}
        return {"count": sum(e["unseen"].values()), "errs": [e]}
    shown = errs
    if not all_errors and name in _CONDENSE:
        n, by, largest = _CONDENSE[name]
        if by == "nvalues":
            ranked = sorted(errs, key=lambda e: len(e["values"]))
        else:
            ranked = sorted(errs, key=lambda e: e[by])  # stable: history order on ties
        shown = ranked[-n:] if largest else ranked[:n]
    return {"count": len(errs), "errs": list(shown)}


def to_jsonable(x: Any) -> Any:
    """Ops become op dicts, sets sorted lists, dict keys stay as they are (ints allowed)."""
    if isinstance(x, Op):
        return op_to_dict(x)
    if isinstance(x, dict):
        return {k: to_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_jsonable(v) for v in x]
    if isinstance(x, set | frozenset):
        return [to_jsonable(v) for v in sorted(x, key=sort_key)]
    return x


def results(
    a: QueueAnalysis, policy: QueuePolicy | None = None, *, all_errors: bool = False
) -> dict[str, Any]:
    """A Jepsen-shaped, JSON-serialisable result map for an analysis."""
    return result_map(a.errors, a.worst_realtime_lag, a.info_txn_causes,
                      {"ops": a.op_count, **a.counts}, policy, all_errors=all_errors)


def result_map(
    errors: Mapping[str, list[dict[str, Any]]], worst_realtime_lag: Mapping[str, Any],
    info_txn_causes: list[Any], stats: Mapping[str, Any], policy: QueuePolicy | None = None,
    *, all_errors: bool = False,
) -> dict[str, Any]:
    """The result map from the anomalies found (in the reference's shape and order: the fast
    path `queue_fast` builds the same `errors` and calls this too)."""
    policy = policy or QueuePolicy()
    types = sorted(errors)
    valid, bad = verdict(types, policy)
    v: Validity = valid
    return {
        "valid?": v,
        "anomaly_types": types,
        "bad_anomaly_types": bad,
        "anomalies": {t: to_jsonable(condense(t, errors[t], all_errors)) for t in types},
        "worst_realtime_lag": to_jsonable(worst_realtime_lag),
        "info_txn_causes": to_jsonable(info_txn_causes),
        "stats": dict(stats),
    }


def check(
    history: Sequence[Op],
    policy: QueuePolicy | None = None,
    *,
    all_errors: bool = False,
    fast: bool = True,
) -> dict[str, Any]:
    """Analyse a queue history and judge it under `policy` (default: assign, ww-deps).

    Tries the vectorised fast path first (`queue_fast`: it answers when it proves the
    history clean or finds only the anomaly kinds it reports itself, `queue_fast.ANSWERED`,
    and then its result equals the reference's); otherwise the reference."""
    if fast:
        from harness.checkers.queue_fast import fast_results

        r = fast_results(history, policy, all_errors=all_errors)
        if r is not None:
            return r
    policy = policy or QueuePolicy()
    return results(analysis(history, policy.cycle_options()), policy, all_errors=all_errors)


def keys_of(history: Iterable[Op]) -> list[Any]:
    """Every key a queue history touches, sorted."""
    ks: set[Any] = set()
    for op in history:
        if op.f in QUEUE_FS and op.type != INVOKE:
            for mop in op.value or ():
                if mop[0] == "send":
                    ks.add(mop[1])
                elif mop[0] == "poll" and len(mop) > 1:
                    pm = mop[1]
                    ks.update(k for k, _ in (pm.items() if isinstance(pm, Mapping) else pm))
    return sorted(ks, key=sort_key)
