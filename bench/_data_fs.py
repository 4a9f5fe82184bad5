"""The brokers' log directories on a filesystem set up as Kafka's documentation recommends,
for the broker benchmark.

Why: Kafka's operations guide (Filesystem Selection) says that recent XFS "has shown it to
have better performance characteristics for Kafka's workload" than ext4, and of ext4's
delayed allocation that it "does seem to involve some locking in the filesystem which adds a
bit of latency variance", listing `nodelalloc` among ext4's tunings. The project's machines
mount their root filesystem ext4 with delalloc. Measured there (2026-11-26, bench/README.md):
a broker's append `write()` waited 20-170 ms in `ext4_da_get_block_prep` while the kernel's
writeback held the inode's allocation lock for the same file, and as every broker runs one
event loop, each such wait stalled all of its partitions: acks=all p99 at half load
120-250 ms; on ext4 with `nodelalloc` the same points measured p99 19 ms, but every append
then allocates its blocks and journals it in `write()`. On XFS the brokers spent half as
much kernel time per record as on ext4 nodelalloc at the same paced rate (2026-11-26,
bench/README.md).

`with DataFs(mib, scratch, kind) as fs:` makes an image of `mib` MiB (allocated, not sparse)
with `kind`'s filesystem ("xfs": `mkfs.xfs`, mounted `noatime`; "ext4": mounted
`nodelalloc,noatime`), attaches it to a loop device with direct I/O (so its blocks are not
cached twice) and mounts it under `scratch`; `fs.path` is the mount point, or `scratch`
itself when that is not possible (not root, no loop device, no mkfs for that kind), with
`fs.why`. On exit it is unmounted, detached and deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple


class Kind(NamedTuple):
    mkfs: tuple[str, ...]
    options: str  # mount options
    advice: str  # whose advice it follows


KINDS: dict[str, Kind] = {
    "xfs": Kind(("mkfs.xfs", "-q", "-f"), "noatime", "Kafka's filesystem recommendation"),
    # inode tables and journal initialised now, not by a kernel thread during the run
    "ext4": Kind(("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"),
                 "nodelalloc,noatime", "Kafka's ext4 notes"),
}


def _run(*cmd: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise OSError(f"{' '.join(cmd)}: {(r.stderr or r.stdout).strip() or r.returncode}")
    return r.stdout.strip()


class DataFs:
    def __init__(self, mib: int, scratch: Path, kind: str = "xfs") -> None:
        if kind not in KINDS:
            raise ValueError(f"no such log.dirs filesystem {kind!r} (one of {', '.join(KINDS)})")
        self.mib, self.scratch, self.kind = mib, scratch, kind
        self.mkfs, self.options, self.advice = KINDS[kind]
        self.path = scratch
        self.active = False
        self.why = ""
        self.image = scratch / "data-fs.img"
        self.mount_point = scratch / "data-fs"
        self.device: str | None = None
        self.mounted = False

    def __enter__(self) -> DataFs:
        if self.mib <= 0:
            self.why = "the scratch directory's own filesystem (--data-fs-mib 0)"
            return self
        if os.geteuid() != 0:
            self.why = "the scratch directory's own filesystem (mounting one needs root)"
            return self
        missing = [t for t in ("losetup", self.mkfs[0], "mount", "umount")
                   if shutil.which(t) is None]
        if missing:
            self.why = f"the scratch directory's own filesystem ({', '.join(missing)} missing)"
            return self
        try:
            with open(self.image, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, self.mib << 20)
            _run(*self.mkfs, str(self.image))
            self.device = _run("losetup", "--find", "--show", "--direct-io=on", str(self.image))
            self.mount_point.mkdir()
            _run("mount", "-o", self.options, self.device, str(self.mount_point))
            self.mounted = True
        except OSError as e:
            self.__exit__(None, None, None)
            self.why = f"the scratch directory's own filesystem (could not mount one: {e})"
            return self
        self.path, self.active = self.mount_point, True
        return self

    def describe(self) -> str:
        if not self.active:
            return f"log.dirs: {self.why}"
        return (f"log.dirs: {self.kind} mounted {self.options} ({self.advice}), a {self.mib:,} "
                f"MiB image on {self.device} with direct I/O")

    def __exit__(self, *exc: object) -> None:
        if self.mounted:
            for _ in range(3):  # a broker that just exited may still hold a file for a moment
                try:
                    _run("umount", str(self.mount_point))
                    break
                except OSError:
                    subprocess.run(["sync"], timeout=60)
            self.mounted = False
        if self.device is not None:
            with contextlib.suppress(OSError):
                _run("losetup", "--detach", self.device)
            self.device = None
        if self.mount_point.is_dir():
            with contextlib.suppress(OSError):
                self.mount_point.rmdir()
        self.image.unlink(missing_ok=True)
        self.path, self.active = self.scratch, False
