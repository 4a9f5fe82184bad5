"""`hiwater analyze`: many campaign runs → Parquet tables → distributed checks → aggregates.

One Spark job does the per-run work: the runs are split into a few groups per core, and each
task (`per_run_arrow`, `mapInArrow`) reads each run's history.parquet once and
- checks it with the same checker code as `hiwater check` (`runs.check_table`: the queue
  checker's fast path on the file's int side columns — no JSON decoded, no `Op` made — and
  the reference checker on decoded `Op`s only where the fast path cannot prove the history
  clean, as `queue.check` does) under the campaign's verdict rule (`policy.run_verdict`);
- derives its fault windows, paired client ops and unseen decay with numpy;
- writes its events as its own partition of the `ops` table;
and returns Arrow batches of long rows of four kinds (check, fault, op, unseen), staged once
as Parquet. Every table and aggregate below is Spark SQL over that output.

Tables (under OUT/tables, Parquet; `ops` partitioned by campaign and run, the others by
campaign):

- `runs`: one row per analysed run — options (workload, acks, min ISR, unclean, idempotence,
  bugs, fault mix, seed, a `config` label) and the verdict recorded in results.json;
- `ops`: every history event (harness.history's fixed schema) plus run_id/campaign/run;
- `checks`: the verdict, validity and anomaly counts found by the checker on each run, and
  the verdict recorded in results.json (compared, with the anomaly sets, on the driver);
- `anomalies`: (run, anomaly type, count, outside the policy?);
- `faults`: fault windows with the time to recover after each heal;
- `op_latency`: client ops paired (invoke → completion), one row per fault kind active at the
  invocation (`quiet` outside every fault);
- `unseen`: each run's unseen count (acknowledged, not yet read) at `runs.DECAY_S` seconds
  after its last heal.

Aggregates (OUT/aggregates, and the page OUT/index.html): `matrix` (config × fault kind:
runs, invalid runs, anomaly rate), `by_dimension` (anomaly rate by fault mix, config, acks,
min ISR, unclean, idempotence, bug switch, workload, seed), `by_type` (runs with each anomaly
type per config), `latency` (config × fault kind or quiet: ops, ok, availability, ok-latency
p50/p99 in ms, exact percentiles), `recovery` (config × fault kind: heals, recovered,
mean/max seconds to the first ok after the heal), `unseen_decay` (config × seconds after the
heal: mean/max unseen, runs at zero) and `seeds` (anomaly type × config × seed: runs with it
of the runs with that seed — which seeds reproduce which anomaly).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.analysis.runs import (
    NO_FAULTS,
    RunInfo,
    find_run_dirs,
    load_run,
    recorded_check,
    run_row,
)

DIMENSIONS: Final = ("nemesis", "config", "acks", "min_isr", "unclean", "idempotence", "bugs",
                     "workload", "seed")

RUNS_SCHEMA: Final = (
    "run_id string, campaign string, run string, path string, history string, "
    "workload string, acks string, min_isr int, unclean boolean, idempotence boolean, "
    "bugs string, nemesis string, seed long, config string, sub_via string, "
    "recorded_verdict string, report string, results_json string")
CHECK_COLS: Final = (("verdict", "string"), ("valid", "string"), ("anomaly_types", "string"),
                     ("bad", "string"), ("counts", "string"), ("linearizable", "string"),
                     ("error", "string"))
FAULT_COLS: Final = (("window", "int"), ("fault", "string"), ("start_ns", "long"),
                     ("end_ns", "long"), ("recover_s", "double"))
OPLAT_COLS: Final = (("f", "string"), ("type", "string"), ("invoke_ns", "long"),
                     ("latency_ms", "double"), ("fault", "string"))
UNSEEN_COLS: Final = (("after_heal_s", "double"), ("unseen", "long"))
#: what each Spark task returns: long rows of four kinds (one `check` row per run, then its
#: `fault` windows, paired `op`s and `unseen` samples), the columns a kind lacks null; one
#: Arrow batch per run, made from numpy columns (no Python object per op)
PER_RUN_COLS: Final = (("kind", "string"), ("run_id", "string"),
                       *dict.fromkeys([*CHECK_COLS, *FAULT_COLS, *OPLAT_COLS, *UNSEEN_COLS]))
PER_RUN_SCHEMA: Final = ", ".join(f"{n} {t}" for n, t in PER_RUN_COLS)
KIND_COLS: Final = {"check": CHECK_COLS, "fault": FAULT_COLS, "op": OPLAT_COLS,
                    "unseen": UNSEEN_COLS}


@dataclass
class Analysis:
    out: Path
    runs: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    mismatches: list[tuple[str, str]] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    tables: dict[str, Path] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.mismatches:
            return 1
        return 2 if self.problems else 0


def discover(stores: Sequence[Path]) -> tuple[list[RunInfo], list[tuple[str, str]]]:
    """Every run of the stores, and what could not be used (by name)."""
    infos: list[RunInfo] = []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for store in stores:
        if not store.is_dir():
            problems.append((str(store), "not a directory"))
            continue
        dirs = find_run_dirs(store)
        if not dirs:
            problems.append((str(store), "no runs (no options.json, results.json or history)"))
            continue
        for d in dirs:
            info = load_run(store, d)
            if len(stores) > 1:
                info.run_id = f"{store.name}/{info.run_id}"
            while info.run_id in seen:
                info.run_id += "+"
            seen.add(info.run_id)
            for p in info.problems:
                problems.append((str(d), p))
            if info.history is not None and not info.problems:
                infos.append(info)
    return infos, problems


# ---------------------------------------------------------------------------------------
# executor functions (module level: pickled by reference)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(),
             "double": pa.float64()}
    return pa.schema([pa.field(n, types[t]) for n, t in PER_RUN_COLS])


def _kind_batch(schema: Any, kind: str, run_id: str, cols: dict[str, Any]) -> Any:
    import pyarrow as pa

    n = len(next(iter(cols.values()))) if cols else 0
    arrays = []
    for f in schema:
        if f.name == "kind":
            arrays.append(pa.array([kind] * n, f.type))
        elif f.name == "run_id":
            arrays.append(pa.array([run_id] * n, f.type))
        elif f.name in cols:
            arrays.append(pa.array(cols[f.name], f.type, from_pandas=True))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: characters Spark escapes in a partition directory's value (ExternalCatalogUtils)
_ESCAPED: Final = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(map(chr, range(32)))


def partition_dir(col: str, value: str) -> str:
    """`col=value` as Spark names a partition directory (so Spark reads the value back)."""
    return col + "=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def write_ops_partition(table: Any, ops_dir: str, run_id: str, campaign: str, run: str) -> None:
    """One run's events as its partition of the `ops` table (campaign=…/run=…/), written
    where the history was read: the history's fixed columns plus run_id; atomic rename."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.history import PARQUET_COLUMNS

    base = table.select(list(PARQUET_COLUMNS))
    base = base.replace_schema_metadata(None).append_column(
        "run_id", pa.array([run_id] * base.num_rows, pa.string()))
    d = os.path.join(ops_dir, partition_dir("campaign", campaign), partition_dir("run", run))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".part-00000.parquet.tmp")
    pq.write_table(base, tmp, compression="snappy")
    os.replace(tmp, os.path.join(d, "part-00000.parquet"))


