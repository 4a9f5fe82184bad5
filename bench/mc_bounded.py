"""One process, a bounded breadth-first run at issue #12's bounds, as a parallel worker
does it (fingerprint keys, `spec.parallel._Expander`), for A/B figures that do not depend on
the load: run under cachegrind, or read its CPU-seconds.

    uv run python bench/mc_bounded.py [max_states] [--seq] [--profile]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from core.config import ProtocolConfig
from spec import parallel
from spec.checker import check, no_cyclic_gc
from spec.model import Bounds, Model


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 20_000
    model = Model(ProtocolConfig(), Bounds(3, 2, 3, crashes=1))
    prof = cProfile.Profile() if "--profile" in sys.argv else None
    t = time.process_time()
    if prof:
        prof.enable()
    if "--seq" in sys.argv:
        r = check(model, max_states=n)
        out = (r.states, r.transitions, r.depth)
    else:
        parallel._MIN_WIDTH = 10**9  # never fork: the coordinator expands every level
        with no_cyclic_gc():
            _, _, parents, trans, depth, _, _ = parallel.bfs(model, 1, True, None, n, None,
                                                             None, time.perf_counter())
        out = (len(parents), trans, depth)
    if prof:
        prof.disable()
    cpu = time.process_time() - t
    print(f"states {out[0]} transitions {out[1]} depth {out[2]} cpu {cpu:.2f} s "
          f"({out[0] / cpu:,.0f} states per CPU-s)", flush=True)
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
