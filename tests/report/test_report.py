"""Reports rendered from hand-made histories and results: content, escaping, bounds, index."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from harness.checkers.policy import (
    ALWAYS_ALLOWED,
    QUEUE_ANOMALIES,
    SUBSCRIBE_ALLOWED,
    WW_DEPS_ALLOWED,
)
from harness.history import Op
from harness.report import EXPLANATIONS, explain, render, render_html, render_index, verdict_of
from harness.report.explain import canonical
from harness.report.page import MAX_ERRS_SHOWN, MAX_OPS_PER_ANOMALY, MAX_TIMELINE_OPS
from tests.report.conftest import RUNS, report_path
from tests.report.runs import (
    HOSTILE,
    S,
    write_run,
)

EXTERNAL = re.compile(
    r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*\b(?:src|href|data)\s*=\s*"
    r"[\"']?\s*(?:https?:)?//", re.I)


def _report(store: Path, name: str) -> str:
    return report_path(store, name).read_text(encoding="utf-8")


ALL = tuple(RUNS)


@pytest.mark.parametrize("name", ALL)
def test_self_contained(store: Path, name: str) -> None:
    text = _report(store, name)
    assert not EXTERNAL.findall(text), EXTERNAL.findall(text)[:3]
    assert "plotly.js v" in text  # the library is inlined
    assert "cdn.plot.ly" not in text.split("plotly.js v", 1)[0]
    assert len(text) < 8_000_000


@pytest.mark.parametrize("name", ALL)
def test_verdict_first(store: Path, name: str) -> None:
    text = _report(store, name)
    want = RUNS[name]
    code = {"valid": 0, "invalid": 1, "unknown": 2}[want]
    body = text.split("<body", 1)[1]
    first = re.search(r'<div class="verdict"[^>]*><div class="word">(\w+)</div>', body)
    assert first is not None and first.group(1) == want.upper()
    assert body.index('class="verdict"') < body.index("<nav>")
    assert f"exit code {code}:" in body
    assert f'data-verdict="{want}"' in text


def test_valid_report(store: Path) -> None:
    text = _report(store, "valid")
    assert "No anomaly was reported" in text
    for s in ("start-partition", "kill-node", "Timeline", "Latency and throughput",
              "Unseen messages", "Fault windows", "Configuration", "&quot;partition&quot;"):
        assert s in text, s
    assert text.count("hiwaterPlot(\"fig-") >= 4


def test_lost_write_and_duplicate(store: Path) -> None:
    text = _report(store, "lost")
    for t in ("lost_write", "duplicate"):
        assert f'id="anomaly-{t}"' in text
        assert explain(t).what.split(",")[0] in text
    sec = text.split('id="anomaly-lost_write"', 1)[1].split("<h2", 1)[0]
    assert "forbidden" in sec
    assert "value 2 (log index 1) was never read" in sec
    # the lost value's writer (#9) and the reader that moved past it (#17) are listed
    assert re.search(r'<span class="idx">9</span>', sec)
    assert re.search(r'<span class="idx">17</span>', sec)
    assert "Lost write: key 0" in sec  # an offset diagram
    dup = text.split('id="anomaly-duplicate"', 1)[1].split("<h2", 1)[0]
    assert "value 3 at 2 offsets [2,3]" in dup
    assert "Duplicate: key 0" in dup


def test_hostile_values_are_escaped(store: Path) -> None:
    text = _report(store, "lost")
    assert HOSTILE not in text
    assert html.escape(HOSTILE) in text  # in the op tables, options and fault values
    # inside the plot JSON, `<` never appears raw
    for m in re.finditer(r"hiwaterPlot\((.*?)\);</script>", text):
        assert "<" not in m.group(1)


def test_linearizability_report(store: Path) -> None:
    text = _report(store, "lin")
    sec = text.split('id="anomaly-nonlinearizable"', 1)[1]
    assert "Key 0" in sec
    assert "longest linearizable prefix has 2 op(s)" in sec
    assert "op #9" in sec and "cannot be linearized next" in sec
    assert "(linearized 2.)" in sec and "(linearized 1.)" in sec
    assert "Key 0: operations from call to return" in sec
    assert "Key 1" not in sec  # key 1 is linearizable


def test_unknown_reports(store: Path) -> None:
    text = _report(store, "unknown")
    assert "linearizability undecided for 1 key(s)" in text
    crashed = _report(store, "crashed")
    assert "no results.json" in crashed


def test_missing_everything(tmp_path: Path) -> None:
    p = render(tmp_path)
    text = p.read_text()
    assert "UNKNOWN" in text and "no history.jsonl" in text


def test_verdict_of() -> None:
    assert verdict_of(None) == "unknown"
    assert verdict_of({"valid?": True}) == "valid"
    assert verdict_of({"valid?": False}) == "invalid"
    assert verdict_of({"valid?": "unknown"}) == "unknown"
    assert verdict_of({"valid?": True, "verdict": "invalid"}) == "invalid"


def test_explanations_cover_every_anomaly() -> None:
    names = set(QUEUE_ANOMALIES) | ALWAYS_ALLOWED | SUBSCRIBE_ALLOWED | WW_DEPS_ALLOWED | {
        "realtime_lag", "nonlinearizable", "cycle_search_timeout", "empty_transaction_graph"}
    missing = sorted(n for n in names if n not in EXPLANATIONS)
    assert not missing
    for e in EXPLANATIONS.values():
        assert e.title and len(e.what) > 40 and len(e.why) > 30
    assert canonical(":lost-write") == "lost_write"
    assert canonical("g1a") == "G1a"
    assert canonical("G1c-realtime") == "G1c_realtime"
    assert canonical("realtime lag") == "realtime_lag"
    assert "No plain-language explanation" in explain("made-up").why


def test_bounded_sizes(tmp_path: Path) -> None:
    """A long history is downsampled; a long anomaly list is capped and says how many more."""
    ops: list[Op] = []
    n = MAX_TIMELINE_OPS * 2
    for i in range(n):
        ops.append(Op(len(ops), i * S // 1000, i % 8, "invoke", "send", [["send", i % 5, i]]))
        typ = "ok" if i % 10 else "info"
        ops.append(Op(len(ops), i * S // 1000 + 500_000, i % 8, typ, "send",
                      [["send", i % 5, [i // 5, i]]]))
    errs = [{"key": 0, "value": i, "writer": {"index": 2 * i + 1, "time_ns": 0, "process": 0,
                                                "type": "fail", "f": "send", "value": i},
             "reader": {"index": 2 * i + 3, "time_ns": 0, "process": 1, "type": "ok",
                        "f": "poll", "value": [["poll", {"0": [[i, i]]}]]}}
            for i in range(100)]
    results = {"valid?": False, "verdict": "invalid", "bad": ["G1a"],
               "queue": {"valid?": False, "anomaly_types": ["G1a"],
                         "bad_anomaly_types": ["G1a"],
                         "anomalies": {"G1a": {"count": 250, "errs": errs}}}}
    write_run(tmp_path, ops, results, {})
    text = render(tmp_path).read_text()
    assert f"Showing {MAX_TIMELINE_OPS} of {n} ops" in text
    assert "250 occurrence(s); the checker kept 100 example(s); " \
           f"{MAX_ERRS_SHOWN} listed here, {100 - MAX_ERRS_SHOWN} more not listed" in text
    sec = text.split('id="anomaly-G1a"', 1)[1]
    assert sec.count('<span class="idx">') == MAX_OPS_PER_ANOMALY
    assert re.search(r"… and \d+ more operations", sec)
    assert len(text) < 8_000_000


def test_render_html_without_history() -> None:
    text = render_html([], {"valid?": True, "verdict": "valid"}, {"a": HOSTILE})
    assert "VALID" in text and HOSTILE not in text


def test_index(store: Path) -> None:
    p = render_index(store)
    text = p.read_text()
    rows = re.findall(r'<tr data-verdict="(\w+)">(.*?)</tr>', text)
    assert len(rows) == len(ALL)  # `latest` (a symlink) is not listed twice
    names = [re.findall(r">(\w+)/\d{8}T", r)[0] for _v, r in rows]
    by_name = dict(zip(names, rows, strict=True))
    assert by_name["valid"][0] == "valid"
    assert by_name["lost"][0] == "invalid"
    assert by_name["unknown"][0] == "unknown"
    assert 'href="lost/20260102T120000.000+0000/report.html"' in text
    assert '<b class="forbidden">lost_write: 1</b>' in by_name["lost"][1]
    assert "2026-01-05" in text
    assert names == ["crashed", "unknown", "lin", "lost", "valid"]  # newest first
    assert HOSTILE not in text
    json.dumps(text)  # plain text, nothing odd


def test_main_renders_runs_and_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.report.__main__ import main

    run = tmp_path / "q" / "20260201T000000.000+0000"
    write_run(run, [Op(0, 0, 0, "invoke", "send", [["send", 0, 1]])], None, {})
    assert main([str(run), "--index", str(tmp_path)]) == 0
    assert (run / "report.html").exists() and (tmp_path / "index.html").exists()
    assert str(run / "report.html") in capsys.readouterr().out


def test_script_json_is_inert_and_exact() -> None:
    from harness.report.page import _script_json

    x = {"a": ["NaN Infinity", float("nan"), float("inf"), 1.5, "</script><b>&", "\u2028"]}
    s = _script_json(x)
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": ["NaN Infinity", None, None, 1.5, "</script><b>&", "\u2028"]}
