"""A long-running broker's page cache for the broker benchmark: the cluster runs in a memory
cgroup that is already full of clean page cache, so each new log page reuses a reclaimed one.

Why: a freshly booted VM's memory is not yet backed by the host. On these Firecracker VMs a
guest page touched for the first time (or handed back to the host by free-page reporting,
which the kernel does for free memory beyond about 1 GiB) costs about 2.5 CPU-s per GB of
page cache, against about 0.2 for a page the guest already holds (measured 2026-11-26:
appending to a new file runs at ~5,500 MB/s for the first ~0.6-1 GB and at ~390 MB/s after).
A 3-broker RF=3 cluster writes every produced byte three times, so in a cold guest it paid
~7.5 CPU-s per GB produced for the VM alone: 3.3 CPU-s/GB of broker work became 9-10, and
the saturated rate fell from 330 to 140 MB/s after the first ~600 MB. Kafka would pay the
same. A broker that has run for a while has a full page cache, and its new pages come from
reclaiming old ones; the bench measures that state. `--page-cache-mib 0` measures the cold
machine instead, and the fill's own cost is printed, so the VM's figure is never hidden.

The cgroup is a child of this process's own memory cgroup (cgroup v1, as on the project's
machines; cgroup v2 when this process may move into a child of its cgroup). Without a
writable memory cgroup (not root) the bench says so and runs unbounded.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

MiB = 1 << 20
V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def _own_cgroup() -> tuple[Path, str] | None:
    """(directory of this process's memory cgroup, limit file name), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and (V1_ROOT / "cgroup.procs").exists():
            return V1_ROOT / path.lstrip("/"), "memory.limit_in_bytes"
    for line in lines:
        if line.startswith("0::") and (V2_ROOT / "cgroup.controllers").exists():
            d = V2_ROOT / line[3:].lstrip("/")
            try:
                if "memory" in (d / "cgroup.subtree_control").read_text().split():
                    return d, "memory.max"
            except OSError:
                return None
    return None


class SteadyPageCache:
    """`with SteadyPageCache(mib, scratch) as pc:` this process and every child started inside
    the block (the cluster's brokers and ZooKeeper, the load generator) run in a memory cgroup
    of `mib` MiB whose page cache was filled first with a clean file in `scratch`. `pc.active`
    says whether it is; `pc.why` says why not. On exit this process moves back to its own
    cgroup, the file is deleted and the cgroup removed (children must have exited)."""

    def __init__(self, mib: int, scratch: Path) -> None:
        self.mib, self.scratch = mib, scratch
        self.active = False
        self.why = ""
        self.dir: Path | None = None
        self.home: Path | None = None
        self.fill_file = scratch / "page-cache-fill.bin"
        self.fill_s = self.fill_cpu_s_per_gb = 0.0
        self.append_cpu_s_per_gb = 0.0

    def __enter__(self) -> SteadyPageCache:
        if self.mib <= 0:
            self.why = "not bounded (--page-cache-mib 0): new log pages are fresh guest memory"
            return self
        own = _own_cgroup()
        if own is None:
            self.why = "not bounded: no memory cgroup controller found"
            return self
        self.home, limit_file = own
        d = self.home / f"hiwater-bench-{os.getpid()}"
        try:
            d.mkdir()
        except OSError as e:
            self.why = (f"not bounded: cannot create a memory cgroup under {self.home} "
                        f"({e.strerror})")
            return self
        self.dir = d
        try:
            (d / limit_file).write_text(str(self.mib * MiB))
            (d / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as e:
            self._remove()
            self.why = f"not bounded: cannot use the memory cgroup {d} ({e.strerror})"
            return self
        self.active = True
        try:
            self._fill()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _fill(self) -> None:
        """Write the limit's worth of a file, fdatasync'd in steps so that what the cgroup
        reclaims is clean: afterwards every page the cluster needs is a reclaimed one. Then
        append a further quarter (at most 512 MiB) to the same file, each page now a reclaimed
        one, to measure what an append costs in that state; the cgroup stays full."""
        buf = os.urandom(MiB)
        step = max(1, min(256, self.mib // 8))
        extra = max(1, min(512, self.mib // 4))
        fd = os.open(self.fill_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.fill_s, self.fill_cpu_s_per_gb = self._write(fd, buf, self.mib, step)
            _, self.append_cpu_s_per_gb = self._write(fd, buf, extra, step)
        finally:
            os.close(fd)

    @staticmethod
    def _write(fd: int, buf: bytes, mib: int, step: int) -> tuple[float, float]:
        """(wall s, CPU-s per GB) of `mib` 1 MiB writes, fdatasync every `step` MiB."""
        c, t = time.process_time(), time.perf_counter()
        for i in range(mib):
            os.write(fd, buf)
            if i % step == step - 1:
                os.fdatasync(fd)
        os.fdatasync(fd)
        return time.perf_counter() - t, (time.process_time() - c) / (mib * MiB / 1e9)

    def describe(self) -> str:
        if not self.active:
            return f"page cache: {self.why}"
        return (f"page cache: the cluster runs in a {self.mib:,} MiB memory cgroup filled first, "
                f"as a long-running broker's page cache is (new log pages reuse reclaimed "
                f"ones); filling it took {self.fill_s:.1f} s, {self.fill_cpu_s_per_gb:.2f} "
                f"CPU-s/GB (the VM's first touch of its memory); an append into it now "
                f"{self.append_cpu_s_per_gb:.2f} CPU-s/GB")

    def _remove(self) -> None:
        if self.dir is None:
            return
        for _ in range(50):  # children that just exited may take a moment to leave it
            try:
                self.dir.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        self.dir = None

    def __exit__(self, *exc: object) -> None:
        if self.home is not None and self.dir is not None:
            with contextlib.suppress(OSError):
                (self.home / "cgroup.procs").write_text(str(os.getpid()))
        self.fill_file.unlink(missing_ok=True)
        self._remove()
        self.active = False
