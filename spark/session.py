"""Start a SparkSession set up for the RocketMQ sources.

The Python workers Spark starts must import `rmq_spark` and `rmq` the way this process does,
so the directories they come from are put on PYTHONPATH (and the same interpreter on
PYSPARK_PYTHON) before the JVM starts. On a real cluster, install the rmq package on the
executors instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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
    from pyspark.sql import SparkSession

    from .sources import register

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
