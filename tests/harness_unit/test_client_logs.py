"""Client libraries' logs go to a file with the client's process, never to the console."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.clients.logs import ClientLogs, bind_thread, client_logger, quiet


def test_routes_library_loggers_to_the_file_with_process_ids(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "logs" / "clients.log"
    kafka = logging.getLogger("kafka.conn")
    root_seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            root_seen.append(record)

    keep = Keep()
    logging.getLogger().addHandler(keep)
    # a client made earlier on this thread (another test in this worker) bound it to its
    # process: this test's records from the main thread must name none
    bind_thread(None)
    try:
        with ClientLogs(path) as logs:
            client_logger(7).error("FAIL [jepsen-7#producer-1] Connect failed")
            kafka.warning("<BrokerConnection client_id=jepsen-12-admin, node_id=1> closed")

            def worker() -> None:
                bind_thread(3)
                logging.getLogger("kafka.producer").error("sender: broken")

            t = threading.Thread(target=worker)
            t.start()
            t.join(5)
            logging.getLogger("kazoo.client").info("Connecting to 127.0.0.1")
            assert logs.errors == 2 and logs.lines == 4
        kafka.warning("after the run: not in the file")
    finally:
        logging.getLogger().removeHandler(keep)
    text = path.read_text()
    assert " p=7 ERROR hiwater.clients.librdkafka: FAIL [jepsen-7#producer-1]" in text
    assert " p=12 WARNING kafka.conn: <BrokerConnection" in text
    assert " p=3 ERROR kafka.producer: sender: broken" in text
    assert " p=- INFO kazoo.client: Connecting" in text
    assert "after the run" not in text
    # while open nothing propagated to the root logger; afterwards the loggers are restored
    assert [r.getMessage() for r in root_seen] == ["after the run: not in the file"]
    assert capsys.readouterr().err == ""


def test_librdkafka_lines_reach_the_logger_not_stderr(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "clients.log"
    with ClientLogs(path) as logs:
        p = Producer({"bootstrap.servers": "127.0.0.1:1", "logger": client_logger(5),
                      "reconnect.backoff.ms": 10})
        end = time.monotonic() + 10
        while logs.lines == 0 and time.monotonic() < end:
            p.poll(0.1)
        del p
    assert "%3|" not in capfd.readouterr().err
    assert " p=5 ERROR hiwater.clients.librdkafka: FAIL " in path.read_text()


def test_quiet_keeps_client_loggers_off_the_last_resort_handler() -> None:
    saved = [(logging.getLogger(n), logging.getLogger(n).propagate) for n in ("kafka", "kazoo")]
    try:
        quiet()
        assert not logging.getLogger("kafka").propagate
        assert logging.getLogger("kazoo").handlers
    finally:
        for lg, prop in saved:
            lg.propagate = prop
