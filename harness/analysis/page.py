"""One self-contained HTML page across runs (plotly inlined, harness.report's helpers)."""

from __future__ import annotations

import datetime as _dt
import html
import os
from pathlib import Path
from typing import Any

from harness.report.figures import base_layout
from harness.report.page import CSS, ERROR_HOOK, VERDICT_COLORS, _Page, plotly_js, table


def _read(p: Path) -> Any:
    import pandas as pd

    if not p.exists():
        return pd.DataFrame()
    try:
        df = pd.read_parquet(p)
    except (OSError, ValueError):  # an empty table: no part files
        return pd.DataFrame()
    for c in df.columns:
        if str(df[c].dtype) == "category":
            df[c] = df[c].astype(str)
    return df


def _fmt(x: Any, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "—"
    if pct:
        return f"{100 * float(x):.0f}%"
    if isinstance(x, float):
        return f"{x:.1f}"
    return html.escape(str(x))


def _rate_cell(rate: float, runs: int, invalid: int) -> str:
    shade = int(255 - 180 * rate)
    return (f'<td style="background:rgb(255,{shade},{shade})" title="{invalid} of {runs} runs '
            f'invalid">{100 * rate:.0f}% <span class="note">({invalid}/{runs})</span></td>')


def render(out: Path, problems: list[tuple[str, str]], mismatches: list[tuple[str, str]]
           ) -> Path:
    tables, aggs = out / "tables", out / "aggregates"
    runs = _read(tables / "runs")
    checks = _read(tables / "checks")
    matrix = _read(aggs / "matrix")
    lat = _read(aggs / "latency")
    rec = _read(aggs / "recovery")
    bydim = _read(aggs / "by_dimension")
    decay = _read(aggs / "unseen_decay")
    seeds = _read(aggs / "seeds")
    pg = _Page()
    pg.add(f'<h1 style="margin:14px 30px">hiwater analysis — {len(runs)} run(s)</h1>')

    pg.section("matrix", "Anomaly rate: configuration × fault kind")
    if len(matrix):
        configs = sorted(matrix["config"].unique())
        faults = sorted(matrix["fault"].unique())
        cell = {(r.config, r.fault): r for r in matrix.itertuples()}
        head = "".join(f"<th>{html.escape(f)}</th>" for f in faults)
        body = []
        for c in configs:
            tds = "".join(_rate_cell(float(cell[c, f].anomaly_rate), int(cell[c, f].runs),
                                     int(cell[c, f].invalid_runs)) if (c, f) in cell
                          else "<td>—</td>" for f in faults)
            body.append(f"<tr><th>{html.escape(c)}</th>{tds}</tr>")
        pg.add(f"<table><tr><th>configuration</th>{head}</tr>{''.join(body)}</table>")
        z = [[float(cell[c, f].anomaly_rate) if (c, f) in cell else None for f in faults]
             for c in configs]
        fig = {"data": [{"type": "heatmap", "z": z, "x": faults, "y": configs,
                         "colorscale": "Reds", "zmin": 0, "zmax": 1,
                         "colorbar": {"title": {"text": "invalid"}}}],
               "layout": {**base_layout("invalid runs / runs", xtitle="fault kind",
                                        height=220 + 30 * len(configs)),
                          "margin": {"l": 330, "r": 20, "t": 45, "b": 60}}}
        pg.figure(fig, "A run counts under every fault kind it saw (none: no faults).")

    pg.section("latency", "Latency and availability under each fault")
    if len(lat):
        pg.add(table(["configuration", "fault", "ops", "availability", "p50 ms", "p99 ms"],
                     [[_fmt(r.config), _fmt(r.fault), _fmt(r.ops), _fmt(r.availability, True),
                       _fmt(r.p50_ms), _fmt(r.p99_ms)] for r in lat.itertuples()]))
        data = []
        for c in sorted(lat["config"].unique()):
            sub = lat[lat["config"] == c]
            data.append({"type": "bar", "name": c, "x": list(sub["fault"]),
                         "y": [float(v) if v == v else None for v in sub["p99_ms"]]})
        pg.figure({"data": data, "layout": {**base_layout("ok-latency p99 by fault kind",
                                                          xtitle="fault kind", ytitle="ms"),
                                            "barmode": "group"}},
                  "Ops are counted under the fault kind active at their invocation; quiet: none.")

    pg.section("recovery", "Time to recover after heal")
    if len(rec):
        pg.add(table(["configuration", "fault", "heals", "recovered", "mean s", "max s"],
                     [[_fmt(r.config), _fmt(r.fault), _fmt(r.heals), _fmt(r.recovered),
                       f"{r.mean_recover_s:.2f}" if r.mean_recover_s == r.mean_recover_s
                       else "—",
                       f"{r.max_recover_s:.2f}" if r.max_recover_s == r.max_recover_s
                       else "—"] for r in rec.itertuples()]))

    pg.section("unseen", "Unseen decay after the last heal")
    if len(decay):
        data = []
        for c in sorted(decay["config"].unique()):
            sub = decay[decay["config"] == c].sort_values("after_heal_s")
            data.append({"type": "scatter", "mode": "lines+markers", "name": c,
                         "x": [float(x) for x in sub["after_heal_s"]],
                         "y": [float(y) for y in sub["mean_unseen"]]})
        pg.figure({"data": data, "layout": base_layout(
            "mean unseen records (acknowledged, not yet read) after the last heal",
            xtitle="seconds after the last heal", ytitle="records")},
            "Each run sampled after the end of its last fault window (its start when it had "
            "none); the curve should fall to zero once consumers catch up.")
        pg.add(table(["configuration", "s after heal", "runs", "mean unseen", "max",
                      "runs at zero"],
                     [[_fmt(r.config), _fmt(r.after_heal_s), _fmt(r.runs),
                       _fmt(float(r.mean_unseen)), _fmt(r.max_unseen), _fmt(r.runs_zero)]
                      for r in decay.itertuples()]))

    pg.section("seeds", "Which seeds reproduce which anomaly")
    if len(seeds):
        pg.add(table(["anomaly", "configuration", "seed", "runs with it", "runs", "rate"],
                     [[_fmt(r.type) + (" (bad)" if r.bad else ""), _fmt(r.config),
                       _fmt(r.seed), _fmt(r.runs_with), _fmt(r.runs), _fmt(r.rate, True)]
                      for r in seeds.itertuples()]))

    pg.section("dimensions", "Anomaly rate by dimension")
    if len(bydim):
        pg.add(table(["dimension", "value", "runs", "invalid", "rate"],
                     [[_fmt(r.dimension), _fmt(r.value), _fmt(r.runs), _fmt(r.invalid_runs),
                       _fmt(r.anomaly_rate, True)] for r in bydim.itertuples()]))

    pg.section("runs", "Runs")
    if len(runs):
        v = dict(zip(checks["run_id"], checks["verdict"], strict=False)) if len(checks) else {}
        rows = []
        for r in runs.sort_values("run_id").itertuples():
            verdict = str(v.get(r.run_id, "unknown"))
            color = VERDICT_COLORS.get(verdict, "#777")
            name = html.escape(r.run_id)
            link = (f'<a href="{html.escape(os.path.relpath(r.report, out))}">{name}</a>'
                    if isinstance(r.report, str) and r.report else name)
            rows.append(f'<tr><td>{link}</td><td><span class="v" style="background:{color};'
                        f'color:#fff;padding:0 6px">{verdict.upper()}</span></td>'
                        f"<td>{html.escape(r.config)}</td><td>{html.escape(r.nemesis)}</td>"
                        f"<td>{r.seed}</td></tr>")
        pg.add("<table><tr><th>run</th><th>verdict</th><th>configuration</th><th>faults</th>"
               "<th>seed</th></tr>" + "".join(rows) + "</table>")

    if problems or mismatches:
        pg.section("problems", "Not analysed / disagreeing with results.json")
        pg.add(table(["run", "problem"], [[html.escape(a), html.escape(b)]
                                          for a, b in [*problems, *mismatches]]))
    nav = "".join(f'<a href="#{html.escape(a)}">{html.escape(t)}</a>' for a, t in pg.nav)
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        "<title>hiwater analysis</title>", f"<style>{CSS}</style>",
        f"<script>{ERROR_HOOK}</script>", f"<script>{plotly_js()}</script>",
        "</head><body>", pg.parts[0], f"<nav>{nav}</nav><main>", *pg.parts[1:],
        f'<p class="note">Generated {generated}. {pg.figs} plot(s).</p>',
        '<pre id="js-errors"></pre></main></body></html>\n'])
    path = out / "index.html"
    path.write_text(text, encoding="utf-8")
    return path
