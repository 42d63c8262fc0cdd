"""Spark export benchmark: `rmq export parquet` on local[2] against a single-process pyarrow writer.

    python bench/spark.py [--messages 1000000] [--body 1024] [--topics 4] [--dir DIR] [--master local[2]]

Writes a store of --messages records with --body-byte bodies over --topics topics with
the synchronous MessageStore, then, in the same run:
  (a) exports it with Spark (rmq_spark.export.run: the "rocketmq-store" source, Parquet
      partitioned by topic and date), timing the export job only (not the JVM start);
      and the source alone into Spark's no-op sink;
  (b) reads the same splits in this one process (spark.store_scan + spark.rows, the code
      the Spark source runs) and writes the same partitioned Parquet with pyarrow.
Prints messages/s and CommitLog MB/s for each and the ratio Spark / pyarrow.
  (c) writes --sink-messages rows back to a topic with the "rocketmq" sink
      (df.write.format("rocketmq")) against `rmq dev` in its own process, and prints msg/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from rmq.store import MessageDraft, MessageStore, StoreConfig
from rmq_spark.rows import batches
from rmq_spark.schema import arrow_schema
from rmq_spark.store_scan import plan_splits, scan_split

T0 = 1_714_521_600_000  # 2024-05-01T00:00:00Z


def make_store(root: Path, messages: int, body: int, topics: int) -> int:
    """Write the store; returns the CommitLog bytes used."""
    cfg = StoreConfig(store_path_root_dir=str(root), message_index_enable=False)
    clock = [T0]

    def now() -> int:
        return clock[0]

    pool = [os.urandom(body) for _ in range(256)]
    with MessageStore(cfg, clock=now) as store:
        for i in range(messages):
            clock[0] = T0 + i // 10  # ten messages per millisecond, all on one day
            props = {"KEYS": f"key-{i}", "TAGS": f"tag{i % 8}", "UNIQ_KEY": f"{i:032X}"}
            r = store.put(
                MessageDraft(
                    f"BenchTopic{i % topics}", i % 8, pool[i % len(pool)], properties=props, born_timestamp=clock[0]
                )
            )
            if not r.ok:
                raise RuntimeError(f"store refused message {i}: {r.status} {r.remark}")
            if i % 10_000 == 9_999:
                store.dispatch_pending()
        return store.commitlog.max_offset


def run_spark(root: Path, out: Path, master: str, warmup: Path) -> tuple[int, float, float, float]:
    """(rows, export seconds, read-only seconds, seconds to start the session and warm up)."""
    from rmq_spark import export
    from rmq_spark.session import build_session

    started = time.monotonic()
    session = build_session(master, "rmq bench", {"spark.driver.memory": "1g"})
    try:
        # The first job of a session pays for starting Python workers and loading classes.
        export.run(session, export.parse_args(["--store", str(warmup), "--out", str(out.with_name("warmup-out"))]))
        startup = time.monotonic() - started
        result = export.run(session, export.parse_args(["--store", str(root), "--out", str(out)]))
        # The source alone: read every record into Spark and drop it (no Parquet encoding).
        t = time.monotonic()
        session.read.format("rocketmq-store").load(str(root)).write.format("noop").mode("overwrite").save()
        read_only = time.monotonic() - t
    finally:
        session.stop()
    return result.rows, result.seconds, read_only, startup


def run_pyarrow(root: Path, out: Path) -> tuple[int, float]:
    """(rows, seconds) for one process reading every split and writing with pyarrow."""
    schema = arrow_schema()
    started = time.monotonic()
    rows = 0

    def dated() -> object:
        nonlocal rows
        for split in plan_splits(root):
            for batch in batches(scan_split(split), schema):
                rows += batch.num_rows
                date = pc.strftime(batch.column("store_timestamp"), format="%Y-%m-%d")
                yield pa.RecordBatch.from_arrays([*batch.columns, date], names=[*batch.schema.names, "date"])

    out_schema = schema.append(pa.field("date", pa.string()))
    ds.write_dataset(
        dated(), str(out), schema=out_schema, format="parquet", partitioning=["topic", "date"],
        partitioning_flavor="hive", max_rows_per_group=64 * 1024,
    )  # fmt: skip
    return rows, time.monotonic() - started


def _free_port(span: int = 1) -> int:
    import socket

    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        try:
            for port in range(base - 2, base + span):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


def run_sink(work: Path, master: str, messages: int, body: int) -> tuple[int, float]:
    """(messages stored, seconds) for df.write.format("rocketmq") of `messages` rows."""
    import subprocess

    from pyspark.sql import functions as F

    from rmq.client.blocking import QueueReader
    from rmq_spark.session import build_session

    ns_port, broker_port = _free_port(), _free_port(3)
    cmd = [sys.executable, "-m", "rmq", "dev", "--store", str(work / "sink-store"), "--log-level", "WARNING",
           "--namesrv-port", str(ns_port), "--broker-port", str(broker_port)]  # fmt: skip
    dev = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert dev.stdout is not None
        while "export NAMESRV_ADDR" not in dev.stdout.readline():
            pass
        ns = f"127.0.0.1:{ns_port}"
        session = build_session(master, "rmq bench sink", {"spark.driver.memory": "1g"})
        try:
            df = session.range(messages).select(F.expr(f"repeat('x', {body})").alias("body"))
            warm = df.limit(100).write.format("rocketmq").option("namesrv", ns).option("topic", "SinkWarmup")
            warm.mode("append").save()
            t = time.monotonic()
            df.write.format("rocketmq").option("namesrv", ns).option("topic", "SinkBench").mode("append").save()
            seconds = time.monotonic() - t
        finally:
            session.stop()
        with QueueReader(ns) as reader:
            stored = sum(reader.max_offset(mq) - reader.min_offset(mq) for mq in reader.queues("SinkBench"))
        return stored, seconds
    finally:
        dev.terminate()
        dev.wait(30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--body", type=int, default=1024)
    p.add_argument("--topics", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    p.add_argument("--sink-messages", type=int, default=100_000, help="rows written back with the sink (0: skip)")
    args = p.parse_args()

    work = Path(args.dir or tempfile.mkdtemp(prefix="rmq-spark-bench-"))
    try:
        store = work / "store"
        t = time.monotonic()
        used = make_store(store, args.messages, args.body, args.topics)
        print(f"store: {args.messages:,} messages of {args.body} B, {used / 1e6:,.1f} MB of CommitLog "
              f"written in {time.monotonic() - t:.1f} s")  # fmt: skip

        make_store(work / "warmup", 1000, args.body, args.topics)
        rows, spark_s, read_s, startup = run_spark(store, work / "spark-out", args.master, work / "warmup")
        assert rows == args.messages, (rows, args.messages)
        base_rows, base_s = run_pyarrow(store, work / "pyarrow-out")
        assert base_rows == args.messages, (base_rows, args.messages)

        mb = used / 1e6
        print(f"spark   ({args.master}): {rows / spark_s:>10,.0f} msg/s  {mb / spark_s:7.1f} MB/s  "
              f"({spark_s:.1f} s; session start and warm-up {startup:.1f} s not counted)")  # fmt: skip
        print(f"  of which reading:    {rows / read_s:>10,.0f} msg/s  {mb / read_s:7.1f} MB/s  "
              f"(the source into a no-op sink, {read_s:.1f} s)")  # fmt: skip
        print(f"pyarrow (1 process):   {base_rows / base_s:>10,.0f} msg/s  {mb / base_s:7.1f} MB/s  ({base_s:.1f} s)")
        print(f"ratio spark / pyarrow: {base_s / spark_s:.2f}x")
        if args.sink_messages:
            stored, sink_s = run_sink(work, args.master, args.sink_messages, args.body)
            assert stored == args.sink_messages, (stored, args.sink_messages)
            print(f"sink    ({args.master}): {stored / sink_s:>10,.0f} msg/s  "
                  f"({stored:,} rows of {args.body} B, {sink_s:.1f} s; the broker in its own process)")  # fmt: skip
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