def per_run_arrow(batches: Iterator[Any], ops_dir: str | None = None) -> Iterator[Any]:
    """The Spark task (`mapInArrow`): each run of the batch read once from its history file
    and analysed (`runs.analyse_table`: the same checkers as `hiwater check`), and its events
    written as its partition of the `ops` table (`ops_dir`); a run whose analysis fails gives
    a check row with the error, and the others go on."""
    import pyarrow.parquet as pq

    from harness.analysis.runs import analyse_table

    schema = _arrow_schema()
    for batch in batches:
        for r in batch.to_pylist():
            rid = r["run_id"]
            try:
                table = pq.read_table(r["history"])
                if ops_dir is not None:
                    write_ops_partition(table, ops_dir, rid, r["campaign"], r["run"])
                row, win, lat, unseen = analyse_table(table, r["sub_via"].split(","),
                                                      json.loads(r["results_json"]))
                row["error"] = None
            except Exception as e:  # reported per run, the others go on
                yield _kind_batch(schema, "check", rid, {
                    "verdict": ["unknown"], "valid": ["unknown"], "anomaly_types": ["[]"],
                    "bad": ["[]"], "counts": ["{}"], "linearizable": ["n/a"],
                    "error": [f"{type(e).__name__}: {e}"]})
                continue
            yield _kind_batch(schema, "check", rid, {k: [v] for k, v in row.items()})
            yield _kind_batch(schema, "fault", rid, win)
            yield _kind_batch(schema, "op", rid, lat)
            yield _kind_batch(schema, "unseen", rid, unseen)


# ---------------------------------------------------------------------------------------
# the pipeline


Progress = Callable[[str], None]


