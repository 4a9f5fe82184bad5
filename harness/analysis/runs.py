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

    from harness.history import parquet_schema, read_jsonl, write_parquet

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
    write_parquet(ops, tmp)
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


def check_run(history: Sequence[Op], sub_via: Sequence[str], facts: Mapping[str, Any],
              time_limit_s: float = 30.0) -> dict[str, Any]:
    """The single-process checker on one history (what `hiwater check` and the campaign run),
    as one row: verdict, validity and the anomaly types with their counts."""
    from harness.checkers import check
    from harness.checkers.policy import QueuePolicy, run_verdict

    checked = check(history, QueuePolicy.of(sub_via), time_limit_s=time_limit_s)
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
