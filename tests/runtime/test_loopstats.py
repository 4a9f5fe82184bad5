"""HIWATER_LOOPSTATS: off by default; when on, a long callback is reported by name with its
wall and CPU time, and every thread's CPU and run-queue wait is written once a second."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from broker.runtime import loopstats


def test_off_unless_the_variable_names_a_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIWATER_LOOPSTATS", raising=False)
    loop = asyncio.new_event_loop()
    try:
        assert loopstats.maybe_install(loop) is None
    finally:
        loop.close()


def busy_callback(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_long_callback_is_named_with_its_cpu_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIWATER_LOOPSTATS", str(tmp_path))
    loop = asyncio.new_event_loop()
    stats = loopstats.maybe_install(loop)
    assert stats is not None
    try:
        async def main() -> None:
            loop.call_soon(busy_callback, 0.01)  # 10 ms of CPU: over STALL_MS however busy
            await asyncio.sleep(1.3)  # past the first once-a-second dump

        loop.run_until_complete(main())
    finally:
        stats.uninstall()
        loop.close()
    (f,) = tmp_path.glob("broker-*.jsonl")
    first = json.loads(f.read_text().splitlines()[0])
    assert first["iters"] > 0
    assert first["n_stalls"] >= 1
    named = [h for _, hs in first["stalls"] for h in hs if h[0] == "busy_callback"]
    assert named, first["stalls"]
    _, wall_ms, cpu_ms = named[0]
    assert cpu_ms >= 10.0 and wall_ms >= cpu_ms * 0.99
    assert "MainThread" in first["threads"]
    assert set(first["gc"]) == {"0", "1", "2"}
    assert asyncio.events.Handle._run.__name__ == "_run"  # uninstalled
