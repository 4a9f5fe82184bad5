"""Jepsen's history model: one `Op` per event, JSONL while running, Parquet for analysis.

An op is `Op(index, time_ns, process, type, f, value, extra)`:

- `index` — position in the history (0, 1, 2, ...), assigned by the recorder;
- `time_ns` — nanoseconds since the test started (monotonic clock);
- `process` — an int for a client instance, or `"nemesis"` for faults. A worker whose op ends
  `info` (or carries `end_process`) continues under a *new* process id, so one process id is
  one client instance (Jepsen `context/with-next-process`);
- `type` — `invoke | ok | fail | info`; `info` means indeterminate (timeouts, exceptions);
- `f` — the operation (`send`, `poll`, `txn`, `assign`, `subscribe`, `crash`, `read`, `write`,
  `cas`, or a nemesis function such as `start-partition`);
- `value` — JSON-friendly payload (see below);
- `extra` — optional mapping of Jepsen's extra keys (`error`, `rebalance_log`, `end_process`,
  `poll_ms`, `seek_to_beginning`, `clock_offsets`, ...), or `None`.

Queue workload values (Jepsen `jepsen.tests.kafka`, as JSON lists):

- send / txn / poll invocations: `[["send", k, v], ["poll"], ...]`;
- their completions: `[["send", k, [offset, v]], ["poll", {k: [[offset, v], ...]}], ...]`;
  `offset` is `null` when unknown; an `info` completion may keep the bare `v`;
- assign / subscribe: `[k1, k2, ...]`.

JSON objects only have string keys, so a poll result `{3: [...]}` is written as `{"3": [...]}`;
`op_from_json` turns decimal-integer keys of poll maps back into ints, so a history read from
disk equals the one written (`op_from_json(op_to_json(op)) == op`).

Register workload values: `write [k, v]`, `read [k, v]` (`v` null in the invocation),
`cas [k, [old, new]]`.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

INVOKE: Final = "invoke"
OK: Final = "ok"
FAIL: Final = "fail"
INFO: Final = "info"
TYPES: Final = (INVOKE, OK, FAIL, INFO)
NEMESIS: Final = "nemesis"
#: the queue workload's final-phase query of partition end offsets (harness.workloads.queue)
END_OFFSETS_F: Final = "end-offsets"

_BASE_KEYS: Final = frozenset({"index", "time_ns", "process", "type", "f", "value"})


class Op(NamedTuple):
    """One history event. A NamedTuple so hot loops can unpack it positionally."""

    index: int  # type: ignore[assignment]  # Jepsen's name; shadows tuple.index
    time_ns: int
    process: int | str
    type: str
    f: str
    value: Any
    extra: Mapping[str, Any] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        """An extra key (`error`, `rebalance_log`, ...) or `default`."""
        if self.extra is None:
            return default
        return self.extra.get(key, default)


def op_to_dict(op: Op) -> dict[str, Any]:
    """The op as a flat JSON-friendly dict (extra keys at top level, as Jepsen's op maps)."""
    d: dict[str, Any] = {
        "index": op.index,
        "time_ns": op.time_ns,
        "process": op.process,
        "type": op.type,
        "f": op.f,
        "value": op.value,
    }
    if op.extra:
        for k in sorted(op.extra):
            if k in _BASE_KEYS:
                raise ValueError(f"extra key {k!r} collides with an Op field")
            d[k] = op.extra[k]
    return d


def _restore_key(k: Any) -> Any:
    if isinstance(k, str) and k and (k.isdigit() or (k[0] == "-" and k[1:].isdigit())):
        return int(k)
    return k


def _restore_poll_keys(value: Any) -> Any:
    """Turn `{"3": pairs}` in poll micro-ops back into `{3: pairs}`."""
    if not isinstance(value, list):
        return value
    out = []
    changed = False
    for mop in value:
        if (
            isinstance(mop, list)
            and len(mop) == 2
            and mop[0] == "poll"
            and isinstance(mop[1], dict)
        ):
            out.append(["poll", {_restore_key(k): v for k, v in mop[1].items()}])
            changed = True
        else:
            out.append(mop)
    return out if changed else value


def op_from_dict(d: Mapping[str, Any]) -> Op:
    """Inverse of `op_to_dict` (also accepts Jepsen's `time` for `time_ns`)."""
    time_ns = d["time_ns"] if "time_ns" in d else d.get("time", 0)
    extra = {k: v for k, v in d.items() if k not in _BASE_KEYS and k != "time"}
    f = d["f"]
    value = d.get("value")
    if f in ("send", "poll", "txn"):
        value = _restore_poll_keys(value)
    typ = d["type"]
    if typ not in TYPES:
        raise ValueError(f"op type must be one of {TYPES}, not {typ!r}")
    return Op(int(d["index"]), int(time_ns), d["process"], typ, f, value, extra or None)


def op_to_json(op: Op) -> str:
    """One compact JSON line (no newline)."""
    return json.dumps(op_to_dict(op), separators=(",", ":"), default=_json_default)


def op_from_json(line: str) -> Op:
    return op_from_dict(json.loads(line))


def _json_default(o: Any) -> Any:
    if isinstance(o, set | frozenset):
        return sorted(o, key=sort_key)
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def sort_key(x: Any) -> tuple[int, Any]:
    """A total order over mixed keys/values (ints before strings before anything else)."""
    if isinstance(x, bool):
        return (2, str(x))
    if isinstance(x, int | float):
        return (0, x)
    if isinstance(x, str):
        return (1, x)
    return (2, repr(x))


# ---------------------------------------------------------------------------------------
# JSONL: written while the test runs, one op per line, flushed per op


class JsonlWriter:
    """Appends ops to a JSONL file as they happen; assigns `index` if the caller passes -1.

    Each line is flushed so a crashed run leaves a readable prefix; `fsync=True` also
    fsyncs each line (slow; for runs that may lose the machine).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._fsync = fsync
        self.next_index = 0

    def append(self, op: Op) -> Op:
        if op.index < 0:
            op = op._replace(index=self.next_index)
        self.next_index = op.index + 1
        self._fh.write(op_to_json(op))
        self._fh.write("\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())
        return op

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(ops: Iterable[Op], path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(op_to_json(op))
            fh.write("\n")


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Ops of a JSONL history. A torn last line (crash mid-write) is ignored."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield op_from_json(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 and not line.endswith("\n"):
                return
            raise


def read_jsonl(path: str | os.PathLike[str]) -> list[Op]:
    return list(iter_jsonl(path))


# ---------------------------------------------------------------------------------------
# Parquet: a fixed schema for harness.analysis

PARQUET_COLUMNS: Final = (
    "index",
    "time_ns",
    "process",
    "process_name",
    "type",
    "f",
    "value",
    "extra",
)


def parquet_schema() -> Any:
    """The fixed pyarrow schema. `process` is null for non-integer processes (the nemesis),
    whose name is in `process_name`; `value` and `extra` are JSON strings."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("index", pa.int64(), nullable=False),
            pa.field("time_ns", pa.int64(), nullable=False),
            pa.field("process", pa.int64(), nullable=True),
            pa.field("process_name", pa.string(), nullable=True),
            pa.field("type", pa.string(), nullable=False),
            pa.field("f", pa.string(), nullable=False),
            pa.field("value", pa.string(), nullable=True),
            pa.field("extra", pa.string(), nullable=True),
        ],
        metadata={b"hiwater.history.version": b"1"},
    )


