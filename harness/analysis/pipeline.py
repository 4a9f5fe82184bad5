"""`hiwater analyze`: many campaign runs → Parquet tables → distributed checks → aggregates.

Tables (under OUT/tables, Parquet; `ops` partitioned by campaign and run, the others by
campaign):

- `runs`: one row per analysed run — options (workload, acks, min ISR, unclean, idempotence,
  bugs, fault mix, seed, a `config` label) and the verdict recorded in results.json;
- `ops`: every history event (harness.history's fixed schema) plus run_id/campaign/run;
- `checks`: the verdict, validity and anomaly counts found by the single-process checker
  (`harness.checkers.check`, what `hiwater check` and the campaign run) on each run, one run
  per task (`mapInPandas`), and whether they agree with results.json;
- `anomalies`: (run, anomaly type, count, outside the policy?);
- `faults`: fault windows with the time to recover after each heal;
- `op_latency`: client ops paired (invoke → completion), one row per fault kind active at the
  invocation (`quiet` outside every fault).

Aggregates (OUT/aggregates, and the page OUT/index.html): `matrix` (config × fault kind:
runs, invalid runs, anomaly rate), `by_dimension` (anomaly rate by fault mix, config, acks,
min ISR, unclean, idempotence, bug switch, workload, seed), `by_type` (runs with each anomaly
type per config), `latency` (config × fault kind or quiet: ops, ok, availability, ok-latency
p50/p99 in ms, exact percentiles) and `recovery` (config × fault kind: heals, recovered,
mean/max seconds to the first ok after the heal).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
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
CHECK_SCHEMA: Final = (
    "run_id string, verdict string, valid string, anomaly_types string, bad string, "
    "counts string, linearizable string, error string")
FAULT_COLS: Final = (("window", "int"), ("fault", "string"), ("start_ns", "long"),
                     ("end_ns", "long"), ("recover_s", "double"))
OPLAT_COLS: Final = (("f", "string"), ("type", "string"), ("invoke_ns", "long"),
                     ("latency_ms", "double"), ("fault", "string"))
#: one row per run: the check, and its fault windows and paired ops as arrays (one read
#: of each history; Spark explodes the arrays into the faults and op_latency tables)
PER_RUN_SCHEMA: Final = CHECK_SCHEMA + "".join(
    f", w_{n} array<{t}>" for n, t in FAULT_COLS) + "".join(
    f", o_{n} array<{t}>" for n, t in OPLAT_COLS)


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


def _per_run_batches(batches: Iterator[Any]) -> Iterator[Any]:
    import pandas as pd

    from harness.analysis.runs import check_run, fault_rows, op_rows
    from harness.history import read_parquet

    cols = [c.split()[0] for c in PER_RUN_SCHEMA.split(", ")]
    for pdf in batches:
        rows = []
        for r in pdf.itertuples(index=False):
            try:
                h = read_parquet(r.history)
                row: dict[str, Any] = check_run(h, r.sub_via.split(","),
                                                json.loads(r.results_json))
                row["error"] = None
                ws = fault_rows(h)
                for n, _t in FAULT_COLS:
                    row[f"w_{n}"] = [w[n] for w in ws]
                for n, v in op_rows(h, ws).items():
                    row[f"o_{n}"] = v
            except Exception as e:  # reported per run, the others go on
                row = {"verdict": "unknown", "valid": "unknown", "anomaly_types": "[]",
                       "bad": "[]", "counts": "{}", "linearizable": "n/a",
                       "error": f"{type(e).__name__}: {e}",
                       **{f"w_{n}": [] for n, _ in FAULT_COLS},
                       **{f"o_{n}": [] for n, _ in OPLAT_COLS}}
            rows.append({"run_id": r.run_id, **row})
        yield pd.DataFrame(rows, columns=cols)


def _explode(df: Any, prefix: str, cols: Sequence[tuple[str, str]]) -> Any:
    from pyspark.sql import functions as F

    z = F.arrays_zip(*[F.col(f"{prefix}{n}") for n, _ in cols])
    return (df.select("run_id", F.explode(z).alias("z"))
            .select("run_id", *[F.col(f"z.{prefix}{n}").alias(n) for n, _ in cols]))


# ---------------------------------------------------------------------------------------
# the pipeline


def _norm_path_col(col: Any) -> Any:
    from pyspark.sql import functions as F

    return F.regexp_replace(col, r"^file:(//)?", "")


def analyze(stores: Sequence[Path], out: Path, spark: Any) -> Analysis:
    from pyspark.sql import functions as F

    from harness.history import parquet_schema

    out.mkdir(parents=True, exist_ok=True)
    res = Analysis(out)
    t = time.perf_counter()
    infos, res.problems = discover(stores)
    res.seconds["discover"] = time.perf_counter() - t
    res.runs = len(infos)
    (out / "problems.json").write_text(json.dumps(res.problems, indent=2))
    tables = out / "tables"
    aggs = out / "aggregates"
    if not infos:
        return res

    rows = [run_row(i) for i in infos]
    import pandas as pd

    runs_pdf = pd.DataFrame(rows, columns=[c.split()[0] for c in RUNS_SCHEMA.split(", ")])
    runs = spark.createDataFrame(runs_pdf, RUNS_SCHEMA)
    nparts = max(1, min(len(infos), spark.sparkContext.defaultParallelism * 2))
    work = runs.select("run_id", "history", "sub_via", "results_json").repartition(
        nparts, "run_id").cache()

    per_run = work.mapInPandas(_per_run_batches, PER_RUN_SCHEMA).cache()
    checks = per_run.select(*[c.split()[0] for c in CHECK_SCHEMA.split(", ")])
    faults = _explode(per_run, "w_", FAULT_COLS)
    oplat = _explode(per_run, "o_", OPLAT_COLS)

    # the raw events, read by Spark from each run's Parquet (fixed schema)
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(_spark_schema_json(parquet_schema())))
    paths = [str(Path(i.history).resolve()) for i in infos if i.history]
    keyed = spark.createDataFrame(
        [(str(Path(i.history).resolve()), i.run_id, i.campaign, i.run) for i in infos
         if i.history], "src string, run_id string, campaign string, run string")
    ops = (spark.read.schema(schema).parquet(*paths)
           .withColumn("src", _norm_path_col(F.input_file_name()))
           .join(F.broadcast(keyed), "src").drop("src"))

    schemas: dict[str, Any] = {}

    def write(df: Any, name: str, base: Path = tables, parts: Sequence[str] = ("campaign",)
              ) -> None:
        p = base / name
        w = df.write.mode("overwrite")
        if parts:
            w = w.partitionBy(*parts)
        t0 = time.perf_counter()
        schemas[name] = df.schema
        w.parquet(str(p))
        res.tables[name] = p
        res.seconds[name] = time.perf_counter() - t0

    camp = runs.select("run_id", "campaign")
    write(runs.drop("results_json"), "runs")
    write(ops, "ops", parts=("campaign", "run"))
    checks_t = checks.join(runs.select("run_id", "campaign", "recorded_verdict"), "run_id")
    write(checks_t, "checks")
    anomalies = (checks.select("run_id", F.explode(F.from_json("counts", "map<string,bigint>"))
                               .alias("type", "count"),
                               F.from_json("bad", "array<string>").alias("bad_types"))
                 .withColumn("bad", F.array_contains("bad_types", F.col("type")))
                 .drop("bad_types").join(camp, "run_id"))
    write(anomalies, "anomalies")
    write(faults.join(camp, "run_id"), "faults")
    write(oplat.join(camp, "run_id"), "op_latency")

    # compare with results.json, on the driver (small)
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
    for name in ("runs", "checks", "faults", "op_latency", "anomalies"):
        # with the schema written: an empty table (no anomaly at all) has no part files
        spark.read.schema(schemas[name]).parquet(str(tables / name)).createOrReplaceTempView(
            f"t_{name}")
    for name, sql in AGG_SQL.items():
        df = spark.sql(sql)
        write(df.coalesce(1), name, aggs, parts=())
    (out / "problems.json").write_text(json.dumps(
        {"problems": res.problems, "mismatches": res.mismatches}, indent=2))
    per_run.unpersist()
    work.unpersist()
    return res


def _spark_schema_json(pa_schema: Any) -> str:
    types = {"int64": "long", "string": "string"}
    return json.dumps({"type": "struct", "fields": [
        {"name": f.name, "type": types[str(f.type)], "nullable": True, "metadata": {}}
        for f in pa_schema]})


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
    "recovery": (
        "SELECT r.config, f.fault, count(*) AS heals, count(f.recover_s) AS recovered, "
        "avg(f.recover_s) AS mean_recover_s, max(f.recover_s) AS max_recover_s "
        "FROM t_faults f JOIN t_runs r ON f.run_id = r.run_id "
        "GROUP BY r.config, f.fault ORDER BY r.config, f.fault"),
}
