"""A live display for a running campaign (rich), or plain lines when not on a terminal.

    with Progress(total_s=300, title="queue / partition") as prog:
        while running:
            prog.update({"ok": n_ok, "fail": n_fail, "info": n_info},
                        nemesis_state="partition-network [n1] | [n2 n3]",
                        anomalies={"lost_write": 1})     # optional, when cheap
            time.sleep(0.5)

`counters` are cumulative completion counts: flat (`{"ok": .., "fail": .., "info": ..}`) or per
`f` (`{"send": {"ok": ..}, "poll": {...}}`); ops/s is measured over the last `rate_window_s`.
`nemesis_state` is whatever describes the current fault (a string, a list of active faults, a
mapping, or None for no fault). On a terminal a rich `Live` panel is redrawn; otherwise one
plain line is printed every `interval_s` seconds, whenever the fault changes, and at the end.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

TYPES: Final = ("ok", "fail", "info")


def _fmt_s(s: float) -> str:
    s = max(0, int(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def totals(counters: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """(ok/fail/info totals, per-f counts) of flat or per-f counters."""
    tot = dict.fromkeys(TYPES, 0)
    by_f: dict[str, dict[str, int]] = {}
    for k, v in counters.items():
        if isinstance(v, Mapping):
            d = {t: int(v.get(t, 0) or 0) for t in TYPES}
            by_f[str(k)] = d
            for t in TYPES:
                tot[t] += d[t]
        elif k in tot and isinstance(v, int | float):
            tot[k] += int(v)
    return tot, by_f


def describe_nemesis(state: Any) -> str:
    if state is None or state == "" or state == [] or state == {}:
        return "no fault"
    if isinstance(state, str):
        return state
    if isinstance(state, list | tuple | set | frozenset):
        return ", ".join(describe_nemesis(s) for s in state)
    if isinstance(state, Mapping):
        return ", ".join(f"{k}={describe_nemesis(v) if isinstance(v, Mapping | list) else v}"
                         for k, v in state.items())
    try:
        return json.dumps(state, default=str)
    except (TypeError, ValueError):
        return str(state)


class Progress:
    """See the module docstring. `live=None` picks rich's live display on a terminal."""

    def __init__(
        self,
        total_s: float,
        *,
        title: str = "campaign",
        console: Console | None = None,
        live: bool | None = None,
        interval_s: float = 10.0,
        rate_window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total_s = float(total_s)
        self.title = title
        self.console = console if console is not None else Console(stderr=True)
        self.live = self.console.is_terminal if live is None else live
        self.interval_s = interval_s
        self.rate_window_s = rate_window_s
        self._clock = clock
        self._t0: float | None = None
        self._samples: deque[tuple[float, int, int]] = deque()  # (t, completions, ok)
        self.totals: dict[str, int] = dict.fromkeys(TYPES, 0)
        self.by_f: dict[str, dict[str, int]] = {}
        self.nemesis = "no fault"
        self.anomalies: dict[str, int] = {}
        #: log records at ERROR or above from the client libraries (in logs/clients.log)
        self.client_errors: int | None = None
        self._live: Live | None = None
        self._last_line = -1e18
        self._lines = 0

    # -- lifecycle

    def start(self) -> Progress:
        if self._t0 is None:
            self._t0 = self._clock()
        if self.live and self._live is None:
            self._live = Live(self.renderable(), console=self.console, refresh_per_second=4,
                              transient=False)
            self._live.start()
        return self

    def stop(self) -> None:
        if self._live is not None:
            self._live.update(self.renderable(), refresh=True)
            self._live.stop()
            self._live = None
        elif self._t0 is not None:
            self._print_line(final=True)

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- state

    @property
    def elapsed_s(self) -> float:
        return 0.0 if self._t0 is None else self._clock() - self._t0

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.total_s - self.elapsed_s)

    def rates(self) -> tuple[float, float]:
        """(completions/s, ok/s) over the rate window."""
        if len(self._samples) < 2:
            return (0.0, 0.0)
        t0, n0, ok0 = self._samples[0]
        t1, n1, ok1 = self._samples[-1]
        dt = t1 - t0
        if dt <= 0:
            return (0.0, 0.0)
        return ((n1 - n0) / dt, (ok1 - ok0) / dt)

    def update(self, counters: Mapping[str, Any], nemesis_state: Any = None,
               anomalies: Mapping[str, int] | None = None,
               client_errors: int | None = None) -> None:
        if self._t0 is None:
            self.start()
        now = self._clock()
        self.totals, self.by_f = totals(counters)
        n = sum(self.totals.values())
        self._samples.append((now, n, self.totals["ok"]))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.rate_window_s:
            self._samples.popleft()
        new_nem = describe_nemesis(nemesis_state)
        changed = new_nem != self.nemesis
        self.nemesis = new_nem
        if anomalies is not None:
            self.anomalies = {str(k): int(v) for k, v in anomalies.items() if v}
        if client_errors is not None:
            self.client_errors = int(client_errors)
        if self._live is not None:
            self._live.update(self.renderable())
        elif changed or now - self._last_line >= self.interval_s:
            self._print_line()

    # -- output

    def line(self, *, final: bool = False) -> str:
        ops, ok_s = self.rates()
        t = self.totals
        parts = [
            f"[{self.title}] {'done' if final else 'elapsed'} "
            f"{_fmt_s(self.elapsed_s)}/{_fmt_s(self.total_s)}",
            f"remaining {_fmt_s(self.remaining_s)}",
            f"ok {t['ok']} fail {t['fail']} info {t['info']}",
            f"{ops:.1f} ops/s ({ok_s:.1f} ok/s)",
        ]
        if self.client_errors is not None:
            parts.append(f"client errors {self.client_errors}")
        parts.append(f"nemesis: {self.nemesis}")
        if self.anomalies:
            parts.append("anomalies: " + ", ".join(f"{k}={v}"
                                                    for k, v in sorted(self.anomalies.items())))
        return " | ".join(parts)

    def _print_line(self, *, final: bool = False) -> None:
        self._last_line = self._clock()
        self._lines += 1
        self.console.print(self.line(final=final), markup=False, highlight=False,
                           soft_wrap=True)

    def renderable(self) -> Any:
        ops, ok_s = self.rates()
        el = self.elapsed_s
        head = Table.grid(padding=(0, 2))
        head.add_row(Text(self.title, style="bold"),
                     ProgressBar(total=max(self.total_s, 1e-9), completed=min(el, self.total_s),
                                 width=40),
                     Text(f"{_fmt_s(el)} / {_fmt_s(self.total_s)}  "
                          f"(remaining {_fmt_s(self.remaining_s)})"))
        t = self.totals
        stats = Table.grid(padding=(0, 2))
        stats.add_row(Text(f"ok {t['ok']}", style="green"),
                      Text(f"fail {t['fail']}", style="magenta"),
                      Text(f"info {t['info']}", style="yellow"),
                      Text(f"{ops:.1f} ops/s ({ok_s:.1f} ok/s)"),
                      *([] if self.client_errors is None else [Text(
                          f"client errors {self.client_errors} (logs/clients.log)",
                          style="dim" if not self.client_errors else "yellow")]))
        parts: list[Any] = [head, stats]
        if self.by_f:
            ft = Table("f", "ok", "fail", "info", box=None, padding=(0, 2),
                       header_style="bold dim")
            for f in sorted(self.by_f):
                d = self.by_f[f]
                ft.add_row(f, str(d["ok"]), str(d["fail"]), str(d["info"]))
            parts.append(ft)
        nem_style = "dim" if self.nemesis == "no fault" else "bold red"
        parts.append(Text.assemble(("nemesis: ", "bold"), (self.nemesis, nem_style)))
        if self.anomalies:
            parts.append(Text.assemble(
                ("anomalies so far: ", "bold"),
                (", ".join(f"{k}={v}" for k, v in sorted(self.anomalies.items())), "red")))
        return Group(*parts)