def analyze(stores: Sequence[Path], out: Path, spark: Any, progress: Progress | None = None
            ) -> Analysis:
    """Discover the runs, write the tables and aggregates under `out`; `progress(stage)` is
    called as each stage starts."""
    import shutil

    import pandas as pd
    from pyspark.sql import functions as F
    out.mkdir(parents=True, exist_ok=True)
    res = Analysis(out)
    current: list[Any] = [None, 0.0]

    def stage(name: str, what: str = "") -> None:
        """Start a stage: the time since the last one is that one's."""
        now = time.perf_counter()
        if current[0] not in (None, "done"):
            res.seconds[current[0]] = res.seconds.get(current[0], 0.0) + now - current[1]
        current[:] = [name, now]
        if progress is not None and name != "done":
            progress(f"{name}: {what}" if what else name)

    stage("discover", "runs, options, results (JSONL-only runs converted to Parquet)")
    infos, res.problems = discover(stores)
    stage("done")
    res.runs = len(infos)
    (out / "problems.json").write_text(json.dumps(res.problems, indent=2))
    tables = out / "tables"
    aggs = out / "aggregates"
    if not infos:
        return res

    stage("runs", "the runs table")
    rows = [run_row(i) for i in infos]
    runs_pdf = pd.DataFrame(rows, columns=[c.split()[0] for c in RUNS_SCHEMA.split(", ")])
    runs = spark.createDataFrame(runs_pdf, RUNS_SCHEMA)
    # a few tasks per core (balance: runs differ in cost, e.g. the reference checker's slow
    # path on a history with anomalies), each with many runs (a task's fixed cost is paid
    # once per task, not per run); no key, so no hash skew
    nparts = max(1, min(len(infos), spark.sparkContext.defaultParallelism * 4))
    work = runs.select("run_id", "campaign", "run", "history", "sub_via", "results_json"
                       ).repartition(nparts)

    schemas: dict[str, Any] = {}

    def write(df: Any, name: str, base: Path = tables, parts: Sequence[str] = ("campaign",)
              ) -> None:
        p = base / name
        stage(name, f"writing {base.name}/{name}")
        w = df.write.mode("overwrite")
        if parts:
            w = w.partitionBy(*parts)
        schemas[name] = df.schema
        w.parquet(str(p))
        res.tables[name] = p

    # every run analysed once, in one Spark job; its four kinds of rows staged as Parquet
    staged = out / "_per_run"
    stage("check runs", f"{len(infos)} runs checked in {nparts} tasks (mapInArrow)")
    ops_dir = tables / "ops"
    shutil.rmtree(ops_dir, ignore_errors=True)
    task = functools.partial(per_run_arrow, ops_dir=str(ops_dir.resolve()))
    (work.mapInArrow(task, PER_RUN_SCHEMA).write.mode("overwrite")
     .partitionBy("kind").parquet(str(staged)))
    res.tables["ops"] = ops_dir
    per_run = spark.read.schema(PER_RUN_SCHEMA.replace("kind string, ", "") + ", kind string"
                                ).parquet(str(staged))

    def kind(k: str) -> Any:
        return per_run.where(F.col("kind") == k).select(
            "run_id", *dict.fromkeys(n for n, _t in KIND_COLS[k]))

    checks, faults, oplat, unseen = (kind(k) for k in ("check", "fault", "op", "unseen"))

    camp = F.broadcast(runs.select("run_id", "campaign"))
    write(runs.drop("results_json"), "runs")
    checks_t = checks.join(F.broadcast(runs.select("run_id", "campaign", "recorded_verdict")),
                           "run_id")
    write(checks_t, "checks")
    anomalies = (checks.select("run_id", F.explode(F.from_json("counts", "map<string,bigint>"))
                               .alias("type", "count"),
                               F.from_json("bad", "array<string>").alias("bad_types"))
                 .withColumn("bad", F.array_contains("bad_types", F.col("type")))
                 .drop("bad_types").join(camp, "run_id"))
    write(anomalies, "anomalies")
    write(faults.join(camp, "run_id"), "faults")
    write(oplat.join(camp, "run_id"), "op_latency")
    write(unseen.join(camp, "run_id"), "unseen")

    # compare with results.json, on the driver (small)
    stage("compare", "verdicts and anomaly sets against results.json")
    got = {r["run_id"]: r.asDict() for r in checks.collect()}
    for i in infos:
        g = got.get(i.run_id)
        if g is None:
            res.mismatches.append((i.run_id, "not checked"))
            continue
        if g["error"]:
            res.problems.append((str(i.path), f"check failed: {g['error']}"))
            continue
        res.verdicts[i.run_id] = g["verdict"]
        want = recorded_check(i.results)
        mine = {"verdict": g["verdict"], "anomaly_types": json.loads(g["anomaly_types"]),
                "bad": json.loads(g["bad"]), "counts": json.loads(g["counts"])}
        diff = [k for k in want if want[k] != mine[k]]
        if diff:
            res.mismatches.append((i.run_id, "differs from results.json in " + ", ".join(
                f"{k} ({want[k]} vs {mine[k]})" for k in diff)))

    # aggregates (Spark SQL over the tables just written)
    cached = []
    for name in ("runs", "checks", "faults", "op_latency", "anomalies", "unseen"):
        # with the schema written: an empty table (no anomaly at all) has no part files
        df = spark.read.schema(schemas[name]).parquet(str(tables / name))
        if name != "op_latency":  # small tables, read by several aggregates: kept in memory
            df = df.cache()
            cached.append(df)
        df.createOrReplaceTempView(f"t_{name}")
    for name, sql in AGG_SQL.items():
        df = spark.sql(sql)
        write(df.coalesce(1), name, aggs, parts=())
    stage("done")
    for df in cached:
        df.unpersist()
    (out / "problems.json").write_text(json.dumps(
        {"problems": res.problems, "mismatches": res.mismatches}, indent=2))
    shutil.rmtree(staged, ignore_errors=True)
    return res


