"""The rocketmq sink: batch and Structured Streaming writes to a live broker (rmq_cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmq.client import ConsumeFromWhere
from rmq.client.blocking import PullConsumer

pytestmark = pytest.mark.spark


def drain(ns: str, topic: str, group: str, expect: int) -> list[Any]:
    got: list[Any] = []
    with PullConsumer(group, namesrv=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET) as consumer:
        consumer.subscribe(topic)
        consumer.wait_for_assignment(timeout=30)
        for _ in range(120):
            got += consumer.poll(timeout=0.5)
            if len(got) >= expect:
                break
        got += consumer.poll(timeout=0.5)  # anything beyond what was expected
    return got


def test_batch_write_maps_columns_to_messages(spark_session: Any, rmq_cluster: Any) -> None:
    from pyspark.sql import functions as F

    ns = rmq_cluster.namesrv_addr
    rmq_cluster.create_topic("SinkBatch", 4)
    df = spark_session.range(200).select(
        F.concat(F.lit("order-"), F.col("id").cast("string")).alias("body"),
        F.array(F.concat(F.lit("K"), F.col("id").cast("string")), F.lit("all")).alias("keys"),
        F.when(F.col("id") % 2 == 0, F.lit("even")).otherwise(F.lit("odd")).alias("tags"),
        F.create_map(F.lit("source"), F.lit("spark"), F.lit("n"), F.col("id").cast("string")).alias("properties"),
    )
    df.write.format("rocketmq").option("namesrv", ns).option("topic", "SinkBatch").mode("append").save()
    got = drain(ns, "SinkBatch", "sink-check", 200)
    assert len(got) == 200
    by_body = {m.body.decode(): m for m in got}
    m = by_body["order-7"]
    assert m.tags == "odd" and m.keys == "K7 all"
    assert m.properties["source"] == "spark" and m.properties["n"] == "7"


def test_uniq_key_column_makes_reruns_recognisable(spark_session: Any, rmq_cluster: Any) -> None:
    ns = rmq_cluster.namesrv_addr
    rows = [("T-SinkIdem", f"id-{i}", f"payload {i}") for i in range(20)]
    df = spark_session.createDataFrame(rows, "topic string, order_id string, body string")
    for _ in range(2):  # the same job run twice: at least once
        df.write.format("rocketmq").option("namesrv", ns).option("uniqKeyColumn", "order_id").mode("append").save()
    got = drain(ns, "T-SinkIdem", "idem-check", 40)
    assert len(got) == 40
    assert {m.msg_id for m in got} == {f"id-{i}" for i in range(20)}  # consumers dedupe by id


def test_a_rerun_is_dropped_by_uniq_key_when_read_back(spark_session: Any, rmq_cluster: Any) -> None:
    """The documented way: ids in a `uniq_key` column, the job run twice, the topic read back
    with Spark and `dropDuplicates(["uniq_key"])`; `msg_id` tells the stored copies apart."""
    import time

    ns = rmq_cluster.namesrv_addr
    rmq_cluster.create_topic("SinkRerun", 2)
    rows = [(f"order-{i}", f"payload {i}") for i in range(30)]
    df = spark_session.createDataFrame(rows, "uniq_key string, body string")
    for _ in range(2):
        df.write.format("rocketmq").option("namesrv", ns).option("topic", "SinkRerun").mode("append").save()
    reader = spark_session.read.format("rocketmq").option("namesrv", ns).option("topics", "SinkRerun")
    deadline = time.monotonic() + 30
    while reader.load().count() < 60 and time.monotonic() < deadline:
        time.sleep(0.5)  # the consume queues may trail the last sends
    back = reader.load()
    assert back.count() == 60
    assert back.select("msg_id").distinct().count() == 60
    once = back.dropDuplicates(["uniq_key"]).collect()
    assert sorted((r.uniq_key, bytes(r.body).decode()) for r in once) == sorted(rows)
    assert all(r.properties["UNIQ_KEY"] == r.uniq_key for r in once)


def test_streaming_write_from_a_stream(spark_session: Any, rmq_cluster: Any, tmp_path: Path) -> None:
    ns = rmq_cluster.namesrv_addr
    rmq_cluster.create_topic("SinkStream", 2)
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "a.json").write_text("\n".join(f'{{"body": "s{i}", "tags": "T"}}' for i in range(30)))
    stream = spark_session.readStream.schema("body string, tags string").json(str(incoming))
    query = (
        stream.writeStream.format("rocketmq")
        .option("namesrv", ns)
        .option("topic", "SinkStream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = drain(ns, "SinkStream", "stream-check", 30)
    assert sorted(m.body for m in got) == sorted(b"s%d" % i for i in range(30))


def test_bad_rows_fail_the_write_with_a_clear_error(spark_session: Any, rmq_cluster: Any) -> None:
    df = spark_session.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="no topic"):
        df.write.format("rocketmq").option("namesrv", rmq_cluster.namesrv_addr).mode("append").save()
