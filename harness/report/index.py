"""`index.html` across the runs of a store: name, time, verdict, anomaly counts, links.

A run is any directory under the store holding `results.json` or `history.jsonl`; symlinked
directories (`latest`, `current`) are not followed, so each run is listed once.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness.report.page import CSS, VERDICT_COLORS, anomalies_of, render, verdict_of

RUN_MARKERS: Final = ("results.json", "history.jsonl", "history.parquet")
_STAMP: Final = re.compile(r"(\d{8}T\d{6})(?:\.(\d{1,6}))?([+-]\d{4}|Z)?")


@dataclass
class RunRow:
    path: Path
    name: str
    time: _dt.datetime | None
    verdict: str
    anomalies: list[tuple[str, int, bool]]  # (type, count, forbidden?)
    has_report: bool


def find_runs(store_dir: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(store_dir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
        if any(m in files for m in RUN_MARKERS):
            out.append(Path(root))
    return out


def _load(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _parse_time(x: Any) -> _dt.datetime | None:
    if isinstance(x, int | float) and not isinstance(x, bool):
        secs = x / 1e9 if x > 1e12 else x
        try:
            return _dt.datetime.fromtimestamp(secs, _dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(x, str):
        try:
            t = _dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
        except ValueError:
            m = _STAMP.search(x)
            if not m:
                return None
            try:
                t = _dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S")
            except ValueError:
                return None
            tz = m.group(3)
            if tz == "Z":
                t = t.replace(tzinfo=_dt.UTC)
            elif tz:
                t = t.replace(tzinfo=_dt.datetime.strptime(tz, "%z").tzinfo)
        return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)
    return None


def run_time(run: Path, options: Mapping[str, Any], results: Mapping[str, Any]) -> \
        _dt.datetime | None:
    for src in (options, results):
        for k in ("start_time", "started_at", "start", "time", "timestamp"):
            t = _parse_time(src.get(k))
            if t is not None:
                return t
    t = _parse_time(run.name)
    if t is not None:
        return t
    for m in RUN_MARKERS:
        p = run / m
        if p.exists():
            return _dt.datetime.fromtimestamp(p.stat().st_mtime, _dt.UTC)
    return None


def run_row(store_dir: Path, run: Path) -> RunRow:
    results = _load(run / "results.json")
    results = results if isinstance(results, Mapping) else None
    options = _load(run / "options.json")
    options = options if isinstance(options, Mapping) else {}
    anomalies = [(a.type, a.count, a.bad) for a in anomalies_of(results)]
    name = run.relative_to(store_dir).as_posix() if run != store_dir else run.name
    return RunRow(run, name or ".", run_time(run, options, results or {}),
                  verdict_of(results), anomalies, (run / "report.html").exists())


def render_index(store_dir: Path | str, *, render_missing: bool = False) -> Path:
    """Write `store_dir/index.html` listing every run (newest first) and return its path.

    `render_missing` renders `report.html` for runs that have none yet."""
    store_dir = Path(store_dir)
    runs = find_runs(store_dir)
    if render_missing:
        for run in runs:
            if not (run / "report.html").exists():
                render(run)
    rows = [run_row(store_dir, r) for r in runs]
    epoch = _dt.datetime.min.replace(tzinfo=_dt.UTC)
    rows.sort(key=lambda r: (r.time or epoch, r.name), reverse=True)
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICT_COLORS}
    body = []
    for r in rows:
        link_target = (r.path / "report.html" if r.has_report else
                       r.path / "results.json").relative_to(store_dir).as_posix()
        name = html.escape(r.name)
        link = (f'<a href="{html.escape(link_target)}">{name}</a>' if r.has_report else
                f'{name} <span class="note">(no report; <a href="'
                f'{html.escape(link_target)}">results.json</a>)</span>')
        an = ", ".join(
            (f'<b class="forbidden">{html.escape(t)}: {c}</b>' if bad else
             f"{html.escape(t)}: {c}") for t, c, bad in r.anomalies) or "—"
        when = r.time.strftime("%Y-%m-%d %H:%M:%S %Z") if r.time else ""
        body.append(
            f'<tr data-verdict="{r.verdict}"><td>{link}</td><td>{html.escape(when)}</td>'
            f'<td><span class="v" style="background:{VERDICT_COLORS[r.verdict]}">'
            f"{r.verdict.upper()}</span></td><td>{an}</td></tr>")
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    text = "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        "<title>hiwater runs</title>",
        f"<style>{CSS}.v{{color:#fff;padding:1px 8px;border-radius:8px;font-weight:700}}"
        ".forbidden{color:#c62828}main{padding-top:16px}</style></head><body><main>",
        f"<h1>hiwater runs</h1><p>{len(rows)} run(s): {html.escape(summary)}.</p>",
        "<table><thead><tr><th>run</th><th>time</th><th>verdict</th>"
        "<th>anomalies (forbidden in bold)</th></tr></thead><tbody>",
        *body,
        "</tbody></table></main></body></html>\n",
    ])
    path = store_dir / "index.html"
    tmp = path.with_name("index.html.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
