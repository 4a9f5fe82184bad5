"""bench/_data_fs.py: the broker bench's log.dirs on XFS or on ext4 mounted nodelalloc (a
loop-device image), and everything undone afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _data_fs import DataFs  # bench/ is not a package


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to attach a loop device and mount"
    # scripts/setup installs xfsprogs
    missing = [t for t in ("losetup", "mkfs.ext4", "mkfs.xfs") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} missing"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control"
    return None


def _mounts() -> str:
    return Path("/proc/mounts").read_text()


def test_zero_means_the_scratch_directory(tmp_path: Path) -> None:
    with DataFs(0, tmp_path) as fs:
        assert not fs.active and fs.path == tmp_path
        assert "--data-fs-mib 0" in fs.describe()


def test_an_unknown_filesystem_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no such log\.dirs filesystem 'btrfs'"):
        DataFs(512, tmp_path, "btrfs")


@pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))
@pytest.mark.parametrize(("kind", "option"), [("xfs", "noatime"), ("ext4", "nodelalloc")])
def test_mounted_then_undone(tmp_path: Path, kind: str, option: str) -> None:
    with DataFs(512, tmp_path, kind) as fs:  # mkfs.xfs wants 300 MB at least
        assert fs.active, fs.why
        line = next(m for m in _mounts().splitlines() if m.split()[1] == str(fs.path))
        device, _, mounted, options = line.split()[:4]
        assert mounted == kind and option in options.split(",")
        assert kind in fs.describe()
        (fs.path / "x").write_bytes(b"kafka" * 1000)  # usable
        assert device == fs.device
    assert str(tmp_path / "data-fs") not in _mounts()
    assert not (tmp_path / "data-fs.img").exists()
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "BACK-FILE"],
                           capture_output=True, text=True).stdout
    assert str(tmp_path / "data-fs.img") not in loops
    assert fs.path == tmp_path and not fs.active
