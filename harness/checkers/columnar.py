"""Queue histories as int64 columns: decoded once, then checked with numpy (`queue_fast`).

The queue checker's fast path (`queue_fast.check_columns`) works on a `QueueColumns`: flat
numpy arrays of the client completions (process, type, times), of every send micro-op
(op, key, offset, value) and of every poll result (runs of (op, key, count), then the
records' offsets and values). This module makes one from

- a list of `Op`s (`from_ops`: one Python pass over the nested values, the old floor);
- a JSONL history (`from_jsonl`: one `json.loads` per line and the same pass, without making
  `Op`s or restoring poll keys per op);
- a **columnar history file** written by `write_columnar` (Parquet, or Arrow IPC with an
  `.arrow`/`.feather` suffix): the usual history columns (`harness.history.parquet_schema`,
  so `read_parquet`/`from_arrow` still read it) plus side columns per row — `send_k`,
  `send_o` (null: offset unknown), `send_v`, `poll_k`, `poll_n`, `rec_o`, `rec_v` (list<int64>;
  `poll_n[i]` records of key `poll_k[i]`, in micro-op order) and `sub_k` (assign/subscribe
  keys). `from_arrow_file` reads those lists as flat arrays (pyarrow → numpy, no Python object
  per event); only `info` rows whose `extra` mentions `"error"` and rows whose `extra` mentions
  `"rebalance_log"` are parsed as JSON. A plain history Parquet (no side columns) is decoded
  from its JSON `value` strings with the JSONL pass.

Whatever a decoder cannot express exactly as ints — non-int keys, processes or offsets,
`None` poll offsets, bools as keys or processes, a `rebalance_log`, an unknown op type,
malformed micro-ops — raises `Fallback`, and `check_file` then answers with the reference
checker (`queue.check(read_history(path), fast=False)`), so a columnar answer is always the
reference's answer.

    from harness.checkers import columnar
    columnar.write_columnar(history, "history.columnar.parquet")
    result = columnar.check_file("history.columnar.parquet")  # == queue.check(history)
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from harness.history import END_OFFSETS_F, FAIL, INFO, INVOKE, OK, TYPES, Op

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
QUEUE_FS: Final = frozenset({"send", "poll", "txn"})
SUB_FS: Final = frozenset({"assign", "subscribe"})
_TYPE_CODE: Final = {OK: 0, INFO: 1, FAIL: 2}
COLUMNAR_VERSION_KEY: Final = b"hiwater.columnar.version"
SIDE_COLUMNS: Final = ("send_k", "send_o", "send_v", "poll_k", "poll_n", "rec_o", "rec_v",
                       "sub_k")


#: why the fast path declines a history with a confirmed final end offset: `truncated_write`
#: is found by the reference alone
TRUNCATION: Final = "a confirmed final end offset (truncated_write)"


class Fallback(Exception):
    """The columnar path cannot decide this history; use the reference."""


@dataclass
class QueueColumns:
    """A queue history as columns. "Ops" are the client completions (`send`/`poll`/`txn`
    events that are not invocations), numbered 0.. in history order."""

    n_events: int  # len(history)
    # per op
    r_proc: I64
    r_type: npt.NDArray[np.int8]  # 0 ok, 1 info, 2 fail
    r_send: B  # f == "send"
    r_time: I64
    r_inv: I64  # time of the pending invocation of the op's process, else its own time
    # sends, in history and micro-op order
    s_r: I64
    s_k: I64
    s_o: I64  # -1 where unknown
    s_known: B
    s_v: I64
    # poll runs (op, key, record count), in micro-op order, then the records
    p_r: I64
    p_k: I64
    p_n: I64
    rec_o: I64
    rec_v: I64
    # ok/info assign/subscribe completions of int processes: how many ops precede each
    sub_pos: I64
    sub_proc: I64
    sub_ok: B
    sub_assign: B
    sub_kstart: I64  # keys of sub i: sub_keys[sub_kstart[i]:sub_kstart[i + 1]]
    sub_keys: I64
    #: repr(error) -> error of `info` queue ops (the reference's `info_txn_causes`)
    info_causes: dict[str, Any]
    #: per op: its event's position in the history (to name it in an anomaly)
    r_row: I64 | None = None
    #: time of the history's last event (the reference stamps `unseen` with it)
    last_time: int = 0
    #: the `Op`s at some history positions, as the reference reads them (anomalies name ops)
    op_loader: Callable[[list[int]], list[Op]] | None = None
    #: some value is a bool (taken as the int it equals: exact for a clean verdict, but an
    #: anomaly would name the int where the reference names the bool)
    exotic: bool = False

    def ops_at(self, ops: Sequence[int]) -> dict[int, Op]:
        """op number -> its `Op`, for the few ops an anomaly names."""
        if self.op_loader is None or self.r_row is None:
            raise Fallback("no way to load the ops an anomaly names")
        want = sorted(set(int(r) for r in ops))
        got = self.op_loader([int(self.r_row[r]) for r in want])
        return dict(zip(want, got, strict=True))

    @property
    def n_ops(self) -> int:
        return len(self.r_type)


def _i64(xs: Any) -> I64:
    """int64 array of Python ints; anything else (str, float, None, huge) -> Fallback."""
    if len(xs) == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        a = np.array(xs)
    except (OverflowError, ValueError) as e:
        raise Fallback("non-integer data") from e
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise Fallback("non-integer data")
    if a.dtype.kind == "u" and len(a) and int(a.max()) >= 1 << 63:
        raise Fallback("integer range")
    return a.astype(np.int64, copy=False)


def _only_ints(xs: Iterable[Any]) -> bool:
    return set(map(type, xs)) <= {int}


_EMPTY: Final = np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# from Op tuples: one Python pass (Op lists, JSONL lines, plain Parquet rows)


def _pass(events: Iterable[Sequence[Any]], n_events: int | None, json_mode: bool) -> QueueColumns:
    """One pass over (index, time_ns, process, type, f, value, extra) tuples. In `json_mode`
    the values come straight from JSON: poll map keys are strings to restore as
    `harness.history.op_from_dict` does, types are validated."""
    procs: list[Any] = []
    types: list[int] = []
    fsend: list[bool] = []
    times: list[Any] = []
    inv_times: list[Any] = []
    run_r: list[int] = []
    run_k: list[Any] = []
    run_n: list[int] = []
    pairs_all: list[Any] = []
    s_r: list[int] = []
    s_k: list[Any] = []
    s_o: list[Any] = []
    s_v: list[Any] = []
    subs: list[tuple[int, Any, str, str, Any]] = []
    pending: dict[Any, Any] = {}
    info_causes: dict[str, Any] = {}
    rows: list[int] = []
    tcode = _TYPE_CODE
    odd = False
    n = 0
    t = 0
    ext = pairs_all.extend
    for op in events:
        n += 1
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
            if f == END_OFFSETS_F and typ == OK and extra and extra.get("truncated"):
                raise Fallback(TRUNCATION)
            continue
        r = len(procs)
        procs.append(p)
        rows.append(n - 1)
        types.append(tcode[typ])  # KeyError (unknown type) -> Fallback
        fsend.append(f == "send")
        times.append(t)
        inv_times.append(pending.pop(p, t))
        if extra:
            if extra.get("rebalance_log"):
                raise Fallback("rebalance_log")
            if typ == INFO:
                err = extra.get("error")
                if err is not None:
                    info_causes.setdefault(repr(err), err)
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
            elif m0 == "poll" and len(mop) > 1:
                pm = mop[1]
                if pm.__class__ is dict:
                    items: Any = pm.items()
                    if len(mop) > 2:
                        odd = True
                else:
                    odd = True
                    items = pm.items() if hasattr(pm, "items") else pm
                for k, pairs in items:
                    run_r.append(r)
                    run_k.append(k)
                    run_n.append(len(pairs))
                    ext(pairs)
    if json_mode and odd:
        raise Fallback("poll micro-op that JSON decoding would not restore")
    if n_events is None:
        n_events = n
    if not _only_ints(procs):
        raise Fallback("non-int processes")
    if json_mode:
        run_k = _json_keys(run_k)
    if not (_only_ints(run_k) and _only_ints(s_k)):
        raise Fallback("non-int keys")
    nrecs = sum(run_n)
    flat_l = list(chain.from_iterable(pairs_all))
    if len(flat_l) != 2 * nrecs:
        raise Fallback("malformed poll pairs")
    rec = _i64(flat_l).reshape(-1, 2) if nrecs else np.zeros((0, 2), dtype=np.int64)
    s_known = np.array([o is not None for o in s_o], dtype=bool)
    so = _i64([-1 if o is None else o for o in s_o])
    # subs: only int processes matter (every op's process is an int)
    sub_pos: list[int] = []
    sub_proc: list[int] = []
    sub_ok: list[bool] = []
    sub_assign: list[bool] = []
    sub_kstart = [0]
    sub_keys: list[Any] = []
    for s, p, typ, f, ks in subs:
        if p.__class__ is not int:
            if p.__class__ is bool or isinstance(p, int | float):
                raise Fallback("non-int process that equals an int")
            continue
        sub_pos.append(s)
        sub_proc.append(p)
        sub_ok.append(typ == OK)
        sub_assign.append(f == "assign")
        sub_keys.extend(ks)
        sub_kstart.append(len(sub_keys))
    if not _only_ints(sub_keys):
        raise Fallback("non-int assigned keys")
    return QueueColumns(
        n_events=n_events,
        r_proc=_i64(procs),
        r_type=np.array(types, dtype=np.int8),
        r_send=np.array(fsend, dtype=bool),
        r_time=_i64(times),
        r_inv=_i64(inv_times),
        s_r=np.array(s_r, dtype=np.int64),
        s_k=_i64(s_k),
        s_o=so,
        s_known=s_known,
        s_v=_i64(s_v),
        p_r=np.array(run_r, dtype=np.int64),
        p_k=_i64(run_k),
        p_n=np.array(run_n, dtype=np.int64),
        rec_o=np.ascontiguousarray(rec[:, 0]),
        rec_v=np.ascontiguousarray(rec[:, 1]),
        sub_pos=np.array(sub_pos, dtype=np.int64),
        sub_proc=np.array(sub_proc, dtype=np.int64),
        sub_ok=np.array(sub_ok, dtype=bool),
        sub_assign=np.array(sub_assign, dtype=bool),
        sub_kstart=np.array(sub_kstart, dtype=np.int64),
        sub_keys=_i64(sub_keys),
        info_causes=info_causes,
        r_row=np.array(rows, dtype=np.int64),
        last_time=int(t) if n else 0,
        exotic=not (_only_ints(flat_l) and _only_ints(s_v)),
    )


def _restore_key(k: Any) -> Any:
    """As `harness.history._restore_key` (decimal-integer strings -> int)."""
    if isinstance(k, str) and k and (k.isdigit() or (k[0] == "-" and k[1:].isdigit())):
        return int(k)
    return k


def _json_keys(run_k: list[Any]) -> list[Any]:
    """Poll map keys as `op_from_dict` restores them (few distinct keys: map each once)."""
    if not run_k:
        return run_k
    try:
        m = {k: _restore_key(k) for k in set(run_k)}
    except ValueError as e:  # str.isdigit() accepts digits int() does not
        raise Fallback("poll key") from e
    return list(map(m.__getitem__, run_k))


def from_ops(history: Sequence[Op]) -> QueueColumns:
    """Columns of an in-memory history (one Python pass over the nested values)."""
    try:
        with _NoGC():
            c = _pass(history, len(history), json_mode=False)
    except KeyError as e:  # an op type outside invoke/ok/info/fail
        raise Fallback(f"unknown op type {e}") from e
    c.op_loader = lambda rows: [history[i] for i in rows]
    return c


_JSONL_BLOCK: Final = 2048


def _jsonl_dicts(lines: list[str]) -> Iterable[Any]:
    """The decoded lines, a block of lines per `json.loads` call (one JSON array); a block
    that does not parse as exactly its lines is parsed line by line, where a torn last line
    is ignored (as `iter_jsonl` does) and any other bad line is a Fallback."""
    loads = json.loads
    n = len(lines)
    for s in range(0, n, _JSONL_BLOCK):
        idx = [i for i in range(s, min(n, s + _JSONL_BLOCK))
               if lines[i] and not lines[i].isspace()]
        try:
            ds = loads("[" + ",".join([lines[i] for i in idx]) + "]")
        except json.JSONDecodeError:
            ds = None
        if ds is not None and len(ds) == len(idx):
            yield from ds
            continue
        for i in idx:
            try:
                d = loads(lines[i])
            except json.JSONDecodeError:
                if i == n - 1 and not lines[i].endswith("\n"):
                    return  # a torn last line
                raise Fallback("bad JSON line") from None
            yield d


def _jsonl_events(lines: list[str]) -> Iterable[tuple[Any, ...]]:
    types = frozenset(TYPES)
    for d in _jsonl_dicts(lines):
        typ = d["type"]
        if typ not in types:
            raise Fallback("unknown op type")
        if d["index"].__class__ is not int:
            raise Fallback("index")
        t = d["time_ns"] if "time_ns" in d else d.get("time", 0)
        if t.__class__ is not int:
            t = int(t)
        # `d` stands in for `extra`: only its non-base keys (error, rebalance_log) are read
        yield (0, t, d["process"], typ, d["f"], d.get("value"), d)


class _NoGC:
    """Pause the cyclic GC: decoding makes millions of small lists that it would traverse
    again and again, though none of them is part of a cycle."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


