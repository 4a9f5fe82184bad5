"""Where the client libraries' own logs go: a file in the run directory, never the terminal.

librdkafka (under confluent-kafka) writes its log lines (`%6|...|FAIL|...Disconnected`) straight
to stderr unless the client's config has a `logger`; then it hands each line to that Python
logger instead. kafka-python and kazoo log through the `logging` module (`kafka.*`,
`kazoo.*`). Under faults every expected disconnect is such a line, so a campaign collects them
all in `logs/clients.log` and counts the errors for its progress line:

    with ClientLogs(run_dir / "logs" / "clients.log") as logs:
        conf["logger"] = client_logger(process)    # confluent-kafka: one adapter per client
        ...
        logs.errors                                 # records at ERROR or above so far

Each line names the Jepsen process of the client it came from (`p=3`): from the adapter
(confluent-kafka), from the `client_id=<prefix>-<process>` that kafka-python puts in its
messages, or from the thread that opened the client (`bind_thread`); `p=-` when none applies
(the runtime's own ZooKeeper client, admin clients of the harness).

`quiet()` (the CLI calls it first) gives these loggers a null handler and stops them from
propagating, so that outside a campaign (`hiwater cluster up`, a late close after the run)
they never fall through to logging's last-resort handler, i.e. to stderr.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

#: confluent-kafka clients log through children of this logger (see `client_logger`)
CLIENT_LOGGER = "hiwater.clients"
#: every logger whose records are client-library output
LIBRARY_LOGGERS = (CLIENT_LOGGER, "kafka", "kazoo")
FORMAT = "%(asctime)s p=%(hiwater_process)s %(levelname)s %(name)s: %(message)s"

_CLIENT_ID_RE = re.compile(r"client_id=[\w.]*?-(\d+)(?:-admin)?\b")
_thread = threading.local()


class ClientLogAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger for one client: every record carries the client's process id."""


def client_logger(process: int | str | None, library: str = "librdkafka") -> ClientLogAdapter:
    """The `logger` for a confluent-kafka client config (also used for its `error_cb`)."""
    return ClientLogAdapter(logging.getLogger(f"{CLIENT_LOGGER}.{library}"),
                            {"hiwater_process": "-" if process is None else process})


def bind_thread(process: int | str | None) -> None:
    """Records logged from this thread (kafka-python's calls in a worker) name `process`."""
    _thread.process = process


def quiet_logger(name: str = f"{CLIENT_LOGGER}.quiet") -> logging.Logger:
    """A logger that drops everything: for clients whose logs nobody reads (benchmarks)."""
    logger = logging.getLogger(name)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def quiet() -> None:
    """Keep client-library logs off the console (see the module docstring)."""
    for name in LIBRARY_LOGGERS:
        quiet_logger(name)


class _ProcessFilter(logging.Filter):
    """Adds `hiwater_process` to records that lack it (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "hiwater_process"):
            process: Any = getattr(_thread, "process", None)
            if process is None:
                m = _CLIENT_ID_RE.search(record.getMessage())
                process = m.group(1) if m else "-"
            record.hiwater_process = process
        return True


class ClientLogs:
    """While open, every client-library logger writes to `path` (INFO and above) and to no
    console; `errors` counts the records at ERROR or above. Restores the loggers on close."""

    def __init__(self, path: Path, level: int = logging.INFO) -> None:
        self.path = Path(path)
        self.level = level
        self.errors = 0
        self.lines = 0
        self._handler: logging.Handler | None = None
        self._saved: list[tuple[logging.Logger, bool, int]] = []
        self._lock = threading.Lock()

    def _count(self, record: logging.LogRecord) -> bool:
        with self._lock:
            self.lines += 1
            if record.levelno >= logging.ERROR:
                self.errors += 1
        return True

    def open(self) -> ClientLogs:
        if self._handler is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.path)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.setLevel(self.level)
        handler.addFilter(_ProcessFilter())
        handler.addFilter(self._count)
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate, logger.level))
            logger.propagate = False
            if logger.level == logging.NOTSET or logger.level > self.level:
                logger.setLevel(self.level)
            logger.addHandler(handler)
        self._handler = handler
        return self

    def close(self) -> None:
        handler, self._handler = self._handler, None
        if handler is None:
            return
        for logger, propagate, level in reversed(self._saved):
            logger.removeHandler(handler)
            logger.propagate = propagate
            logger.setLevel(level)
        self._saved.clear()
        handler.close()

    def __enter__(self) -> ClientLogs:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["CLIENT_LOGGER", "ClientLogAdapter", "ClientLogs", "bind_thread", "client_logger",
           "quiet", "quiet_logger"]
