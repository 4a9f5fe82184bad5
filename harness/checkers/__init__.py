"""History checkers: queue anomalies (Jepsen kafka), linearizability, stats; policy apart.

Entry point for `hiwater check`:

    from harness.checkers import check_file
    results = check_file("store/.../history.jsonl")   # or .parquet
    json.dump(results, fh)                             # JSON-serialisable

`check` picks the checkers from the ops present: `send/poll/txn` ops go to the queue checker,
`read/write/cas` ops (or, with `model=NAME`, that model's ops: `linearizable.MODELS`) to the
linearizability checker (per key, per-key budgets); stats always run. The top-level `valid?`
merges the parts as Jepsen's `compose` does (false > unknown > true). `check_file` reads
JSONL, Parquet, Jepsen's `history.edn` and Porcupine-style Jepsen logs (`edn`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from harness.checkers import linearizable, queue, stats
from harness.checkers.edn import read_any_history
from harness.checkers.policy import QueuePolicy, Validity, merge_valid
from harness.history import Op

__all__ = ["QueuePolicy", "check", "check_command", "check_file"]

REGISTER_FS = frozenset({"read", "write", "cas"})


def check(
    history: Sequence[Op],
    policy: QueuePolicy | None = None,
    *,
    time_limit_s: float | None = 60.0,
    all_errors: bool = False,
    model: str | None = None,
    key_time_limit_s: float | None = None,
) -> dict[str, Any]:
    """Run every applicable checker on a history; a Jepsen-shaped result map."""
    fs = {op.f for op in history}
    out: dict[str, Any] = {}
    valids: list[Validity] = []
    m = linearizable.MODELS[model] if model is not None else linearizable.REGISTER
    lin_fs = frozenset(m.codes)
    if fs & queue.QUEUE_FS or not fs & lin_fs:
        q = queue.check(history, policy, all_errors=all_errors)
        out["queue"] = q
        valids.append(q["valid?"])
    if fs & lin_fs:
        lz = linearizable.check(history, m, time_limit_s=time_limit_s,
                                key_time_limit_s=key_time_limit_s)
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
    model: str | None = None,
    key_time_limit_s: float | None = None,
) -> dict[str, Any]:
    """`check` on a `history.jsonl`, `history.parquet`, Jepsen `history.edn` or
    Porcupine-style log file."""
    return check(read_any_history(path), policy, time_limit_s=time_limit_s,
                 all_errors=all_errors, model=model, key_time_limit_s=key_time_limit_s)


def check_command(
    path: str | os.PathLike[str],
    *,
    time_limit_s: float | None = 60.0,
    model: str | None = None,
    out: str | os.PathLike[str] | None = None,
    report: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """What `hiwater check` does: check a history file (JSONL, Parquet, Jepsen EDN,
    Porcupine-style log), write the results JSON to `out` and a report page to `report`."""
    import json
    from pathlib import Path

    if model is not None and model not in linearizable.MODELS:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(linearizable.MODELS)}")
    history = read_any_history(path)
    results = check(history, time_limit_s=time_limit_s, model=model)
    if out is not None:
        Path(out).write_text(json.dumps(results, indent=2, default=str))
    if report is not None:
        from harness.report.page import render_html

        Path(report).write_text(render_html(history, results, run_name=str(path)),
                                encoding="utf-8")
    return results
