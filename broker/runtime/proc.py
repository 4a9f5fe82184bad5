"""Child-process helpers shared by the ZooKeeper and toxiproxy launchers (no other imports)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any, Literal


def wait_ready(
    proc: subprocess.Popen[Any],
    ready: Callable[[], bool],
    timeout_s: float,
    interval_s: float = 0.05,
) -> Literal["ready", "exited", "timeout"]:
    """Poll every ``interval_s`` until ``ready()`` holds, ``proc`` exits (checked first) or
    ``timeout_s`` passes; says which. The caller reports and cleans up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return "exited"
        if ready():
            return "ready"
        time.sleep(interval_s)
    return "timeout"


def stop_process(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM ``proc`` if it still runs, wait ``timeout_s``, then SIGKILL and wait again.

    A process that already exited is left alone (``Popen`` ignores signals to a reaped child).
    The last wait raises ``subprocess.TimeoutExpired`` if even SIGKILL did not end it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)
