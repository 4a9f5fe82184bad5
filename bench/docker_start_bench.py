"""Time from `hiwater campaign` to its first client op: the local runtime next to the Docker
runtime, the latter with a warm image cache and (``--cold``) after removing the node images
(``--cold-base``: the debootstrapped base image too). Each campaign is stopped with SIGTERM
once its first op is recorded (the runtimes' cleanup then removes what they started).

    uv run python bench/docker_start_bench.py [--cold] [--cold-base] [--rounds N]
        [--harness-container]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def first_op_seconds(runtime: str, store: Path, timeout_s: float = 1800.0,
                     harness: str = "host") -> float:
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "campaign",
           "--runtime", runtime, "--time-limit", "20", "--nemesis", "none", "--store",
           str(store), "--name", f"bench-{runtime}", "--harness", harness]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    history = store / f"bench-{runtime}" / "latest" / "history.jsonl"
    try:
        while time.monotonic() - t0 < timeout_s:
            if history.exists() and history.stat().st_size > 0:
                return time.monotonic() - t0
            if proc.poll() is not None:
                raise RuntimeError(f"campaign --runtime {runtime} exited {proc.returncode} "
                                   "before its first op")
            time.sleep(0.05)
        raise RuntimeError(f"no op after {timeout_s:.0f} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", action="store_true", help="remove the node images first")
    ap.add_argument("--cold-base", action="store_true", help="and the base image")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--harness-container", action="store_true",
                    help="also Docker with the harness in a container (--harness container)")
    args = ap.parse_args()
    from harness.runtime import docker as hd

    rows = []
    with tempfile.TemporaryDirectory(prefix="hiwater-bench-") as tmp:
        for r in range(args.rounds):
            rows.append(("local", first_op_seconds("local", Path(tmp) / f"l{r}")))
            if args.cold or args.cold_base:
                refs = hd.docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}",
                                 hd.NODE_REPO).stdout.decode().split()
                if args.cold_base:
                    refs.append(hd.BASE_IMAGE)
                if refs:
                    hd.docker("image", "rm", *refs, check=False)
                label = "docker (cold" + (", base too)" if args.cold_base else ")")
            else:
                label = "docker (warm)"
            rows.append((label, first_op_seconds("docker", Path(tmp) / f"d{r}")))
            if args.harness_container:  # the harness image as it is (built when missing)
                rows.append(("docker, harness container", first_op_seconds(
                    "docker", Path(tmp) / f"h{r}", harness="container")))
    local = [s for n, s in rows if n == "local"]
    base = sum(local) / len(local)
    print(f"{'runtime':<28} {'to first op, s':>15} {'x local':>8}")
    for name, s in rows:
        print(f"{name:<28} {s:>15.1f} {s / base:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
