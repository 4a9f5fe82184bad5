"""Deleted segments' files: the last RETIRED_OPEN_MAX stay readable for sendfiles in flight;
older ones are released (the blocks freed, the descriptor number kept, reading an early end)
and closed beyond RETIRED_HANDLES_MAX. Keeping 64 open per log pinned their blocks on disk:
a soak filled 16 GiB in under a minute although retention was bounding the logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.store import log as log_module
from broker.store.batch import Record, build_batch
from broker.store.config import LogConfig
from broker.store.log import RETIRED_OPEN_MAX, Log
from broker.store.manager import LogManager

T0 = 1_700_000_000_000


def _log_with_segments(d: Path, at_least: int) -> tuple[LogManager, Log]:
    mgr = LogManager([d], LogConfig(segment_bytes=700), now_ms=T0)
    log = mgr.get_or_create_log("t", 0)
    i = 0
    while len(log.segments) < at_least:
        batch = build_batch([Record(0, T0 + i, None, b"v%05d" % i)], base_offset=0)
        log.append_as_leader(batch, 0, now_ms=T0 + i)
        i += 1
    return mgr, log


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _ours(fd: int, d: Path) -> bool:
    """The number still refers to a segment file of the log in `d` or to its placeholder
    (closed numbers may be reused by other files of the test process)."""
    try:
        target = _target(fd)
    except OSError:
        return False
    return target == os.devnull or target.startswith(str(d))


def test_only_the_last_deleted_segments_stay_readable(tmp_path: Path) -> None:
    mgr, log = _log_with_segments(tmp_path, 8)
    fds = [seg.file.fileno() for seg in log.segments[:6]]
    heads = [seg.file.pread(0, 61) for seg in log.segments[:6]]
    assert all(fd is not None for fd in fds)
    for _ in range(6):  # one at a time, as retention does
        log.delete_segments(1)
    released, readable = fds[:6 - RETIRED_OPEN_MAX], fds[6 - RETIRED_OPEN_MAX:]
    for fd in released:
        assert fd is not None
        assert _target(fd) == os.devnull  # the file let go: its blocks are free
        assert os.pread(fd, 61, 0) == b""  # a sendfile in flight reads an early end
    for fd, head in zip(readable, heads[6 - RETIRED_OPEN_MAX:], strict=True):
        assert fd is not None
        assert _target(fd).endswith(" (deleted)")  # unlinked, still readable
        assert os.pread(fd, 61, 0) == head
    # no descriptor number of a released file was given to another file meanwhile
    assert len(set(fds)) == len(fds)
    mgr.shutdown()
    for fd in fds:
        assert fd is not None
        assert not _ours(fd, tmp_path)


def test_released_numbers_are_closed_beyond_the_bound(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_module, "RETIRED_HANDLES_MAX", 2)
    mgr, log = _log_with_segments(tmp_path, 9)
    fds = [seg.file.fileno() for seg in log.segments[:7]]
    for _ in range(7):
        log.delete_segments(1)
    # 7 deleted: the last 2 readable, the 2 before them released, the 3 oldest closed
    closed, kept = fds[:3], fds[3:]
    for fd in kept:
        assert fd is not None
        os.fstat(fd)
    for fd in closed:
        assert fd is not None
        assert not _ours(fd, tmp_path)
    mgr.shutdown()
