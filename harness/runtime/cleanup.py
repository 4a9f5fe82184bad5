"""Stop what a runtime started even when the test process ends badly.

`register(fn)` adds a cleanup that runs at interpreter exit (`atexit`), and — if the process
gets SIGTERM, SIGHUP or SIGINT while the default handler is in place — before the process
exits (the signal is turned into `SystemExit`, so `finally` blocks and atexit run). A cleanup
runs at most once; `unregister` removes it after a normal `stop()`.

SIGKILL cannot be caught: then an iptables chain may be left behind. `IptablesNetwork` removes
chains of dead processes (`HIWATER-<pid>-<n>` whose pid is gone) when it next starts.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable
from types import FrameType

_lock = threading.Lock()
_cleanups: dict[int, Callable[[], None]] = {}
_next = 0
_installed = False
_previous: dict[int, object] = {}


def register(fn: Callable[[], None]) -> int:
    global _next
    with _lock:
        _install()
        _next += 1
        _cleanups[_next] = fn
        return _next


def unregister(token: int) -> None:
    with _lock:
        _cleanups.pop(token, None)


def run_all() -> None:
    """Run (and forget) every registered cleanup, newest first; errors are swallowed."""
    while True:
        with _lock:
            if not _cleanups:
                return
            token = max(_cleanups)
            fn = _cleanups.pop(token)
        with contextlib.suppress(Exception):
            fn()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    run_all()
    prev = _previous.get(signum)
    if callable(prev):
        prev(signum, frame)
        return
    raise SystemExit(128 + signum)


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(run_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still runs
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            current = signal.getsignal(sig)
            if current in (signal.SIG_DFL, None):
                _previous[sig] = current
                signal.signal(sig, _on_signal)
