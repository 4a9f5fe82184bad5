"""`hiwater analyze` on a synthetic store: verdicts and anomaly sets equal each run's
results.json (made by the single-process checker), aggregates equal pandas on the same
tables, bad inputs reported by name while the rest is analysed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness.analysis.pipeline import Analysis, analyze
from harness.analysis.runs import recorded_check
from harness.analysis.synth import CONFIGS, make_store, write_run
from harness.checkers.columnar import write_columnar
from harness.history import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _read(p: Path) -> pd.DataFrame:
    df = pd.read_parquet(p)
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df


@pytest.fixture(scope="module")
def analysed(spark: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Analysis, Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("analysis")
    store = root / "store"
    good = make_store(store, 8, 600)
    # a run written by a campaign: history.parquet in columnar form beside the JSONL
    col = write_run(store, "safe", "20260102T000000.000000Z", seed=99, n_ops=600,
                    config=CONFIGS[0], faults=("pause",))
    write_columnar(read_jsonl(col / "history.jsonl"), col / "history.parquet")
    good.append(col)
    bad: dict[str, Path] = {}
    # a run without results.json
    r = write_run(store, "broken", "20260103T000000.000000Z", seed=5, n_ops=200,
                  config=CONFIGS[0], faults=())
    (r / "results.json").unlink()
    bad["no results"] = r
    # a truncated history.jsonl (torn last line)
    r = write_run(store, "broken", "20260103T000001.000000Z", seed=6, n_ops=200,
                  config=CONFIGS[0], faults=())
    text = (r / "history.jsonl").read_text()
    (r / "history.jsonl").write_text(text[: len(text) - 17])
    bad["truncated"] = r
    # a corrupt Parquet file
    r = write_run(store, "broken", "20260103T000002.000000Z", seed=7, n_ops=200,
                  config=CONFIGS[0], faults=(), parquet=True)
    (r / "history.parquet").write_bytes(b"PAR1 not really parquet")
    bad["corrupt"] = r
    empty = root / "empty"
    empty.mkdir()
    bad["empty"] = empty
    res = analyze([store, empty], root / "out", spark)
    return res, root / "out", {"good": store, **bad}


def test_bad_inputs_reported_by_name(analysed: tuple[Analysis, Path, dict[str, Path]]) -> None:
    res, _out, where = analysed
    named = {Path(w): p for w, p in res.problems}
    assert "no results" in named[where["no results"]]
    assert "truncated" in named[where["truncated"]]
    assert "corrupt" in named[where["corrupt"]]
    assert "no runs" in named[where["empty"]]
    assert len(res.problems) == 4
    assert res.runs == 9 and res.exit_code == 2


def test_verdicts_and_anomalies_equal_results_json(
        analysed: tuple[Analysis, Path, dict[str, Path]]) -> None:
    res, out, _where = analysed
    assert res.mismatches == []
    checks = _read(out / "tables" / "checks")
    runs = _read(out / "tables" / "runs")
    assert len(checks) == 9
    assert set(checks["verdict"]) == {"valid", "invalid"}  # unsafe configurations lose writes
    for r in runs.itertuples():
        results = json.loads((Path(r.path) / "results.json").read_text())
        want = recorded_check(results)
        got = checks[checks["run_id"] == r.run_id].iloc[0]
        assert got["verdict"] == want["verdict"] == r.recorded_verdict
        assert json.loads(got["anomaly_types"]) == want["anomaly_types"]
        assert json.loads(got["bad"]) == want["bad"]
        assert json.loads(got["counts"]) == want["counts"]
    anomalies = _read(out / "tables" / "anomalies")
    for rid, g in anomalies.groupby("run_id"):
        c = checks[checks["run_id"] == rid].iloc[0]
        assert sorted(g["type"]) == json.loads(c["anomaly_types"])
    # every history event is in the ops table, partitioned by campaign and run
    ops = _read(out / "tables" / "ops")
    for r in runs.itertuples():
        lines = (Path(r.path) / "history.jsonl").read_text().splitlines()
        n = sum(1 for line in lines if line.strip())
        assert (ops["run_id"] == r.run_id).sum() == n
    assert (out / "tables" / "ops" / "campaign=safe").is_dir()
    # old runs were converted once, beside their JSONL
    assert all((p / "history.parquet").exists() for p in runs["path"].map(Path))


def _verdicts(out: Path) -> pd.DataFrame:
    runs = _read(out / "tables" / "runs")
    checks = _read(out / "tables" / "checks")[["run_id", "verdict"]]
    v = runs.merge(checks, on="run_id")
    v["bad_run"] = (v["verdict"] == "invalid").astype(int)
    return v


def _close(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> None:
    a = a.sort_values(keys).reset_index(drop=True)
    b = b.sort_values(keys).reset_index(drop=True)[list(a.columns)]
    assert list(a[keys].astype(str).itertuples(index=False)) == \
        list(b[keys].astype(str).itertuples(index=False))
    for c in a.columns:
        if c in keys:
            continue
        x, y = a[c].astype(float).to_numpy(), b[c].astype(float).to_numpy()
        assert np.allclose(x, y, equal_nan=True), c


def test_aggregates_equal_pandas(analysed: tuple[Analysis, Path, dict[str, Path]]) -> None:
    _res, out, _where = analysed
    aggs = out / "aggregates"
    v = _verdicts(out)
    faults = _read(out / "tables" / "faults")
    rf = v.merge(faults[["run_id", "fault"]].drop_duplicates(), on="run_id", how="left")
    rf["fault"] = rf["fault"].fillna("none")
    m = rf.groupby(["config", "fault"]).agg(runs=("run_id", "size"),
                                            invalid_runs=("bad_run", "sum")).reset_index()
    m["anomaly_rate"] = m["invalid_runs"] / m["runs"]
    _close(m, _read(aggs / "matrix"), ["config", "fault"])
    assert set(m["fault"]) >= {"partition", "kill", "pause", "none"}

    parts = []
    for d in ("nemesis", "config", "acks", "min_isr", "unclean", "idempotence", "bugs",
              "workload", "seed"):
        g = v.groupby(d).agg(runs=("run_id", "size"), invalid_runs=("bad_run", "sum"))
        g = g.reset_index().rename(columns={d: "value"})
        g["value"] = g["value"].map(lambda x: str(x).lower() if isinstance(x, bool | np.bool_)
                                    else str(x))
        g.insert(0, "dimension", d)
        parts.append(g)
    bd = pd.concat(parts)
    bd["anomaly_rate"] = bd["invalid_runs"] / bd["runs"]
    _close(bd, _read(aggs / "by_dimension"), ["dimension", "value"])

    lat = _read(out / "tables" / "op_latency").merge(v[["run_id", "config"]], on="run_id")
    rows = []
    for (c, f), g in lat.groupby(["config", "fault"]):
        ok = g[g["type"] == "ok"]["latency_ms"]
        rows.append({"config": c, "fault": f, "ops": len(g), "ok": len(ok),
                     "availability": len(ok) / len(g),
                     "p50_ms": ok.quantile(0.5) if len(ok) else np.nan,
                     "p99_ms": ok.quantile(0.99) if len(ok) else np.nan})
    _close(pd.DataFrame(rows), _read(aggs / "latency"), ["config", "fault"])

    fr = faults.merge(v[["run_id", "config"]], on="run_id")
    rec = fr.groupby(["config", "fault"]).agg(
        heals=("run_id", "size"), recovered=("recover_s", "count"),
        mean_recover_s=("recover_s", "mean"), max_recover_s=("recover_s", "max")).reset_index()
    _close(rec, _read(aggs / "recovery"), ["config", "fault"])

    an = _read(out / "tables" / "anomalies").merge(v[["run_id", "config"]], on="run_id")
    n = v.groupby("config").size().rename("runs")
    bt = an.groupby(["config", "type"]).agg(runs_with=("run_id", "nunique"),
                                           bad=("bad", "max")).reset_index()
    bt = bt.merge(n, on="config")
    bt["rate"] = bt["runs_with"] / bt["runs"]
    _close(bt, _read(aggs / "by_type"), ["config", "type"])

    un = _read(out / "tables" / "unseen").merge(v[["run_id", "config"]], on="run_id")
    assert len(un) and set(un["run_id"]) == set(v["run_id"])
    ud = un.groupby(["config", "after_heal_s"]).agg(
        runs=("run_id", "size"), mean_unseen=("unseen", "mean"), max_unseen=("unseen", "max"),
        runs_zero=("unseen", lambda x: int((x == 0).sum()))).reset_index()
    _close(ud, _read(aggs / "unseen_decay"), ["config", "after_heal_s"])

    an2 = _read(out / "tables" / "anomalies").merge(v[["run_id", "config", "seed"]],
                                                   on="run_id")
    ns = v.groupby(["config", "seed"]).size().rename("runs").reset_index()
    sd = an2.groupby(["type", "config", "seed"]).agg(runs_with=("run_id", "nunique"),
                                                     bad=("bad", "max")).reset_index()
    sd = sd.merge(ns, on=["config", "seed"])
    sd["rate"] = sd["runs_with"] / sd["runs"]
    _close(sd, _read(aggs / "seeds"), ["type", "config", "seed"])
    assert {"lost_write", "unseen"} <= set(sd["type"])


def test_page(analysed: tuple[Analysis, Path, dict[str, Path]]) -> None:
    from harness.analysis.page import render

    res, out, _where = analysed
    html = render(out, res.problems, res.mismatches).read_text()
    assert "configuration × fault kind" in html and "Plotly" in html
    assert "Unseen decay after the last heal" in html
    assert "Which seeds reproduce which anomaly" in html
    assert "report.html" in html  # links to each run's report
    assert "<script src=" not in html  # self-contained


def test_all_valid_store_has_empty_anomalies(spark: Any, tmp_path: Path) -> None:
    """No anomaly anywhere: the empty tables still read back, the aggregates still come."""
    store = tmp_path / "store"
    write_run(store, "safe", "20260104T000000.000000Z", seed=3, n_ops=200, config=CONFIGS[0],
              faults=("kill",))
    res = analyze([store], tmp_path / "out", spark)
    assert res.runs == 1 and res.exit_code == 0 and res.verdicts == {
        "safe/20260104T000000.000000Z": "valid"}
    assert len(_read(tmp_path / "out" / "aggregates" / "matrix")) == 1
    assert len(_read(tmp_path / "out" / "aggregates" / "by_type")) == 0