def to_arrow(ops: Sequence[Op]) -> Any:
    import pyarrow as pa

    dumps = json.dumps
    cols: dict[str, list[Any]] = {c: [] for c in PARQUET_COLUMNS}
    for op in ops:
        d = op_to_dict(op)
        cols["index"].append(op.index)
        cols["time_ns"].append(op.time_ns)
        if isinstance(op.process, int) and not isinstance(op.process, bool):
            cols["process"].append(op.process)
            cols["process_name"].append(None)
        else:
            cols["process"].append(None)
            cols["process_name"].append(str(op.process))
        cols["type"].append(op.type)
        cols["f"].append(op.f)
        cols["value"].append(dumps(d["value"], separators=(",", ":"), default=_json_default))
        extra = {k: v for k, v in d.items() if k not in _BASE_KEYS}
        cols["extra"].append(
            dumps(extra, separators=(",", ":"), default=_json_default) if extra else None
        )
    return pa.table(cols, schema=parquet_schema())


def write_parquet(ops: Sequence[Op], path: str | os.PathLike[str]) -> None:
    import pyarrow.parquet as pq

    pq.write_table(to_arrow(ops), str(path), compression="zstd")


def from_arrow(table: Any) -> list[Op]:
    cols = table.select(list(PARQUET_COLUMNS)).to_pydict()
    out: list[Op] = []
    loads = json.loads
    for i in range(table.num_rows):
        d: dict[str, Any] = {
            "index": cols["index"][i],
            "time_ns": cols["time_ns"][i],
            "process": (
                cols["process"][i] if cols["process"][i] is not None else cols["process_name"][i]
            ),
            "type": cols["type"][i],
            "f": cols["f"][i],
            "value": loads(cols["value"][i]) if cols["value"][i] is not None else None,
        }
        if cols["extra"][i] is not None:
            d.update(loads(cols["extra"][i]))
        out.append(op_from_dict(d))
    return out


def read_parquet(path: str | os.PathLike[str]) -> list[Op]:
    import pyarrow.parquet as pq

    return from_arrow(pq.read_table(str(path), schema=parquet_schema()))


def jsonl_to_parquet(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """Convert a run's `history.jsonl` to Parquet; returns the number of ops."""
    ops = read_jsonl(src)
    write_parquet(ops, dst)
    return len(ops)


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    """Read `.jsonl` or `.parquet` by suffix."""
    p = str(path)
    if p.endswith(".parquet"):
        return read_parquet(p)
    return read_jsonl(p)


# ---------------------------------------------------------------------------------------
# Helpers over histories


def client_ops(ops: Iterable[Op]) -> list[Op]:
    """Ops of integer (client) processes, i.e. without the nemesis."""
    return [op for op in ops if isinstance(op.process, int) and not isinstance(op.process, bool)]


def nemesis_ops(ops: Iterable[Op]) -> list[Op]:
    return [op for op in ops if op.process == NEMESIS]


def pair_index(ops: Sequence[Op]) -> dict[int, int]:
    """Map the list position of each completion to the position of its invocation (and back).

    Pairs by process: a process has at most one outstanding op. Nemesis ops are recorded
    Jepsen-style as two `info` events; the second one closes the first.
    """
    pending: dict[int | str, int] = {}
    pairs: dict[int, int] = {}
    for i, op in enumerate(ops):
        p = op.process
        if op.type == INVOKE or (p == NEMESIS and op.type == INFO and p not in pending):
            pending[p] = i
        else:
            j = pending.pop(p, None)
            if j is not None:
                pairs[i] = j
                pairs[j] = i
    return pairs


def dumps_ops(ops: Iterable[Op]) -> str:
    """The JSONL text of some ops (handy in tests and reports)."""
    buf = io.StringIO()
    for op in ops:
        buf.write(op_to_json(op))
        buf.write("\n")
    return buf.getvalue()
