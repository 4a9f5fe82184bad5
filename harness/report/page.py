"""One self-contained HTML report per run: `render(run_dir) -> run_dir / "report.html"`.

Reads `history.jsonl` (or `history.parquet`), `results.json` (what `harness.checkers.check`
returns plus the campaign's `verdict`, `bad`, `policy`, `options`, `faults`) and
`options.json`; any of them may be missing (a crashed run still gets a report, verdict
unknown). plotly.js is embedded from the installed plotly package (no network at view time);
CSS is inline. Every user-controlled string is escaped. Sizes are bounded: plotted points
are downsampled and each anomaly lists a bounded number of examples and ops (saying how many
more there are).
"""

from __future__ import annotations

import datetime as _dt
import functools
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.checkers.policy import QUEUE_ANOMALIES
from harness.checkers.stats import fault_windows
from harness.checkers.stats import stats as compute_stats
from harness.history import FAIL, INFO, OK, Op, read_history
from harness.report import derive, figures
from harness.report.explain import canonical, explain
from harness.report.figures import compact, esc

#: what `hiwater campaign` exits with for each verdict (Jepsen's convention)
EXIT_CODES: Final = {"valid": 0, "invalid": 1, "unknown": 2}
EXIT_MEANING: Final = {
    "valid": "the checkers found no anomaly that this configuration forbids",
    "invalid": "the checkers found anomalies that this configuration forbids",
    "unknown": "the checkers could not decide (a time limit, a missing or incomplete "
               "history, or a run that crashed)",
}
VERDICT_COLORS: Final = {"valid": "#2e7d32", "invalid": "#c62828", "unknown": "#ef6c00"}

MAX_TIMELINE_OPS: Final = 4000
MAX_RAW_LATENCY_POINTS: Final = 3000
MAX_ERRS_SHOWN: Final = 20
MAX_OPS_PER_ANOMALY: Final = 40
MAX_DIAGRAMS_PER_TYPE: Final = 3
MAX_DIAGRAM_ROWS: Final = 60
DIAGRAM_PAD: Final = 5
DIAGRAM_SPAN: Final = 50
MAX_LIN_KEYS: Final = 5
MAX_LIN_OPS: Final = 300
MAX_PREFIX_ROWS: Final = 20
MAX_FAULT_ROWS: Final = 50
MAX_OPTION_CHARS: Final = 400
VALUE_CHARS: Final = 300

ORDER: Final = (*QUEUE_ANOMALIES, "G0", "G0_process", "G0_realtime", "G1c", "G1c_process",
                "G1c_realtime", "PL_1_cycle_exists", "strong_PL_1_cycle_exists",
                "PL_2_cycle_exists", "strong_PL_2_cycle_exists")


def verdict_of(results: Mapping[str, Any] | None) -> str:
    """valid | invalid | unknown: the campaign's `verdict`, else from `valid?`."""
    if not results:
        return "unknown"
    v = results.get("verdict")
    if v in EXIT_CODES:
        return str(v)
    vv = results.get("valid?")
    if vv is True:
        return "valid"
    if vv is False:
        return "invalid"
    return "unknown"


@dataclass
class Anomaly:
    type: str
    count: int
    errs: list[dict[str, Any]]
    bad: bool
    source: str = "queue"


@dataclass
class _Page:
    parts: list[str] = field(default_factory=list)
    figs: int = 0
    nav: list[tuple[str, str]] = field(default_factory=list)

    def add(self, s: str) -> None:
        self.parts.append(s)

    def section(self, anchor: str, title: str) -> None:
        self.nav.append((anchor, title))
        self.add(f'<h2 id="{html.escape(anchor)}">{html.escape(title)}</h2>')

    def figure(self, fig: Mapping[str, Any], caption: str = "") -> None:
        self.figs += 1
        fid = f"fig-{self.figs}"
        data = _script_json(fig["data"])
        layout = _script_json(fig["layout"])
        self.add(f'<div class="fig" id="{fid}"></div>')
        if caption:
            self.add(f'<p class="caption">{caption}</p>')
        self.add(f"<script>hiwaterPlot({json.dumps(fid)},{data},{layout});</script>")


def _finite(x: Any) -> Any:
    """x with non-finite floats (JSON has none) as null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def _script_json(x: Any) -> str:
    """JSON safe inside a <script> element (no `<`, `>`, `&`, line separators)."""
    s = json.dumps(_finite(x), separators=(",", ":"), default=repr, allow_nan=False)
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


@functools.cache
def plotly_js() -> str:
    """plotly.js from the installed plotly package, safe to inline."""
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js.replace("</script", "<\\/script")


# ---------------------------------------------------------------------------------------
# loading


def _load_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def load_history(run_dir: Path) -> tuple[list[Op], str | None]:
    for name in ("history.jsonl", "history.parquet"):
        p = run_dir / name
        if p.exists():
            try:
                return read_history(p), None
            except Exception as e:  # a corrupt history still gets a report
                return [], f"could not read {name}: {type(e).__name__}: {e}"
    return [], "no history.jsonl in the run directory"


def anomalies_of(results: Mapping[str, Any] | None) -> list[Anomaly]:
    """Every anomaly type in the results, bad ones first, then in Jepsen's order."""
    if not results:
        return []
    q = results.get("queue") if isinstance(results.get("queue"), Mapping) else None
    found: dict[str, Mapping[str, Any]] = {}
    if q and isinstance(q.get("anomalies"), Mapping):
        found.update(q["anomalies"])
    elif isinstance(results.get("anomalies"), Mapping):
        found.update(results["anomalies"])
    bad_raw = results.get("bad")
    if bad_raw is None and q is not None:
        bad_raw = q.get("bad_anomaly_types")
    bad = {canonical(str(b)) for b in (bad_raw or ())}
    out: list[Anomaly] = []
    for t, a in found.items():
        a = a if isinstance(a, Mapping) else {}
        errs = [e for e in a.get("errs", []) if isinstance(e, Mapping)]
        count = a.get("count", len(errs))
        out.append(Anomaly(canonical(str(t)), int(count) if isinstance(count, int) else
                           len(errs), [dict(e) for e in errs], canonical(str(t)) in bad))
    lin = results.get("linearizable")
    if isinstance(lin, Mapping) and lin.get("failures"):
        fails = [dict(f) for f in lin["failures"] if isinstance(f, Mapping)]
        is_bad = ("nonlinearizable" in bad if results.get("bad") is not None
                  else lin.get("valid?") is False)
        out.append(Anomaly("nonlinearizable", len(fails), fails, is_bad, "linearizable"))
    rank = {t: i for i, t in enumerate(ORDER)}
    out.sort(key=lambda a: (not a.bad, rank.get(a.type, len(rank)), a.type))
    return out


