"""A vectorised fast path for the queue checker (`queue.check`), exact by construction.

`fast_results(history, ...)` flattens the history once (one Python pass: per completion its
process, type and times; poll records and sends as flat integer columns) and then, with numpy
sorts and differences, *proves* that the reference (`queue.analysis`) would find no anomaly:

- version orders: every VO observation (all poll records; `ok` sends with offsets; `info`
  sends with offsets whose op is proven committed) sorted by (key, offset, value) — two values
  at one offset are `inconsistent_offsets`, one value at two offsets a `duplicate`;
- `lost_write`: per key, the ok-read values with a dense index must be exactly the prefix
  0..bound (count == bound + 1), i.e. no lost-write *candidate* at all;
- `G1a` (failed sends read by ok ops), `unseen` (ok sends never read by an ok op) and
  `precommitted_read` (only ops with both sends and polls; checked in Python);
- `int_poll_skip` / `int_nonmonotonic_poll` / `int_send_skip` / `int_nonmonotonic_send`:
  consecutive dense indices inside an (op, key) run differ by exactly 1 (or one is unknown);
- `poll_skip` / `nonmonotonic_poll` / `nonmonotonic_send`: each (process, key) run is
  compared with the last run that moved the position (ok ops for polls; ok/info ops for sends)
  unless an assign/subscribe of that process dropped the key in between (counted with
  `searchsorted` over (process, position) and (process, key, position) codes);
- `empty_history`: some ok queue op exists.

It also computes what a clean result map carries besides anomalies: the worst realtime lag
(per-process positions as a dense rows x keys matrix: assign/subscribe resets, segmented
running maxima; `expired[k][i]` from a running maximum of offsets per key), the `info` error
causes and the counts. When any check finds something — or the history is outside what the
fast path handles (keys, values, offsets or processes that are not Python ints, `None` poll
offsets, negative offsets, a `rebalance_log`, an assign of a key no op touches, a tie for the
worst lag inside one op, a lag matrix above `MAX_LAG_CELLS`) — it returns `None` and
`queue.check` runs the reference, which produces the anomaly details. So results are
identical whenever the fast path answers (a clean result does not depend on `all_errors`);
a history with anomalies costs one fast attempt plus the reference. (bool values are taken
as the ints they equal, as the reference's dicts and sets do.)

Cost: one Python pass over the ops (the floor: decoding nested lists), one conversion of
the poll records to int64 (about 35 ns per int), one stable argsort of the poll records by
(key, offset) — mostly sorted already — and O(n) numpy passes; everything else works on per
(op, key) runs, sends and the deduplicated log, which are several times smaller.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from harness.checkers.policy import QueuePolicy, verdict
from harness.history import FAIL, INFO, INVOKE, OK, Op

I64 = npt.NDArray[np.int64]
QUEUE_FS: Final = frozenset({"send", "poll", "txn"})
SUB_FS: Final = frozenset({"assign", "subscribe"})
MAX_LAG_OFFSET: Final = 1 << 24  # as queue.MAX_LAG_OFFSET
#: the lag matrix (ok poll/txn ops + subs) x keys is bounded; beyond it, the reference
MAX_LAG_CELLS: Final = 40_000_000
_BIG: Final = 1 << 32
_TYPE_CODE: Final = {OK: 0, INFO: 1, FAIL: 2}


class Fallback(Exception):
    """The fast path cannot decide this history; use the reference."""


def _arr(x: Any) -> I64:
    a = np.asarray(x, dtype=np.int64)
    return a


def _ints(xs: list[Any]) -> I64:
    """An int64 array of Python ints; anything else (str, float, None, bool) -> Fallback."""
    if not xs:
        return np.zeros(0, dtype=np.int64)
    a = np.array(xs)
    if a.dtype.kind != "i" or a.ndim != 1:
        raise Fallback("non-integer data")
    return a.astype(np.int64, copy=False)


def _count_in(codes_sorted: I64, lo: I64, hi: I64) -> I64:
    """How many of `codes_sorted` lie in [lo, hi] (elementwise)."""
    r: I64 = np.searchsorted(codes_sorted, hi, "right") - np.searchsorted(codes_sorted, lo, "left")
    return r


def _isin_sorted(sorted_codes: I64, q: I64) -> npt.NDArray[np.bool_]:
    if len(sorted_codes) == 0:
        return np.zeros(len(q), dtype=bool)
    pos = np.searchsorted(sorted_codes, q)
    pos = np.minimum(pos, len(sorted_codes) - 1)
    found: npt.NDArray[np.bool_] = sorted_codes[pos] == q
    return found


def _items(pm: Any) -> Any:
    return pm.items() if isinstance(pm, Mapping) else pm


def fast_results(
    history: Sequence[Op], policy: QueuePolicy | None = None, *, all_errors: bool = False
) -> dict[str, Any] | None:
    """`queue.results(queue.analysis(history), ...)` when the fast path can prove the history
    clean, else `None`."""
    # the pass allocates few container objects, but a cyclic-GC run mid-pass would traverse
    # the whole history (millions of lists): pause the collector, restore it after
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _fast(history, policy)
    except Fallback:
        return None
    finally:
        if was_enabled:
            gc.enable()


def _fast(history: Sequence[Op], policy: QueuePolicy | None) -> dict[str, Any]:
    procs: list[Any] = []
    types: list[str] = []
    fs: list[str] = []
    times: list[int] = []
    inv_times: list[int] = []
    run_r: list[int] = []
    run_k: list[Any] = []
    run_n: list[int] = []
    pairs_all: list[Any] = []
    s_r: list[int] = []
    s_k: list[Any] = []
    s_o: list[Any] = []
    s_v: list[Any] = []
    subs: list[tuple[int, Any, str, str, Any]] = []
    mixed: list[Op] = []
    pending: dict[Any, int] = {}
    info_causes: dict[str, Any] = {}
    n_ok = 0
    ext = pairs_all.extend
    for op in history:
        _i, t, p, typ, f, value, extra = op
        if typ == INVOKE:
            pending[p] = t
            continue
        if f in SUB_FS:
            pending.pop(p, None)
            if typ in (OK, INFO):
                subs.append((len(procs), p, typ, f, value or ()))
            continue
        if f not in QUEUE_FS:
            pending.pop(p, None)
            continue
        r = len(procs)
        procs.append(p)
        types.append(typ)
        fs.append(f)
        times.append(t)
        inv_times.append(pending.pop(p, t))
        if typ == OK:
            n_ok += 1
        if extra:
            if extra.get("rebalance_log"):
                raise Fallback("rebalance_log")
            if typ == INFO:
                err = extra.get("error")
                if err is not None:
                    info_causes.setdefault(repr(err), err)
        hasr = hasw = False
        for mop in value or ():
            m0 = mop[0]
            if m0 == "send":
                x = mop[2]
                if x.__class__ is list or x.__class__ is tuple:
                    s_o.append(x[0])
                    s_v.append(x[1])
                else:
                    s_o.append(None)
                    s_v.append(x)
                s_r.append(r)
                s_k.append(mop[1])
                hasw = True
            elif m0 == "poll" and len(mop) > 1:
                pm = mop[1]
                hasr = True
                for k, pairs in pm.items() if pm.__class__ is dict else _items(pm):
                    run_r.append(r)
                    run_k.append(k)
                    run_n.append(len(pairs))
                    ext(pairs)
        if hasr and hasw:
            mixed.append(op)
    nrec = len(procs)
    if n_ok == 0:
        raise Fallback("empty history")
    for op in mixed:
        _precommitted_check(op)

    # ---- columns
    tcode = _arr([_TYPE_CODE[t] for t in types])
    is_ok = tcode == 0
    nonfail = tcode != 2
    fsend = _arr([f == "send" for f in fs]).astype(bool)
    proc_a = _ints(procs)
    time_a = _ints(times)
    inv_a = _ints(inv_times)
    flat = list(chain.from_iterable(pairs_all))
    nrecs = sum(run_n)
    if len(flat) != 2 * nrecs:
        raise Fallback("malformed poll pairs")
    rec = _ints(flat).reshape(-1, 2) if nrecs else np.zeros((0, 2), dtype=np.int64)
    rec_o = rec[:, 0]
    rec_v = rec[:, 1]
    run_n_a = _arr(run_n)
    run_r_a = _arr(run_r)
    rec_r = np.repeat(run_r_a, run_n_a)
    so_known = [o is not None for o in s_o]
    so_a = _ints([-1 if o is None else o for o in s_o])
    so_known_a = np.array(so_known, dtype=bool)
    sv_a = _ints(s_v)
    sr_a = _arr(s_r)
    run_k_a = _ints(run_k)
    sk_a = _ints(s_k)
    if (rec_o < 0).any() or (so_a[so_known_a] < 0).any():
        raise Fallback("negative offsets")
    keys = np.unique(np.concatenate([run_k_a, sk_a]))
    nk = len(keys)
    run_kid = np.searchsorted(keys, run_k_a)
    rec_kid = np.repeat(run_kid, run_n_a)
    s_kid = np.searchsorted(keys, sk_a)

    vals = np.concatenate([rec_v, sv_a])
    vmin = int(vals.min()) if len(vals) else 0
    vspan = (int(vals.max()) - vmin + 1) if len(vals) else 1
    offs = np.concatenate([rec_o, so_a])
    ospan = int(offs.max()) + 1 if len(offs) else 1
    if vspan * max(nk, 1) >= 1 << 62 or ospan * max(nk, 1) >= 1 << 62 or ospan >= 1 << 31:
        raise Fallback("value range")

    def kv(kid: I64, v: I64) -> I64:
        r_: I64 = kid * vspan + (v - vmin)
        return r_

    K = max(nk, 1)
    nrun = len(run_n)
    run_start = np.zeros(nrun, dtype=np.int64)
    if nrun:
        run_start[1:] = np.cumsum(run_n_a)[:-1]
    ok_rec = is_ok[rec_r]

    # ---- poll records by (key, offset): the log entries they make
    pko = rec_kid * ospan + rec_o
    if K * ospan <= 8 * len(pko) + (1 << 20):
        # offsets are dense: a table indexed by (key, offset), no sort
        table = np.zeros(K * ospan, dtype=np.int64)
        table[pko] = rec_v
        if (table[pko] != rec_v).any():
            raise Fallback("inconsistent offsets")
        seen = np.zeros(K * ospan, dtype=bool)
        seen[pko] = True
        pent_ko = np.nonzero(seen)[0].astype(np.int64)
        pent_v = table[pent_ko]
        eid = table  # reuse: entry id per (key, offset)
        eid[pent_ko] = np.arange(len(pent_ko))
        entry_of_rec = eid[pko]
    else:
        porder = np.argsort(pko, kind="stable")
        pko_s = pko[porder]
        pv_s = rec_v[porder]
        starts = np.ones(len(pko_s), dtype=bool)
        if len(pko_s):
            same_o = pko_s[1:] == pko_s[:-1]
            if (same_o & (pv_s[1:] != pv_s[:-1])).any():
                raise Fallback("inconsistent offsets")
            starts[1:] = ~same_o
        entry_sorted = np.cumsum(starts) - 1
        pent_ko = pko_s[starts]
        pent_v = pv_s[starts]
        entry_of_rec = np.empty(len(pko), dtype=np.int64)
        entry_of_rec[porder] = entry_sorted
    pent_kid = pent_ko // ospan
    okflag = np.zeros(len(pent_ko), dtype=bool)
    okflag[entry_of_rec[ok_rec]] = True
    pkv = kv(pent_kid, pent_v)
    pkv_order = np.argsort(pkv, kind="stable")
    pkv_s = pkv[pkv_order]
    if len(pkv_s) > 1 and (pkv_s[1:] == pkv_s[:-1]).any():
        raise Fallback("duplicate")

    def poll_entry(codes: I64) -> I64:
        if len(pkv_s) == 0:
            return np.full(len(codes), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(pkv_s, codes), len(pkv_s) - 1)
        out: I64 = np.where(pkv_s[pos] == codes, pkv_order[pos], -1)
        return out

    s_kv = kv(s_kid, sv_a)
    s_type = tcode[sr_a]
    s_ent = poll_entry(s_kv)
    read_ok = (s_ent >= 0) & okflag[np.maximum(s_ent, 0)] if len(s_ent) else s_ent >= 0
    # G1a: a failed send read by an ok op
    if (read_ok & (s_type == 2)).any():
        raise Fallback("G1a")
    # unseen: ok sends never read by an ok op
    if (~read_ok & (s_type == 0)).any():
        raise Fallback("unseen")
    # committed info ops: some send of theirs was read by an ok op
    committed = is_ok.copy()
    committed[sr_a[read_ok & (s_type == 1)]] = True

    # ---- version orders: poll entries + sends that count
    s_vo = so_known_a & committed[sr_a]
    ko = np.concatenate([pent_ko, s_kid[s_vo] * ospan + so_a[s_vo]])
    vo_v = np.concatenate([pent_v, sv_a[s_vo]])
    order = np.argsort(ko, kind="stable")
    ko_s = ko[order]
    v_s = vo_v[order]
    if len(ko_s):
        same_o = ko_s[1:] == ko_s[:-1]
        if (same_o & (v_s[1:] != v_s[:-1])).any():
            raise Fallback("inconsistent offsets")
        keep = np.ones(len(ko_s), dtype=bool)
        keep[1:] = ~same_o
        ko_s = ko_s[keep]
        v_s = v_s[keep]
    log_kid = ko_s // ospan
    # dense index: position minus the key's first position
    first_pos = np.searchsorted(log_kid, np.arange(nk))
    dense = np.arange(len(ko_s)) - first_pos[log_kid]
    log_kv = kv(log_kid, v_s)
    kv_order = np.argsort(log_kv, kind="stable")
    kv_sorted = log_kv[kv_order]
    if len(kv_sorted) > 1 and (kv_sorted[1:] == kv_sorted[:-1]).any():
        raise Fallback("duplicate")
    idx_of_kv = dense[kv_order]

    def index_of(codes: I64) -> I64:
        if len(kv_sorted) == 0:
            return np.full(len(codes), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(kv_sorted, codes), len(kv_sorted) - 1)
        out: I64 = np.where(kv_sorted[pos] == codes, idx_of_kv[pos], -1)
        return out

    # every poll entry is in VO, and (no duplicates) its value's index is its offset's
    pent_dense = np.searchsorted(ko_s, pent_ko) - first_pos[pent_kid]
    # lost writes: per key, the ok-read values (distinct entries) are exactly 0..bound
    okr_kid = pent_kid[okflag]
    if len(okr_kid):
        cnt = np.bincount(okr_kid, minlength=nk)
        bound = np.full(nk, -1, dtype=np.int64)
        np.maximum.at(bound, okr_kid, pent_dense[okflag])
        if (cnt != bound + 1).any():
            raise Fallback("lost-write candidates")

    # ---- internal skips / nonmonotonic runs, polls then sends
    rec_idx = pent_dense[entry_of_rec] if len(entry_of_rec) else entry_of_rec
    run_code = run_r_a * K + run_kid
    ne = run_n_a > 0
    rf = np.full(nrun, -1, dtype=np.int64)  # index of each run's first / last value
    rl = np.full(nrun, -1, dtype=np.int64)
    rf[ne] = rec_idx[run_start[ne]]
    rl[ne] = rec_idx[run_start[ne] + run_n_a[ne] - 1]
    if len(rec_idx) > 1:  # consecutive reads inside one run
        new_run = np.zeros(len(rec_idx), dtype=bool)
        new_run[run_start[ne]] = True
        both = (rec_idx[1:] >= 0) & (rec_idx[:-1] >= 0)
        if (~new_run[1:] & both & (np.diff(rec_idx) != 1)).any():
            raise Fallback("internal poll")
    # an op may read a key in several poll micro-ops: its reads of k are their concatenation
    c_ne = run_code[ne]
    c_order = np.argsort(c_ne, kind="stable")
    c_s = c_ne[c_order]
    f_s = rf[ne][c_order]
    l_s = rl[ne][c_order]
    if len(c_s) > 1:
        join = c_s[1:] == c_s[:-1]
        both = (l_s[:-1] >= 0) & (f_s[1:] >= 0)
        if (join & both & (f_s[1:] - l_s[:-1] != 1)).any():
            raise Fallback("internal poll")
    s_idx = index_of(s_kv)
    sord = np.argsort(sr_a * K + s_kid, kind="stable")
    sg = (sr_a * K + s_kid)[sord]
    si_s = s_idx[sord]
    if len(sg) > 1:
        same = sg[1:] == sg[:-1]
        both = (si_s[1:] >= 0) & (si_s[:-1] >= 0)
        if (same & both & (np.diff(si_s) != 1)).any():
            raise Fallback("internal send")

    # ---- across ops of one process
    pids, pid_of_rec = np.unique(proc_a, return_inverse=True)
    pid_of_rec = pid_of_rec.astype(np.int64)
    npid = len(pids)
    stride = nrec + 1
    key_ix = {int(k): i for i, k in enumerate(keys.tolist())}
    proc_ix = {int(p): i for i, p in enumerate(pids.tolist())}
    sub_all: list[int] = []
    sub_key: list[int] = []
    for s, p, _typ, _f, ks in subs:
        pi = proc_ix.get(p) if isinstance(p, int) else None
        if pi is None:
            continue
        sub_all.append(pi * stride + s)
        for k in set(ks):
            ki = key_ix.get(k) if isinstance(k, int) and not isinstance(k, bool) else None
            if ki is not None:
                sub_key.append((pi * max(nk, 1) + ki) * stride + s)
    if npid * max(nk, 1) * stride >= 1 << 62:
        raise Fallback("too large")
    sub_all_a = np.sort(_arr(sub_all))
    sub_key_a = np.sort(_arr(sub_key))

    def dropped(pid: I64, kid: I64, a: I64, b: I64) -> npt.NDArray[np.bool_]:
        """Some assign/subscribe of the process in positions (a, b] dropped the key."""
        n_all = _count_in(sub_all_a, pid * stride + a + 1, pid * stride + b)
        pk = (pid * max(nk, 1) + kid) * stride
        n_key = _count_in(sub_key_a, pk + a + 1, pk + b)
        out: npt.NDArray[np.bool_] = n_all > n_key
        return out

    def across(
        g_r: I64, g_kid: I64, g_first: I64, g_last: I64, g_moves: npt.NDArray[np.bool_],
        send: bool,
    ) -> None:
        if len(g_r) < 2:
            return
        g_pid = pid_of_rec[g_r]
        seg_all = g_pid * K + g_kid
        o2 = np.argsort(seg_all * stride + g_r)
        seg = seg_all[o2]
        n = len(o2)
        pos = np.arange(n)
        starts = np.ones(n, dtype=bool)
        starts[1:] = seg[1:] != seg[:-1]
        seg_start = np.maximum.accumulate(np.where(starts, pos, 0))
        mv = np.where(g_moves[o2], pos, -1)
        pm = np.maximum.accumulate(mv)
        prev = np.full(n, -1, dtype=np.int64)
        prev[1:] = pm[:-1]
        prev = np.where(prev >= seg_start, prev, -1)
        cur = pos[prev >= 0]
        pr = prev[prev >= 0]
        if len(cur) == 0:
            return
        ci = o2[cur]
        pi = o2[pr]
        i1 = g_last[pi]
        i2 = g_first[ci]
        test = (i1 >= 0) & (i2 >= 0)
        bad = test & (i2 - i1 < 1) if send else test & (i2 - i1 != 1)
        if not bad.any():
            return
        drop = dropped(g_pid[ci[bad]], g_kid[ci[bad]], g_r[pi[bad]], g_r[ci[bad]])
        if not drop.all():
            raise Fallback("across ops")

    # poll runs per (op, key), empty ones included (an empty ok run resets the position)
    if nrun:
        u_code = np.unique(run_code)
        lo = np.searchsorted(c_s, u_code, "left")
        hi = np.searchsorted(c_s, u_code, "right")
        nonempty = hi > lo
        if len(c_s):
            first_i = np.where(nonempty, f_s[np.minimum(lo, len(c_s) - 1)], -1)
            last_i = np.where(nonempty, l_s[np.maximum(hi - 1, 0)], -1)
        else:
            first_i = last_i = np.full(len(u_code), -1, dtype=np.int64)
        g_r = u_code // K
        # only non-empty runs are compared; every ok run moves the position
        across(g_r, u_code % K, first_i, last_i, is_ok[g_r], False)
    # send runs of ok/info ops
    if len(sg):
        sends_r = sr_a[sord]
        keep_s = tcode[sends_r] <= 1
        sgk = sg[keep_s]
        sik = si_s[keep_s]
        if len(sgk):
            u, lo_s = np.unique(sgk, return_index=True)
            hi_s = np.append(lo_s[1:], len(sgk))
            across(u // max(nk, 1), u % max(nk, 1), sik[lo_s], sik[hi_s - 1],
                   np.ones(len(u), dtype=bool), True)

    worst = _worst_lag(
        nk, tcode, nonfail, fsend, time_a, inv_a, pid_of_rec, proc_ix, key_ix, subs,
        _run_max(rec_o, run_start, run_n_a), sr_a, s_kid, so_a, so_known_a, run_r_a, run_kid,
    )
    if worst is None:
        worst_d: dict[str, Any] = {"time_ns": 0, "lag_ns": 0, "process": None, "key": None}
    else:
        lag, t_inv, r_w, kid_w = worst
        worst_d = {"time_ns": t_inv, "lag_ns": lag, "process": procs[r_w],
                   "key": int(keys[kid_w])}
    worst_d["time"] = worst_d["time_ns"] / 1e9
    worst_d["lag"] = worst_d["lag_ns"] / 1e9

    nkeys = len(np.unique(np.concatenate([run_kid, s_kid[s_vo]])))
    valid, bad_types = verdict([], policy or QueuePolicy())
    return {
        "valid?": valid,
        "anomaly_types": [],
        "bad_anomaly_types": bad_types,
        "anomalies": {},
        "worst_realtime_lag": worst_d,
        "info_txn_causes": [info_causes[c] for c in sorted(info_causes)],
        "stats": {"ops": len(history), "client_ops": nrec, "ok": n_ok, "keys": nkeys},
    }


def _run_max(rec_o: I64, run_start: I64, run_n: I64) -> I64:
    """The largest offset of each poll run; -1 for an empty run."""
    out = np.full(len(run_n), -1, dtype=np.int64)
    ne = run_n > 0
    if ne.any():
        out[ne] = np.maximum.reduceat(rec_o, run_start[ne])
    return out


def _precommitted_check(op: Op) -> None:
    reads: dict[Any, list[Any]] = {}
    writes: dict[Any, list[Any]] = {}
    for mop in op.value or ():
        if mop[0] == "send":
            x = mop[2]
            v = x[1] if isinstance(x, list | tuple) else x
            writes.setdefault(mop[1], []).append(v)
        elif mop[0] == "poll" and len(mop) > 1:
            for k, pairs in _items(mop[1]):
                reads.setdefault(k, []).extend(pr[1] for pr in pairs)
    for k, vs in writes.items():
        rk = reads.get(k)
        if rk and not set(vs).isdisjoint(rk):
            raise Fallback("precommitted read")


def _worst_lag(
    nk: int, tcode: I64, nonfail: npt.NDArray[np.bool_], fsend: npt.NDArray[np.bool_],
    time_a: I64, inv_a: I64, pid_of_rec: I64, proc_ix: dict[int, int], key_ix: dict[int, int],
    subs: list[tuple[int, Any, str, str, Any]], run_max: I64, sr_a: I64, s_kid: I64,
    so_a: I64, so_known: npt.NDArray[np.bool_], run_r: I64, run_kid: I64,
) -> tuple[int, int, int, int] | None:
    """(lag, invoke time, op position, key id) of the first worst realtime-lag sample."""
    nrec = len(tcode)
    K = max(nk, 1)
    # maxo per (op, key): poll runs (a polled key with no records counts -1), known sends
    s_ok = so_known & nonfail[sr_a]
    codes = np.concatenate([run_r * K + run_kid, sr_a[s_ok] * K + s_kid[s_ok]])
    ovals = np.concatenate([run_max, so_a[s_ok]])
    if len(codes) == 0:
        ucodes = codes
        maxo = ovals
    else:
        co = np.argsort(codes, kind="stable")
        c_sorted = codes[co]
        first = np.ones(len(co), dtype=bool)
        first[1:] = c_sorted[1:] != c_sorted[:-1]
        ucodes = c_sorted[first]
        maxo = np.maximum.reduceat(ovals[co], np.nonzero(first)[0])
    m_r = ucodes // K
    m_kid = ucodes % K
    # expired[k][i]: time of the first non-fail op (history order) with maxo[k] >= i
    ev = nonfail[m_r] & (maxo >= 0) & (maxo < MAX_LAG_OFFSET)
    # ucodes are sorted by (op, key): a stable sort by key (radix for small ints) gives
    # (key, op) order
    kid_ev = m_kid[ev]
    eo = np.argsort(kid_ev.astype(np.int16) if K < 1 << 15 else kid_ev, kind="stable")
    e_kid = m_kid[ev][eo]
    e_t = time_a[m_r[ev][eo]]
    e_cm = np.maximum.accumulate(e_kid * _BIG + maxo[ev][eo]) if len(eo) else e_kid

    # rows: ok subs and ok poll/txn ops, per process in history order
    op_rows = np.nonzero((tcode == 0) & ~fsend)[0]
    sub_rows = [(s, proc_ix[p], f, ks) for s, p, typ, f, ks in subs
                if typ == OK and isinstance(p, int) and p in proc_ix]
    n_rows = len(op_rows) + len(sub_rows)
    if n_rows * K > MAX_LAG_CELLS:
        raise Fallback("lag matrix too large")
    if len(op_rows) == 0:
        return None
    row_order_key = np.concatenate([2 * op_rows + 1, _arr([2 * s for s, *_ in sub_rows])])
    row_pid = np.concatenate([pid_of_rec[op_rows], _arr([pi for _, pi, _, _ in sub_rows])])
    row_is_op = np.concatenate([np.ones(len(op_rows), bool), np.zeros(len(sub_rows), bool)])
    row_r = np.concatenate([op_rows, np.full(len(sub_rows), -1, dtype=np.int64)])
    ro = np.lexsort((np.arange(n_rows), row_order_key, row_pid))
    inv_ro = np.empty(n_rows, dtype=np.int64)
    inv_ro[ro] = np.arange(n_rows)
    # matrices in sorted-row order
    contrib = np.full((n_rows, K), -2, dtype=np.int64)
    reset = np.zeros((n_rows, K), dtype=bool)
    # op contributions
    op_row_of_rec = np.full(nrec, -1, dtype=np.int64)
    op_row_of_rec[op_rows] = inv_ro[np.arange(len(op_rows))]
    mrow = op_row_of_rec[m_r]
    sel = mrow >= 0
    contrib[mrow[sel], m_kid[sel]] = maxo[sel]
    for j, (_s, _pi, f, ks) in enumerate(sub_rows):
        row = inv_ro[len(op_rows) + j]
        reset[row, :] = True
        if f == "assign":
            for k in ks or ():
                ki = key_ix.get(k) if isinstance(k, int) and not isinstance(k, bool) else None
                if ki is not None:
                    reset[row, ki] = False
                    contrib[row, ki] = -1
            # (assigned keys outside the key set never get samples' key ids: none exist)
            if any(not (isinstance(k, int) and k in key_ix) for k in ks or ()):
                raise Fallback("assign of unknown key")
    pid_s = row_pid[ro]
    pstart = np.ones(n_rows, dtype=bool)
    pstart[1:] = pid_s[1:] != pid_s[:-1]
    epoch = np.cumsum(reset, axis=0) + np.cumsum(pstart)[:, None]
    has = contrib > -2
    enc = np.where(has, epoch * _BIG + contrib + 2, 0)
    cm = np.maximum.accumulate(enc, axis=0)
    value = cm - epoch * _BIG - 2
    # a key is in the process's position map iff it got a contribution in its current epoch
    member = cm >= epoch * _BIG
    # samples: op rows, member cells
    is_op_s = row_is_op[ro]
    r_s = row_r[ro]
    rows_op = np.nonzero(is_op_s)[0]
    vals_m = value[rows_op]
    mem_m = member[rows_op]
    inv_t = inv_a[r_s[rows_op]]
    i_next = vals_m + 1
    kid_grid = np.broadcast_to(np.arange(K, dtype=np.int64), vals_m.shape)
    q = kid_grid * _BIG + i_next
    if len(e_cm):
        pos = np.searchsorted(e_cm, q, "left")
        pos_c = np.minimum(pos, len(e_cm) - 1)
        ok_e = (pos < len(e_cm)) & (e_kid[pos_c] == kid_grid)
        et = e_t[pos_c]
        lag = np.where(ok_e & (inv_t[:, None] > et), inv_t[:, None] - et, 0)
    else:
        lag = np.zeros(vals_m.shape, dtype=np.int64)
    lag = np.where(mem_m, lag, -1)
    if not mem_m.any():
        return None
    best = int(lag.max())
    # first op (history order) reaching the maximum
    hit_rows = np.nonzero((lag == best).any(axis=1))[0]
    first = hit_rows[np.argmin(r_s[rows_op][hit_rows])]
    kids = np.nonzero(lag[first] == best)[0]
    if len(kids) != 1:
        raise Fallback("tie for the worst lag inside one op")
    r_w = int(r_s[rows_op][first])
    return (best, int(inv_a[r_w]), r_w, int(kids[0]))
