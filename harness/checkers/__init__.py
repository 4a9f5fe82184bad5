"""History checkers: queue anomalies (Jepsen kafka), linearizability, stats; policy apart.

Entry point for `hiwater check`:

    from harness.checkers import check_file
    results = check_file("store/.../history.jsonl")   # or .parquet
    json.dump(results, fh)                             # JSON-serialisable

`check` picks the checkers from the ops present: `send/poll/txn` ops go to the queue checker,
`read/write/cas` ops to the linearizability checker (per key); stats always run. The top-level
`valid?` merges the parts as Jepsen's `compose` does (false > unknown > true).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from harness.checkers import linearizable, queue, stats
from harness.checkers.policy import QueuePolicy, Validity, merge_valid
from harness.history import Op, read_history

__all__ = ["QueuePolicy", "check", "check_file"]

REGISTER_FS = frozenset({"read", "write", "cas"})


def check(
    history: Sequence[Op],
    policy: QueuePolicy | None = None,
    *,
    time_limit_s: float | None = 60.0,
    all_errors: bool = False,
) -> dict[str, Any]:
    """Run every applicable checker on a history; a Jepsen-shaped result map."""
    fs = {op.f for op in history}
    out: dict[str, Any] = {}
    valids: list[Validity] = []
    if fs & queue.QUEUE_FS or not fs & REGISTER_FS:
        q = queue.check(history, policy, all_errors=all_errors)
        out["queue"] = q
        valids.append(q["valid?"])
    if fs & REGISTER_FS:
        lz = linearizable.check(history, time_limit_s=time_limit_s)
        out["linearizable"] = lz
        valids.append(lz["valid?"])
    out["stats"] = stats.stats(history)
    return {"valid?": merge_valid(valids), **out}


def check_file(
    path: str | os.PathLike[str],
    policy: QueuePolicy | None = None,
    *,
    time_limit_s: float | None = 60.0,
    all_errors: bool = False,
) -> dict[str, Any]:
    """`check` on a `history.jsonl` or `history.parquet` file."""
    return check(read_history(path), policy, time_limit_s=time_limit_s, all_errors=all_errors)