def from_jsonl(path: str | os.PathLike[str]) -> QueueColumns:
    """Columns of a `history.jsonl` (`json.loads` of blocks of lines; no `Op`s)."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    try:
        with _NoGC():
            c = _pass(_jsonl_events(lines), None, json_mode=True)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        if isinstance(e, Fallback):
            raise
        raise Fallback(f"cannot decode: {e!r}") from e

    def load(rows: list[int]) -> list[Op]:
        from harness.history import op_from_dict

        event_lines = [i for i, ln in enumerate(lines) if ln and not ln.isspace()]
        return [op_from_dict(json.loads(lines[event_lines[r]])) for r in rows]

    c.op_loader = load
    return c


# ---------------------------------------------------------------------------------------
# columnar files: history columns + int side columns


def _side_lists(ops: Sequence[Op]) -> dict[str, tuple[list[int], list[Any]]] | None:
    """Per side column: (row lengths, flat values), or None if some queue row has data that
    is not plain ints (the file is then written without side columns)."""
    out: dict[str, tuple[list[int], list[Any]]] = {c: ([], []) for c in SIDE_COLUMNS}
    lens = {c: out[c][0] for c in SIDE_COLUMNS}
    flat = {c: out[c][1] for c in SIDE_COLUMNS}
    for op in ops:
        ns = npoll = nrec = nsub = 0
        if op.type != INVOKE and op.f in QUEUE_FS:
            for mop in op.value or ():
                m0 = mop[0]
                if m0 == "send":
                    k = mop[1]
                    x = mop[2]
                    if x.__class__ is list or x.__class__ is tuple:
                        o, v = x[0], x[1]
                        if not (o is None or o.__class__ is int):
                            return None
                    else:
                        o, v = None, x
                    if k.__class__ is not int or v.__class__ is not int:
                        return None
                    flat["send_k"].append(k)
                    flat["send_o"].append(o)
                    flat["send_v"].append(v)
                    ns += 1
                elif m0 == "poll" and len(mop) > 1:
                    pm = mop[1]
                    if pm.__class__ is not dict or len(mop) > 2:
                        return None
                    for k, pairs in pm.items():
                        if k.__class__ is not int:
                            return None
                        flat["poll_k"].append(k)
                        flat["poll_n"].append(len(pairs))
                        npoll += 1
                        for pr in pairs:
                            if len(pr) != 2:
                                return None
                            o, v = pr
                            if o.__class__ is not int or v.__class__ is not int:
                                return None
                            flat["rec_o"].append(o)
                            flat["rec_v"].append(v)
                            nrec += 1
        elif op.type in (OK, INFO) and op.f in SUB_FS:
            ks = op.value or ()
            for k in ks:
                if k.__class__ is not int:
                    return None
            flat["sub_k"].extend(ks)
            nsub = len(ks)
        lens["send_k"].append(ns)
        lens["poll_k"].append(npoll)
        lens["rec_o"].append(nrec)
        lens["sub_k"].append(nsub)
    for a, b in (("send_o", "send_k"), ("send_v", "send_k"), ("poll_n", "poll_k"),
                 ("rec_v", "rec_o")):
        lens[a].extend(lens[b])
    return out


def to_columnar_arrow(ops: Sequence[Op]) -> Any:
    """The history table (`harness.history.to_arrow`) plus the int side columns."""
    import pyarrow as pa

    from harness.history import to_arrow

    table = to_arrow(ops)
    side = _side_lists(ops)
    meta = dict(table.schema.metadata or {})
    if side is not None:
        try:
            arrays = {}
            for c in SIDE_COLUMNS:
                lens, vals = side[c]
                offs = np.zeros(len(lens) + 1, dtype=np.int64)
                np.cumsum(lens, out=offs[1:])
                typ = pa.int32() if c == "poll_n" else pa.int64()
                arrays[c] = pa.LargeListArray.from_arrays(
                    pa.array(offs, pa.int64()), pa.array(vals, type=typ))
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            side = None
    if side is not None:
        for c in SIDE_COLUMNS:
            table = table.append_column(c, arrays[c])
        meta[COLUMNAR_VERSION_KEY] = b"1"
    else:
        meta[COLUMNAR_VERSION_KEY] = b"0"  # plain: values only as JSON
    return table.replace_schema_metadata(meta)


def _is_ipc(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith((".arrow", ".feather", ".ipc"))


def write_columnar(
    ops: Sequence[Op], path: str | os.PathLike[str], *, compression: str | None = None
) -> None:
    """Write a history with int side columns: Parquet (default compression zstd), or Arrow IPC
    for an `.arrow`/`.feather`/`.ipc` path (default uncompressed, memory-mappable)."""
    table = to_columnar_arrow(ops)
    if _is_ipc(path):
        import pyarrow.feather as feather

        feather.write_feather(table, str(path), compression=compression or "uncompressed")
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, str(path), compression=compression or "zstd")


def _read_table(path: str | os.PathLike[str], columns: list[str] | None = None) -> Any:
    if _is_ipc(path):
        import pyarrow.feather as feather

        return feather.read_table(str(path), columns=columns, memory_map=True)
    import pyarrow.parquet as pq

    return pq.read_table(str(path), columns=columns)


def read_history_file(path: str | os.PathLike[str]) -> list[Op]:
    """The `Op`s of a JSONL, Parquet or columnar file (the reference's input)."""
    from harness.history import PARQUET_COLUMNS, from_arrow, read_jsonl

    p = str(path)
    if p.endswith(".parquet") or _is_ipc(p):
        return from_arrow(_read_table(p, list(PARQUET_COLUMNS)))
    return read_jsonl(p)


def _np(arr: Any) -> Any:
    """A (chunked) arrow array without nulls as numpy."""
    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    return arr.to_numpy(zero_copy_only=False)


def _flat(table: Any, name: str) -> tuple[I64, Any]:
    """(per-row lengths, flat child array) of a list column."""
    import pyarrow.compute as pc

    col = table.column(name).combine_chunks()
    lens = pc.list_value_length(col).fill_null(0).to_numpy().astype(np.int64, copy=False)
    return lens, col.flatten()


def from_arrow_file(path: str | os.PathLike[str]) -> QueueColumns:
    """Columns of a Parquet/Arrow history: vectorised from the side columns if the file has
    them (`write_columnar`), else through the JSON `value` strings (one pass)."""
    return from_arrow_table(_read_table(path))


def _table_loader(table: Any) -> Callable[[list[int]], list[Op]]:
    """The `Op`s of some rows of a history table, as `harness.history.from_arrow` reads them."""

    def load(rows: list[int]) -> list[Op]:
        import pyarrow as pa

        from harness.history import PARQUET_COLUMNS, from_arrow

        return from_arrow(table.select(list(PARQUET_COLUMNS)).take(pa.array(rows, pa.int64())))

    return load


def from_arrow_table(table: Any) -> QueueColumns:
    """`from_arrow_file` of a table already read (schema metadata kept)."""
    c = _from_arrow_table(table)
    c.op_loader = _table_loader(table)
    return c


def _from_arrow_table(table: Any) -> QueueColumns:
    import pyarrow as pa
    import pyarrow.compute as pc

    meta = table.schema.metadata or {}
    if meta.get(COLUMNAR_VERSION_KEY) != b"1" or not all(
            c in table.column_names for c in SIDE_COLUMNS):
        return _from_plain_table(table)
    n = table.num_rows
    tcol = table.column("type")
    fcol = table.column("f")
    tcode = pc.index_in(tcol, value_set=pa.array([OK, INFO, FAIL, INVOKE]))
    if tcode.null_count:
        raise Fallback("unknown op type")
    typ = _np(tcode).astype(np.int8)
    fc = _np(pc.index_in(fcol, value_set=pa.array(["send", "poll", "txn", "assign",
                                                   "subscribe"])).fill_null(5)).astype(np.int8)
    time_a = _np(table.column("time_ns")).astype(np.int64, copy=False)
    pcol = table.column("process")
    int_proc = ~_np(pcol.is_null())
    proc = _np(pcol.fill_null(0)).astype(np.int64, copy=False)
    is_rec = (typ != 3) & (fc <= 2)
    rec_rows = np.nonzero(is_rec)[0]
    if not int_proc[rec_rows].all():
        raise Fallback("non-int process")
    nrec = len(rec_rows)
    r_of_row = np.cumsum(is_rec) - 1

    # invocation times: the previous event of the same (int) process, if it is an invoke
    ip_rows = np.nonzero(int_proc)[0]
    pv = proc[ip_rows]
    if len(pv):
        pmin = int(pv.min())
        span = int(pv.max()) - pmin
        key = (pv - pmin).astype(np.uint16) if span < 1 << 16 else pv
        order = ip_rows[np.argsort(key, kind="stable")]
        prev = np.full(n, -1, dtype=np.int64)
        same = proc[order[1:]] == proc[order[:-1]]
        prev[order[1:][same]] = order[:-1][same]
        pr = prev[rec_rows]
        has = (pr >= 0) & (typ[np.maximum(pr, 0)] == 3)
        r_inv = np.where(has, time_a[np.maximum(pr, 0)], time_a[rec_rows])
    else:
        r_inv = time_a[rec_rows]

    # extra: parse only rows that may matter
    xcol = table.column("extra")
    info_causes: dict[str, Any] = {}
    if xcol.null_count < n:
        xn = ~_np(xcol.is_null())
        reb = _np(pc.match_substring(xcol, '"rebalance_log"').fill_null(False)) & is_rec
        err = _np(pc.match_substring(xcol, '"error"').fill_null(False)) & is_rec & (typ == 1)
        ends = _np(pc.equal(fcol, END_OFFSETS_F).fill_null(False)) & (typ == 0) & \
            _np(pc.match_substring(xcol, '"truncated"').fill_null(False))
        if ends.any():
            raise Fallback(TRUNCATION)
        want = np.nonzero((reb | err) & xn)[0]
        if len(want):
            xs = xcol.take(pa.array(want)).to_pylist()
            for row, x in zip(want.tolist(), xs, strict=True):
                d = json.loads(x)
                if d.get("rebalance_log"):
                    raise Fallback("rebalance_log")
                if typ[row] == 1:
                    e = d.get("error")
                    if e is not None:
                        info_causes.setdefault(repr(e), e)

    s_len, sk = _flat(table, "send_k")
    _, so = _flat(table, "send_o")
    _, sv = _flat(table, "send_v")
    p_len, pk = _flat(table, "poll_k")
    _, pn = _flat(table, "poll_n")
    _, ro = _flat(table, "rec_o")
    _, rv = _flat(table, "rec_v")
    sub_len, subk = _flat(table, "sub_k")
    if s_len[~is_rec].any() or p_len[~is_rec].any():
        raise Fallback("side columns on a non-queue row")
    s_r = np.repeat(r_of_row, s_len)
    p_r = np.repeat(r_of_row, p_len)
    s_known = ~_np(so.is_null()) if so.null_count else np.ones(len(so), dtype=bool)
    so_a = _np(so.fill_null(-1) if so.null_count else so).astype(np.int64, copy=False)
    pn_a = _np(pn).astype(np.int64, copy=False)
    rec_o = _np(ro).astype(np.int64, copy=False)
    if int(pn_a.sum()) != len(rec_o):
        raise Fallback("side columns disagree")

    is_sub = (fc >= 3) & (fc <= 4) & (typ <= 1)
    sub_rows = np.nonzero(is_sub & int_proc)[0]
    ks_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sub_len, out=ks_start[1:])
    subk_a = _np(subk).astype(np.int64, copy=False)
    sub_counts = sub_len[sub_rows]
    sub_kstart = np.zeros(len(sub_rows) + 1, dtype=np.int64)
    np.cumsum(sub_counts, out=sub_kstart[1:])
    if len(sub_rows) and sub_counts.sum():
        starts = ks_start[sub_rows]
        idx = np.repeat(starts - sub_kstart[:-1], sub_counts) + np.arange(int(sub_counts.sum()))
        sub_keys = subk_a[idx]
    else:
        sub_keys = _EMPTY
    n_before = np.cumsum(is_rec)  # ops at or before each row (a sub row is not an op)
    return QueueColumns(
        n_events=n,
        r_proc=proc[rec_rows],
        r_type=typ[rec_rows],
        r_send=fc[rec_rows] == 0,
        r_time=time_a[rec_rows],
        r_inv=r_inv.astype(np.int64, copy=False),
        s_r=s_r,
        s_k=_np(sk).astype(np.int64, copy=False),
        s_o=so_a,
        s_known=s_known,
        s_v=_np(sv).astype(np.int64, copy=False),
        p_r=p_r,
        p_k=_np(pk).astype(np.int64, copy=False),
        p_n=pn_a,
        rec_o=rec_o,
        rec_v=_np(rv).astype(np.int64, copy=False),
        sub_pos=n_before[sub_rows].astype(np.int64, copy=False) if nrec else np.zeros(len(sub_rows),
                                                                        dtype=np.int64),
        sub_proc=proc[sub_rows],
        sub_ok=typ[sub_rows] == 0,
        sub_assign=fc[sub_rows] == 3,
        sub_kstart=sub_kstart,
        sub_keys=sub_keys,
        info_causes=info_causes,
        r_row=rec_rows.astype(np.int64, copy=False),
        last_time=int(time_a[-1]) if n else 0,
    )


