"""Starting a server as a process: ``python -m nemesis.toxiproxy`` and the launcher that
prefers a real ``toxiproxy-server`` binary when one is installed and configured."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy_testlib import TcpServer, connect, http_request, recv_exactly

from nemesis.toxiproxy import ToxiproxyLaunchError, find_real_server, launch
from nemesis.toxiproxy.launcher import BINARY_ENV, MODE_ENV, api_ready, default_mode, free_port


@pytest.fixture(autouse=True)
def no_configured_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BINARY_ENV, raising=False)
    monkeypatch.delenv(MODE_ENV, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def fake_real_binary(directory: Path) -> Path:
    """An executable named ``toxiproxy-server`` that takes the real binary's flags
    (-host, -port) and runs this package's server, to exercise the "real" code path."""
    path = directory / "toxiproxy-server"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nemesis.toxiproxy "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_module_entry_point_serves_and_stops_on_sigterm() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nemesis.toxiproxy", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 15
        while not api_ready("127.0.0.1", port):
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.05)
        assert http_request(f"http://127.0.0.1:{port}", "GET", "/proxies").json() == {}
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    assert f"http://127.0.0.1:{port}".encode() in output


def test_module_version_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nemesis.toxiproxy", "-version"],
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert done.stdout.startswith(b"toxiproxy-server version ")


def test_module_refuses_non_loopback_api() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nemesis.toxiproxy", "-host", "0.0.0.0", "-port", "0"],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert b"non-loopback" in done.stderr


def test_find_real_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_real_server(path=str(empty)) is None
    binary = fake_real_binary(tmp_path)
    assert find_real_server(path=str(tmp_path)) == str(binary)
    monkeypatch.setenv(BINARY_ENV, str(binary))
    assert find_real_server(path=str(empty)) == str(binary)
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "missing"))
    assert find_real_server(path=str(tmp_path)) is None


def test_mode_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_mode() == "auto"
    monkeypatch.setenv(MODE_ENV, "builtin")
    assert default_mode() == "builtin"
    monkeypatch.setenv(MODE_ENV, "download")
    with pytest.raises(ToxiproxyLaunchError):
        default_mode()


def test_real_mode_without_binary_fails(tmp_path: Path) -> None:
    with pytest.raises(ToxiproxyLaunchError):
        launch(mode="real", path=str(tmp_path))


def test_launch_builtin_and_drive_it_with_the_client(tmp_path: Path) -> None:
    fake_real_binary(tmp_path)  # present, but builtin mode must ignore it
    saved = (APIConsumer.host, APIConsumer.port)
    with launch(mode="builtin", path=str(tmp_path)) as server, TcpServer() as echo:
        assert server.kind == "builtin"
        client = Toxiproxy()
        client.update_api_consumer(server.host, server.port)
        try:
            proxy = client.create(upstream=echo.address, name="echo")
            with connect(proxy.listen) as sock:
                sock.sendall(b"via child")
                assert recv_exactly(sock, 9) == b"via child"
        finally:
            APIConsumer.host, APIConsumer.port = saved
    assert server.process.poll() is not None


def test_auto_prefers_a_real_binary_on_path(tmp_path: Path) -> None:
    fake_real_binary(tmp_path)
    with launch(mode="auto", path=str(tmp_path)) as server:
        assert server.kind == "real"
        assert server.process.args[1:3] == ["-host", "127.0.0.1"]  # type: ignore[index]
        assert http_request(server.url, "GET", "/version").status == 200
    empty = tmp_path / "empty"
    empty.mkdir()
    with launch(mode="auto", path=str(empty)) as server:
        assert server.kind == "builtin"


def test_launch_reports_a_server_that_exits(tmp_path: Path) -> None:
    broken = tmp_path / "toxiproxy-server"
    broken.write_text("#!/bin/sh\necho cannot start >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ToxiproxyLaunchError, match="cannot start"):
        launch(mode="real", binary=str(broken))
