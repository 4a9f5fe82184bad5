"""A quiet SparkSession: Java and the worker Python found automatically, bound to 127.0.0.1,
no UI, Spark's own log (WARN and up) in a file under the output directory."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse


class SparkUnavailable(Exception):
    """Java missing, or the master unreachable: one line for the user (exit 3)."""


def _java_version(java: str) -> int | None:
    try:
        p = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = p.stderr + p.stdout
    for tok in text.replace('"', " ").split():
        head = tok.split(".")[0].split("-")[0]
        if head.isdigit() and ("." in tok or tok.isdigit()) and 8 <= int(head) < 100:
            return int(head)
    return None


def find_java_home() -> str:
    """JAVA_HOME if it holds a java, else Java 17 (Spark's best fit), else any 17–21 JDK/JRE
    under /usr/lib/jvm, else `java` on PATH. Raises SparkUnavailable when there is none."""
    env = os.environ.get("JAVA_HOME")
    if env and os.access(os.path.join(env, "bin", "java"), os.X_OK):
        return env
    cands = sorted(glob.glob("/usr/lib/jvm/*17*")) + sorted(glob.glob("/usr/lib/jvm/*21*"))
    for c in cands:
        if os.access(os.path.join(c, "bin", "java"), os.X_OK):
            return os.path.realpath(c)
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    raise SparkUnavailable("Java not found: install openjdk-17-jre-headless "
                           "(Debian) or set JAVA_HOME")


def _check_master(master: str) -> None:
    if master.startswith("local"):
        return
    u = urlparse(master)
    if u.scheme != "spark" or not u.hostname:
        raise SparkUnavailable(f"unsupported master {master!r} (local[*] or spark://HOST:PORT)")
    try:
        with socket.create_connection((u.hostname, u.port or 7077), timeout=5):
            pass
    except OSError as e:
        raise SparkUnavailable(f"Spark master {master} unreachable: {e.strerror or e}") from None


LOG4J = """status = error
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


def session(master: str = "local[*]", log_dir: Path | None = None, *,
            shuffle_partitions: int = 4, driver_memory: str = "1g") -> Any:
    """Start (or reuse) a SparkSession. Raises SparkUnavailable with one line."""
    os.environ["JAVA_HOME"] = find_java_home()
    if _java_version(os.path.join(os.environ["JAVA_HOME"], "bin", "java")) is None:
        raise SparkUnavailable(f"Java at {os.environ['JAVA_HOME']} does not run")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    _check_master(master)
    log_dir = Path(log_dir or ".")
    log_dir.mkdir(parents=True, exist_ok=True)
    props = log_dir / "log4j2.properties"
    props.write_text(LOG4J.format(level="WARN", path=(log_dir / "spark.log").resolve()))
    java_opts = f"-Dlog4j2.configurationFile=file:{props.resolve()}"
    # the worker processes must import this project
    root = str(Path(__file__).resolve().parents[2])
    pp = os.environ.get("PYTHONPATH", "")
    if root not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(master).appName("hiwater-analyze")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.default.parallelism", str(shuffle_partitions))
         .config("spark.driver.memory", driver_memory)
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", java_opts)
         .config("spark.executor.extraJavaOptions", java_opts)
         .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
         .config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1"))
    if not master.startswith("local"):
        b = b.config("spark.executor.memory", "512m").config("spark.cores.max", "2")
    # the JVM's own stderr chatter (launcher warnings) goes to the log as well
    saved = os.dup(2)
    try:
        with open(log_dir / "spark-launch.log", "ab") as fh:
            os.dup2(fh.fileno(), 2)
            try:
                spark = b.getOrCreate()
            finally:
                os.dup2(saved, 2)
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkUnavailable(f"Spark did not start ({master}): {msg}") from None
    finally:
        os.close(saved)
    spark.sparkContext.setLogLevel("ERROR")
    return spark
