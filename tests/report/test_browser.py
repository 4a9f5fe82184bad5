"""The reports in a real headless browser (Debian `chromium`): every plot renders, no JS error.

`chromium --headless --dump-dom` loads each report and prints the DOM after the load event.
Plotly builds `<div class="plot-container plotly">` with `<svg class="main-svg">` layers for
every plot it draws; the report's own hook counts drawn plots in `data-plots-rendered` and
records `window.onerror` / unhandled rejections in `data-js-errors` and `#js-errors`.
Console messages go to stderr (`--enable-logging=stderr --v=0`), and every network request
is routed to a dead proxy, so a page that tried to load anything remote would log an error.

Chromium is installed with apt-get when missing (we run as root; `scripts/setup` lists it).
Without it the test is skipped, except under CI (env `CI` set), where that is a failure.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.report.conftest import RUNS, report_path
from tests.report.runs import HOSTILE

BROWSER_TIMEOUT_S = 300  # per page; a loaded 2-core machine can take a minute


def _find() -> str | None:
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _find()
    why = ""
    if path is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-qq", "chromium"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True,
                           timeout=600)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        why = (r.stderr or r.stdout).strip()[-300:]
        path = _find()
    elif path is None:
        why = "not root or no apt-get"
    if path is None:
        msg = f"chromium is not installed and could not be installed ({why})"
        if os.environ.get("CI"):
            pytest.fail(msg + "; CI must have it (scripts/setup installs it)")
        pytest.skip(msg)
    return path


def _dump(chromium: str, page: Path) -> tuple[str, str]:
    """(dumped DOM, stderr) of one page, in a throwaway profile."""
    env = {**os.environ, "DBUS_SESSION_BUS_ADDRESS": "/dev/null"}
    with tempfile.TemporaryDirectory(prefix="hiwater-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--mute-audio",
               f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9",
               "--proxy-bypass-list=<-loopback>", "--enable-logging=stderr", "--v=0",
               "--dump-dom", page.resolve().as_uri()]
        # a session of its own, so a timeout can end the renderer and GPU children too
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
        try:
            return p.communicate(timeout=BROWSER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _out, err = p.communicate()
            return "", err + f"\n(timed out after {BROWSER_TIMEOUT_S} s)"
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _dump_all(chromium: str, pages: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """name -> (dumped DOM, stderr); as many browsers at once as there are CPUs."""
    workers = max(1, min(len(pages), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as ex:
        futs = {name: ex.submit(_dump, chromium, page) for name, page in pages.items()}
        return {name: f.result() for name, f in futs.items()}


def _console_errors(stderr: str) -> list[str]:
    bad = []
    for line in stderr.splitlines():
        console_error = "CONSOLE" in line and re.search(r"error|fail", line, re.I)
        if "Uncaught" in line or console_error or "net::ERR_" in line:
            bad.append(line)
    return bad


def test_reports_render_in_chromium(chromium: str, store: Path) -> None:
    # one report per kind of run (the crashed run's report is the unknown one's, simpler;
    # the index has no script and is checked in test_report)
    pages = {name: report_path(store, name) for name in ("valid", "lost", "lin", "unknown")}
    dumps = _dump_all(chromium, pages)
    problems: list[str] = []
    for name, (dom, err) in dumps.items():
        if "</html>" not in dom:
            problems.append(f"{name}: no DOM dumped; stderr tail: {err[-800:]}")
            continue
        for line in _console_errors(err):
            problems.append(f"{name}: console: {line}")
        src = pages[name].read_text(encoding="utf-8")
        expected = src.count('hiwaterPlot("fig-')
        containers = len(re.findall(r'<div class="plot-container plotly"', dom))
        svgs = len(re.findall(r'<svg class="main-svg"', dom))
        rendered = re.search(r'data-plots-rendered="(\d+)"', dom)
        if containers != expected:
            problems.append(f"{name}: {containers} plot containers, expected {expected}")
        if svgs < expected:
            problems.append(f"{name}: {svgs} svg layers for {expected} plots")
        if expected and (rendered is None or int(rendered.group(1)) != expected):
            problems.append(f"{name}: plots rendered {rendered and rendered.group(1)} of "
                            f"{expected}")
        if re.search(r"<html[^>]*data-js-errors=", dom):
            m = re.search(r'<pre id="js-errors">(.*?)</pre>', dom, re.S)
            problems.append(f"{name}: JS errors: {m.group(1)[:500] if m else '?'}")
        if HOSTILE in dom:
            problems.append(f"{name}: the hostile value became markup")
        if not re.search(r'<div class="verdict"[^>]*><div class="word">'
                         + RUNS[name].upper(), dom):
            problems.append(f"{name}: verdict banner missing")
    assert not problems, "\n".join(problems)

    lost = dumps["lost"][0]
    assert html.escape(HOSTILE, quote=False) in lost  # shown as text
    # plotly drew the offset diagrams' cells and legends (text inside the SVG)
    assert re.search(r'class="legendtext"[^>]*>involved in the anomaly<', lost)
    assert re.search(r">w2</text>", lost)
    lin = dumps["lin"][0]
    assert re.search(r'class="legendtext"[^>]*>cannot be linearized next<', lin)
    valid = dumps["valid"][0]
    assert re.search(r">start-partition</text>", valid)  # a labelled fault band
