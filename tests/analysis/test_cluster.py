"""A standalone Spark cluster (a master and 2 workers from the pyspark package, on 127.0.0.1)
gives the same tables as local[*]. Runs everywhere the suite runs (it starts three more JVMs
and takes a few minutes): a skip on the project's machines would hide a broken cluster path."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis.pipeline import analyze
from harness.analysis.spark import find_java_home
from harness.analysis.synth import make_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "JAVA_HOME": find_java_home(), "SPARK_HOME": str(home),
           "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_NO_DAEMONIZE": "1"}
    port = _free_port()
    procs: list[subprocess.Popen[bytes]] = []
    cls = str(home / "bin" / "spark-class")
    try:
        with open(tmp_path / "master.log", "wb") as log:
            procs.append(subprocess.Popen(
                [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(_free_port())],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        _wait_port(port, 180)
        for i in range(2):
            with open(tmp_path / f"worker{i}.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [cls, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                     "--host", "127.0.0.1", "--cores", "1", "--memory", "768m",
                     "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"w{i}")],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        time.sleep(15)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)


def _table(out: Path, name: str) -> pd.DataFrame:
    df = pd.read_parquet(out / name)
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def test_standalone_cluster_gives_the_local_tables(cluster: str, spark: Any,
                                                   tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_store(store, 6, 400)
    # the cluster: `hiwater analyze` in its own process (one SparkContext per process);
    # local[2]: the test session's own (no second JVM to start)
    out_cluster, out_local = tmp_path / "out-cluster", tmp_path / "out-local"
    p = subprocess.run([str(Path(sys.executable).parent / "hiwater"), "analyze", str(store),
                        "--master", cluster, "--out", str(out_cluster)],
                       capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stderr[-2000:]
    res = analyze([store], out_local, spark)
    assert res.exit_code == 0 and res.runs == 6
    for name in ("tables/runs", "tables/checks", "tables/anomalies", "tables/faults",
                 "tables/op_latency", "tables/ops", "tables/unseen", "aggregates/matrix",
                 "aggregates/latency", "aggregates/by_dimension", "aggregates/recovery",
                 "aggregates/unseen_decay", "aggregates/seeds"):
        a, b = _table(out_cluster, name), _table(out_local, name)
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