def _from_plain_table(table: Any) -> QueueColumns:
    """A history table whose values are JSON strings: decode queue/sub rows only."""
    cols = table.select(["time_ns", "process", "process_name", "type", "f", "value",
                         "extra"]).to_pydict()
    loads = json.loads

    def events() -> Iterable[tuple[Any, ...]]:
        for t, p, pn, typ, f, v, x in zip(cols["time_ns"], cols["process"],
                                          cols["process_name"], cols["type"], cols["f"],
                                          cols["value"], cols["extra"], strict=True):
            if typ not in TYPES:
                raise Fallback("unknown op type")
            if typ == INVOKE:
                yield (0, t, p if p is not None else pn, typ, f, None, None)
                continue
            if f in QUEUE_FS or f in SUB_FS:
                yield (0, t, p if p is not None else pn, typ, f,
                       loads(v) if v is not None else None,
                       loads(x) if x is not None else None)
            elif f == END_OFFSETS_F:
                yield (0, t, p if p is not None else pn, typ, f, None,
                       loads(x) if x is not None else None)
            else:
                yield (0, t, p if p is not None else pn, typ, f, None, None)

    try:
        with _NoGC():
            return _pass(events(), table.num_rows, json_mode=True)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        if isinstance(e, Fallback):
            raise
        raise Fallback(f"cannot decode: {e!r}") from e


def read_columns(path: str | os.PathLike[str]) -> QueueColumns:
    """Columns of a `.jsonl`, `.parquet` or Arrow IPC history (by suffix)."""
    p = str(path)
    if p.endswith(".parquet") or _is_ipc(p):
        return from_arrow_file(p)
    return from_jsonl(p)


def check_file(
    path: str | os.PathLike[str], policy: Any = None, *, all_errors: bool = False
) -> dict[str, Any]:
    """`queue.check` of a history file: columns + the numpy fast path when it can decide,
    else the reference on the file's `Op`s."""
    from harness.checkers import queue
    from harness.checkers.queue_fast import check_columns

    try:
        r = check_columns(read_columns(path), policy, all_errors=all_errors)
    except Fallback:
        r = None
    if r is not None:
        return r
    return queue.check(read_history_file(Path(path)), policy, all_errors=all_errors,
                       fast=False)
