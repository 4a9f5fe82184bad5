"""Run a module (the broker) with cProfile switched on and off by SIGUSR2.

    python bench/_profiled_broker.py DIR -m broker.runtime.main --config FILE

The first SIGUSR2 starts profiling, the next stops it and writes
DIR/broker-<pid>-<phase>.prof (phase 1, 2, ...), and so on: bench/broker_bench.py --profile
brackets its produce and consume phases with it, so start-up (imports, ZooKeeper, topic
creation) stays out of the figures.
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys
import time
from pathlib import Path
from types import FrameType


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:3] != ["-m"] or len(sys.argv) < 4:
        print("usage: _profiled_broker.py DIR -m MODULE [ARGS...]", file=sys.stderr)
        sys.exit(3)
    module = sys.argv[3]
    prof: list[cProfile.Profile] = []
    phase = [0]

    def toggle(signum: int, frame: FrameType | None) -> None:
        if not prof:
            # CPU time, not wall time: on a shared machine a wall-clock profile charges
            # whatever ran while the broker was preempted to the function it was in
            p = cProfile.Profile(time.process_time)
            prof.append(p)
            p.enable()
            return
        p = prof.pop()
        p.disable()
        phase[0] += 1
        p.dump_stats(str(out / f"broker-{os.getpid()}-{phase[0]}.prof"))

    signal.signal(signal.SIGUSR2, toggle)
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