_V: Final = ("SELECT r.*, c.verdict, CASE WHEN c.verdict = 'invalid' THEN 1 ELSE 0 END AS bad_run"
             " FROM t_runs r JOIN t_checks c ON r.run_id = c.run_id")
_RUN_FAULTS: Final = (
    f"SELECT v.*, coalesce(f.fault, '{NO_FAULTS}') AS fault FROM ({_V}) v LEFT JOIN "
    "(SELECT DISTINCT run_id, fault FROM t_faults) f ON v.run_id = f.run_id")

AGG_SQL: Final = {
    "matrix": (
        f"SELECT config, fault, count(*) AS runs, sum(bad_run) AS invalid_runs, "
        f"sum(bad_run) / count(*) AS anomaly_rate FROM ({_RUN_FAULTS}) "
        "GROUP BY config, fault ORDER BY config, fault"),
    "by_dimension": " UNION ALL ".join(
        f"SELECT '{d}' AS dimension, CAST({d} AS string) AS value, count(*) AS runs, "
        f"sum(bad_run) AS invalid_runs, sum(bad_run) / count(*) AS anomaly_rate "
        f"FROM ({_V}) GROUP BY {d}" for d in DIMENSIONS) + " ORDER BY dimension, value",
    "by_type": (
        "SELECT r.config, a.type, count(DISTINCT a.run_id) AS runs_with, "
        "max(n.runs) AS runs, count(DISTINCT a.run_id) / max(n.runs) AS rate, "
        "max(CAST(a.bad AS int)) AS bad FROM t_anomalies a JOIN t_runs r ON a.run_id = r.run_id "
        "JOIN (SELECT config, count(*) AS runs FROM t_runs GROUP BY config) n "
        "ON n.config = r.config GROUP BY r.config, a.type ORDER BY r.config, a.type"),
    "latency": (
        "SELECT r.config, o.fault, count(*) AS ops, sum(CASE WHEN o.type = 'ok' THEN 1 ELSE 0 "
        "END) AS ok, sum(CASE WHEN o.type = 'ok' THEN 1 ELSE 0 END) / count(*) AS availability, "
        "percentile(CASE WHEN o.type = 'ok' THEN o.latency_ms END, 0.5) AS p50_ms, "
        "percentile(CASE WHEN o.type = 'ok' THEN o.latency_ms END, 0.99) AS p99_ms "
        "FROM t_op_latency o JOIN t_runs r ON o.run_id = r.run_id "
        "GROUP BY r.config, o.fault ORDER BY r.config, o.fault"),
    "unseen_decay": (
        "SELECT r.config, u.after_heal_s, count(*) AS runs, avg(u.unseen) AS mean_unseen, "
        "max(u.unseen) AS max_unseen, sum(CASE WHEN u.unseen = 0 THEN 1 ELSE 0 END) AS runs_zero "
        "FROM t_unseen u JOIN t_runs r ON u.run_id = r.run_id "
        "GROUP BY r.config, u.after_heal_s ORDER BY r.config, u.after_heal_s"),
    "seeds": (
        "SELECT a.type, r.config, r.seed, count(DISTINCT a.run_id) AS runs_with, "
        "max(n.runs) AS runs, count(DISTINCT a.run_id) / max(n.runs) AS rate, "
        "max(CAST(a.bad AS int)) AS bad FROM t_anomalies a JOIN t_runs r ON a.run_id = r.run_id "
        "JOIN (SELECT config, seed, count(*) AS runs FROM t_runs GROUP BY config, seed) n "
        "ON n.config = r.config AND n.seed = r.seed "
        "GROUP BY a.type, r.config, r.seed ORDER BY a.type, r.config, r.seed"),
    "recovery": (
        "SELECT r.config, f.fault, count(*) AS heals, count(f.recover_s) AS recovered, "
        "avg(f.recover_s) AS mean_recover_s, max(f.recover_s) AS max_recover_s "
        "FROM t_faults f JOIN t_runs r ON f.run_id = r.run_id "
        "GROUP BY r.config, f.fault ORDER BY r.config, f.fault"),
}
