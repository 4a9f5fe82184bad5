"""Child-process helpers shared by the ZooKeeper and toxiproxy launchers (no other imports)."""

from __future__ import annotations

import subprocess
from typing import Any


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
