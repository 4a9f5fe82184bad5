"""`python -m harness.report RUN_DIR... [--index STORE_DIR]`: render reports and an index."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.report import render, render_index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__)
    ap.add_argument("runs", nargs="*", type=Path, help="run directories to render")
    ap.add_argument("--index", type=Path, help="also write STORE_DIR/index.html")
    ap.add_argument("--render-missing", action="store_true",
                    help="with --index: render runs that have no report.html yet")
    a = ap.parse_args(argv)
    if not a.runs and a.index is None:
        ap.error("nothing to do: give run directories and/or --index")
    for r in a.runs:
        print(render(r))
    if a.index is not None:
        print(render_index(a.index, render_missing=a.render_missing))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