def unknown_reasons(results: Mapping[str, Any] | None, history_note: str | None) -> list[str]:
    out = []
    if history_note:
        out.append(history_note)
    if not results:
        out.append("no results.json: the checkers did not run or did not finish")
        return out
    for k in ("error", "reason", "crash", "exception"):
        if results.get(k):
            out.append(f"{k}: {compact(results[k])}")
    lin = results.get("linearizable")
    if isinstance(lin, Mapping):
        if lin.get("unknown_keys"):
            ks = lin["unknown_keys"]
            out.append(f"linearizability undecided for {len(ks)} key(s) (time limit reached): "
                       f"{compact(ks[:20])}" + (" …" if len(ks) > 20 else ""))
        elif lin.get("valid?") == "unknown":
            out.append("the linearizability checker returned unknown")
    q = results.get("queue")
    if isinstance(q, Mapping) and q.get("valid?") == "unknown":
        out.append("the queue checker returned unknown")
    return out


# ---------------------------------------------------------------------------------------
# HTML helpers


def _t(ns: Any) -> str:
    return f"{ns / 1e9:.3f}" if isinstance(ns, int | float) else ""


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """Cells must already be escaped HTML."""
    h = "".join(f"<th>{html.escape(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>'


def _is_op(x: Any) -> bool:
    return isinstance(x, Mapping) and "index" in x and "type" in x and "f" in x


def _op_dict(op: Op | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(op, Op):
        d = {"index": op.index, "time_ns": op.time_ns, "process": op.process,
             "type": op.type, "f": op.f, "value": op.value}
        if op.extra:
            d.update(op.extra)
        return d
    return dict(op)


def op_rows(ops: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for d in ops:
        typ = str(d.get("type", ""))
        err = d.get("error")
        rows.append([
            f'<span class="idx">{esc(d.get("index"))}</span>',
            esc(d.get("process")),
            _t(d.get("time_ns", d.get("time"))),
            esc(d.get("f")),
            f'<code>{esc(d.get("value"), VALUE_CHARS)}</code>',
            f'<span class="t-{html.escape(typ)}">{esc(typ)}</span>'
            + (f' <span class="err">{esc(err, 120)}</span>' if err is not None else ""),
        ])
    return rows


OP_HEADERS: Final = ("index", "process", "time (s)", "f", "value", "type")


def _strip_ops(x: Any) -> Any:
    """An error with its op maps replaced by `op #index` (for the compact details column)."""
    if _is_op(x):
        return f"op #{x.get('index')}"
    if isinstance(x, Mapping):
        return {k: _strip_ops(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_strip_ops(v) for v in x]
    return x


def _ops_in(x: Any, out: dict[int, dict[str, Any]]) -> None:
    if _is_op(x):
        idx = x.get("index")
        if isinstance(idx, int):
            out.setdefault(idx, dict(x))
        return
    if isinstance(x, Mapping):
        for v in x.values():
            _ops_in(v, out)
    elif isinstance(x, list):
        for v in x:
            _ops_in(v, out)


def _cycle_ops(e: Mapping[str, Any]) -> list[Any]:
    return [o.get("index") if isinstance(o, Mapping) else getattr(o, "index", "?")
            for o in e.get("cycle") or []]


def cycle_steps(e: Mapping[str, Any]) -> list[str]:
    """'op #A -ww(key 3: 1 -> 2)-> op #B' for each edge of a cycle anomaly example."""
    from harness.checkers.cycles import step_label

    idx = _cycle_ops(e)
    out = []
    for i, st in enumerate(e.get("steps") or []):
        if i + 1 < len(idx) and isinstance(st, Mapping):
            out.append(f"op #{idx[i]} -{step_label(st)}-> op #{idx[i + 1]}")
    return out


def cycle_line(e: Mapping[str, Any]) -> str:
    """A cycle in one line: #1 -ww-> #3 -wr-> #1."""
    idx = _cycle_ops(e)
    parts = [f"#{idx[0]}"] if idx else []
    for i, st in enumerate(e.get("steps") or []):
        t = st.get("type") if isinstance(st, Mapping) else "?"
        k = f" {st.get('key')}" if isinstance(st, Mapping) and "key" in st else ""
        parts.append(f"-{t}{k}-> #{idx[i + 1] if i + 1 < len(idx) else '?'}")
    return f"cycle of {len(e.get('steps') or [])} op(s): " + " ".join(parts)


_EDGE_COLOURS: Final = {"ww": "#1f77b4", "wr": "#2ca02c", "rw": "#d62728",
                        "process": "#7f7f7f", "realtime": "#9467bd"}


def cycle_svg(e: Mapping[str, Any]) -> str:
    """The cycle's ops on a circle with labelled, coloured arrows (inline SVG)."""
    import math

    idx = _cycle_ops(e)[:-1]
    steps = e.get("steps") or []
    n = len(idx)
    if n < 2 or n > 24 or len(steps) != n:
        return ""
    r = 60 + 12 * n
    w = 2 * r + 160
    cx, cy = w / 2, r + 30
    pts = [(cx + r * math.sin(2 * math.pi * i / n), cy - r * math.cos(2 * math.pi * i / n))
           for i in range(n)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{2 * r + 60:.0f}" '
           'class="cycle" role="img"><defs><marker id="arr" viewBox="0 0 10 10" refX="10" '
           'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']
    for i, st in enumerate(steps):
        (x1, y1), (x2, y2) = pts[i], pts[(i + 1) % n]
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        px, py = -dy / d * 6, dx / d * 6  # a little aside, so a 2-cycle's arrows differ
        sx, sy = x1 + dx * 22 / d + px, y1 + dy * 22 / d + py
        ex, ey = x2 - dx * 22 / d + px, y2 - dy * 22 / d + py
        t = str(st.get("type")) if isinstance(st, Mapping) else "?"
        col = _EDGE_COLOURS.get(t, "#000")
        lab = t + (f" k{st.get('key')}" if isinstance(st, Mapping) and "key" in st else "")
        out.append(f'<line x1="{sx:.1f}" y1="{sy:.1f}" x2="{ex:.1f}" y2="{ey:.1f}" '
                   f'stroke="{col}" stroke-width="2" marker-end="url(#arr)"/>')
        out.append(f'<text x="{(sx + ex) / 2:.1f}" y="{(sy + ey) / 2 - 4:.1f}" fill="{col}" '
                   f'font-size="11" text-anchor="middle">{html.escape(lab[:24])}</text>')
    for (x, y), op in zip(pts, idx, strict=True):
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="20" fill="#fff" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="11" text-anchor="middle">'
                   f"#{html.escape(str(op))}</text>")
    out.append("</svg>")
    return "".join(out)


def describe_err(t: str, e: Mapping[str, Any]) -> str:
    """One line of plain text (escaped) for an anomaly example."""
    k = esc(e.get("key"))
    if t == "inconsistent_offsets":
        return (f"key {k}, offset {esc(e.get('offset'))}: values "
                f"{esc(e.get('values'), 200)}")
    if t == "duplicate":
        return (f"key {k}: value {esc(e.get('value'))} at {esc(e.get('count'))} offsets "
                f"{esc(e.get('offsets'), 200)}")
    if t == "lost_write":
        mr = e.get("max_read")
        return (f"key {k}: value {esc(e.get('value'))} (log index {esc(e.get('index'))}) was "
                f"never read, though index {esc(e.get('max_read_index'))} was read"
                + (f" (by op #{esc(mr.get('index'))})" if isinstance(mr, Mapping) else "")
                + (f"; written by op #{esc(e['writer'].get('index'))}"
                   if isinstance(e.get("writer"), Mapping) else ""))
    if t == "truncated_write":
        w, c = e.get("writer"), e.get("confirmed_by")
        return (f"key {k}: value {esc(e.get('value'))} at offset {esc(e.get('offset'))}, "
                f"but the partition ends at {esc(e.get('end_offset'))}"
                + (f" (op #{esc(c.get('index'))})" if isinstance(c, Mapping) else "")
                + (f"; written by op #{esc(w.get('index'))}" if isinstance(w, Mapping) else ""))
    if t == "G1a":
        return (f"key {k}: value {esc(e.get('value'))} read by op "
                f"#{esc((e.get('reader') or {}).get('index'))}, written by failed op "
                f"#{esc((e.get('writer') or {}).get('index'))}")
    if t == "precommitted_read":
        return (f"key {k}: op #{esc((e.get('op') or {}).get('index'))} read its own "
                f"value {esc(e.get('value'))}")
    if t == "unseen":
        un = e.get("unseen") or {}
        total = sum(v for v in un.values() if isinstance(v, int)) if isinstance(un, Mapping) \
            else "?"
        return (f"{esc(total)} message(s) on {len(un)} key(s) never read by "
                f"t={_t(e.get('time_ns'))} s; per key: {esc(un, 200)}")
    if isinstance(e.get("steps"), list) and isinstance(e.get("cycle"), list):
        return html.escape(cycle_line(e), quote=False)
    if "delta" in e:
        ops = e.get("ops") or ([e["op"]] if _is_op(e.get("op")) else [])
        which = ", ".join(f"#{esc(o.get('index'))}" for o in ops if _is_op(o))
        extra = ""
        if e.get("values") is not None:
            extra += f"; values {esc(e.get('values'), 80)}"
        if e.get("skipped"):
            sk = e["skipped"]
            extra += f"; skipped {len(sk)}: {esc(sk[:10], 80)}" + (" …" if len(sk) > 10 else "")
        return f"key {k}: delta {esc(e.get('delta'))} (ops {which}){extra}"
    return esc(_strip_ops(e), 300)


# ---------------------------------------------------------------------------------------
# focus of an anomaly on keys (for the offset diagrams and ops-involved tables)


def _focus(t: str, errs: Sequence[Mapping[str, Any]]) -> dict[str, derive.Focus]:
    """key -> the offsets and values an anomaly's examples point at (first keys only)."""
    out: dict[str, derive.Focus] = {}

    def get(k: Any) -> derive.Focus | None:
        ks = derive.key_str(k)
        f = out.get(ks)
        if f is None:
            if len(out) >= MAX_DIAGRAMS_PER_TYPE:
                return None
            f = out[ks] = derive.Focus(ks)
        return f

    for e in errs:
        if t == "unseen":
            msgs = e.get("messages") or {}
            if isinstance(msgs, Mapping):
                for k, vs in msgs.items():
                    f = get(k)
                    if f is not None:
                        f.values.update(derive._hashable(v) for v in (vs or ())[:50])
            continue
        if "key" not in e:
            continue
        f = get(e["key"])
        if f is None:
            continue
        if isinstance(e.get("offset"), int):
            f.offsets.add(e["offset"])
        for o in e.get("offsets") or ():
            if isinstance(o, int):
                f.offsets.add(o)
        if "value" in e:
            f.values.add(derive._hashable(e["value"]))
        for v in (e.get("values") or ())[:50]:
            f.values.add(derive._hashable(v))
        for v in (e.get("skipped") or ())[:50]:
            f.values.add(derive._hashable(v))
    return out


def _window(offsets: Iterable[int]) -> tuple[int, int] | None:
    fo = sorted(offsets)
    if not fo:
        return None
    inc = [o for o in fo if o <= fo[0] + DIAGRAM_SPAN]
    return (max(0, fo[0] - DIAGRAM_PAD), inc[-1] + DIAGRAM_PAD)


def _pick_rows(focus: derive.Focus, obs: Sequence[derive.Obs],
               window: tuple[int, int]) -> tuple[list[derive.Obs], int]:
    """The ops (rows) of a diagram: cells inside the window or on a focus value; rows with
    an anomaly cell first, capped; history order."""
    rows: list[tuple[bool, derive.Obs]] = []
    for ob in obs:
        cells = tuple(c for c in ob.cells
                      if (isinstance(c[1], int) and window[0] <= c[1] <= window[1])
                      or derive._hashable(c[2]) in focus.values)
        if not cells:
            continue
        hit = any((isinstance(c[1], int) and c[1] in focus.offsets)
                  or derive._hashable(c[2]) in focus.values for c in cells)
        rows.append((hit, derive.Obs(ob.op, cells)))
    hits = [r for h, r in rows if h]
    rest = [r for h, r in rows if not h]
    chosen = hits[:MAX_DIAGRAM_ROWS]
    room = MAX_DIAGRAM_ROWS - len(chosen)
    if room > 0 and rest:
        chosen += [rest[i] for i in derive.stride_sample(len(rest), room)]
    chosen.sort(key=lambda ob: ob.op.index)
    return chosen, len(rows)


# ---------------------------------------------------------------------------------------
# the page


CSS: Final = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:0;
color:#222;background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:0 20px 40px}
.verdict{color:#fff;padding:22px 28px;margin:0 0 16px}
.verdict .word{font-size:46px;font-weight:800;letter-spacing:.05em}
.verdict .why{font-size:17px;margin-top:6px}
.verdict .run{font-size:13px;opacity:.85;margin-top:8px;word-break:break-all}
nav{background:#fff;border-bottom:1px solid #ddd;padding:8px 20px;position:sticky;top:0;
z-index:10;font-size:13px}
nav a{margin-right:14px;color:#1565c0;text-decoration:none}
h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:34px}
h3{margin-top:26px}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
td code{white-space:pre-wrap;word-break:break-all;font-size:12px}
.fig{background:#fff;border:1px solid #e4e4e4;margin:10px 0}
.caption,.note{font-size:13px;color:#555}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;color:#fff;
margin-left:8px;vertical-align:middle}
.bad{background:#c62828}.allowed{background:#757575}.info{background:#1565c0}
.explain{background:#fff;border-left:4px solid #90caf9;padding:8px 14px;margin:8px 0}
.explain p{margin:4px 0}
.t-ok{color:#1565c0}.t-fail{color:#ad1457}.t-info{color:#e65100}
.err{color:#ad1457;font-size:12px}
.idx{font-family:monospace}
.kv td:first-child{font-weight:600;white-space:nowrap}
#js-errors{color:#c62828}
"""

ERROR_HOOK: Final = """
window.hiwaterErrors=[];
function hiwaterRecordError(msg){
  window.hiwaterErrors.push(String(msg));
  var root=document.documentElement;
  root.setAttribute('data-js-errors',String(window.hiwaterErrors.length));
  var el=document.getElementById('js-errors');
  if(el){el.textContent=window.hiwaterErrors.join('\\n');}
}
window.onerror=function(msg,src,line,col){hiwaterRecordError(msg+' at '+line+':'+col);};
window.addEventListener('unhandledrejection',function(e){hiwaterRecordError('unhandled: '+
  (e.reason&&e.reason.message?e.reason.message:e.reason));});
function hiwaterPlot(id,data,layout){
  try{
    var p=Plotly.newPlot(id,data,layout,{displaylogo:false,responsive:true});
    Promise.resolve(p).then(function(){
      var root=document.documentElement;
      root.setAttribute('data-plots-rendered',
        String(Number(root.getAttribute('data-plots-rendered')||'0')+1));
    },function(e){hiwaterRecordError('plot '+id+': '+e);});
  }catch(e){hiwaterRecordError('plot '+id+': '+e);}
}
"""


def render(run_dir: Path | str, *, out: Path | str | None = None) -> Path:
    """Write `report.html` for a run directory (or to `out`) and return its path."""
    run_dir = Path(run_dir)
    history, history_note = load_history(run_dir)
    results = _load_json(run_dir / "results.json")
    if not isinstance(results, Mapping):
        results = None
    options = _load_json(run_dir / "options.json")
    if not isinstance(options, Mapping):
        options = results.get("options") if results and isinstance(
            results.get("options"), Mapping) else {}
    text = render_html(history, results, options, run_name=run_dir.name,
                       history_note=history_note)
    path = Path(out) if out is not None else run_dir / "report.html"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def render_html(history: Sequence[Op], results: Mapping[str, Any] | None,
                options: Mapping[str, Any] | None = None, *, run_name: str = "",
                history_note: str | None = None) -> str:
    """The report as one HTML string (see `render`)."""
    options = options or {}
    pg = _Page()
    verdict = verdict_of(results)
    anomalies = anomalies_of(results)
    t_end = max((op.time_ns for op in history), default=0)
    windows = fault_windows(history) if history else []
    st = results.get("stats") if results and isinstance(results.get("stats"), Mapping) else None
    if st is None and history:
        st = compute_stats(history)

    _verdict_banner(pg, verdict, results, anomalies, run_name, history_note)
    _summary(pg, anomalies, results)
    _config(pg, history, results, options, st, t_end)
    if history:
        _time_plots(pg, history, windows, t_end, results)
        _faults(pg, st, windows)
    for a in anomalies:
        if a.type == "nonlinearizable":
            continue
        _anomaly_section(pg, a, history)
    _realtime_lag(pg, results)
    _linearizability(pg, history, results, t_end)

    nav = "".join(f'<a href="#{html.escape(a)}">{html.escape(t)}</a>' for a, t in pg.nav)
    title = f"hiwater report — {verdict.upper()} — {run_name}"
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>{html.escape(title)}</title>",
        f"<style>{CSS}</style>",
        f"<script>{ERROR_HOOK}</script>",
        f"<script>{plotly_js()}</script>",
        f'</head><body data-verdict="{verdict}">',
        pg.parts[0],  # the verdict banner comes before the navigation
        f"<nav>{nav}</nav><main>",
        *pg.parts[1:],
        f'<p class="note">Generated {generated}. {pg.figs} plot(s).</p>',
        '<pre id="js-errors"></pre>',
        "<script>if(window.hiwaterErrors.length){hiwaterRecordError('(earlier errors)');}"
        "</script>",
        "</main></body></html>\n",
    ])


def _verdict_banner(pg: _Page, verdict: str, results: Mapping[str, Any] | None,
                    anomalies: Sequence[Anomaly], run_name: str,
                    history_note: str | None) -> None:
    code = results.get("exit_code") if results else None
    if not isinstance(code, int):
        code = EXIT_CODES[verdict]
    why = f"exit code {code}: {EXIT_MEANING[verdict]}"
    bad = [a.type for a in anomalies if a.bad]
    if results and results.get("bad"):
        bad = [canonical(str(b)) for b in results["bad"]]
    if verdict == "invalid" and bad:
        why += ": " + ", ".join(bad)
    reasons = unknown_reasons(results, history_note) if verdict == "unknown" else []
    extra = "".join(f'<div class="why">{html.escape(r)}</div>' for r in reasons)
    pg.add(f'<div class="verdict" id="verdict" style="background:{VERDICT_COLORS[verdict]}">'
           f'<div class="word">{verdict.upper()}</div>'
           f'<div class="why">{html.escape(why)}</div>{extra}'
           f'<div class="run">run {html.escape(run_name)}</div></div>')


def _summary(pg: _Page, anomalies: Sequence[Anomaly], results: Mapping[str, Any] | None) -> None:
    pg.section("summary", "Anomalies")
    if not anomalies:
        pg.add("<p>No anomaly was reported.</p>" if results else
               "<p>No checker results (results.json missing or unreadable).</p>")
        return
    rows = []
    for a in anomalies:
        e = explain(a.type)
        status = ('<span class="badge bad">forbidden</span>' if a.bad else
                  '<span class="badge allowed">allowed by the policy</span>')
        rows.append([f'<a href="#anomaly-{html.escape(a.type)}">{html.escape(e.title)}</a>'
                     f' <code>{html.escape(a.type)}</code>', str(a.count), status,
                     html.escape(e.what)])
    pg.add(table(["anomaly", "count", "status", "meaning"], rows))


def _kv_table(d: Mapping[str, Any]) -> str:
    rows = [[esc(k, 80), f"<code>{esc(v, MAX_OPTION_CHARS)}</code>"]
            for k, v in sorted(d.items(), key=lambda kv: str(kv[0]))]
    return table(["option", "value"], rows, "kv")


def _setting(v: Any) -> str:
    if isinstance(v, list):  # the leaders reported different values over the run
        return "<b>differed:</b> " + ", ".join(esc(x) for x in v)
    return esc(v)


def _topic_settings(pg: _Page, results: Mapping[str, Any] | None) -> None:
    """The replication settings the cluster's leaders reported obeying for the workload's
    topics (results.json `topic_settings`, read from each broker's GET /replicas)."""
    ts = results.get("topic_settings") if results else None
    if not isinstance(ts, Mapping):
        return
    pg.add("<h3>Topic replication settings (as the leaders reported them)</h3>")
    if not ts:
        pg.add('<p class="note">No leader of a workload topic answered GET /replicas.</p>')
        return
    rows = []
    for topic, d in sorted(ts.items()):
        if not isinstance(d, Mapping):
            continue
        rows.append([esc(topic, 80), _setting(d.get("min_insync_replicas")),
                     _setting(d.get("unclean_leader_election_enable")),
                     f"<code>{esc(d.get('topic_config', {}), 200)}</code>",
                     esc(d.get("leaders")), esc(d.get("samples"))])
    pg.add(table(["topic", "min.insync.replicas", "unclean.leader.election.enable",
                  "topic overrides (/config/topics)", "leaders", "leader rows"], rows))


def _config(pg: _Page, history: Sequence[Op], results: Mapping[str, Any] | None,
            options: Mapping[str, Any], st: Mapping[str, Any] | None, t_end: int) -> None:
    pg.section("config", "Configuration")
    if options:
        pg.add(_kv_table(options))
    else:
        pg.add('<p class="note">No options.json.</p>')
    _topic_settings(pg, results)
    if results:
        for k, title in (("policy", "Policy (which anomalies are allowed)"),
                         ("faults", "Faults")):
            v = results.get(k)
            if v is None or (k == "policy" and not v):
                continue
            if k == "faults" and not v:
                pg.add(f"<h3>{html.escape(title)}</h3><p>none</p>")
                continue
            pg.add(f"<h3>{html.escape(title)}</h3>")
            pg.add(_kv_table(v) if isinstance(v, Mapping) else
                   f"<p><code>{esc(v, MAX_OPTION_CHARS)}</code></p>")
    procs = {op.process for op in history if derive.is_client(op.process)}
    c = derive.counts_by_type(history)
    n_nem = sum(1 for op in history if not derive.is_client(op.process))
    pg.add("<h3>History</h3>")
    pg.add(table(["events", "client processes", "duration (s)", "ok", "fail", "info",
                  "nemesis events"],
                 [[str(len(history)), str(len(procs)), _t(t_end), str(c[OK]), str(c[FAIL]),
                   str(c[INFO]), str(n_nem)]]))
    if st and isinstance(st.get("by_f"), Mapping):
        rows = []
        for f, d in st["by_f"].items():
            if not isinstance(d, Mapping):
                continue
            lat = d.get("latency_ms") or {}
            rows.append([esc(f), esc(d.get("count")), esc(d.get(OK)), esc(d.get(FAIL)),
                         esc(d.get(INFO))] + [
                f"{lat[q]:.1f}" if isinstance(lat.get(q), int | float) else ""
                for q in ("p50", "p95", "p99", "max")])
        pg.add(table(["f", "completions", "ok", "fail", "info", "p50 ms", "p95 ms", "p99 ms",
                      "max ms"], rows))


def _time_plots(pg: _Page, history: Sequence[Op], windows: Sequence[Mapping[str, Any]],
                t_end: int, results: Mapping[str, Any] | None) -> None:
    ps = derive.pairs(history)
    nem = derive.nemesis_events(history)
    pg.section("timeline", "Timeline")
    fig, drawn = figures.timeline(ps, nem, windows, t_end, MAX_TIMELINE_OPS)
    cap = ("" if drawn == len(ps) else
           f" Showing {drawn} of {len(ps)} ops (every failed/indefinite op first, ok ops "
           "sampled evenly).")
    pg.figure(fig, "Each line runs from an op's invocation to its completion (blue ok, pink "
              "fail, orange info/indefinite); shaded bands are nemesis faults, triangles on "
              "lane −1 are nemesis operations." + html.escape(cap))
    bucket = derive.bucket_s(t_end / 1e9)
    pg.section("latency", "Latency and throughput")
    pg.figure(figures.latency(derive.latency_quantiles(ps, bucket), ps, windows, bucket,
                              MAX_RAW_LATENCY_POINTS),
              "Lines: p50 (solid) and p99 (dotted) of ok-op latency per window; grey dots: "
              "individual ok ops (sampled).")
    pg.figure(figures.throughput(derive.throughput(ps, bucket, t_end), windows, bucket))
    if any(op.f in derive.QUEUE_FS for op in history):
        q = results.get("queue") if results and isinstance(results.get("queue"),
                                                           Mapping) else None
        u = derive.unseen(history, q)
        pg.section("unseen", "Unseen messages")
        e = explain("unseen")
        pg.add(f'<div class="explain"><p>{html.escape(e.what)}</p>'
               f"<p>{html.escape(e.why)}</p></div>")
        fin = sum(u.final.values())
        pg.figure(figures.unseen(u, windows),
                  html.escape(f"Series {u.source} from the history; at the end {fin} "
                              f"message(s) unseen on {len(u.final)} key(s)."))


def _faults(pg: _Page, st: Mapping[str, Any] | None,
            windows: Sequence[Mapping[str, Any]]) -> None:
    fw = st.get("fault_windows") if st else None
    if not isinstance(fw, list):
        fw = list(windows)
    pg.section("faults", "Fault windows")
    if not fw:
        pg.add("<p>No nemesis faults in this run.</p>")
        return
    rows = []
    for w in fw[:MAX_FAULT_ROWS]:
        if not isinstance(w, Mapping):
            continue
        av = w.get("availability")
        lat = w.get("latency_ms") or {}
        rows.append([esc(w.get("f")), f"<code>{esc(w.get('value'), 120)}</code>",
                     _t(w.get("start_ns")), _t(w.get("end_ns")), esc(w.get("ops", "")),
                     f"{av:.1%}" if isinstance(av, int | float) else "",
                     f"{w['ok_per_s']:.1f}" if isinstance(w.get("ok_per_s"), int | float)
                     else "",
                     f"{lat['p99']:.1f}" if isinstance(lat.get("p99"), int | float) else ""])
    pg.add(table(["fault", "value", "start (s)", "end (s)", "ops invoked", "availability",
                  "ok/s", "p99 ms"], rows))
    if len(fw) > MAX_FAULT_ROWS:
        pg.add(f'<p class="note">… and {len(fw) - MAX_FAULT_ROWS} more fault windows.</p>')
    nf = st.get("no_fault") if st else None
    if isinstance(nf, Mapping) and isinstance(nf.get("availability"), int | float):
        pg.add(f'<p class="note">Outside every fault: availability '
               f'{nf["availability"]:.1%}, {nf.get("ok_per_s", 0):.1f} ok/s.</p>')


def _anomaly_section(pg: _Page, a: Anomaly, history: Sequence[Op]) -> None:
    e = explain(a.type)
    anchor = f"anomaly-{a.type}"
    pg.nav.append((anchor, e.title))
    badge = ('<span class="badge bad">forbidden</span>' if a.bad else
             '<span class="badge allowed">allowed by the policy</span>')
    pg.add(f'<h2 id="{html.escape(anchor)}">{html.escape(e.title)} '
           f'<code>{html.escape(a.type)}</code>{badge}</h2>')
    pg.add(f'<div class="explain"><p><b>What:</b> {html.escape(e.what)}</p>'
           f"<p><b>Why it matters:</b> {html.escape(e.why)}</p></div>")
    shown = a.errs[:MAX_ERRS_SHOWN]
    note = f"{a.count} occurrence(s)"
    if len(a.errs) < a.count:
        note += f"; the checker kept {len(a.errs)} example(s)"
    if len(a.errs) > len(shown):
        note += f"; {len(shown)} listed here, {len(a.errs) - len(shown)} more not listed"
    pg.add(f'<p class="note">{html.escape(note)}.</p>')
    if shown:
        pg.add(table(["#", "example"], [[str(i + 1), describe_err(a.type, x)]
                                        for i, x in enumerate(shown)]))

    cyc = [x for x in shown
           if isinstance(x.get("steps"), list) and isinstance(x.get("cycle"), list)]
    for i, x in enumerate(cyc):
        pg.add(f"<h3>Cycle {i + 1}: {len(x['steps'])} edge(s), in an SCC of "
               f"{esc(x.get('scc_size'))} operation(s)</h3>")
        pg.add(cycle_svg(x))
        items = "".join(f"<li>{html.escape(line, quote=False)}</li>" for line in cycle_steps(x))
        pg.add(f'<ol class="cycle">{items}</ol>')

    # ops: those the examples name, plus those the history shows touching the anomaly
    involved: dict[int, dict[str, Any]] = {}
    _ops_in(a.errs, involved)
    focus = _focus(a.type, a.errs)
    diagrams: list[tuple[derive.Focus, list[derive.Obs], tuple[int, int] | None, int]] = []
    if focus and history:
        wanted = {k: f.values for k, f in focus.items() if f.values}
        located = derive.locate_values(history, wanted)
        wins: dict[str, tuple[int, int]] = {}
        for k, f in focus.items():
            f.offsets |= located.get(k, set())
            w = _window(f.offsets)
            if w is not None:
                wins[k] = w
        obs = derive.observations(history, wins, wanted)
        for k, f in focus.items():
            w = wins.get(k)
            if w is None:
                diagrams.append((f, [], None, 0))
                continue
            rows, total = _pick_rows(f, obs.get(k, []), w)
            diagrams.append((f, rows, w, total))
            for ob in obs.get(k, []):
                if any((isinstance(c[1], int) and c[1] in f.offsets)
                       or derive._hashable(c[2]) in f.values for c in ob.cells):
                    involved.setdefault(ob.op.index, _op_dict(ob.op))
    ops = [involved[i] for i in sorted(involved)]
    pg.add("<h3>Operations involved</h3>")
    if ops:
        pg.add(table(OP_HEADERS, op_rows(ops[:MAX_OPS_PER_ANOMALY]), "ops"))
        if len(ops) > MAX_OPS_PER_ANOMALY:
            pg.add(f'<p class="note">… and {len(ops) - MAX_OPS_PER_ANOMALY} more '
                   "operations.</p>")
        if focus:
            pg.add(f'<p class="note">Ops touching the anomaly are listed for the first '
                   f"{len(focus)} key(s).</p>")
    else:
        pg.add('<p class="note">The checker named no operations for this anomaly.</p>')
    for f, rows, w, total in diagrams:
        if w is None:
            pg.add(f'<p class="note">Key {esc(f.key)}: no offset is known for the values '
                   "involved, so there is no offset diagram.</p>")
            continue
        cap = (f"Key {f.key}, offsets {w[0]}–{w[1]}: one row per operation that sent or "
               "read there (history order); r = read by a poll, w = send with a known "
               "offset; red cells and shaded columns are the anomaly.")
        if total > len(rows):
            cap += f" Showing {len(rows)} of {total} operations."
        pg.figure(figures.offsets_diagram(f, rows, w, f"{e.title}: key {figures.short(f.key, 40)}"),
                  html.escape(cap))


def _realtime_lag(pg: _Page, results: Mapping[str, Any] | None) -> None:
    q = results.get("queue") if results and isinstance(results.get("queue"), Mapping) else None
    if not q or not isinstance(q.get("worst_realtime_lag"), Mapping):
        return
    w = q["worst_realtime_lag"]
    e = explain("realtime_lag")
    pg.section("realtime-lag", "Realtime lag")
    pg.add(f'<div class="explain"><p>{html.escape(e.what)}</p>'
           f"<p>{html.escape(e.why)}</p></div>")
    lag = w.get("lag", (w.get("lag_ns") or 0) / 1e9)
    t = w.get("time", (w.get("time_ns") or 0) / 1e9)
    pg.add(table(["worst lag (s)", "at (s)", "process", "key"],
                 [[esc(f"{lag:.3f}" if isinstance(lag, int | float) else lag),
                   esc(f"{t:.3f}" if isinstance(t, int | float) else t),
                   esc(w.get("process")), esc(w.get("key"))]]))
    causes = q.get("info_txn_causes")
    if causes:
        pg.add("<h3>Causes of indefinite (info) operations</h3><ul>" + "".join(
            f"<li><code>{esc(c, 200)}</code></li>" for c in causes[:20]) + "</ul>")


def _linearizability(pg: _Page, history: Sequence[Op], results: Mapping[str, Any] | None,
                     t_end: int) -> None:
    lin = results.get("linearizable") if results else None
    if not isinstance(lin, Mapping):
        return
    e = explain("nonlinearizable")
    pg.section("anomaly-nonlinearizable", "Linearizability")
    v = lin.get("valid?")
    pg.add(f"<p>Model <code>{esc(lin.get('model'))}</code>: {esc(lin.get('keys'))} key(s), "
           f"{esc(lin.get('ops'))} op(s) checked, {esc(lin.get('dropped_ops'))} dropped "
           f"(failed ops, indefinite reads); result <b>{esc(v)}</b>.</p>")
    if lin.get("unknown_keys"):
        ks = lin["unknown_keys"]
        pg.add(f'<p class="note">Undecided (time limit) for {len(ks)} key(s): '
               f"{esc(ks[:30], 300)}.</p>")
    verdicts = [x for x in lin.get("verdicts") or () if isinstance(x, str)]
    if verdicts:
        items = "".join(f"<li>{html.escape(x, quote=False)}</li>" for x in verdicts[:50])
        more = (f"<li>… and {len(verdicts) - 50} more</li>" if len(verdicts) > 50 else "")
        n_ok = lin.get("linearizable_keys")
        pg.add("<p>Per key" + (f" ({esc(n_ok)} key(s) linearizable)" if n_ok is not None
                               else "") + f':</p><ul class="per-key">{items}{more}</ul>')
    fails = [f for f in lin.get("failures") or () if isinstance(f, Mapping)]
    if not fails:
        return
    pg.add(f'<div class="explain"><p><b>What:</b> {html.escape(e.what)}</p>'
           f"<p><b>Why it matters:</b> {html.escape(e.why)}</p></div>")
    shown = fails[:MAX_LIN_KEYS]
    if len(fails) > len(shown):
        pg.add(f'<p class="note">{len(fails)} keys are not linearizable; the first '
               f"{len(shown)} are shown.</p>")
    reg = derive.register_ops(history, {derive.key_str(f.get("key")) for f in shown})
    for f in shown:
        key = f.get("key")
        prefix = [p for p in f.get("longest_prefix") or () if _is_op(p)]
        blocked = f.get("blocked_op") if _is_op(f.get("blocked_op")) else None
        pg.add(f"<h3>Key {esc(key)}</h3>")
        pg.add(f"<p>{esc(f.get('ops'))} op(s); the longest linearizable prefix has "
               f"{len(prefix)} op(s) and leaves the register at "
               f"<code>{esc(f.get('state_after_prefix'))}</code>; "
               + (f"op #{esc(blocked.get('index'))} "
                  f"(<code>{esc(blocked.get('f'))} {esc(blocked.get('value'))}</code>, process "
                  f"{esc(blocked.get('process'))}) cannot be linearized next."
                  if blocked else "no blocking op was recorded.") + "</p>")
        order = {p["index"]: i for i, p in enumerate(prefix) if isinstance(p.get("index"), int)}
        ops = reg.get(derive.key_str(key), [])
        if ops:
            fig, drawn = figures.linearizability(
                key, ops, order, blocked.get("index") if blocked else None, t_end, MAX_LIN_OPS)
            cap = ("Porcupine-style: each bar spans an op's call to its return in its client's "
                   "row; green bars are the longest linearizable prefix, numbered in "
                   "linearization order; the red bar could not be linearized next; faded bars "
                   "are indefinite (never returned).")
            if drawn < len(ops):
                cap += f" Showing {drawn} of {len(ops)} ops around the failure."
            pg.figure(fig, html.escape(cap))
        rows: list[Mapping[str, Any]] = []
        if blocked:
            rows.append(blocked)
        tail = prefix[-MAX_PREFIX_ROWS:]
        pg.add("<p><b>The op that breaks linearizability</b>, then the end of the prefix "
               "(last linearized first):</p>")
        prow = op_rows(rows)
        for i, r in zip(range(len(prefix), len(prefix) - len(tail), -1),
                        op_rows(list(reversed(tail))), strict=False):
            prow.append([f"{r[0]} <span class='note'>(linearized {i}.)</span>", *r[1:]])
        pg.add(table(OP_HEADERS, prow, "ops"))
        if len(prefix) > len(tail):
            pg.add(f'<p class="note">… and {len(prefix) - len(tail)} earlier prefix ops.</p>')


__all__ = ["EXIT_CODES", "Anomaly", "anomalies_of", "render", "render_html", "verdict_of"]
