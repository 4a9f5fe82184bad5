"""Fingerprints of the simulator's behaviour on one code tree, to show that a change meant
to keep behaviour (a speed-up, a refactoring) keeps it: for 159 runs (default-option seeds,
short runs, the seeds of the historic-bug switches) the trace hash, verdict, failure line,
event, step and fault counts, simulated time and a hash of the history.

    git archive <commit> | tar -x -C DIR
    cd DIR && uv run --project /path/to/hiwater python scripts/simhash.py OUT.json DIR
    python scripts/simhash.py --diff A.json B.json     # exit 1 if any run differs

(Run it from inside DIR: the tree it fingerprints is DIR, first on sys.path.)
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_SEEDS = (7, 11, 21340, *range(50000, 50060), *range(60000, 60005), *range(1000, 1031),
                 3, 4, 5, 101, 147, 201697, 320065, 345482, 385633, 397166)


def fingerprint(code: str) -> dict[str, list[Any]]:
    sys.path.insert(0, code)
    from harness.sim.run import SimOptions, history_lines, run_seed
    from spec.bugs import CATALOGUE

    runs = [(f"d{s}", SimOptions(seed=s)) for s in DEFAULT_SEEDS]
    runs += [(f"short{s}", SimOptions(seed=s, time_s=10.0)) for s in range(40, 45)]
    runs += [(f"{sc.name}:{s}", SimOptions(seed=s, bug=sc.name, time_s=10.0))
             for sc in CATALOGUE for s in (5, 25, 181)]
    out: dict[str, list[Any]] = {}
    for key, opts in runs:
        r = run_seed(opts)
        h = hashlib.sha256("\n".join(history_lines(r.history)).encode()).hexdigest()
        out[key] = [r.trace_hash, r.ok, r.failure, r.events, r.steps, r.sim_ms, r.faults, h]
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--diff"]:
        a, b = (json.loads(Path(p).read_text()) for p in argv[1:3])
        bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} runs, {len(bad)} differ", bad[:20])
        return 1 if bad else 0
    res = fingerprint(argv[1])
    Path(argv[0]).write_text(json.dumps(res, indent=0, sort_keys=True))
    print(len(res), "runs;", sum(not v[1] for v in res.values()), "fail")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
