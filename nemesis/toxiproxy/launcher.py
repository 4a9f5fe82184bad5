"""Start a Toxiproxy API server as a child process: the real ``toxiproxy-server`` when one is
installed and configured, else this package's asyncio implementation.

Nothing is ever downloaded. The choice (``mode``):

- ``"builtin"``: always ``python -m nemesis.toxiproxy``;
- ``"real"``: the real binary (``binary=``, else ``$HIWATER_TOXIPROXY_SERVER``, else
  ``toxiproxy-server`` on ``PATH``); an error if there is none;
- ``"auto"``: the real binary if one is found, else the builtin one.

The default mode comes from ``$HIWATER_TOXIPROXY`` and is ``"auto"``, as DESIGN.md asks (a real
Toxiproxy where one is installed, else the project's own).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Literal

from broker.runtime.proc import stop_process, wait_ready
from nemesis.toxiproxy.server import DEFAULT_HOST

Mode = Literal["auto", "builtin", "real"]
REAL_BINARY_NAME = "toxiproxy-server"
MODE_ENV = "HIWATER_TOXIPROXY"
BINARY_ENV = "HIWATER_TOXIPROXY_SERVER"
_MODES: tuple[Mode, ...] = ("auto", "builtin", "real")


class ToxiproxyLaunchError(RuntimeError):
    pass


def find_real_server(path: str | None = None) -> str | None:
    """The real ``toxiproxy-server``: ``$HIWATER_TOXIPROXY_SERVER`` if set and executable, else
    the first on ``path`` (default ``$PATH``)."""
    configured = os.environ.get(BINARY_ENV)
    if configured:
        return configured if shutil.which(configured) else None
    return shutil.which(REAL_BINARY_NAME, path=path)


def default_mode() -> Mode:
    value = os.environ.get(MODE_ENV, "auto")
    for mode in _MODES:
        if value == mode:
            return mode
    raise ToxiproxyLaunchError(f"${MODE_ENV} must be one of {', '.join(_MODES)}, not {value!r}")


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port that was free on ``host`` a moment ago (the child binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def api_ready(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when ``GET /version`` answers 200."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", "/version")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


@dataclass
class LaunchedToxiproxy:
    """A running Toxiproxy API server process."""

    kind: Literal["builtin", "real"]
    host: str
    port: int
    process: subprocess.Popen[bytes]
    log_file: IO[bytes] = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def output(self) -> str:
        """What the server wrote to stdout and stderr so far."""
        self.log_file.flush()
        self.log_file.seek(0)
        return self.log_file.read().decode("utf-8", "replace")

    def stop(self, timeout_s: float = 10.0) -> None:
        stop_process(self.process, timeout_s)
        self.log_file.close()

    def __enter__(self) -> LaunchedToxiproxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def server_command(
    kind: Literal["builtin", "real"], host: str, port: int, binary: str | None
) -> list[str]:
    if kind == "real":
        if binary is None:
            raise ToxiproxyLaunchError("no toxiproxy-server binary")
        return [binary, "-host", host, "-port", str(port)]
    return [sys.executable, "-m", "nemesis.toxiproxy", "-host", host, "-port", str(port)]


def launch(
    host: str = DEFAULT_HOST,
    port: int | None = None,
    *,
    mode: Mode | None = None,
    binary: str | None = None,
    path: str | None = None,
    startup_timeout_s: float = 15.0,
) -> LaunchedToxiproxy:
    """Start a server on ``host:port`` (a free port if ``None``) and wait until its API
    answers. See the module docstring for ``mode``; ``path`` overrides ``$PATH`` for finding
    the real binary."""
    chosen = default_mode() if mode is None else mode
    real = binary if binary is not None else find_real_server(path)
    if chosen == "real" and real is None:
        raise ToxiproxyLaunchError(
            f"mode 'real' but no {REAL_BINARY_NAME} found (set ${BINARY_ENV} or PATH)"
        )
    kind: Literal["builtin", "real"] = "real" if chosen != "builtin" and real else "builtin"
    if port is None:
        port = free_port(host)
    env = dict(os.environ)
    env.setdefault("LOG_LEVEL", "warn" if kind == "real" else "warning")
    log_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by LaunchedToxiproxy.stop)
    process = subprocess.Popen(
        server_command(kind, host, port, real),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env=env,
    )
    launched = LaunchedToxiproxy(kind, host, port, process, log_file)
    outcome = wait_ready(process, lambda: api_ready(host, port), startup_timeout_s)
    if outcome == "ready":
        return launched
    if outcome == "exited":
        output = launched.output()
        launched.stop()
        raise ToxiproxyLaunchError(
            f"{kind} toxiproxy server exited with {process.returncode}: {output}"
        )
    output = launched.output()
    with contextlib.suppress(OSError):
        launched.stop()
    raise ToxiproxyLaunchError(
        f"{kind} toxiproxy server not ready within {startup_timeout_s} s: {output}"
    )
