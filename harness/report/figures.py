"""Plotly figures as plain dicts (`{"data": [...], "layout": {...}}`), built without plotly's
Python validation (fast on large histories). Every user-controlled string that goes into a
figure is HTML-escaped first: plotly renders text and hover labels as a subset of HTML.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harness.history import FAIL, INFO, OK, Op, sort_key
from harness.report import derive
from harness.report.derive import Focus, Obs, Pair, RegOp, TimeSeries, Unseen

Figure = dict[str, Any]

TYPE_COLORS: Final = {OK: "#6DB6FE", INFO: "#FFAA26", FAIL: "#FF1E90"}
FAULT_PALETTE: Final = ("#f4a582", "#92c5de", "#b2abd2", "#a6dba0", "#fdb863", "#c2a5cf",
                        "#d9d9d9", "#80cdc1", "#f1b6da", "#bababa", "#e6f598", "#abdda4")
F_COLORS: Final = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f",
                   "#bcbd22", "#e377c2", "#d62728", "#ff7f0e")
MAX_BANDS: Final = 200
MAX_BAND_LABELS: Final = 40
TEXT_CAP: Final = 120


def short(x: Any, cap: int = TEXT_CAP) -> str:
    """A value as short text (JSON for non-strings), not escaped."""
    s = x if isinstance(x, str) else compact(x)
    if len(s) > cap:
        s = s[: cap - 1] + "…"
    return s


def esc(x: Any, cap: int = TEXT_CAP) -> str:
    """A value as short escaped text (JSON for non-strings)."""
    return html.escape(short(x, cap))


def compact(x: Any) -> str:
    try:
        return json.dumps(x, separators=(",", ":"), sort_keys=False, default=repr)
    except (TypeError, ValueError):
        return repr(x)


def op_hover(op: Op | Mapping[str, Any]) -> str:
    if isinstance(op, Op):
        d = {"index": op.index, "time_ns": op.time_ns, "process": op.process, "type": op.type,
             "f": op.f, "value": op.value, "error": op.get("error")}
    else:
        d = dict(op)
    parts = [f"#{esc(d.get('index'))} p{esc(d.get('process'))} {esc(d.get('type'))} "
             f"{esc(d.get('f'))}",
             f"t={_secs(d.get('time_ns'))} s",
             f"value: {esc(d.get('value'), 200)}"]
    if d.get("error") is not None:
        parts.append(f"error: {esc(d.get('error'))}")
    return "<br>".join(parts)


def _secs(t: Any) -> str:
    return f"{t / 1e9:.3f}" if isinstance(t, int | float) else "?"


def base_layout(title: str, *, height: int = 360, xtitle: str = "time (s)",
                ytitle: str = "") -> dict[str, Any]:
    return {
        "title": {"text": html.escape(title), "x": 0.01, "font": {"size": 15}},
        "height": height,
        "margin": {"l": 70, "r": 20, "t": 45, "b": 95},
        "xaxis": {"title": {"text": xtitle}, "zeroline": False},
        "yaxis": {"title": {"text": ytitle}, "zeroline": False},
        "hovermode": "closest",
        "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom",
                   "x": 0, "font": {"size": 11}},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
    }


def fault_colors(windows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    fs = sorted({str(w["f"]) for w in windows})
    return {f: FAULT_PALETTE[i % len(FAULT_PALETTE)] for i, f in enumerate(fs)}


def add_fault_bands(fig: Figure, windows: Sequence[Mapping[str, Any]],
                    *, labels: bool = True) -> None:
    """Shaded vertical bands for nemesis fault windows, labelled by fault."""
    if not windows:
        return
    colors = fault_colors(windows)
    shapes = fig["layout"].setdefault("shapes", [])
    ann = fig["layout"].setdefault("annotations", [])
    shown = windows[:MAX_BANDS]
    for i, w in enumerate(shown):
        f = str(w["f"])
        x0 = w["start_ns"] / 1e9
        x1 = max(w["end_ns"], w["start_ns"]) / 1e9
        if x1 - x0 <= 0:
            x1 = x0 + 1e-3
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1,
                       "y0": 0, "y1": 1, "fillcolor": colors[f], "opacity": 0.35,
                       "line": {"width": 0}, "layer": "below"})
        if labels and i < MAX_BAND_LABELS:
            ann.append({"x": x0, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
                        "xanchor": "left", "showarrow": False, "text": esc(f, 40),
                        "font": {"size": 10, "color": "#555"}})
    # a legend entry per fault kind (invisible point)
    for f, c in colors.items():
        fig["data"].append({"type": "scatter", "mode": "markers", "x": [None], "y": [None],
                            "name": f"fault: {esc(f, 40)}", "showlegend": True,
                            "marker": {"symbol": "square", "size": 12, "color": c},
                            "hoverinfo": "skip"})


def timeline(ps: Sequence[Pair], nemesis: Sequence[Op], windows: Sequence[Mapping[str, Any]],
             t_end_ns: int, cap: int) -> tuple[Figure, int]:
    """Invoke→complete segments per process lane, coloured by completion type; nemesis ops on
    lane -1; fault bands. Returns (figure, number of ops drawn)."""
    n = len(ps)
    if n > cap:
        # keep every fail/info op up to half the budget, then sample the ok ones evenly
        odd = [i for i, p in enumerate(ps) if p.type != OK]
        odd = [odd[i] for i in derive.stride_sample(len(odd), cap // 2)]
        oks = [i for i, p in enumerate(ps) if p.type == OK]
        oks = [oks[i] for i in derive.stride_sample(len(oks), cap - len(odd))]
        chosen = sorted(odd + oks)
    else:
        chosen = list(range(n))
    fig: Figure = {"data": [], "layout": base_layout(
        "Operations: invocation → completion, per process", height=420, ytitle="process")}
    for typ in (OK, FAIL, INFO):
        xs: list[float | None] = []
        ys: list[Any] = []
        mx: list[float] = []
        my: list[Any] = []
        texts: list[str] = []
        for i in chosen:
            p = ps[i]
            if p.type != typ:
                continue
            t1 = p.t1_ns if p.t1_ns is not None else t_end_ns
            x0, x1 = p.t0_ns / 1e9, t1 / 1e9
            xs += [x0, x1, None]
            ys += [p.process, p.process, None]
            mx.append(x1)
            my.append(p.process)
            texts.append(op_hover(p.op) + f"<br>latency {(t1 - p.t0_ns) / 1e6:.1f} ms"
                         + ("" if p.t1_ns is not None else " (never completed)"))
        if not mx:
            continue
        fig["data"].append({"type": "scatter", "mode": "lines", "x": xs, "y": ys,
                            "name": typ, "legendgroup": typ, "hoverinfo": "skip",
                            "line": {"color": TYPE_COLORS[typ], "width": 3}})
        fig["data"].append({"type": "scatter", "mode": "markers", "x": mx, "y": my,
                            "name": typ, "legendgroup": typ, "showlegend": False,
                            "text": texts, "hoverinfo": "text",
                            "marker": {"color": TYPE_COLORS[typ], "size": 4}})
    if nemesis:
        shown = [nemesis[i] for i in derive.stride_sample(len(nemesis), 500)]
        fig["data"].append({"type": "scatter", "mode": "markers", "name": "nemesis op",
                            "x": [op.time_ns / 1e9 for op in shown], "y": [-1] * len(shown),
                            "text": [op_hover(op) for op in shown], "hoverinfo": "text",
                            "marker": {"symbol": "triangle-down", "size": 9,
                                       "color": "#d62728"}})
    add_fault_bands(fig, windows)
    fig["layout"]["yaxis"]["autorange"] = "reversed"
    return fig, len(chosen)


def latency(q: Mapping[str, TimeSeries], ps: Sequence[Pair], windows: Sequence[Mapping[str, Any]],
            bucket: float, raw_cap: int) -> Figure:
    fig: Figure = {"data": [], "layout": base_layout(
        f"Latency of ok ops: p50 / p99 per {bucket:g} s window, by f", ytitle="latency (ms)")}
    fig["layout"]["yaxis"].update({"type": "log", "dtick": 1})
    oks = [p for p in ps if p.type == OK and p.t1_ns is not None]
    raw = [oks[i] for i in derive.stride_sample(len(oks), raw_cap)]
    if raw:
        fig["data"].append({"type": "scatter", "mode": "markers", "name": "ok op (sampled)",
                            "x": [p.t1_ns / 1e9 for p in raw if p.t1_ns is not None],
                            "y": [max((p.t1_ns or 0) - p.t0_ns, 1) / 1e6 for p in raw],
                            "marker": {"size": 3, "color": "#bbbbbb"}, "hoverinfo": "skip"})
    for i, f in enumerate(sorted(q)):
        c = F_COLORS[i % len(F_COLORS)]
        ts = q[f]
        for name, dash in (("p50", "solid"), ("p99", "dot")):
            fig["data"].append({"type": "scatter", "mode": "lines+markers",
                                "name": f"{esc(f, 30)} {name}", "x": ts.x, "y": ts.ys[name],
                                "line": {"color": c, "dash": dash}, "marker": {"size": 4}})
    add_fault_bands(fig, windows)
    return fig


def throughput(ts: TimeSeries, windows: Sequence[Mapping[str, Any]], bucket: float) -> Figure:
    fig: Figure = {"data": [], "layout": base_layout(
        f"Throughput: completions per second ({bucket:g} s buckets), by f and type",
        ytitle="ops/s")}
    fs = sorted({c.split(" ")[0] for c in ts.ys})
    fcolor = {f: F_COLORS[i % len(F_COLORS)] for i, f in enumerate(fs)}
    dashes = {OK: "solid", FAIL: "dash", INFO: "dot"}
    for col, ys in ts.ys.items():
        f, _, typ = col.rpartition(" ")
        fig["data"].append({"type": "scatter", "mode": "lines", "name": esc(col, 40),
                            "x": ts.x, "y": ys, "line": {"color": fcolor.get(f, "#333"),
                                                         "dash": dashes.get(typ, "solid")}})
    add_fault_bands(fig, windows)
    return fig


def unseen(u: Unseen, windows: Sequence[Mapping[str, Any]]) -> Figure:
    fig: Figure = {"data": [], "layout": base_layout(
        "Unseen: acknowledged but not yet read messages", ytitle="messages")}
    fig["data"].append({"type": "scatter", "mode": "lines", "name": "all keys",
                        "x": u.x, "y": u.total, "line": {"shape": "hv", "color": "#d62728",
                                                         "width": 2}})
    for i, (k, (x, y)) in enumerate(u.per_key.items()):
        fig["data"].append({"type": "scatter", "mode": "lines", "name": f"key {esc(k, 20)}",
                            "x": x, "y": y, "line": {"shape": "hv", "width": 1,
                                                     "color": F_COLORS[i % len(F_COLORS)]},
                            "visible": "legendonly" if i >= 4 else True})
    add_fault_bands(fig, windows)
    return fig


def offsets_diagram(focus: Focus, obs: Sequence[Obs], window: tuple[int, int],
                    title: str) -> Figure:
    """Offset on x, one row per op that touched the key's window; cells `r<v>`/`w<v>`; the
    anomaly's offsets shaded and its values in red (Jepsen's `orders/<key>.svg`)."""
    xs: dict[str, list[Any]] = {"w": [], "r": [], "hit": []}
    ys: dict[str, list[str]] = {"w": [], "r": [], "hit": []}
    text: dict[str, list[str]] = {"w": [], "r": [], "hit": []}
    hover: dict[str, list[str]] = {"w": [], "r": [], "hit": []}
    lines: dict[str, list[str]] = {"w": [], "r": [], "hit": []}
    rows: list[str] = []
    unknown_x = window[1] + 2
    for ob in obs:
        op = ob.op
        row = f"#{op.index} p{esc(op.process, 12)} {esc(op.f, 10)} {op.type}"
        rows.append(row)
        for kind, o, v in ob.cells:
            hit = (isinstance(o, int) and o in focus.offsets) or \
                derive._hashable(v) in focus.values
            grp = "hit" if hit else kind
            xs[grp].append(o if isinstance(o, int) else unknown_x)
            ys[grp].append(row)
            text[grp].append(f"{kind}{esc(v, 12)}")
            hover[grp].append(f"offset {esc(o)}: {kind} {esc(v, 60)}<br>" + op_hover(op))
            lines[grp].append(TYPE_COLORS.get(op.type, "#999") if op.type != OK else "#ffffff")
    fig: Figure = {"data": [], "layout": base_layout(
        title, height=min(1900, 160 + 28 * max(len(rows), 3)), xtitle="offset", ytitle="")}
    names = {"w": "send (offset known)", "r": "read by poll", "hit": "involved in the anomaly"}
    colors = {"w": "#2ca02c", "r": "#1f77b4", "hit": "#d62728"}
    for grp in ("w", "r", "hit"):
        if not xs[grp]:
            continue
        fig["data"].append({
            "type": "scatter", "mode": "markers+text", "name": names[grp],
            "x": xs[grp], "y": ys[grp], "text": text[grp], "hovertext": hover[grp],
            "hoverinfo": "text", "textposition": "middle center",
            "textfont": {"size": 9, "color": "#ffffff"},
            "marker": {"symbol": "square", "size": 20, "color": colors[grp],
                       "line": {"width": 2, "color": lines[grp]}},
        })
    lay = fig["layout"]
    lay["yaxis"].update({"type": "category", "autorange": "reversed",
                         "categoryorder": "array", "categoryarray": rows,
                         "tickfont": {"size": 9}})
    lay["xaxis"].update({"dtick": 1 if window[1] - window[0] <= 40 else None,
                         "range": [window[0] - 0.6, window[1] + 0.6 + (
                             2 if any(x == unknown_x for v in xs.values() for x in v) else 0)]})
    lay["margin"]["l"] = 150
    shapes = lay.setdefault("shapes", [])
    for o in sorted(focus.offsets):
        if window[0] <= o <= window[1]:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": o - 0.5,
                           "x1": o + 0.5, "y0": 0, "y1": 1, "fillcolor": "#ffcccc",
                           "opacity": 0.5, "line": {"width": 0}, "layer": "below"})
    return fig


def _reg_label(r: RegOp) -> str:
    if r.f == "write":
        return f"w {esc(r.arg, 16)}"
    if r.f == "read":
        return f"r {esc(r.arg, 16)}" if r.type == OK else "r ?"
    if r.f == "cas" and isinstance(r.arg, list | tuple) and len(r.arg) == 2:
        return f"cas {esc(r.arg[0], 8)}→{esc(r.arg[1], 8)}"
    return f"{esc(r.f, 8)} {esc(r.arg, 16)}"


def linearizability(key: Any, ops: Sequence[RegOp], prefix_order: Mapping[int, int],
                    blocked: int | None, t_end_ns: int, cap: int) -> tuple[Figure, int]:
    """Porcupine-like: one bar per op from call to return in its client's row; the longest
    linearizable prefix in green with its linearization order, the op that could not be
    linearized next in red. Returns (figure, ops drawn)."""
    if len(ops) > cap:
        # keep the ops nearest (in call order) to the blocked op, or the last ones
        pos = next((i for i, r in enumerate(ops) if r.index == blocked), len(ops) - 1)
        lo = max(0, min(pos - cap // 2, len(ops) - cap))
        ops = ops[lo: lo + cap]
    cats = {"prefix": ("longest linearizable prefix", "#2ca02c"),
            "blocked": ("cannot be linearized next", "#d62728"),
            "rest": ("not in the prefix", "#bbbbbb")}
    groups: dict[str, list[RegOp]] = {c: [] for c in cats}
    for r in ops:
        if r.index == blocked:
            groups["blocked"].append(r)
        elif r.index in prefix_order:
            groups["prefix"].append(r)
        else:
            groups["rest"].append(r)
    procs = sorted({r.process for r in ops}, key=sort_key)
    fig: Figure = {"data": [], "layout": base_layout(
        f"Key {short(key, 40)}: operations from call to return, per client",
        height=min(1400, 170 + 36 * max(len(procs), 2)), ytitle="client")}
    for c, (name, color) in cats.items():
        g = groups[c]
        if not g:
            continue
        labels = []
        for r in g:
            lab = _reg_label(r)
            if r.index in prefix_order:
                lab = f"{prefix_order[r.index] + 1}. {lab}"
            labels.append(lab)
        fig["data"].append({
            "type": "bar", "orientation": "h", "name": name,
            "y": [f"p{esc(r.process, 12)}" for r in g],
            "base": [r.t0_ns / 1e9 for r in g],
            # an indefinite op may take effect any time after its call: its bar runs to the end
            "x": [max(((r.t1_ns if r.t1_ns is not None and r.type != INFO else t_end_ns)
                       - r.t0_ns) / 1e9, 1e-6) for r in g],
            "text": labels, "textposition": "inside", "insidetextanchor": "middle",
            "hovertext": [
                f"{_reg_label(r)}<br>#{r.index} p{esc(r.process, 12)} {r.type}<br>"
                f"call {r.t0_ns / 1e9:.6f} s, return "
                + (f"{r.t1_ns / 1e9:.6f} s" if r.t1_ns is not None else "never")
                + (" (indefinite: may take effect at any later time)" if r.type == INFO else "")
                + (f"<br>linearized {prefix_order[r.index] + 1}." if r.index in prefix_order
                   else "")
                for r in g],
            "hoverinfo": "text",
            "marker": {"color": color, "opacity": [0.5 if r.type == INFO else 1 for r in g],
                       "line": {"width": 1, "color": "#333"}},
        })
    lay = fig["layout"]
    lay["barmode"] = "overlay"
    lay["yaxis"].update({"type": "category", "categoryorder": "array",
                         "categoryarray": [f"p{esc(p, 12)}" for p in procs]})
    return fig, len(ops)
