"""Start a SparkSession set up for the RocketMQ sources.

The Python workers Spark starts must import `rmq_spark` and `rmq` the way this process does,
so the directories they come from are put on PYTHONPATH (and the same interpreter on
PYSPARK_PYTHON) before the JVM starts. On a real cluster, install the rmq package on the
executors instead.

A driver JVM this process starts gets options that make it start cheaply, unless the caller
sets `spark.driver.extraJavaOptions` itself: the class archive of spark.class_archive, and in
local mode (every task runs in that JVM, jobs are small and short) the C1 compiler alone and
the serial collector, which bench/spark_small.py measures at a third less CPU than tiered
compilation and G1's threads for a session and a 20,000-row export.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from . import class_archive
from .java import check_java

DEFAULT_CONF = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.python.filterPushdown.enabled": "true",
    # Partition values stay strings when read back: a topic named "0123" must not turn into 123.
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # Standard Parquet timestamps (int64 microseconds, UTC) instead of legacy INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"


def _package_roots() -> list[str]:
    import rmq

    here = Path(__file__).resolve().parent.parent
    return sorted({str(here), str(Path(rmq.__file__).resolve().parent.parent)})


def prepare_environment() -> None:
    """Make Spark's Python workers use this interpreter and find our packages."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for root in _package_roots():
        if root not in paths:
            paths.insert(0, root)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def build_session(master: str = "local[*]", app_name: str = "rmq", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession with both sources registered.

    Raises:
        rmq_spark.java.JavaMissing: no Java 17+ (checked before Spark is started).
    """
    check_java()
    prepare_environment()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from .sources import register

    settings = {**DEFAULT_CONF, **(conf or {})}
    partial = None
    # A JVM already running (this process's, or spark-submit's) has its options.
    starts_jvm = SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    if starts_jvm and JAVA_OPTIONS_KEY not in settings:
        archive, partial = class_archive.java_options()
        local = LOCAL_JAVA_OPTIONS if master.startswith("local") else ""
        if local or archive:
            settings[JAVA_OPTIONS_KEY] = f"{local} {archive}".strip()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    jvm = getattr(SparkContext._gateway, "proc", None)
    if partial is not None and jvm is not None:
        class_archive.finish_at_exit(partial, jvm)
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
