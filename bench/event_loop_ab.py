"""The brokers' CPU per acks=all produce request and per GB, asyncio against uvloop, alternated.

    uv run python bench/event_loop_ab.py [--rate REC_PER_S] [--seconds S] [--pairs N]
                                         [--loops asyncio,uvloop]

Each side is a fresh `LocalCluster` (3 brokers, min ISR 2, topic of 3 partitions, RF 3, one
leader per broker) whose brokers run with `hiwater.event.loop` set to that side's loop; the
bench's paced producer (acks=all, linger.ms 5, 1 KiB records) sends at a fixed rate, so both
sides see the same offered load. Reported per point: the brokers' CPU (utime+stime from /proc,
all threads) per produce request (the stored batches: with one leader per partition every
produce request carries one batch, so this is the cost of one acks=all round across the three
brokers) and per GB, their run-queue wait (schedstat), p50/p99, the foreign CPU and the load
average. CPU per request is the figure to compare: it does not depend on the machine's load
the way latency does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

import broker_bench as bb

from broker.runtime.cluster import LocalCluster


def _wait_s(pid: int) -> float:
    """Seconds every thread of `pid` spent runnable, waiting for a CPU (schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    return total / 1e9


def point(root: Path, loop: str, args: argparse.Namespace, value: bytes) -> str:
    d = Path(tempfile.mkdtemp(prefix=f"ab-{loop}-", dir=root))
    cluster = LocalCluster(d, 3, {"min.insync.replicas": "2", "hiwater.event.loop": loop})
    cluster.start(wait=False)
    try:
        cluster.wait_ready(timeout_s=90.0)
        bb.create_topic(cluster.bootstrap, 3, 3)
        pids = {f"broker {i}": b.pid for i, b in cluster.nodes.items() if b.pid}
        data1 = cluster.nodes[1].data_dir
        time.sleep(1.0)
        conf = bb.producer_config(args, cluster.bootstrap)
        # warm-up at the same rate (connections, page cache, the allocator)
        bb.produce(conf, 3, int(args.rate * 2), value, rate=args.rate, named=pids, every=10)
        n0, b0 = bb.batch_stats(data1)
        w0 = {k: _wait_s(p) for k, p in pids.items()}
        la0 = os.getloadavg()[0]
        r = bb.produce(conf, 3, int(args.rate * args.seconds), value, rate=args.rate,
                       named=pids, every=args.every)
        w1 = {k: _wait_s(p) for k, p in pids.items()}
        n1, b1 = bb.batch_stats(data1)
    finally:
        cluster.stop()
        shutil.rmtree(d, ignore_errors=True)
    assert r.cpu is not None
    cpu = sum(r.cpu.named_s.values())
    wait = sum(w1[k] - w0[k] for k in pids)
    reqs = n1 - n0
    gb = (b1 - b0) / 1e9
    return (f"{loop:8} {r.rate:8,.0f} rec/s {r.mbs:6.1f} MB/s  reqs {reqs:6,d} "
            f"({(b1 - b0) / max(1, reqs) / 1024:5.1f} KiB)  brokers CPU {cpu:6.2f} s = "
            f"{1000 * cpu / max(1, reqs):5.3f} ms/req, {cpu / gb:5.2f} s/GB "
            f"({' + '.join(f'{v:.2f}' for v in r.cpu.named_s.values())})  "
            f"runq wait {wait:5.2f} s  p50 {r.pct(.5):6.1f} p99 {r.pct(.99):6.1f} ms  "
            f"producer {r.cpu.self_s:5.2f} s  foreign {r.cpu.pct(r.cpu.foreign_s):4.0f} %  "
            f"load {la0:.2f}-{os.getloadavg()[0]:.2f}  errors {r.errors}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=70_000.0, help="records/s")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--loops", default="asyncio,uvloop")
    ap.add_argument("--every", type=int, default=1, help="latency of every N-th record")
    ap.add_argument("--linger-ms", type=float, default=5.0)
    ap.add_argument("--batch-size", type=int, default=1_000_000)
    ap.add_argument("--max-in-flight", type=int, default=5)
    ap.add_argument("--quiet-limit", type=float, default=60.0)
    args = ap.parse_args()
    args.producer_opt = []
    bb.QUIET["limit"] = args.quiet_limit
    value = os.urandom(bb.VALUE_BYTES)
    root = Path(tempfile.mkdtemp(prefix="hiwater-loop-ab-"))
    try:
        for i in range(args.pairs):
            for loop in args.loops.split(","):
                print(f"{i + 1}: {point(root, loop, args, value)}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
