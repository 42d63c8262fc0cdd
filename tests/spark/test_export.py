"""Spark in local mode over stores written by our MessageStore: export to Parquet, read back with pyarrow."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from rmq.protocol.message import make_offset_msg_id
from rmq.store import MessageDraft
from rmq_spark import export
from rmq_spark.store_scan import list_segments

from .spark_fixtures import DAY_MS, StoreWriter, fill, read_parquet, tear_tail, write_garbage
from .test_store_scan import crash_store

pytestmark = pytest.mark.spark


def run_export(session: Any, *argv: str) -> export.WriteResult:
    return export.run(session, export.parse_args(list(argv)))


def test_export_round_trip(spark_session: Any, store_writer: Any, tmp_path: Path) -> None:
    w: StoreWriter = store_writer()
    w.step_ms = DAY_MS // 160  # 300 messages over two UTC days
    fill(w, 300)
    w.close()
    tear_tail(w.root)
    out = tmp_path / "out"

    result = run_export(spark_session, "--store", str(w.root), "--out", str(out), "--split-size", "16384")

    rows = read_parquet(out)
    assert result.rows == len(rows) == len(w.sent)
    for row, sent in zip(rows, w.sent, strict=False):
        assert row["topic"] == sent.topic
        assert row["body"] == sent.body
        assert row["compression"] is None
        assert row["sys_flag"] & 1 == int(sent.compressed)
        assert dict(row["properties"]) == sent.properties
        assert row["keys"] == sent.properties["KEYS"].split()
        assert row["tags"] == sent.properties["TAGS"]
        assert row["uniq_key"] == sent.properties["UNIQ_KEY"]
        assert (row["queue_id"], row["queue_offset"], row["commitlog_offset"]) == (
            sent.queue_id, sent.queue_offset, sent.commitlog_offset,
        )  # fmt: skip
        stored = dt.datetime.fromtimestamp(sent.store_ms / 1000, dt.UTC)
        assert row["store_timestamp"] == stored
        assert row["date"] == stored.strftime("%Y-%m-%d")
        assert row["born_host"] == "10.1.2.3:40000" and row["store_host"] == "10.9.8.7:10911"
        assert row["msg_id"] == make_offset_msg_id("10.9.8.7", 10911, sent.commitlog_offset)
        assert row["is_retry"] == sent.topic.startswith("%RETRY%")
        assert row["delay_level"] == (3 if row["is_retry"] else None)
        assert row["transaction_type"] == "NOT" and not row["is_dlq"]
    assert {r["date"] for r in rows} == {"2024-05-01", "2024-05-02"}
    assert (out / "topic=%25RETRY%25billing").is_dir()


def test_rerun_replaces_rows_and_keeps_the_rest(spark_session: Any, store_writer: Any, tmp_path: Path) -> None:
    w: StoreWriter = store_writer()
    w.step_ms = DAY_MS // 100
    fill(w, 200, topics=("a", "b"))
    w.close()
    out = tmp_path / "out"
    first = run_export(spark_session, "--store", str(w.root), "--out", str(out))
    assert first.merged == 0

    # A sub-range over part of one day: only those rows are rewritten, nothing is lost or doubled.
    since, until = w.sent[30].store_ms, w.sent[60].store_ms
    again = run_export(
        spark_session, "--store", str(w.root), "--out", str(out), "--since", str(since), "--until", str(until)
    )
    assert again.rows == 30 and again.merged == again.partitions
    rows = read_parquet(out)
    assert [r["commitlog_offset"] for r in rows] == [s.commitlog_offset for s in w.sent]

    # The whole range once more, restricted to one topic.
    run_export(spark_session, "--store", str(w.root), "--out", str(out), "--topic", "b")
    assert [r["commitlog_offset"] for r in read_parquet(out)] == [s.commitlog_offset for s in w.sent]
    # Nothing to export: nothing changes.
    empty = run_export(spark_session, "--store", str(w.root), "--out", str(out), "--topic", "no-such-topic")
    assert (empty.rows, empty.partitions) == (0, 0)
    assert len(read_parquet(out)) == len(w.sent)
    assert not [p for p in out.iterdir() if p.name.startswith("_staging")]


def test_crashed_broker_store_exports_every_valid_record(spark_session: Any, tmp_path: Path) -> None:
    root = tmp_path / "crashed"
    written = crash_store(root, 600)
    assert (root / "abort").exists()
    write_garbage(root)
    out = tmp_path / "out"
    result = run_export(spark_session, "--store", str(root), "--out", str(out), "--split-size", "8192")
    assert result.rows == len(written)
    assert [r["commitlog_offset"] for r in read_parquet(out)] == written


def test_store_source_pushes_topic_and_time_filters(spark_session: Any, store_writer: Any) -> None:
    from pyspark.sql import functions as F

    w: StoreWriter = store_writer()
    fill(w, 120)
    w.close()
    lo = dt.datetime.fromtimestamp(w.sent[40].store_ms / 1000, dt.UTC)
    df = spark_session.read.format("rocketmq-store").option("splitSize", "8192").load(str(w.root))
    assert df.rdd.getNumPartitions() > len(list_segments(w.root))  # files are read in several pieces
    picked = df.where((F.col("topic") == "payments") & (F.col("store_timestamp") >= F.lit(lo)))
    got = sorted(r.commitlog_offset for r in picked.select("commitlog_offset").collect())
    want = [s.commitlog_offset for s in w.sent if s.topic == "payments" and s.store_ms >= w.sent[40].store_ms]
    assert got == want and want
    plan = picked._jdf.queryExecution().executedPlan().toString()
    assert " Filter (" not in plan  # the source applied both filters itself
    by_option = spark_session.read.format("rocketmq-store").option("topics", "orders").load(str(w.root)).count()
    assert by_option == sum(s.topic == "orders" for s in w.sent)


def test_to_parquet_reuses_the_session_and_writes_what_the_store_reader_decodes(
    spark_session: Any, store_writer: Any, tmp_path: Path
) -> None:
    """Two exports from Python in the session already running, one topic each; together they
    hold every record as the store's own reader decodes it (spark.rows over spark.store_scan,
    which the source hands Spark as Arrow batches), value for value."""
    from pyspark.sql import SparkSession

    from rmq_spark.rows import batches
    from rmq_spark.schema import arrow_schema
    from rmq_spark.store_scan import plan_splits, scan_split

    w: StoreWriter = store_writer()
    fill(w, 150, topics=("a", "b"))
    w.close()
    out = tmp_path / "out"
    first = export.to_parquet(out, store=w.root, topics="a")
    second = export.to_parquet(out, store=str(w.root), topics=["b"])
    active = SparkSession.getActiveSession()
    assert active is not None and active.sparkContext.applicationId == spark_session.sparkContext.applicationId
    assert (first.rows, second.rows) == (75, 75)
    want = [row for s in plan_splits(w.root) for b in batches(scan_split(s), arrow_schema()) for row in b.to_pylist()]
    got = read_parquet(out)
    assert {row.pop("date") for row in got} == {"2024-05-01"}
    assert got == want and len(want) == 150
    with pytest.raises(ValueError, match="store or namesrv"):
        export.to_parquet(out)


def test_export_without_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    (tmp_path / "commitlog").mkdir()
    assert export.main(["--store", str(tmp_path), "--out", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert "Java not found" in err and "openjdk-17" in err and "JAVA_HOME" in err


@pytest.mark.slow
def test_rmq_export_parquet_command(java: int, store_writer: Any, tmp_path: Path) -> None:
    """The real command in its own process: plain progress lines (no terminal) and the summary;
    its JVM leaves a class archive in the cache for the next start, and nothing half-written."""
    import os
    import subprocess
    import sys

    w: StoreWriter = store_writer()
    fill(w, 50)
    w.close()
    out = tmp_path / "out"
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("RMQ_SPARK_CLASS_ARCHIVE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "rmq", "export", "parquet", "--store", str(w.root), "--out", str(out)]
        + ["--master", "local[1]"],
        capture_output=True, text=True, timeout=600, cwd=repo, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "export ..." in proc.stdout
    assert f"exported 50 rows to {out}" in proc.stdout
    assert len(read_parquet(out)) == 50
    cached = sorted(p.name for p in (tmp_path / "cache" / "rmq").iterdir())
    assert len(cached) == 1 and cached[0].startswith("spark-classes-") and cached[0].endswith(".jsa"), cached


def test_empty_store_and_empty_range_export_zero_rows(spark_session: Any, store_writer: Any, tmp_path: Path) -> None:
    empty: StoreWriter = store_writer("empty")
    empty.close()
    out = tmp_path / "out"
    assert run_export(spark_session, "--store", str(empty.root), "--out", str(out)).rows == 0
    w: StoreWriter = store_writer()
    fill(w, 20)
    w.close()
    result = run_export(spark_session, "--store", str(w.root), "--out", str(out), "--since", "2100-01-01")
    assert result.rows == 0
    assert sorted(p.name for p in out.iterdir()) == []  # no lock file, no staging left


def test_interrupted_export_leaves_nothing_that_blocks_the_next(
    spark_session: Any, store_writer: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from rmq_spark.parquet_sink import write

    out = tmp_path / "out"
    failing = spark_session.range(10).select(
        F.lit("T").alias("topic"),
        F.current_timestamp().alias("store_timestamp"),
        F.expr("raise_error('boom')").alias("x"),
    )
    with pytest.raises(Exception, match="boom"):
        write(spark_session, failing, out)
    assert list(out.iterdir()) == []
    w: StoreWriter = store_writer()
    fill(w, 20)
    w.close()
    assert run_export(spark_session, "--store", str(w.root), "--out", str(out)).rows == 20


def test_missing_or_foreign_store_is_a_one_line_error(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a store")
    for bad in (tmp_path / "missing", tmp_path / "foreign"):
        with pytest.raises(SystemExit) as exit_info:
            export.parse_args(["--store", str(bad), "--out", str(tmp_path / "out")])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert str(bad) in err and "CommitLog" in err


def test_lz4_and_zstd_bodies_are_inflated(spark_session: Any, tmp_path: Path) -> None:
    from rmq.protocol.message import compress
    from rmq.store import MessageStore, StoreConfig

    bodies = {"lz4": b"four " * 500, "zstd": b"standard " * 500}
    with MessageStore(StoreConfig(store_path_root_dir=str(tmp_path / "st"))) as store:
        for codec, body in bodies.items():
            packed, flags = compress(body, codec)
            store.put(MessageDraft("Codecs", 0, packed, sys_flag=flags, properties={"KEYS": codec}))
    rows = spark_session.read.format("rocketmq-store").load(str(tmp_path / "st")).collect()
    got = {r["keys"][0]: (r["body"], r["compression"]) for r in rows}
    assert got == {codec: (body, None) for codec, body in bodies.items()}
