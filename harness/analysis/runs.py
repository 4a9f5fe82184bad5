"""One run directory as rows: discovery, loading, JSONL→Parquet conversion, and the per-run
functions the Spark jobs call (the same checker code as `hiwater check` and the campaign).

Everything here is plain Python/pandas, so it runs the same on the driver, on an executor, and
in tests without Spark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.history import INVOKE, NEMESIS, OK, Op

HISTORY_PARQUET: Final = "history.parquet"
HISTORY_JSONL: Final = "history.jsonl"
QUIET: Final = "quiet"
NO_FAULTS: Final = "none"


@dataclass
class RunInfo:
    """A discovered run: where it is, what it was asked, what it concluded."""

    run_id: str
    campaign: str
    run: str
    path: Path
    options: dict[str, Any]
    results: dict[str, Any]
    history: Path | None = None
    problems: list[str] = field(default_factory=list)


def find_run_dirs(store: Path) -> list[Path]:
    """Every directory under `store` with options.json, results.json or a history (symlinks
    such as `latest` are not followed, so each run appears once)."""
    markers = ("options.json", "results.json", HISTORY_JSONL, HISTORY_PARQUET)
    out: list[Path] = []
    for root, dirs, files in os.walk(store, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        if any(m in files for m in markers):
            out.append(Path(root))
            dirs[:] = []  # a run's own subdirectories (logs, cluster data) are not runs
    return out


def _load_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, ValueError) as e:
        return None, f"{path.name} unreadable: {e}"
    if not isinstance(d, dict):
        return None, f"{path.name} is not a JSON object"
    return d, None


def ensure_parquet(run_dir: Path) -> tuple[Path | None, str | None]:
    """The run's history as Parquet (fixed schema), converting history.jsonl on first use.

    Returns (path, None) or (None, problem). A Parquet file that cannot be read is a problem
    (reported, not silently replaced)."""
    import pyarrow.parquet as pq

    from harness.checkers.columnar import write_columnar
    from harness.history import parquet_schema, read_jsonl

    pq_path = run_dir / HISTORY_PARQUET
    if pq_path.exists():
        try:
            meta = pq.read_schema(str(pq_path))
            want = parquet_schema()
            for f in want:
                if meta.get_field_index(f.name) < 0:
                    return None, f"{HISTORY_PARQUET} lacks column {f.name!r}"
            pq.ParquetFile(str(pq_path)).metadata  # noqa: B018  (reads the footer)
        except Exception as e:  # pyarrow raises several types for a corrupt file
            return None, f"{HISTORY_PARQUET} corrupt: {type(e).__name__}: {e}"
        return pq_path, None
    jl = run_dir / HISTORY_JSONL
    if not jl.exists():
        return None, "no history"
    try:
        with open(jl, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    return None, f"{HISTORY_JSONL} truncated (torn last line)"
        ops = read_jsonl(jl)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"{HISTORY_JSONL} unreadable: {type(e).__name__}: {e}"
    if not ops:
        return None, f"{HISTORY_JSONL} is empty"
    tmp = run_dir / (HISTORY_PARQUET + ".tmp")
    write_columnar(ops, tmp)  # as a campaign writes it: the checker's int columns beside
    os.replace(tmp, pq_path)
    return pq_path, None


def load_run(store: Path, run_dir: Path) -> RunInfo:
    rel = run_dir.relative_to(store).as_posix()
    parts = rel.split("/") if rel != "." else [run_dir.name]
    campaign = parts[0]
    run = "_".join(parts[1:]) or parts[0]
    info = RunInfo(rel if rel != "." else run_dir.name, campaign, run, run_dir, {}, {})
    opts, p1 = _load_json(run_dir / "options.json")
    res, p2 = _load_json(run_dir / "results.json")
    if opts is None:
        opts = (res or {}).get("options") or {}
        if p1 and not opts:
            info.problems.append(p1)
    if res is None:
        info.problems.append(p2 or "no results.json")
    info.options = dict(opts)
    info.results = dict(res or {})
    if res is not None:
        info.history, p3 = ensure_parquet(run_dir)
        if p3:
            info.problems.append(p3)
    return info


# ---------------------------------------------------------------------------------------
# configuration labels


def config_label(o: Mapping[str, Any]) -> str:
    """acks, min ISR, unclean, idempotence (and bug switches) as one short label."""
    s = (f"acks={o.get('acks', 'all')} minisr={o.get('min_insync_replicas', '?')} "
         f"unclean={str(bool(o.get('unclean_leader_election', False))).lower()} "
         f"idem={str(bool(o.get('idempotence', True))).lower()}")
    bugs = o.get("bugs") or ()
    if bugs:
        s += " bugs=" + ",".join(sorted(str(b) for b in bugs))
    return s


def run_row(info: RunInfo) -> dict[str, Any]:
    o, r = info.options, info.results
    nem = o.get("scenario") or ",".join(sorted(str(x) for x in o.get("nemesis") or ())) or "none"
    report = info.path / "report.html"
    return {
        "run_id": info.run_id,
        "campaign": info.campaign,
        "run": info.run,
        "path": str(info.path),
        "history": str(info.history) if info.history else None,
        "workload": str(o.get("workload", "queue")),
        "acks": str(o.get("acks", "all")),
        "min_isr": int(o.get("min_insync_replicas", 0) or 0),
        "unclean": bool(o.get("unclean_leader_election", False)),
        "idempotence": bool(o.get("idempotence", True)),
        "bugs": ",".join(sorted(str(b) for b in o.get("bugs") or ())) or "none",
        "nemesis": nem,
        "seed": int(o["seed"]) if isinstance(o.get("seed"), int) else
        (int(r["seed"]) if isinstance(r.get("seed"), int) else -1),
        "config": config_label(o),
        "sub_via": ",".join(o.get("sub_via") or ("assign",)),
        "recorded_verdict": str(r.get("verdict", "unknown")),
        "report": str(report) if report.exists() else None,
        "results_json": json.dumps(
            {k: r[k] for k in ("error", "probes", "workload") if k in r}, default=str),
    }


# ---------------------------------------------------------------------------------------
# per-run work (executors)


def check_row(checked: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """A `check` result as one row: the run's verdict (`run_verdict`, the campaign's rule),
    validity, and the anomaly types with their counts."""
    from harness.checkers.policy import run_verdict

    verdict, bad = run_verdict(checked, facts)
    q = checked.get("queue") or {}
    counts = {t: int(a.get("count", 0)) for t, a in (q.get("anomalies") or {}).items()}
    v = checked["valid?"]
    return {
        "verdict": verdict,
        "valid": "unknown" if v == "unknown" else str(bool(v)).lower(),
        "anomaly_types": json.dumps(sorted(q.get("anomaly_types", []))),
        "bad": json.dumps(sorted(bad)),
        "counts": json.dumps(counts, sort_keys=True),
        "linearizable": str((checked.get("linearizable") or {}).get("valid?", "n/a")).lower(),
    }


def check_run(history: Sequence[Op], sub_via: Sequence[str], facts: Mapping[str, Any],
              time_limit_s: float = 30.0) -> dict[str, Any]:
    """The single-process checker on one history (what `hiwater check` and the campaign run),
    as one row (`check_row`)."""
    from harness.checkers import check
    from harness.checkers.policy import QueuePolicy

    checked = check(history, QueuePolicy.of(sub_via), time_limit_s=time_limit_s)
    return check_row(checked, facts)


def recorded_check(results: Mapping[str, Any]) -> dict[str, Any]:
    """The same row from a results.json (to compare)."""
    q = results.get("queue") or {}
    counts = {t: int(a.get("count", 0)) for t, a in (q.get("anomalies") or {}).items()}
    return {
        "verdict": str(results.get("verdict", "unknown")),
        "anomaly_types": sorted(q.get("anomaly_types", [])),
        "bad": sorted(results.get("bad", [])),
        "counts": counts,
    }


def fault_kind(f: str) -> str:
    """A fault's start op as a kind: start-partition -> partition, kill-node -> kill."""
    return f.removeprefix("start-").removesuffix("-node").removesuffix("-network")


