"""A vectorised fast path for the queue checker (`queue.check`), exact by construction.

`check_columns(cols)` works on a history's int64 columns (`columnar.QueueColumns`: per client
completion its process, type and times; sends and poll records as flat arrays — decoded from
`Op`s, JSONL or a columnar Parquet/Arrow file by `harness.checkers.columnar`) and, with numpy
scatters, sorts and differences, either *proves* that the reference (`queue.analysis`) would
find no anomaly, or finds only anomalies of the kinds it reports itself (`ANSWERED`: what a
lossy run shows — `lost_write`, `unseen`, `int_poll_skip`, `poll_skip`, `nonmonotonic_poll`)
and builds the reference's very entries for them (same order, same VO indices and values, the
named ops loaded from the history for those few ops only, then the reference's own
`queue.result_map`: condensing, verdict). `fast_results(history)` is
`check_columns(columnar.from_ops(history))`. Any other anomaly kind (duplicates and
inconsistent offsets, G1a, precommitted reads, send anomalies, internal nonmonotonic polls,
dependency cycles) hands the history to the reference, which names it; so does a confirmed
final end offset (an `end-offsets` completion with `truncated`: `truncated_write` is the
reference's alone, and the columnar decoders raise `Fallback` on it).

- version orders: poll records go into a (key, offset) table when offsets are dense (else one
  stable sort by (key, offset)) — two values at one offset are `inconsistent_offsets`; the
  `ok` sends with offsets and the `info` sends whose op is proven committed are checked
  against that table, and only the few not already there are merged in; one value at two
  offsets is a `duplicate`;
- `lost_write`: per key, the ok-read values with a dense index must be exactly the prefix
  0..bound (count == bound + 1), i.e. no lost-write *candidate* at all;
- `G1a` (failed sends read by ok ops), `unseen` (ok sends never read by an ok op) and
  `precommitted_read` ((op, key, value) codes of ops with both sends and polls);
- `int_poll_skip` / `int_nonmonotonic_poll`: inside a poll run consecutive records whose
  offsets rise by exactly 1 are consecutive in VO; the others are looked up (dense index per
  table cell); runs of one (op, key) are joined; `int_send_skip` / `int_nonmonotonic_send`
  on sends sorted by (op, key);
- `poll_skip` / `nonmonotonic_poll` / `nonmonotonic_send`: each (process, key) run is
  compared with the last run that moved the position (ok ops for polls; ok/info ops for sends)
  unless an assign/subscribe of that process dropped the key in between (counted with
  `searchsorted` over (process, position) and (process, key, position) codes);
- `empty_history`: some ok queue op exists;
- cycle anomalies (when the policy searches them, the default): the dependency graph's ww
  (consecutive VO positions' writers), wr (writer of each ok-read record's position -> the
  reader) and, when asked, rw (an ok op's last read of a key -> the writer of the next
  position) and process edges, as arrays; `_has_cycle` peels sources and sinks, contracts
  one-in one-out chains by pointer doubling and runs Tarjan on what is left. Any cycle (even
  an allowed G0) hands the history to the reference, which names it; with realtime order the
  fast path declines (its edges need invocation positions, which the columns lack).

It also computes what a clean result map carries besides anomalies: the worst realtime lag
(per-process positions as a keys x rows matrix, rows sorted by (process, history order),
processed in chunks of whole processes: assign/subscribe resets, segmented running maxima;
`expired[k][i]` as a flat table from running maxima of offsets per key, or searched when
offsets are huge), the `info` error causes and the counts. When a check finds something
outside `ANSWERED` — or the history is outside what the fast path handles (keys, values,
offsets or processes that are not Python ints, `None` poll offsets, negative offsets, a
`rebalance_log`, an assign of a key no op touches, a tie for the worst lag inside one op, a
lag matrix above `MAX_LAG_CELLS`) — it returns `None` and `queue.check` runs the reference,
which produces the anomaly details. So results are identical whenever the fast path answers
(`tests/checkers/test_queue_fast_lossy.py` and `test_columnar.py` compare full result maps);
a history with other anomalies costs one fast attempt plus the reference. (bool values are
taken as the ints they equal, as the reference's dicts and sets do — for a clean verdict; an
anomaly in a history with bool values goes to the reference, which names the bools; bool
keys and processes make `columnar` decline.)

Cost, on columns: O(n) numpy passes over the poll records (chunked by whole runs so the
temporaries stay in cache and are reused: a scatter into the (key, offset) table, a gather to
compare, the ok flags, one difference of offsets) — about 1 µs of one core per history event
at 1e5-1e6 events (`bench/checker_bench.py`); sorts only over runs, sends and log entries,
which are several times fewer and mostly sorted already (timsort merges; radix sorts for
small codes). From an `Op` list the Python decoding pass (`columnar.from_ops`) still costs
about three times the check.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from harness.checkers.columnar import Fallback, QueueColumns, from_ops
from harness.checkers.policy import QueuePolicy
from harness.history import Op

__all__ = ["ANSWERED", "MAX_LAG_CELLS", "Fallback", "check_columns", "fast_results"]

#: the anomaly kinds the fast path reports itself (with the reference's details); a history
#: with any other kind goes to the reference
ANSWERED: Final = frozenset({"lost_write", "unseen", "int_poll_skip", "poll_skip",
                             "nonmonotonic_poll", "G1a", "nonmonotonic_send", "int_send_skip",
                             "int_nonmonotonic_send"})

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
MAX_LAG_OFFSET: Final = 1 << 24  # as queue.MAX_LAG_OFFSET
#: the lag matrix (ok poll/txn ops + subs) x keys is bounded; beyond it, the reference
MAX_LAG_CELLS: Final = 40_000_000
_BIG: Final = 1 << 32


def _count_in(codes_sorted: I64, lo: I64, hi: I64) -> I64:
    """How many of `codes_sorted` lie in [lo, hi] (elementwise)."""
    r: I64 = np.searchsorted(codes_sorted, hi, "right") - np.searchsorted(codes_sorted, lo, "left")
    return r


def _ids(*arrays: I64) -> tuple[I64, list[I64]]:
    """The sorted distinct values of some int arrays and each array's dense ids into them
    (a presence table when the range is small, else `np.unique`)."""
    allv = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
    if len(allv) == 0:
        return allv, [np.zeros(0, dtype=np.int64) for _ in arrays]
    lo = int(allv.min())
    span = int(allv.max()) - lo + 1
    if span <= 4 * len(allv) + (1 << 16):
        present = np.zeros(span, dtype=bool)
        present[allv - lo] = True
        uniq = np.flatnonzero(present) + lo
        lut = np.cumsum(present, dtype=np.int64) - 1
        return uniq, [lut[a - lo] for a in arrays]
    uniq, inv = np.unique(allv, return_inverse=True)
    out = []
    at = 0
    for a in arrays:
        out.append(inv[at:at + len(a)].astype(np.int64))
        at += len(a)
    return uniq, out


def _lookup(sorted_u: I64, q: I64) -> I64:
    """Position of each of `q` in `sorted_u`, or -1."""
    if len(sorted_u) == 0:
        return np.full(len(q), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_u, q), len(sorted_u) - 1)
    out: I64 = np.where(sorted_u[pos] == q, pos, -1)
    return out


def _stable_order(a: I64) -> I64:
    """A stable argsort; radix sort when the values span < 2**16."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    lo = int(a.min())
    if int(a.max()) - lo < 1 << 16:
        return np.argsort((a - lo).astype(np.uint16), kind="stable")
    return np.argsort(a, kind="stable")


