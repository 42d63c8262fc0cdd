"""The "rocketmq" source against our own name server and broker: batch reads and restartable streams."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq.client import Message

from .spark_live import LiveCluster

pytestmark = pytest.mark.spark

TOPIC = "SparkLive"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LiveCluster]:
    with LiveCluster(tmp_path) as c:
        yield c


def messages(start: int, n: int, topic: str = TOPIC) -> list[Message]:
    return [
        Message(topic, f"body {i}".encode() * (1 + i % 5), tags=f"t{i % 2}", keys=f"k{i}")
        for i in range(start, start + n)
    ]


def live_reader(session: Any, cluster: LiveCluster, **options: str) -> Any:
    reader = session.read.format("rocketmq").option("namesrv", cluster.namesrv).option("topics", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def keys_of(rows: list[Any]) -> list[str]:
    return [r["keys"][0] for r in rows]


def test_batch_read_while_the_topic_is_written(spark_session: Any, cluster: LiveCluster) -> None:
    cluster.send(messages(0, 40))
    cluster.wait_route(TOPIC)
    writer = threading.Thread(target=lambda: [cluster.send(messages(40 + 20 * k, 20)) for k in range(10)])
    writer.start()
    try:
        during = live_reader(spark_session, cluster, maxMessagesPerPartition="7").collect()
    finally:
        writer.join(120)
    # Whatever the read saw is a gap-free prefix of every queue, each message once.
    by_queue: dict[int, list[int]] = {}
    for r in during:
        by_queue.setdefault(r["queue_id"], []).append(r["queue_offset"])
    for offsets in by_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))
    assert len(during) >= 40 and len(set(keys_of(during))) == len(during)

    after = live_reader(spark_session, cluster).collect()
    assert sorted(keys_of(after), key=lambda k: int(k[1:])) == [f"k{i}" for i in range(240)]
    row = next(r for r in after if r["keys"] == ["k7"])
    assert row["body"] == b"body 7" * 3 and row["tags"] == "t1" and row["topic"] == TOPIC

    # Store-time bounds: offsets found with SEARCH_OFFSET_BY_TIMESTAMP, rows filtered exactly.
    times = sorted(r["store_timestamp"] for r in after)
    lo, hi = times[60], times[180]
    since_ms, until_ms = (int(t.timestamp() * 1000) for t in (lo, hi))
    window = live_reader(spark_session, cluster, since=str(since_ms), until=str(until_ms)).collect()
    assert sorted(keys_of(window)) == sorted(keys_of([r for r in after if lo <= r["store_timestamp"] < hi]))

    # Explicit per-queue offsets: only queue 0, from offset 2 up to 5.
    part = live_reader(
        spark_session, cluster,
        startingOffsets=f'{{"{TOPIC}": {{"broker-a:0": 2}}}}', endingOffsets=f'{{"{TOPIC}": {{"0": 5}}}}',
    ).collect()  # fmt: skip
    assert sorted((r["queue_id"], r["queue_offset"]) for r in part if r["queue_id"] == 0) == [(0, 2), (0, 3), (0, 4)]


def test_stream_restarted_from_its_checkpoint_loses_and_repeats_nothing(
    spark_session: Any, cluster: LiveCluster, tmp_path: Path
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    cluster.send(messages(0, 100))
    cluster.wait_route(TOPIC)

    def start(**trigger: Any) -> Any:
        stream = (
            spark_session.readStream.format("rocketmq")
            .option("namesrv", cluster.namesrv)
            .option("topics", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", "40")
            .load()
            .select("msg_id", "keys", "queue_id", "queue_offset", "body")
        )
        return (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="100 milliseconds")
    try:
        cluster.send(messages(100, 100))
        for _ in range(600):  # bounded: stop once a few micro-batches are done
            if first.lastProgress and first.lastProgress["batchId"] >= 2:
                break
            first.awaitTermination(0.2)
    finally:
        first.stop()

    cluster.send(messages(200, 60))
    second = start(availableNow=True)
    assert second.awaitTermination(300)
    assert second.exception() is None

    got = Counter(keys_of(spark_session.read.parquet(str(out)).collect()))
    assert set(got) == {f"k{i}" for i in range(260)}
    assert max(got.values()) == 1


def test_export_command_from_a_live_cluster(spark_session: Any, cluster: LiveCluster, tmp_path: Path) -> None:
    from rmq_spark import export

    from .spark_fixtures import read_parquet

    results = cluster.send(messages(0, 30))
    cluster.wait_route(TOPIC)
    out = tmp_path / "out"
    args = export.parse_args(["--namesrv", cluster.namesrv, "--topic", TOPIC, "--out", str(out)])
    assert export.run(spark_session, args).rows == 30
    rows = read_parquet(out)
    assert {r["msg_id"] for r in rows} == {r.offset_msg_id for r in results}
    assert {r["uniq_key"] for r in rows} == {r.msg_id for r in results}
