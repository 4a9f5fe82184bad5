"""Start and stop a private, standalone ZooKeeper server (Debian package `zookeeper`).

Used by tests, the local cluster runtime and `hiwater broker` in development. The server
listens on 127.0.0.1 only, on a free port, with its own data directory, and is stopped by the
PID this module started (SIGTERM, then SIGKILL after a bound).

    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts)

Readiness is `srvr` answering `Mode: standalone` (four-letter words over a plain socket; the
machine has no `nc`). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from broker.runtime.proc import stop_process, wait_ready

ZKSERVER_SH = Path("/usr/share/zookeeper/bin/zkServer.sh")
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
INSTALL_HINT = "apt-get update && apt-get install -y zookeeper  (or run scripts/setup as root)"
LOOPBACK = "127.0.0.1"


class ZooKeeperError(RuntimeError):
    """Base class of this module's errors."""


class ZooKeeperNotInstalled(ZooKeeperError):
    def __init__(self, missing: Path) -> None:
        super().__init__(
            f"ZooKeeper is not installed ({missing} is missing); install the Debian package: "
            f"{INSTALL_HINT}"
        )


class ZooKeeperStartError(ZooKeeperError):
    """The server exited or did not become ready within the bound."""


def zookeeper_installed() -> bool:
    return ZKSERVER_SH.exists() and ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def require_zookeeper() -> None:
    for p in (ZKSERVER_SH, ZOOKEEPER_JAR):
        if not p.exists():
            raise ZooKeeperNotInstalled(p)
    if shutil.which("java") is None:
        raise ZooKeeperNotInstalled(Path("java"))


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on right now (the caller may still lose a race for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_ports(host: str, n: int) -> list[int]:
    """`n` distinct ports nobody listens on right now: all bound at once, so the kernel cannot
    hand the same one out twice (two `free_port` calls in a row can: a broker's listener and
    admin port once collided)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                 for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word (`ruok`, `srvr`, `mntr`...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        total = 0
        while total < 1 << 16:  # bounded: answers are a few hundred bytes
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
            total += len(b)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper on 127.0.0.1, owned by this process.

    `tick_time_ms` sets the session-timeout range (2 to 20 ticks): the default 500 ms lets
    clients negotiate sessions from 1 s, so tests can wait for expiry quickly.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        heap_mb: int = 256,
        start_timeout_s: float = 20.0,
        stop_timeout_s: float = 5.0,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.port = port
        self.host = LOOPBACK
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms or 20 * tick_time_ms
        self.heap_mb = heap_mb
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def hosts(self) -> str:
        """The kazoo `hosts` string."""
        if self.port is None:
            raise ZooKeeperError("server not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _write_config(self, data_dir: Path, port: int) -> Path:
        cfg = data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"minSessionTimeout={self.min_session_timeout_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    f"dataDir={data_dir / 'data'}",
                    f"clientPort={port}",
                    f"clientPortAddress={self.host}",
                    "maxClientCnxns=200",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,stat,mntr,srvr,cons",
                    "",
                ]
            )
        )
        (data_dir / "data").mkdir(exist_ok=True)
        return cfg

    def start(self) -> ZooKeeperServer:
        require_zookeeper()
        if self.running:
            return self
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="hiwater-zk-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fixed_port = self.port is not None
        last: ZooKeeperStartError | None = None
        for _attempt in range(1 if fixed_port else 3):  # a free port may be taken meanwhile
            port = self.port if self.port is not None else free_port(self.host)
            try:
                self._start_on(port)
                return self
            except ZooKeeperStartError as e:
                last = e
                if not fixed_port:
                    self.port = None
        assert last is not None
        raise last

    def _start_on(self, port: int) -> None:
        assert self.data_dir is not None
        cfg = self._write_config(self.data_dir, port)
        self._log = self.data_dir / "zookeeper.out"
        env = dict(os.environ)
        env.update(
            JMXDISABLE="true",
            SERVER_JVMFLAGS=f"-Xmx{self.heap_mb}m",
            ZOO_LOG_DIR=str(self.data_dir),
            ZOO_LOG4J_PROP="INFO,CONSOLE",
        )
        with open(self._log, "ab") as out:
            self._proc = subprocess.Popen(
                [str(ZKSERVER_SH), "start-foreground", str(cfg.resolve())],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # our signals (Ctrl-C) are not its
            )
        self.port = port

        def standalone() -> bool:
            with contextlib.suppress(OSError):
                return "Mode: standalone" in four_letter_word(self.host, port, "srvr", 0.5)
            return False

        outcome = wait_ready(self._proc, standalone, self.start_timeout_s)
        if outcome == "ready":
            return
        if outcome == "exited":
            rc = self._proc.returncode
            self._proc = None
            raise ZooKeeperStartError(
                f"ZooKeeper exited with status {rc} during start on port {port}; "
                f"log tail:\n{self.log_tail()}"
            )
        self.stop()
        raise ZooKeeperStartError(
            f"ZooKeeper on {self.host}:{port} not ready after {self.start_timeout_s}s; "
            f"log tail:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        if self._log is None or not self._log.exists():
            return "(no log)"
        text = self._log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """SIGTERM the PID we started, SIGKILL after `stop_timeout_s`; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, self.stop_timeout_s)

    def kill(self) -> None:
        """SIGKILL (a crash: no clean shutdown); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(self.stop_timeout_s)

    def restart(self) -> None:
        """Stop and start again on the same port and data directory (sessions survive in the
        snapshot, as with a real server restart)."""
        if self.port is None:
            raise ZooKeeperError("server not started")
        self.stop()
        self._start_on(self.port)

    def cleanup(self) -> None:
        """Stop, and remove the data directory if this object created it."""
        self.stop()
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"ZooKeeperServer(hosts={self.host}:{self.port}, pid={self.pid})"
