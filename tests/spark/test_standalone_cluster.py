"""The export, the sources and the sink on a standalone Spark cluster (a master and a worker
started here as their own JVMs), as `spark-submit --master spark://...` runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..ports import free_ports
from .spark_fixtures import StoreWriter, fill, read_parquet

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYTHONPATH=str(ROOT),
    )
    return env


@pytest.fixture
def standalone(java: int, tmp_path: Path) -> Iterator[str]:
    port, ui, wui = free_ports(), free_ports(), free_ports()
    env = _env(tmp_path)
    logs = tmp_path / "cluster.log"
    with open(logs, "w") as log:
        master = subprocess.Popen(
            [_spark_bin("spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        url = f"spark://127.0.0.1:{port}"
        worker = subprocess.Popen(
            [_spark_bin("spark-class"), "org.apache.spark.deploy.worker.Worker", url,
             "--host", "127.0.0.1", "--cores", "2", "--memory", "1g", "--webui-port", str(wui)],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in logs.read_text():
            assert time.monotonic() < deadline, logs.read_text()[-3000:]
            assert master.poll() is None and worker.poll() is None, logs.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        for p in (worker, master):
            p.terminate()
        for p in (worker, master):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_export_sources_and_sink_on_a_standalone_cluster(
    standalone: str, store_writer: Any, rmq_cluster: Any, tmp_path: Path
) -> None:
    w: StoreWriter = store_writer()
    fill(w, 120)
    w.close()
    env = _env(tmp_path)
    out = tmp_path / "out"
    # the export command, with the cluster as its master
    proc = subprocess.run(
        [sys.executable, "-m", "rmq", "export", "parquet", "--store", str(w.root), "--out", str(out),
         "--master", standalone],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(read_parquet(out)) == 120
    # a job submitted with spark-submit: the store source in, the sink out to a live broker
    job = tmp_path / "job.py"
    job.write_text(
        textwrap.dedent(
            f"""
            import sys
            from rmq_spark.session import build_session
            spark = build_session({standalone!r}, "rmq standalone test")
            df = spark.read.format("rocketmq-store").load({str(w.root)!r})
            df.select("body", "tags").write.format("rocketmq").option("namesrv", {rmq_cluster.namesrv_addr!r}) \\
                .option("topic", "FromStandalone").mode("append").save()
            n = spark.read.format("rocketmq").option("namesrv", {rmq_cluster.namesrv_addr!r}) \\
                .option("topics", "FromStandalone").load().count()
            print("ROWS", n)
            spark.stop()
            """
        )
    )
    rmq_cluster.create_topic("FromStandalone", 2)
    proc = subprocess.run(
        [_spark_bin("spark-submit"), "--master", standalone, str(job)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ROWS 120" in proc.stdout
