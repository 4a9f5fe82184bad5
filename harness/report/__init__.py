"""Reports: one self-contained HTML page per run, an index across runs, a live progress view.

    from harness.report import render, render_index
    render(Path("store/queue/20260101T120000.000+0000"))   # -> .../report.html
    render_index(Path("store"))                            # -> store/index.html

    from harness.report.progress import Progress
    with Progress(total_s=300) as prog:
        prog.update({"ok": 10, "fail": 0, "info": 1}, nemesis_state="partition-network")
"""

from __future__ import annotations

from harness.report.explain import EXPLANATIONS, Explanation, explain
from harness.report.index import render_index
from harness.report.page import EXIT_CODES, render, render_html, verdict_of

__all__ = [
    "EXIT_CODES",
    "EXPLANATIONS",
    "Explanation",
    "explain",
    "render",
    "render_html",
    "render_index",
    "verdict_of",
]
