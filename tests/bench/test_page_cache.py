"""bench/_page_cache.py: the broker bench's steady page cache (a memory cgroup filled with clean
page cache before the cluster starts). Each case runs in a child process, so pytest's own
worker never moves between cgroups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

SCRIPT = r"""
import json, os, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from _page_cache import SteadyPageCache

def cgroup_of(pid):
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        if "memory" in ctl.split(","):
            return path
    return None

scratch, mib = Path(sys.argv[2]), int(sys.argv[3])
home = cgroup_of("self")
out = {"home": home}
with SteadyPageCache(mib, scratch) as pc:
    out["active"], out["why"] = pc.active, pc.why
    out["described"] = pc.describe()
    if pc.active:
        out["inside"] = cgroup_of("self")
        child = subprocess.run([sys.executable, "-c", "print(open('/proc/self/cgroup').read())"],
                               capture_output=True, text=True, check=True).stdout
        out["child_cgroup"] = child
        stat = dict(l.split() for l in (pc.dir / "memory.stat").read_text().splitlines())
        out["cache"] = int(stat["cache"])
        out["limit"] = int((pc.dir / "memory.limit_in_bytes").read_text())
        out["fill_exists"] = pc.fill_file.exists()
        out["dir"] = str(pc.dir)
        out["append_cpu"] = pc.append_cpu_s_per_gb
out["after"] = cgroup_of("self")
out["fill_after"] = (scratch / "page-cache-fill.bin").exists()
out["dir_after"] = os.path.exists(out.get("dir", "/nonexistent"))
print(json.dumps(out))
"""


def _run(tmp_path: Path, mib: int) -> dict[str, object]:
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(BENCH), str(tmp_path), str(mib)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def _v1_memory_cgroup_writable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create a memory cgroup"
    if not Path("/sys/fs/cgroup/memory/cgroup.procs").exists():
        return "no cgroup v1 memory controller at /sys/fs/cgroup/memory"
    return None


def test_zero_means_unbounded_and_says_so(tmp_path: Path) -> None:
    out = _run(tmp_path, 0)
    assert out["active"] is False
    assert "--page-cache-mib 0" in str(out["why"])
    assert str(out["described"]).startswith("page cache: not bounded")
    assert out["after"] == out["home"]


@pytest.mark.skipif(_v1_memory_cgroup_writable() is not None,
                    reason=str(_v1_memory_cgroup_writable()))
def test_the_cgroup_is_full_of_page_cache_and_children_inherit_it(tmp_path: Path) -> None:
    out = _run(tmp_path, 128)
    assert out["active"] is True, out["why"]
    home, inside = str(out["home"]), str(out["inside"])
    assert inside == home.rstrip("/") + f"/hiwater-bench-{inside.rsplit('-', 1)[1]}"
    assert inside in str(out["child_cgroup"])  # a process started inside inherits it
    limit = int(str(out["limit"]))
    assert limit == 128 << 20
    assert int(str(out["cache"])) >= 0.8 * limit  # full: new pages must come from reclaim
    assert out["fill_exists"] is True
    assert float(str(out["append_cpu"])) > 0
    # and everything is undone
    assert out["after"] == home
    assert out["fill_after"] is False
    assert out["dir_after"] is False
