"""Stop what a runtime started even when the test process ends badly.

`register(fn)` adds a cleanup that runs at interpreter exit (`atexit`), and — if the process
gets SIGTERM, SIGHUP or SIGINT while the default handler is in place — before the process
exits (the signal is turned into `SystemExit`, so `finally` blocks and atexit run). A cleanup
runs at most once; `unregister` removes it after a normal `stop()`.

SIGKILL cannot be caught: then an iptables chain may be left behind. `IptablesNetwork` removes
chains of dead processes (`HIWATER-<pid>-<n>` whose pid is gone) when it next starts.

Cleanups belong to the process that registered them: a forked child (a multiprocessing pool
worker of `hiwater sim` or of the parallel model checker) forgets them and gets the default
signal handlers back. Before, a pool's `terminate()` sent its workers SIGTERM, and each ran
its parent's cleanups: the parent's cluster stopped and its iptables chain vanished under it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
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


def _forget_in_child() -> None:
    """After fork, in the child: none of the parent's cleanups, the default handlers back."""
    _cleanups.clear()
    for sig, prev in _previous.items():
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(sig, prev)  # type: ignore[arg-type]


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(run_all)
    os.register_at_fork(after_in_child=_forget_in_child)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still runs
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            current = signal.getsignal(sig)
            if current in (signal.SIG_DFL, None):
                _previous[sig] = current
                signal.signal(sig, _on_signal)