def _group_edges(sorted_codes: I64) -> tuple[B, B]:
    """(first of its group, last of its group) masks of a sorted array."""
    n = len(sorted_codes)
    first = np.ones(n, dtype=bool)
    last = np.ones(n, dtype=bool)
    if n > 1:
        d = sorted_codes[1:] != sorted_codes[:-1]
        first[1:] = d
        last[:-1] = d
    return first, last


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
        return check_columns(from_ops(history), policy, all_errors=all_errors)
    except Fallback:
        return None
    finally:
        if was_enabled:
            gc.enable()


def check_columns(c: QueueColumns, policy: QueuePolicy | None = None, *,
                  all_errors: bool = False) -> dict[str, Any] | None:
    """The reference's result map for the history behind `c` when the columns prove it
    clean, else `None` (then run the reference). A clean result does not depend on
    `all_errors`."""
    try:
        return _check(c, policy, all_errors)
    except Fallback:
        return None


def _check(c: QueueColumns, policy: QueuePolicy | None, all_errors: bool) -> dict[str, Any]:
    nrec = c.n_ops
    tcode = c.r_type
    is_ok = tcode == 0
    n_ok = int(np.count_nonzero(is_ok))
    if n_ok == 0:
        raise Fallback("empty history")
    nonfail = tcode != 2
    run_r_a, run_n_a = c.p_r, c.p_n
    rec_o, rec_v = c.rec_o, c.rec_v
    sr_a, so_a, so_known_a, sv_a = c.s_r, c.s_o, c.s_known, c.s_v
    if (len(rec_o) and int(rec_o.min()) < 0) or (so_a[so_known_a] < 0).any():
        raise Fallback("negative offsets")
    keys, (run_kid, s_kid) = _ids(c.p_k, c.s_k)
    nk = len(keys)
    K = max(nk, 1)
    vmin = min(int(rec_v.min()) if len(rec_v) else 0, int(sv_a.min()) if len(sv_a) else 0)
    vmax = max(int(rec_v.max()) if len(rec_v) else 0, int(sv_a.max()) if len(sv_a) else 0)
    vspan = vmax - vmin + 1
    offs_max = max(int(rec_o.max()) if len(rec_o) else -1,
                   int(so_a.max()) if len(so_a) else -1)
    ospan = offs_max + 1 if offs_max >= 0 else 1
    if vspan * K >= 1 << 62 or ospan * K >= 1 << 62 or ospan >= 1 << 31 or vmin <= -(1 << 62):
        raise Fallback("value range")

    def kv(kid: I64, v: I64) -> I64:
        r_: I64 = kid * vspan + (v - vmin)
        return r_

    nrun = len(run_n_a)
    run_start = np.zeros(nrun, dtype=np.int64)
    if nrun:
        np.cumsum(run_n_a[:-1], out=run_start[1:])

    # ---- precommitted reads: an op that reads a value it sends itself
    mixed = np.zeros(nrec, dtype=bool)
    mixed[sr_a] = True
    has_poll = np.zeros(nrec, dtype=bool)
    has_poll[run_r_a] = True
    mixed &= has_poll
    if mixed.any():
        if nrec * K * vspan >= 1 << 62:
            raise Fallback("precommitted range")
        rec_r = np.repeat(run_r_a, run_n_a)
        rec_kid = np.repeat(run_kid, run_n_a)
        ms = mixed[sr_a]
        mp = mixed[rec_r]
        a_code = (sr_a[ms] * K + s_kid[ms]) * vspan + (sv_a[ms] - vmin)
        b_code = (rec_r[mp] * K + rec_kid[mp]) * vspan + (rec_v[mp] - vmin)
        if np.isin(a_code, b_code).any():
            raise Fallback("precommitted read")

    # ---- poll records by (key, offset): the log entries they make. A record's "cell" is
    # its (key, offset) slot in a dense table when offsets are dense, else its entry. The
    # record-level passes go chunk by chunk (whole runs), so their temporaries stay small
    chunks = _chunks(run_start, run_n_a, len(rec_o))
    dense_table = K * ospan <= 8 * len(rec_o) + (1 << 20)
    cell_of_rec: I64 | None = None
    if dense_table:
        run_base = run_kid * ospan

        def cells(r0: int, r1: int, a: int, b: int) -> I64:
            x = np.repeat(run_base[r0:r1], run_n_a[r0:r1])
            x += rec_o[a:b]
            return x

        # a table indexed by (key, offset), no sort; `vmin - 1` marks an empty slot
        empty = vmin - 1
        table = np.full(K * ospan, empty, dtype=np.int64)
        for r0, r1, a, b in chunks:
            table[cells(r0, r1, a, b)] = rec_v[a:b]
        for r0, r1, a, b in chunks:
            if (table[cells(r0, r1, a, b)] != rec_v[a:b]).any():
                raise Fallback("inconsistent offsets")
        pent_ko = np.flatnonzero(table != empty)
        pent_v = table[pent_ko]
        cell_of_ent = pent_ko
        ncell = K * ospan
    else:
        pko = np.repeat(run_kid * ospan, run_n_a)
        pko += rec_o
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
        cell_of_rec = np.empty(len(pko), dtype=np.int64)
        cell_of_rec[porder] = entry_sorted
        cell_of_ent = np.arange(len(pent_ko))
        ncell = len(pent_ko)
        del pko, porder, pko_s, pv_s

        def cells(r0: int, r1: int, a: int, b: int) -> I64:
            assert cell_of_rec is not None
            return cell_of_rec[a:b]

    okcell = np.zeros(ncell, dtype=bool)
    for r0, r1, a, b in chunks:
        ok_c = np.repeat(is_ok[run_r_a[r0:r1]], run_n_a[r0:r1])
        okcell[cells(r0, r1, a, b)[ok_c]] = True
    pent_kid = pent_ko // ospan
    okflag = okcell[cell_of_ent]
    pkv = kv(pent_kid, pent_v)
    pkv_order = np.argsort(pkv, kind="stable")
    pkv_s = pkv[pkv_order]
    if len(pkv_s) > 1 and (pkv_s[1:] == pkv_s[:-1]).any():
        raise Fallback("duplicate")

    s_kv = kv(s_kid, sv_a)
    s_type = tcode[sr_a]
    s_pos = _lookup(pkv_s, s_kv)
    s_ent = np.where(s_pos >= 0, pkv_order[np.maximum(s_pos, 0)], -1) if len(pkv_s) else s_pos
    read_ok = (s_ent >= 0) & okflag[np.maximum(s_ent, 0)] if len(pent_ko) else s_ent >= 0
    # G1a: a failed send read by an ok op (reported after the other checks)
    g1a_m = read_ok & (s_type == 2)
    # unseen: ok sends never read by an ok op (reported after the other checks)
    unseen_m = ~read_ok & (s_type == 0)
    # committed info ops: some send of theirs was read by an ok op
    committed = is_ok.copy()
    committed[sr_a[read_ok & (s_type == 1)]] = True

    # ---- version orders: poll entries + sends that count (mostly at entries already)
    s_vo = so_known_a & committed[sr_a]
    sko = s_kid[s_vo] * ospan + so_a[s_vo]
    svv = sv_a[s_vo]
    if dense_table:
        tv = table[sko]
        hit = tv != empty
        if (hit & (tv != svv)).any():
            raise Fallback("inconsistent offsets")
    else:
        at = _lookup(pent_ko, sko)
        hit = at >= 0
        if (pent_v[at[hit]] != svv[hit]).any():
            raise Fallback("inconsistent offsets")
    x_ko = sko[~hit]
    if len(x_ko) == 0:
        ko_s = pent_ko
        v_s = pent_v
    else:
        ko = np.concatenate([pent_ko, x_ko])
        vo_v = np.concatenate([pent_v, svv[~hit]])
        order = np.argsort(ko, kind="stable")
        ko_s = ko[order]
        v_s = vo_v[order]
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
    if len(x_ko) == 0:
        kv_sorted = pkv_s
        idx_of_kv = dense[pkv_order]
        pent_dense = dense
        s_idx = np.where(s_ent >= 0, dense[np.maximum(s_ent, 0)], -1) if len(dense) else s_ent
    else:
        log_kv = kv(log_kid, v_s)
        kv_order = np.argsort(log_kv, kind="stable")
        kv_sorted = log_kv[kv_order]
        if len(kv_sorted) > 1 and (kv_sorted[1:] == kv_sorted[:-1]).any():
            raise Fallback("duplicate")
        idx_of_kv = dense[kv_order]
        # every poll entry is in VO, and (no duplicates) its value's index is its offset's
        pent_dense = np.searchsorted(ko_s, pent_ko) - first_pos[pent_kid]
        pos = _lookup(kv_sorted, s_kv)
        s_idx = np.where(pos >= 0, idx_of_kv[np.maximum(pos, 0)], -1)

    # lost writes: per key, the ok-read values (distinct entries) should be exactly
    # 0..bound; the VO positions up to the bound that no ok op read are the candidates
    ok_ent = np.flatnonzero(okflag)
    bound = np.full(nk, -1, dtype=np.int64)
    lost_pos = np.zeros(0, dtype=np.int64)
    if len(ok_ent):
        okr_kid = pent_kid[ok_ent]
        cnt = np.bincount(okr_kid, minlength=nk)
        _, lastk = _group_edges(okr_kid)  # entries are sorted by key, dense index rising
        bound[okr_kid[lastk]] = pent_dense[ok_ent[lastk]]
        if (cnt != bound + 1).any():
            okpos = np.zeros(len(ko_s), dtype=bool)
            okpos[first_pos[okr_kid] + pent_dense[ok_ent]] = True
            lost_pos = np.flatnonzero(~okpos & (dense <= bound[log_kid]))

    # ---- internal skips / nonmonotonic runs, polls then sends
    dcell = np.empty(ncell, dtype=np.int64)  # dense index per cell
    dcell[cell_of_ent] = pent_dense
    ne = run_n_a > 0
    rs_ne = run_start[ne]
    re_ne = rs_ne + run_n_a[ne] - 1
    rf = np.full(nrun, -1, dtype=np.int64)  # index of each run's first / last value
    rl = np.full(nrun, -1, dtype=np.int64)
    if cell_of_rec is None:
        rf[ne] = dcell[run_base[ne] + rec_o[rs_ne]]
        rl[ne] = dcell[run_base[ne] + rec_o[re_ne]]
    else:
        rf[ne] = dcell[cell_of_rec[rs_ne]]
        rl[ne] = dcell[cell_of_rec[re_ne]]
    # consecutive reads inside one run: their dense indices rise by exactly 1. Where the
    # offsets rise by 1 they do (both are log entries, nothing between); look up the others
    # a rise by more than 1 is an int_poll_skip (kept as (record, next record)); a fall or
    # a repeat goes to the reference
    skip_a: list[I64] = []
    skip_b: list[I64] = []
    for r0, r1, a, b in chunks:
        if b - a < 2:
            continue
        nb = np.diff(rec_o[a:b]) != 1
        st = run_start[r0 + 1:r1]
        nb[st[(st > a) & (st < b)] - a - 1] = False  # across a run boundary
        at = np.flatnonzero(nb)
        if len(at):
            cc = cells(r0, r1, a, b)
            d = dcell[cc[at + 1]] - dcell[cc[at]]
            badm = d != 1
            if badm.any():
                if (d[badm] < 1).any():
                    raise Fallback("internal nonmonotonic poll")
                skip_a.append(at[badm] + a)
                skip_b.append(at[badm] + a + 1)
    # so offsets rise inside each run: its largest is its last
    run_max = np.full(nrun, -1, dtype=np.int64)
    run_max[ne] = rec_o[re_ne]
    # an op may read a key in several poll micro-ops: its reads of k are their concatenation
    run_code = run_r_a * K + run_kid
    if nrun < 2 or bool((run_code[1:] >= run_code[:-1]).all()):
        ord_all = None  # already sorted (polls list their keys in order): no permutation
        cs_all = run_code
        ne_s = ne
        rf_s = rf
        rl_s = rl
    else:
        ord_all = np.argsort(run_code, kind="stable")  # runs are in op order: nearly sorted
        cs_all = run_code[ord_all]
        ne_s = ne[ord_all]
        rf_s = rf[ord_all]
        rl_s = rl[ord_all]
    c_s = cs_all[ne_s]
    f_s = rf_s[ne_s]
    l_s = rl_s[ne_s]
    if len(c_s) > 1:
        join = c_s[1:] == c_s[:-1]
        dj = f_s[1:] - l_s[:-1]
        badj = join & (dj != 1)
        if badj.any():
            if (dj[badj] < 1).any():
                raise Fallback("internal nonmonotonic poll")
            runs_ne = (np.arange(nrun) if ord_all is None else ord_all)[ne_s]
            j = np.flatnonzero(badj)
            skip_a.append(run_start[runs_ne[j]] + run_n_a[runs_ne[j]] - 1)
            skip_b.append(run_start[runs_ne[j + 1]])
    s_code = sr_a * K + s_kid  # sends are in op order
    sord = np.argsort(s_code, kind="stable")
    sg = s_code[sord]
    si_s = s_idx[sord]
    # int_send_skip / int_nonmonotonic_send: (send, next send of the op to the key) pairs
    int_send = np.zeros(0, dtype=np.int64)
    if len(sg) > 1:
        same = sg[1:] == sg[:-1]
        both = (si_s[1:] >= 0) & (si_s[:-1] >= 0)
        int_send = np.flatnonzero(same & both & (np.diff(si_s) != 1))

    # ---- across ops of one process
    pids, (pid_of_rec,) = _ids(c.r_proc)
    npid = len(pids)
    stride = nrec + 1
    if npid * K * stride >= 1 << 62:
        raise Fallback("too large")
    sub_pi = _lookup(pids, c.sub_proc)
    sub_in = sub_pi >= 0
    sub_all_a = np.sort(sub_pi[sub_in] * stride + c.sub_pos[sub_in])
    sub_cnt = np.diff(c.sub_kstart)
    sub_of_key = np.repeat(np.arange(len(sub_cnt)), sub_cnt)
    sk_ki = _lookup(keys, c.sub_keys)
    skeep = sub_in[sub_of_key] & (sk_ki >= 0)
    sj = sub_of_key[skeep]
    sub_key_a = np.unique((sub_pi[sj] * K + sk_ki[skeep]) * stride + c.sub_pos[sj])

    def dropped(pid: I64, kid: I64, a: I64, b: I64) -> B:
        """Some assign/subscribe of the process in positions (a, b] dropped the key."""
        n_all = _count_in(sub_all_a, pid * stride + a + 1, pid * stride + b)
        pk = (pid * K + kid) * stride
        n_key = _count_in(sub_key_a, pk + a + 1, pk + b)
        out: B = n_all > n_key
        return out

    def across(g_r: I64, g_kid: I64, g_first: I64, g_last: I64, g_moves: B, send: bool
               ) -> tuple[I64, I64]:
        """g_* are sorted by op: compare each (process, key) run with the last one that
        moved the position; (current, previous) of the pairs that are anomalies (for sends,
        none: those go to the reference)."""
        none = np.zeros(0, dtype=np.int64)
        if len(g_r) < 2:
            return none, none
        seg_all = pid_of_rec[g_r]
        seg_all *= K
        seg_all += g_kid
        o2 = _stable_order(seg_all)
        seg = seg_all[o2]
        del seg_all
        n = len(o2)
        # chunks of whole segments (one segment: one (process, key)), in sorted order
        cuts = np.searchsorted(seg, seg[np.arange(CHUNK, n, CHUNK)], "left")
        bounds = [0, *sorted(set(cuts.tolist()) - {0}), n]
        bad_c: list[I64] = []
        bad_p: list[I64] = []
        for a, b in pairwise(bounds):
            oc = o2[a:b]
            pos = np.arange(b - a)
            starts, _ = _group_edges(seg[a:b])
            seg_start = np.where(starts, pos, 0)
            np.maximum.accumulate(seg_start, out=seg_start)
            pm = np.where(g_moves[oc], pos, -1)
            np.maximum.accumulate(pm, out=pm)
            prev = np.empty(b - a, dtype=np.int64)
            prev[0] = -1
            prev[1:] = pm[:-1]
            cur = np.flatnonzero(prev >= seg_start)  # (prev = -1 never is)
            if len(cur) == 0:
                continue
            ci = oc[cur]
            pi = oc[prev[cur]]
            i1 = g_last[pi]
            i2 = g_first[ci]
            test = (i1 >= 0) & (i2 >= 0)
            bad = test & (i2 - i1 < 1) if send else test & (i2 - i1 != 1)
            if bad.any():
                bad_c.append(ci[bad])
                bad_p.append(pi[bad])
        if not bad_c:
            return none, none
        ci = np.concatenate(bad_c)
        pi = np.concatenate(bad_p)
        drop = dropped(pid_of_rec[g_r[ci]], g_kid[ci], g_r[pi], g_r[ci])
        if drop.all():
            return none, none
        return ci[~drop], pi[~drop]

    nm_send: tuple[I64, ...] | None = None
    # poll runs per (op, key), empty ones included (an empty ok run resets the position)
    x_cur = x_prev = first_i = last_i = u_code = np.zeros(0, dtype=np.int64)
    if nrun:
        ufirst, _ = _group_edges(cs_all)
        u_code = cs_all[ufirst]
        gid = np.cumsum(ufirst) - 1
        gid_ne = gid[ne_s]
        first_i = np.full(len(u_code), -1, dtype=np.int64)
        last_i = np.full(len(u_code), -1, dtype=np.int64)
        if len(gid_ne):
            gf, gl = _group_edges(gid_ne)
            first_i[gid_ne[gf]] = f_s[gf]
            last_i[gid_ne[gl]] = l_s[gl]
        g_r = u_code // K
        # only non-empty runs are compared; every ok run moves the position
        x_cur, x_prev = across(g_r, u_code % K, first_i, last_i, is_ok[g_r], False)
    # send runs of ok/info ops
    if len(sg):
        keep_s = tcode[sr_a[sord]] <= 1
        sgk = sg[keep_s]
        sik = si_s[keep_s]
        if len(sgk):
            gf, gl = _group_edges(sgk)
            u = sgk[gf]
            y_cur, y_prev = across(u // K, u % K, sik[gf], sik[gl],
                                   np.ones(len(u), dtype=bool), True)
            if len(y_cur):
                sends_kept = sord[keep_s]
                # (op, key) groups of sends: first and last send (micro-op order)
                nm_send = (u[y_cur], sends_kept[gf][y_cur], sends_kept[gl][y_prev],
                           sik[gl][y_prev], sik[gf][y_cur], u[y_prev] // K)

    copts = (policy or QueuePolicy()).cycle_options()
    if copts is not None:
        if copts.realtime:
            raise Fallback("realtime order needs invocation positions")
        # the dependency graph's edges (ww, wr, rw, process) as arrays: writer of each VO
        # position, then edges between ops; any cycle -> the reference explains it
        writer_at = np.full(len(ko_s) + 1, -1, dtype=np.int64)
        sk = s_idx >= 0
        writer_at[first_pos[s_kid[sk]] + s_idx[sk]] = sr_a[sk]
        srcs: list[I64] = []
        dsts: list[I64] = []
        if copts.ww and len(ko_s) > 1:
            same = log_kid[1:] == log_kid[:-1]
            a_ = writer_at[:-2][same]
            b_ = writer_at[1:-1][same]
            m = (a_ >= 0) & (b_ >= 0) & (a_ != b_)
            srcs.append(a_[m])
            dsts.append(b_[m])
        for r0, r1, a, b in chunks:
            rr = np.repeat(run_r_a[r0:r1], run_n_a[r0:r1])
            rk = np.repeat(run_kid[r0:r1], run_n_a[r0:r1])
            w_ = writer_at[first_pos[rk] + dcell[cells(r0, r1, a, b)]]
            m = (w_ >= 0) & (w_ != rr) & is_ok[rr]
            if m.any():
                code = _sorted_unique(w_[m] * nrec + rr[m])
                srcs.append(code // nrec)
                dsts.append(code % nrec)
        if copts.rw and nrun:
            g_r2 = u_code // K
            g_k2 = u_code % K
            key_end = np.append(first_pos[1:], len(ko_s)) if nk else first_pos
            nxt_pos = first_pos[g_k2] + last_i + 1
            m = (last_i >= 0) & is_ok[g_r2] & (nxt_pos < key_end[g_k2])
            w_ = writer_at[np.where(m, nxt_pos, len(ko_s))]
            m &= (w_ >= 0) & (w_ != g_r2)
            srcs.append(g_r2[m])
            dsts.append(w_[m])
        if copts.process:
            okr = np.flatnonzero(is_ok)
            po = okr[np.argsort(pid_of_rec[okr], kind="stable")]
            same = pid_of_rec[po[1:]] == pid_of_rec[po[:-1]]
            srcs.append(po[:-1][same])
            dsts.append(po[1:][same])
        if srcs and _has_cycle(np.concatenate(srcs), np.concatenate(dsts), nrec):
            raise Fallback("dependency cycle")

    worst = _worst_lag(c, nk, keys, nonfail, pid_of_rec, pids, sub_pi,
                       run_max, (cs_all, ord_all), (sg, sord))
    if worst is None:
        worst_d: dict[str, Any] = {"time_ns": 0, "lag_ns": 0, "process": None, "key": None}
    else:
        lag, t_inv, r_w, kid_w = worst
        worst_d = {"time_ns": t_inv, "lag_ns": lag, "process": int(c.r_proc[r_w]),
                   "key": int(keys[kid_w])}
    worst_d["time"] = worst_d["time_ns"] / 1e9
    worst_d["lag"] = worst_d["lag_ns"] / 1e9

    kp = np.zeros(K, dtype=bool)
    kp[run_kid] = True
    kp[s_kid[s_vo]] = True
    nkeys = int(np.count_nonzero(kp)) if nk else 0
    from harness.checkers.queue import result_map

    skip_first = np.concatenate(skip_a) if skip_a else np.zeros(0, dtype=np.int64)
    skip_next = np.concatenate(skip_b) if skip_b else np.zeros(0, dtype=np.int64)
    vo = _VO(keys, first_pos, v_s)

    def dense_of(pos: I64) -> I64:
        """Dense index of some poll records (by their position among all records)."""
        if cell_of_rec is not None:
            cell: I64 = cell_of_rec[pos]
        else:
            run = np.searchsorted(run_start, pos, "right") - 1
            cell = run_kid[run] * ospan + rec_o[pos]
        out: I64 = dcell[cell]
        return out

    def group_rank(codes: I64) -> I64:
        """The first run of each (op, key) code: the reference meets an op's keys in that
        order."""
        at = np.searchsorted(cs_all, codes, "left")
        return at if ord_all is None else ord_all[at]

    errors: dict[str, list[dict[str, Any]]] = {}
    named: list[I64] = []  # ops the anomalies name
    lost = _lost_writes(vo, lost_pos, log_kid, dense, bound, kv, s_kv, sr_a, committed,
                        np.repeat(run_kid, run_n_a), rec_v, np.repeat(run_r_a, run_n_a), is_ok)
    if len(skip_first):
        run2 = np.searchsorted(run_start, skip_next, "right") - 1
        r2 = run_r_a[run2]
        kid2 = run_kid[run2]
        i1 = dense_of(skip_first)
        i2 = dense_of(skip_next)
        order = np.lexsort((skip_next, group_rank(r2 * K + kid2)))
        errors["int_poll_skip"] = [
            {"key": vo.key(k), "values": [v1, v2], "delta": b - a,
             "skipped": vo.values(k, a + 1, b), "op": r}
            for k, v1, v2, a, b, r in zip(
                kid2[order].tolist(), rec_v[skip_first[order]].tolist(),
                rec_v[skip_next[order]].tolist(), i1[order].tolist(), i2[order].tolist(),
                r2[order].tolist(), strict=True)]
        named.append(r2)
    if len(x_cur):
        order = np.argsort(group_rank(u_code[x_cur]), kind="stable")
        x_cur = x_cur[order]
        x_prev = x_prev[order]
        skips: list[dict[str, Any]] = []
        nms: list[dict[str, Any]] = []
        for cur, prev, k, a, b in zip(
                g_r[x_cur].tolist(), g_r[x_prev].tolist(), (u_code[x_cur] % K).tolist(),
                last_i[x_prev].tolist(), first_i[x_cur].tolist(), strict=True):
            if b - a > 1:
                skips.append({"key": vo.key(k), "delta": b - a, "skipped": vo.values(k, a + 1, b),
                              "ops": [prev, cur]})
            else:
                nms.append({"key": vo.key(k), "values": [vo.value(k, a), vo.value(k, b)],
                            "delta": b - a, "ops": [prev, cur]})
        if skips:
            errors["poll_skip"] = skips
        if nms:
            errors["nonmonotonic_poll"] = nms
        named += [g_r[x_cur], g_r[x_prev]]
    if len(int_send):
        a_ = sord[int_send]
        b_ = sord[int_send + 1]
        first_send = sord[np.searchsorted(sg, s_code[b_], "left")]
        order = np.lexsort((b_, first_send))
        a_ = a_[order]
        b_ = b_[order]
        skips = []
        nms = []
        for k, v1, v2, i1_, i2_, r in zip(s_kid[b_].tolist(), sv_a[a_].tolist(),
                                          sv_a[b_].tolist(), s_idx[a_].tolist(),
                                          s_idx[b_].tolist(), sr_a[b_].tolist(), strict=True):
            if i2_ - i1_ > 1:
                skips.append({"key": vo.key(k), "values": [v1, v2], "delta": i2_ - i1_,
                              "skipped": vo.values(k, i1_ + 1, i2_), "op": r})
            else:
                nms.append({"key": vo.key(k), "values": [v1, v2], "delta": i2_ - i1_, "op": r})
        if skips:
            errors["int_send_skip"] = skips
        if nms:
            errors["int_nonmonotonic_send"] = nms
        named.append(sr_a[b_])
    if nm_send is not None:
        codes, cur_first, prev_last, i1s, i2s, prev_r = nm_send
        order = np.argsort(cur_first, kind="stable")  # the op's sends meet its keys so
        errors["nonmonotonic_send"] = [
            {"key": vo.key(k), "values": [v1, v2], "delta": b - a, "ops": [pr, cr]}
            for k, v1, v2, a, b, pr, cr in zip(
                (codes[order] % K).tolist(), sv_a[prev_last[order]].tolist(),
                sv_a[cur_first[order]].tolist(), i1s[order].tolist(), i2s[order].tolist(),
                prev_r[order].tolist(), (codes[order] // K).tolist(), strict=True)]
        named += [prev_r, codes // K]
    if g1a_m.any():
        g1a = _g1a(kv(s_kid[g1a_m], sv_a[g1a_m]), vspan, vmin, vo, s_kv, sr_a,
                   kv(np.repeat(run_kid, run_n_a), rec_v), np.repeat(run_r_a, run_n_a), is_ok)
        errors["G1a"] = g1a
        named.append(np.array([e[x] for e in g1a for x in ("writer", "reader")
                               if e[x] is not None], dtype=np.int64))
    if lost:
        errors["lost_write"] = lost
        named.append(np.array([e[x] for e in lost for x in ("writer", "max_read")
                               if e[x] is not None], dtype=np.int64))
    if unseen_m.any():
        codes = _sorted_unique(kv(s_kid[unseen_m], sv_a[unseen_m]))
        messages: dict[Any, list[Any]] = {}
        for k, v in zip((codes // vspan).tolist(), (codes % vspan + vmin).tolist(), strict=True):
            messages.setdefault(vo.key(k), []).append(v)
        errors["unseen"] = [{"time_ns": c.last_time,
                             "unseen": {k: len(vs) for k, vs in messages.items()},
                             "messages": messages}]
    if errors:
        _name_ops(c, errors, named)

    causes = c.info_causes
    return result_map(errors, worst_d, [causes[k] for k in sorted(causes)],
                      {"ops": c.n_events, "client_ops": nrec, "ok": n_ok, "keys": nkeys}, policy,
                      all_errors=all_errors)


class _VO:
    """The version orders as the reference's `by_index` lists (clean: one value per index)."""

    def __init__(self, keys: I64, first_pos: I64, v_s: I64) -> None:
        self.keys = keys
        self.first_pos = first_pos
        self.v_s = v_s

    def key(self, kid: int) -> int:
        return int(self.keys[kid])

    def value(self, kid: int, i: int) -> int:
        return int(self.v_s[self.first_pos[kid] + i])

    def values(self, kid: int, a: int, b: int) -> list[int]:
        """by_index[k][a:b]"""
        f = int(self.first_pos[kid])
        out: list[int] = self.v_s[f + a:f + b].tolist()
        return out


def _lost_writes(vo: _VO, lost_pos: I64, log_kid: I64, dense: I64, bound: I64,
                 kv: Any, s_kv: I64, sr_a: I64, committed: B, rec_kid: I64, rec_v: I64,
                 rec_r: I64, is_ok: B) -> list[dict[str, Any]]:
    """`lost_write` entries (ops as op numbers): each candidate VO position whose writer — the
    last op sending that value — must have committed; `max_read` is the first ok op reading
    the key's bound value."""
    if len(lost_pos) == 0:
        return []
    lk = log_kid[lost_pos]
    lv = vo.v_s[lost_pos]
    need = kv(lk, lv)
    writer: dict[int, int] = {}
    sel = np.flatnonzero(np.isin(s_kv, need))
    for code, r in zip(s_kv[sel].tolist(), sr_a[sel].tolist(), strict=True):
        writer[code] = r  # sends are in op order: the last one wins, as in the reference
    bkeys = np.unique(lk)
    bvals = vo.v_s[vo.first_pos[bkeys] + bound[bkeys]]
    bcodes = kv(bkeys, bvals)
    reader: dict[int, int] = {}
    m = np.flatnonzero(is_ok[rec_r] & np.isin(kv(rec_kid, rec_v), bcodes))
    for code, r in zip(kv(rec_kid[m], rec_v[m]).tolist(), rec_r[m].tolist(), strict=True):
        reader.setdefault(code, r)  # records are in op order: the first reader
    bcode_of = dict(zip(bkeys.tolist(), bcodes.tolist(), strict=True))
    out: list[dict[str, Any]] = []
    for k, v, i, code in zip(lk.tolist(), lv.tolist(), dense[lost_pos].tolist(), need.tolist(),
                             strict=True):
        w = writer.get(code)
        if w is None or not committed[w]:
            continue
        out.append({"key": vo.key(k), "value": v, "index": i, "max_read_index": int(bound[k]),
                    "writer": w, "max_read": reader.get(bcode_of[k])})
    return out


def _g1a(codes: I64, vspan: int, vmin: int, vo: _VO, s_kv: I64, sr_a: I64, rec_kv: I64,
         rec_r: I64, is_ok: B) -> list[dict[str, Any]]:
    """`G1a` entries (ops as op numbers; sorted by reader once the ops are loaded): per
    (key, value) read by ok ops though some send of it failed, its writer (the last op
    sending it) and each ok op reading it, in history order."""
    codes = _sorted_unique(codes)
    writer: dict[int, int] = {}
    sel = np.flatnonzero(np.isin(s_kv, codes))
    for code, r in zip(s_kv[sel].tolist(), sr_a[sel].tolist(), strict=True):
        writer[code] = r
    readers: dict[int, list[int]] = {}
    m = np.flatnonzero(is_ok[rec_r] & np.isin(rec_kv, codes))
    for code, r in zip(rec_kv[m].tolist(), rec_r[m].tolist(), strict=True):
        lst = readers.setdefault(code, [])
        if not lst or lst[-1] != r:
            lst.append(r)
    out = []
    for code in codes.tolist():
        k, v = divmod(code, vspan)
        for r in readers.get(code, ()):
            out.append({"key": vo.key(k), "value": v + vmin, "writer": writer.get(code),
                        "reader": r})
    return out


def _name_ops(c: QueueColumns, errors: dict[str, list[dict[str, Any]]], named: list[I64]) -> None:
    """Replace the op numbers in the anomalies by the `Op`s (loaded for these few ops only)."""
    if c.exotic:
        raise Fallback("values the reference keeps as non-ints (bools)")
    ops = c.ops_at(np.concatenate(named).tolist() if named else [])
    for es in errors.values():
        for e in es:
            for f in ("op", "writer", "max_read", "reader"):
                if e.get(f) is not None:
                    e[f] = ops[e[f]]
            if "ops" in e:
                e["ops"] = [ops[r] for r in e["ops"]]
    if "G1a" in errors:
        errors["G1a"].sort(key=lambda e: e["reader"].index)  # as the reference orders them


_LAST_TARJAN_NODES = 0  # (for benchmarks: how many nodes the last acyclicity check left)


def _sorted_unique(a: I64) -> I64:
    """np.unique by sorting (numpy's hash-based unique is far slower on these codes)."""
    a = np.sort(a)
    if len(a) > 1:
        keep = np.ones(len(a), dtype=bool)
        keep[1:] = a[1:] != a[:-1]
        a = a[keep]
    return a


def _has_cycle(src: I64, dst: I64, n: int) -> bool:
    """Whether the directed graph (edges src -> dst over nodes 0..n-1) has a cycle.

    With numpy, a few rounds of: drop duplicate edges; peel nodes without in- or out-edges
    (until stable); contract chains — nodes with exactly one in- and one out-edge (a key's
    ww chain of single sends) — by pointer doubling, a chain that closes on itself being a
    cycle. What is left (ops with several edges each side) goes to Tarjan."""
    from harness.checkers.cycles import has_cycle

    for _round in range(32):
        if len(src) == 0:
            return False
        e0 = len(src)
        code = _sorted_unique(src * n + dst)
        src = code // n
        dst = code % n
        for _ in range(2):
            has_in = np.zeros(n, dtype=bool)
            has_in[dst] = True
            has_out = np.zeros(n, dtype=bool)
            has_out[src] = True
            alive = has_in & has_out
            keep = alive[src] & alive[dst]
            if keep.all():
                break
            src = src[keep]
            dst = dst[keep]
        if len(src) == 0:
            return False
        indeg = np.bincount(dst, minlength=n)
        outdeg = np.bincount(src, minlength=n)
        mid = (indeg == 1) & (outdeg == 1)
        n_mid = int(np.count_nonzero(mid))
        if n_mid:
            nxt = np.arange(n, dtype=np.int64)
            m = mid[src]
            nxt[src[m]] = dst[m]
            for _ in range(max(1, n_mid.bit_length() + 1)):
                nxt = nxt[nxt]
            if mid[nxt[mid]].any():
                return True  # a chain of one-in one-out nodes that closes on itself
            # edges out of non-chain nodes, redirected past chains; chain nodes disappear
            keep = ~mid[src]
            src = src[keep]
            dst = nxt[dst[keep]]
            if (src == dst).any():
                return True  # u -> chain -> u
        if len(src) > 0.9 * e0:
            break
    if len(src) == 0:
        return False
    global _LAST_TARJAN_NODES
    nodes, (s2, d2) = _ids(src, dst)
    _LAST_TARJAN_NODES = len(nodes)
    order = np.argsort(s2, kind="stable")
    s2 = s2[order]
    d2 = d2[order]
    starts = np.searchsorted(s2, np.arange(len(nodes) + 1))
    dl = d2.tolist()
    st = starts.tolist()
    succ = [dl[st[i]:st[i + 1]] for i in range(len(nodes))]
    return has_cycle(len(nodes), succ)


def _worst_lag(
    c: QueueColumns, nk: int, keys: I64, nonfail: B, pid_of_rec: I64, pids: I64,
    sub_pi: I64, run_max: I64, runs_sorted: tuple[I64, I64 | None],
    sends_sorted: tuple[I64, I64],
) -> tuple[int, int, int, int] | None:
    """(lag, invoke time, op position, key id) of the first worst realtime-lag sample."""
    tcode = c.r_type
    nrec = len(tcode)
    K = max(nk, 1)
    sr_a, so_a = c.s_r, c.s_o
    # maxo per (op, key): poll runs (a polled key with no records counts -1), known sends;
    # runs and sends come sorted by (op, key) code
    cs_all, ord_all = runs_sorted
    u1, m1 = _group_max(cs_all, run_max if ord_all is None else run_max[ord_all])
    sg, sord = sends_sorted
    s_ok = (c.s_known & nonfail[sr_a])[sord]
    u2, m2 = _group_max(sg[s_ok], so_a[sord][s_ok])
    if len(u2) == 0:
        ucodes, maxo = u1, m1
    else:
        co = np.argsort(np.concatenate([u1, u2]), kind="stable")  # a merge of two runs
        ucodes, maxo = _group_max(np.concatenate([u1, u2])[co], np.concatenate([m1, m2])[co])
    m_r = ucodes // K
    m_kid = ucodes % K
    # expired[k][i]: time of the first non-fail op (history order) with maxo[k] >= i
    ev = nonfail[m_r] & (maxo >= 0) & (maxo < MAX_LAG_OFFSET)
    # ucodes are sorted by (op, key): a stable sort by key gives (key, op) order
    kid_ev = m_kid[ev]
    eo = _stable_order(kid_ev)
    e_kid = kid_ev[eo]
    e_t = c.r_time[m_r[ev][eo]]
    e_cm = np.maximum.accumulate(e_kid * _BIG + maxo[ev][eo]) if len(eo) else e_kid

    # rows: ok subs and ok poll/txn ops, per process in history order
    op_rows = np.flatnonzero((tcode == 0) & ~c.r_send)
    sel_sub = c.sub_ok & (sub_pi >= 0)
    sub_idx = np.flatnonzero(sel_sub)
    n_op = len(op_rows)
    n_rows = n_op + len(sub_idx)
    if n_rows * K > MAX_LAG_CELLS:
        raise Fallback("lag matrix too large")
    if n_op == 0:
        return None
    row_order_key = np.concatenate([2 * op_rows + 1, 2 * c.sub_pos[sub_idx]])
    row_pid = np.concatenate([pid_of_rec[op_rows], sub_pi[sub_idx]])
    o1 = np.argsort(row_order_key, kind="stable")  # two sorted runs: a merge
    ro = o1[_stable_order(row_pid[o1])]
    inv_ro = np.empty(n_rows, dtype=np.int64)
    inv_ro[ro] = np.arange(n_rows)
    # (sorted row, key) matrices (scatters stay local); each chunk below is transposed so
    # that the running maxima run along contiguous rows
    contrib = np.full((n_rows, K), -2, dtype=np.int64)
    reset = np.zeros((n_rows, K), dtype=bool)
    # op contributions
    op_row_of_rec = np.full(nrec, -1, dtype=np.int64)
    op_row_of_rec[op_rows] = inv_ro[:n_op]
    mrow = op_row_of_rec[m_r]
    sel = mrow >= 0
    contrib[mrow[sel], m_kid[sel]] = maxo[sel]
    if len(sub_idx):
        srow = inv_ro[n_op:]
        reset[srow, :] = True
        cnt = np.diff(c.sub_kstart)
        j = np.repeat(np.arange(len(cnt)), cnt)  # sub of each listed key
        row_of_sub = np.full(len(cnt), -1, dtype=np.int64)
        row_of_sub[sub_idx] = srow
        a = (row_of_sub[j] >= 0) & c.sub_assign[j]
        ki = _lookup(keys, c.sub_keys[a])
        if (ki < 0).any():
            # (assigned keys outside the key set never get samples' key ids: none exist)
            raise Fallback("assign of unknown key")
        reset[row_of_sub[j[a]], ki] = False
        contrib[row_of_sub[j[a]], ki] = -1
    pid_s = row_pid[ro]
    pstart, _ = _group_edges(pid_s)
    pcum = np.cumsum(pstart, dtype=np.int64)
    r_s = np.full(n_rows, -1, dtype=np.int64)  # op of each sorted row (-1: a sub)
    r_s[inv_ro[:n_op]] = op_rows
    sub_row = r_s < 0
    inv_row = c.r_inv[np.maximum(r_s, 0)]
    ex = _expiry_table(e_kid, e_t, e_cm, K, 4 * (len(c.rec_o) + len(so_a)) + (1 << 20))
    kcol = np.arange(K, dtype=np.int64)[:, None]
    # per row: the worst lag sample, its key, how many keys reach it
    colmax = np.empty(n_rows, dtype=np.int64)
    colarg = np.empty(n_rows, dtype=np.int64)
    colties = np.empty(n_rows, dtype=np.int64)
    # row chunks start at a process's first row (the running maxima stop there), so their
    # temporaries stay small
    ps = np.flatnonzero(pstart)
    cuts = ps[np.minimum(np.searchsorted(ps, np.arange(_LAG_ROWS, n_rows, _LAG_ROWS)),
                         len(ps) - 1)]
    bounds = [0, *sorted(set(cuts.tolist()) - {0}), n_rows]
    for r0, r1 in pairwise(bounds):
        # epochs: a new one at each reset of the cell and at each process's first row;
        # (epoch << 32) + contribution + 2 orders by epoch, then contribution; 0: none
        epoch = np.cumsum(np.ascontiguousarray(reset[r0:r1].T), axis=1, dtype=np.int64)
        epoch += pcum[r0:r1]
        epoch <<= 32
        enc = np.ascontiguousarray(contrib[r0:r1].T)
        enc += 2
        np.add(enc, epoch, out=enc, where=enc > 0)
        np.maximum.accumulate(enc, axis=1, out=enc)
        # a key is in the process's position map iff it got a contribution in its current
        # epoch (then enc >= epoch); its position is the running maximum. q = position + 1
        # for members, < 0 otherwise; subs take no samples
        enc -= epoch
        enc -= 1
        q = enc
        q[:, sub_row[r0:r1]] = -1
        member = q >= 0
        inv_t = inv_row[r0:r1][None, :]
        if ex is not None:
            # expired[k][i] = ex_tab[base[k] + i] for i < size[k], else none
            ex_tab, base, size = ex
            inb = member & (q < size[:, None])
            if len(ex_tab):
                q += base[:, None]
                q[~inb] = 0
                lag = inv_t - ex_tab[q]
                lag[~inb] = 0
            else:
                lag = np.zeros(q.shape, dtype=np.int64)
        elif len(e_cm):
            q += kcol * _BIG  # (key, position + 1) codes
            pos = np.searchsorted(e_cm, q, "left")
            pos_c = np.minimum(pos, len(e_cm) - 1)
            ok_e = (pos < len(e_cm)) & (e_kid[pos_c] == kcol)
            lag = inv_t - e_t[pos_c]
            lag[~ok_e] = 0
        else:
            lag = np.zeros(q.shape, dtype=np.int64)
        np.maximum(lag, 0, out=lag)
        lag[~member] = -1
        cm = lag.max(axis=0)
        colmax[r0:r1] = cm
        colarg[r0:r1] = lag.argmax(axis=0)
        colties[r0:r1] = (lag == cm).sum(axis=0)
    best = int(colmax.max())
    if best < 0:
        return None  # no samples at all
    # the first op (history order) reaching the maximum
    cols = np.flatnonzero(colmax == best)
    col = int(cols[np.argmin(r_s[cols])])
    if colties[col] != 1:
        raise Fallback("tie for the worst lag inside one op")
    r_w = int(r_s[col])
    return (best, int(c.r_inv[r_w]), r_w, int(colarg[col]))


#: records per chunk of the record-level passes
CHUNK: Final = 1 << 19
#: rows (at least) per chunk of the lag matrices
_LAG_ROWS: Final = 1 << 15


def _chunks(run_start: I64, run_n: I64, nrec: int) -> list[tuple[int, int, int, int]]:
    """(first run, end run, first record, end record) of chunks of about `CHUNK` records
    made of whole runs."""
    nrun = len(run_n)
    if nrun == 0:
        return []
    cuts = np.searchsorted(run_start, np.arange(CHUNK, nrec, CHUNK), "left")
    rb = [0, *sorted(set(int(x) for x in cuts) - {0, nrun}), nrun]
    out = []
    for r0, r1 in pairwise(rb):
        a = int(run_start[r0])
        b = int(run_start[r1]) if r1 < nrun else nrec
        out.append((r0, r1, a, b))
    return out


def _group_max(sorted_codes: I64, vals: I64) -> tuple[I64, I64]:
    """(distinct codes, the largest value of each) of codes sorted with their values."""
    if len(sorted_codes) == 0:
        return sorted_codes, vals
    first, _ = _group_edges(sorted_codes)
    st = np.flatnonzero(first)
    out: I64 = np.maximum.reduceat(vals, st)
    return sorted_codes[st], out


def _expiry_table(
    e_kid: I64, e_t: I64, e_cm: I64, K: int, max_size: int
) -> tuple[I64, I64, I64] | None:
    """`expired[k][i]` (the time of the first event of key k whose running maximum offset
    reaches i) as one flat table: (table, base per key, size per key), or None if it would
    hold more than `max_size` cells. Events are in (key, history) order; `e_cm` is the
    running maximum of `key << 32 | offset`."""
    if len(e_kid) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(K, dtype=np.int64), \
            np.zeros(K, dtype=np.int64)
    rm = e_cm - e_kid * _BIG
    kf, kl = _group_edges(e_kid)
    size = np.zeros(K, dtype=np.int64)
    size[e_kid[kl]] = rm[kl] + 1
    if int(size.sum()) > max_size:
        return None
    prev = np.empty_like(rm)
    prev[1:] = rm[:-1]
    prev[kf] = -1
    table = np.repeat(e_t, rm - prev)
    base = np.zeros(K, dtype=np.int64)
    np.cumsum(size[:-1], out=base[1:])
    return table, base, size
