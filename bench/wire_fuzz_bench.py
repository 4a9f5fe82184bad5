"""Live wire fuzz benchmark (issue #16): `uv run python bench/wire_fuzz_bench.py [--frames N]`.

ZooKeeper and one broker on 127.0.0.1x; kafka-python, confluent-kafka and kcat produce,
consume, join groups and commit through a recording proxy; 200 records are acknowledged;
then `--frames` (default 1,000,000) mutations of the recorded request frames (bit flips,
byte sets, inserts, deletes, truncation, huge length and count words, unknown API keys and
versions, lies in the size prefix) go to the broker on `--concurrency` connections at a time,
each connection 1-32 frames written at once, then EOF (the broker reads them in order and
closes the connection at the first it cannot decode, so the rest of that connection's frames
are sent but not read: the report says how many it surely read); `--one-at-a-time` sends each
frame after the answer to the one before instead. A Metadata probe runs every 2 s throughout.
Afterwards: the same broker process, every record acknowledged before the fuzz read back
(CRC-checked), a new produce and consume, no traceback in the broker's log.

Prints frames/s, frames and connections sent, the answers, the machine's load average, and
exits 1 when the broker did not stay live (the fuzzer found a bug: the seed and case number
reproduce it, `harness.wirefuzz`). Bounded by `--time-limit` (default 1800 s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from harness.wirefuzz import FuzzResult, live_session


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--time-limit", type=float, default=1800.0)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="send each frame after the answer to the one before (every frame "
                    "sent is read by the broker; about 15x slower here) instead of each "
                    "connection's frames at once")
    ap.add_argument("--json", help="also write the report here")
    a = ap.parse_args()
    print(f"wire fuzz: up to {a.frames:,} frames, {a.time_limit:.0f} s, seed {a.seed}; "
          f"{os.cpu_count()} cpus, {load()}", flush=True)

    def progress(r: FuzzResult, elapsed: float) -> None:
        print(f"  {elapsed:5.0f} s  {r.frames:>9,} frames  {r.frames / elapsed:7,.0f}/s  "
              f"{r.connections:,} connections  {load()}", flush=True)

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wire-fuzz-") as d:
        rep = live_session(d, frames=a.frames, seconds=a.time_limit, seed=a.seed,
                           concurrency=a.concurrency, progress=progress,
                           pipeline=not a.one_at_a_time)
        f = rep.fuzz
        print(f"recorded {rep.recorded} request frames from {', '.join(rep.clients)}; corpus "
              f"by API key {dict(sorted(rep.corpus_by_key.items()))}")
        print(f"sent {f.frames:,} frames ({f.bytes_sent / 1e6:.1f} MB) on {f.connections:,} "
              f"connections in {f.seconds:.1f} s: {f.frames_per_s:,.0f} frames/s, "
              f"{f.connections / f.seconds:,.0f} connections/s; {f.responses:,} responses; "
              f"connections {f.outcomes}; frames the broker surely read (answers + the "
              f"frame of each close): {f.read_at_least:,}")
        print(f"broker: same process {rep.pid_kept}; Metadata probes {rep.probes} "
              f"(failed {len(rep.probe_failures)}, slowest {rep.slowest_probe_s} s); "
              f"acknowledged before {rep.acked_before}, missing after {rep.missing}; "
              f"produce+consume after {rep.after_ok}; tracebacks {len(rep.tracebacks)}")
        for tb in rep.tracebacks[:1]:
            print(tb)
        print(f"{'LIVE' if rep.live else 'NOT LIVE'}; {time.monotonic() - t0:.0f} s in all; "
              f"{load()}")
        if a.json:
            with open(a.json, "w") as out:
                json.dump(rep.as_dict(), out, indent=2, default=str)
    return 0 if rep.live else 1


if __name__ == "__main__":
    sys.exit(main())