def fault_rows(history: Sequence[Op]) -> list[dict[str, Any]]:
    """Fault windows (harness.checkers.stats.fault_windows) with the time to recover after
    each heal: from the window's end to the first `ok` completion of a client op invoked
    at or after it (null when none came)."""
    from harness.checkers.stats import fault_windows

    ws = fault_windows(history)
    pend: dict[Any, int] = {}
    oks: list[tuple[int, int]] = []  # (invoke time, ok completion time)
    for op in history:
        if op.process == NEMESIS or not isinstance(op.process, int):
            continue
        if op.type == INVOKE:
            pend[op.process] = op.time_ns
        else:
            t0 = pend.pop(op.process, None)
            if t0 is not None and op.type == OK:
                oks.append((t0, op.time_ns))
    out = []
    for i, w in enumerate(ws):
        end = int(w["end_ns"])
        after = [c for t0, c in oks if t0 >= end]
        out.append({"window": i, "fault": fault_kind(str(w["f"])), "start_ns": int(w["start_ns"]),
                    "end_ns": end,
                    "recover_s": (min(after) - end) / 1e9 if after else None})
    return out


def op_rows(history: Sequence[Op], windows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Client ops (invocation paired with completion) as columns, one row per fault kind
    active at the invocation (`quiet` outside every window)."""
    spans = [(int(w["start_ns"]), int(w["end_ns"]), str(w["fault"])) for w in windows]
    pend: dict[Any, Op] = {}
    cols: dict[str, list[Any]] = {"f": [], "type": [], "invoke_ns": [], "latency_ms": [],
                                  "fault": []}
    for op in history:
        if op.process == NEMESIS or not isinstance(op.process, int):
            continue
        if op.type == INVOKE:
            pend[op.process] = op
            continue
        inv = pend.pop(op.process, None)
        if inv is None:
            continue
        t0 = inv.time_ns
        kinds = sorted({k for s, e, k in spans if s <= t0 < e}) or [QUIET]
        for k in kinds:
            cols["f"].append(op.f)
            cols["type"].append(op.type)
            cols["invoke_ns"].append(t0)
            cols["latency_ms"].append((op.time_ns - t0) / 1e6)
            cols["fault"].append(k)
    return cols


# ---------------------------------------------------------------------------------------
# the same per-run work from the history file's columns (what the Spark tasks run)


def ops_of_table(table: Any) -> list[Op]:
    """`harness.history.from_arrow` (the same `Op`s), faster: every `value` decoded by one
    `json.loads` call, `Op`s made straight from the columns; a row with `extra` keys goes
    through `op_from_dict` as `from_arrow` does."""
    from harness.history import PARQUET_COLUMNS, TYPES, _restore_poll_keys, op_from_dict

    cols = table.select(list(PARQUET_COLUMNS)).to_pydict()
    vals = cols["value"]
    values = json.loads("[" + ",".join("null" if v is None else v for v in vals) + "]")
    queue_fs = ("send", "poll", "txn")
    out: list[Op] = []
    for i, (ix, t, p, pn, typ, f, x) in enumerate(zip(
            cols["index"], cols["time_ns"], cols["process"], cols["process_name"],
            cols["type"], cols["f"], cols["extra"], strict=True)):
        proc = p if p is not None else pn
        if x is not None:
            d = {"index": ix, "time_ns": t, "process": proc, "type": typ, "f": f,
                 "value": values[i]}
            d.update(json.loads(x))
            out.append(op_from_dict(d))
            continue
        if typ not in TYPES:
            raise ValueError(f"op type must be one of {TYPES}, not {typ!r}")
        v = values[i]
        if f in queue_fs:
            v = _restore_poll_keys(v)
        out.append(Op(int(ix), int(t), proc, typ, f, v, None))
    return out


def check_table(table: Any, sub_via: Sequence[str], *, time_limit_s: float = 30.0
                ) -> tuple[dict[str, Any], Any]:
    """`harness.checkers.check`'s verdict-bearing part (`valid?`, `queue`, `linearizable`;
    not `stats`) on a history table, through the same checkers, and the queue columns when
    the file gave them. A queue history goes to `queue_fast.check_columns` on the int
    columns read straight from the file (no JSON, no `Op`s: `check` reaches the same function
    through `columnar.from_ops`; it answers clean and lossy histories, loading the few ops an
    anomaly names), and to the reference `queue.check` on the decoded `Op`s only when the
    fast path declines (other anomaly kinds) — as `queue.check` does; a history with
    register ops goes to `check` whole."""
    import pyarrow.compute as pc

    from harness.checkers import check, linearizable, queue
    from harness.checkers.columnar import Fallback, from_arrow_table
    from harness.checkers.policy import QueuePolicy, merge_valid
    from harness.checkers.queue_fast import check_columns

    policy = QueuePolicy.of(sub_via)
    fs = set(pc.unique(table.column("f")).to_pylist())
    if fs & frozenset(linearizable.REGISTER.codes):
        return check(ops_of_table(table), policy, time_limit_s=time_limit_s), None
    try:
        cols = from_arrow_table(table)
    except Fallback:
        cols = None
    q = check_columns(cols, policy) if cols is not None else None
    if q is None:
        q = queue.check(ops_of_table(table), policy, fast=False)
    return {"valid?": merge_valid([q["valid?"]]), "queue": q}, cols


#: when the unseen count is sampled: seconds after the last heal (the end of the last fault
#: window; the history's start when there was no fault), up to the history's end
DECAY_S: Final = (0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


def _samples(heal_ns: int, end_ns: int) -> list[tuple[float, int]]:
    return [(d, heal_ns + int(d * 1e9)) for d in DECAY_S if heal_ns + int(d * 1e9) <= end_ns]


def unseen_decay_columns(c: Any, heal_ns: int, end_ns: int) -> tuple[list[float], list[int]]:
    """Jepsen's `unseen` (acknowledged by an `ok` send, not yet read by an `ok` poll; a value
    read before it was acknowledged never counts) summed over keys, after each `DECAY_S` step
    past the heal, from the queue columns: each (key, value) is unseen from the op that first
    acknowledged it until the op that first read it."""
    import numpy as np

    ok = c.r_type == 0
    sm = ok[c.s_r]
    rec_op = np.repeat(c.p_r, c.p_n)
    rec_k = np.repeat(c.p_k, c.p_n)
    rm = ok[rec_op]
    k = np.concatenate([c.s_k[sm], rec_k[rm]])
    v = np.concatenate([c.s_v[sm], c.rec_v[rm]])
    op = np.concatenate([c.s_r[sm], rec_op[rm]])
    is_ack = np.concatenate([np.ones(int(sm.sum()), bool), np.zeros(int(rm.sum()), bool)])
    big = np.iinfo(np.int64).max
    if len(k):
        order = np.lexsort((v, k))  # (key, value) pairs numbered 0.. in sorted order
        ks, vs = k[order], v[order]
        new_pair = np.ones(len(order), dtype=bool)
        new_pair[1:] = (ks[1:] != ks[:-1]) | (vs[1:] != vs[:-1])
        inv = np.empty(len(order), dtype=np.int64)
        inv[order] = np.cumsum(new_pair) - 1
        n = int(inv.max()) + 1
        acked = np.full(n, big, np.int64)
        polled = np.full(n, big, np.int64)
        np.minimum.at(acked, inv[is_ack], op[is_ack])
        np.minimum.at(polled, inv[~is_ack], op[~is_ack])
        live = (acked < big) & (acked < polled)
        a_sorted = np.sort(acked[live])
        p_sorted = np.sort(polled[live])
    else:
        a_sorted = p_sorted = np.zeros(0, np.int64)
    done = np.maximum.accumulate(c.r_time) if len(c.r_time) else c.r_time
    xs, ys = [], []
    for d, t in _samples(heal_ns, end_ns):
        n_done = int(np.searchsorted(done, t, side="right"))  # ops completed by t
        xs.append(d)
        ys.append(int(np.searchsorted(a_sorted, n_done, side="left")
                      - np.searchsorted(p_sorted, n_done, side="left")))
    return xs, ys


def unseen_decay_ops(history: Sequence[Op], heal_ns: int, end_ns: int
                     ) -> tuple[list[float], list[int]]:
    """`unseen_decay_columns` from `Op`s, with the report's own unseen series
    (`harness.report.derive`): for histories the columns cannot express."""
    from harness.report.derive import _unseen_events

    events = _unseen_events(history)
    per_key: dict[str, int] = {}
    xs, ys = [], []
    i = 0
    for d, t in _samples(heal_ns, end_ns):
        while i < len(events) and events[i][0] <= t:
            per_key[events[i][1]] = events[i][2]
            i += 1
        xs.append(d)
        ys.append(sum(per_key.values()))
    return xs, ys


def _client_pairs(table: Any) -> dict[str, Any]:
    """Client ops as invocation/completion pairs from the columns (numpy): for each
    completion whose process's previous event is an invocation — what `op_rows` pairs with
    its `pending` map — its f, type, invocation time and completion time, in history order."""
    import numpy as np
    import pyarrow.compute as pc

    proc = table.column("process")
    client = pc.is_valid(proc).to_numpy(zero_copy_only=False)
    idx = np.nonzero(client)[0]
    p = proc.to_numpy(zero_copy_only=False)[idx].astype(np.int64)
    t = table.column("time_ns").to_numpy()[idx]
    typ = table.column("type").to_numpy(zero_copy_only=False)[idx]
    order = np.lexsort((idx, p))
    ps, ts, tys = p[order], t[order], typ[order]
    inv = tys == INVOKE
    j = np.nonzero((ps[1:] == ps[:-1]) & inv[:-1] & ~inv[1:])[0]
    comp = order[j + 1]
    by_time = np.argsort(idx[comp], kind="stable")
    comp, j = comp[by_time], j[by_time]
    f = table.column("f").to_numpy(zero_copy_only=False)[idx]
    return {"f": f[comp], "type": typ[comp], "invoke_ns": ts[j], "done_ns": t[comp]}


def analyse_table(table: Any, sub_via: Sequence[str], facts: Mapping[str, Any], *,
                  time_limit_s: float = 30.0) -> tuple[dict[str, Any], dict[str, Any],
                                                       dict[str, Any], dict[str, Any]]:
    """One run's check row (`check_row` of `check_table`), its fault windows (`fault_rows`),
    its paired client ops (`op_rows`) and its unseen decay after the last heal
    (`unseen_decay_columns`) as columns, from one read of its history file.
    Equal to `check_run`, `fault_rows` and `op_rows` on the decoded history; only the
    nemesis events are decoded to `Op`s here (and the whole history only when the reference
    checker must run)."""
    import numpy as np
    import pyarrow.compute as pc

    from harness.checkers.stats import fault_windows

    checked, cols = check_table(table, sub_via, time_limit_s=time_limit_s)
    row = check_row(checked, facts)
    nem = pc.and_(pc.is_null(table.column("process")),
                  pc.equal(table.column("process_name"), NEMESIS))
    history = ops_of_table(table.filter(nem))
    if table.num_rows:  # fault_windows ends an open window at the history's last event
        history.append(Op(-1, int(table.column("time_ns")[-1].as_py()), 0, OK, "", None))
    ws = fault_windows(history)
    pairs = _client_pairs(table)
    ok = pairs["type"] == OK
    t0_ok, done_ok = pairs["invoke_ns"][ok], pairs["done_ns"][ok]
    o = np.argsort(t0_ok, kind="stable")
    t0_sorted = t0_ok[o]
    first_done = np.minimum.accumulate(done_ok[o][::-1])[::-1] if len(o) else done_ok
    win: dict[str, list[Any]] = {"window": [], "fault": [], "start_ns": [], "end_ns": [],
                                 "recover_s": []}
    for i, w in enumerate(ws):
        end = int(w["end_ns"])
        at = int(np.searchsorted(t0_sorted, end, side="left"))
        win["window"].append(i)
        win["fault"].append(fault_kind(str(w["f"])))
        win["start_ns"].append(int(w["start_ns"]))
        win["end_ns"].append(end)
        win["recover_s"].append((int(first_done[at]) - end) / 1e9 if at < len(o) else None)
    t0 = pairs["invoke_ns"]
    kinds = sorted(set(win["fault"]))
    n = len(t0)
    parts: list[tuple[Any, Any]] = []  # (pair positions, kind rank)
    any_fault = np.zeros(n, dtype=bool)
    for rank, k in enumerate(kinds):
        m = np.zeros(n, dtype=bool)
        for s, e, kk in zip(win["start_ns"], win["end_ns"], win["fault"], strict=True):
            if kk == k:
                m |= (t0 >= s) & (t0 < e)
        any_fault |= m
        parts.append((np.nonzero(m)[0], rank))
    parts.append((np.nonzero(~any_fault)[0], len(kinds)))
    pos = np.concatenate([p for p, _ in parts]) if parts else np.zeros(0, np.int64)
    rank_of = np.concatenate([np.full(len(p), r) for p, r in parts])
    sel = np.lexsort((rank_of, pos))
    pos, rank_of = pos[sel], rank_of[sel]
    names = np.array([*kinds, QUIET], dtype=object)
    lat = {"f": pairs["f"][pos], "type": pairs["type"][pos], "invoke_ns": t0[pos],
           "latency_ms": (pairs["done_ns"][pos] - t0[pos]) / 1e6, "fault": names[rank_of]}
    if table.num_rows:
        t_all = table.column("time_ns")
        start, end = int(t_all[0].as_py()), int(t_all[-1].as_py())
        heal = max(win["end_ns"], default=start)
        if cols is not None:
            xs, ys = unseen_decay_columns(cols, heal, end)
        else:
            xs, ys = unseen_decay_ops(ops_of_table(table), heal, end)
    else:
        xs, ys = [], []
    return row, win, lat, {"after_heal_s": xs, "unseen": ys}
