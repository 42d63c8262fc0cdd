"""Spark Python Data Sources over RocketMQ: "rocketmq-store" (store directories) and "rocketmq" (a live broker).

Register them with `rmq_spark.sources.register(session)` (or `rmq_spark.session.build_session`),
then::

    spark.read.format("rocketmq-store").load("/data/broker-a/store")
    spark.read.format("rocketmq").option("namesrv", "127.0.0.1:9876").option("topics", "T").load()
    spark.readStream.format("rocketmq").option("namesrv", ...).option("topics", "T").load()

Both produce rows of spark.schema.MESSAGE_SCHEMA. Options (case-insensitive):

rocketmq-store
    path            store directory (its `commitlog/` is read) or a commitlog directory;
                    several separated by commas (one per broker)
    topics / topic  comma-separated topic names to keep (default: all)
    since / until   store-time bounds, see spark.options
    splitSize       bytes per partition before record alignment (default 64 MiB)
    checkCrc        verify body CRCs (default true)

rocketmq
    namesrv                 name server address(es), "host:port;host:port" (required)
    topics / topic          comma-separated topics (required)
    group                   consumer group named in pull requests (default rmq-spark)
    startingOffsets         "earliest" | "latest" | JSON (batch default earliest, stream latest)
    endingOffsets           batch only: "latest" | JSON (default latest)
    since / until           batch only: store-time bounds (offsets found by time, rows filtered)
    maxMessagesPerTrigger   stream only: cap per micro-batch (default: no cap)
    maxMessagesPerPartition split a queue's range into partitions of this many (default 100000)
    pullBatchSize           messages per PULL_MESSAGE (default 32)
    timeout                 seconds per request (default 10)
    failOnDataLoss          fail when a range was deleted by retention (default true)

Filter pushdown (Spark 4.1+, `spark.sql.python.filterPushdown.enabled`, which `register`
turns on): `topic = ...`, `topic IN (...)` and `store_timestamp` comparisons narrow the
scan exactly like the topics / since / until options.

Writing: `df.write.format("rocketmq")` and `df.writeStream.format("rocketmq")`, see rmq_spark.sink.

Streaming offsets live in Spark's checkpoint only (nothing is committed to the broker),
so a restarted query resumes exactly after the last committed micro-batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from . import store_scan
from .options import Bounds, normalize, option_bool, option_int, push_filters, split_list
from .rows import batches
from .schema import MESSAGE_SCHEMA, arrow_schema
from .sink import RocketMQStreamWriter, RocketMQWriter, SinkSettings

if TYPE_CHECKING:
    from . import live
    from .pull_client import BrokerClient, QueueRef

# The live source's code (live, pull_client) is imported inside the functions that use it:
# it loads rmq.client and Trio, half a second of CPU in every Python worker Spark starts,
# which the store source's workers have no use for.

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(session: Any) -> None:
    """Register both sources with a SparkSession and enable Python filter pushdown."""
    session.conf.set(PUSHDOWN_CONF, "true")
    session.dataSource.register(RocketMQStoreDataSource)
    session.dataSource.register(RocketMQDataSource)


# --- rocketmq-store ----------------------------------------------------------------------


class StorePartition(InputPartition):
    def __init__(self, split: store_scan.Split) -> None:
        super().__init__(split.start)
        self.split = split


class StoreReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        """`options` with lower-cased names (spark.options.normalize)."""
        paths = split_list(options.get("path")) + split_list(options.get("paths"))
        if not paths:
            raise ValueError('rocketmq-store needs a store directory: .load(path) or .option("path", ...)')
        self.paths = paths
        self.bounds = Bounds.from_options(options)
        self.split_size = option_int(options, "splitSize", store_scan.DEFAULT_SPLIT_SIZE)
        self.check_crc = option_bool(options, "checkCrc", True)

    def pushFilters(self, filters: list[Any]) -> Any:
        self.bounds, rest = push_filters(self.bounds, filters)
        return iter(rest)

    def partitions(self) -> Sequence[InputPartition]:
        b = self.bounds
        return [
            StorePartition(s)
            for path in self.paths
            for s in store_scan.plan_splits(path, self.split_size, b.since_ms, b.until_ms)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, StorePartition):
            # No split was planned (an empty store or range): Spark still reads one
            # partition of its own, which holds nothing.
            return iter(())
        b = self.bounds
        messages = store_scan.scan_split(
            partition.split, topics=b.topics, since_ms=b.since_ms, until_ms=b.until_ms, check_crc=self.check_crc
        )
        return batches(messages, arrow_schema())


class RocketMQStoreDataSource(DataSource):
    """`format("rocketmq-store")`: CommitLog files of one or more broker store directories."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store"

    def schema(self) -> StructType:
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return StoreReader(normalize(self.options))


# --- rocketmq (live broker) ----------------------------------------------------------------


class LiveSettings:
    """The live source's options, parsed once on the driver and shipped to executors."""

    def __init__(self, options: dict[str, str], streaming: bool) -> None:
        """`options` with lower-cased names (spark.options.normalize)."""
        from . import live

        self.namesrv = options.get("namesrv") or options.get("namesrvaddr") or ""
        if not self.namesrv:
            raise ValueError('the rocketmq source needs .option("namesrv", "host:port")')
        self.bounds = Bounds.from_options(options)
        if self.bounds.topics is None:
            raise ValueError('the rocketmq source needs .option("topics", "T1,T2")')
        self.group = options.get("group", "rmq-spark")
        self.timeout = float(options.get("timeout", "10"))
        self.pull_batch = option_int(options, "pullBatchSize", 32)
        self.chunk = option_int(options, "maxMessagesPerPartition", 100_000)
        self.max_per_trigger = option_int(options, "maxMessagesPerTrigger", 0)
        self.fail_on_data_loss = option_bool(options, "failOnDataLoss", True)
        self.starting = live.parse_spec(options.get("startingoffsets"), "latest" if streaming else "earliest")
        self.ending = live.parse_spec(options.get("endingoffsets"), "latest")
        if self.chunk <= 0 or self.pull_batch <= 0:
            raise ValueError("maxMessagesPerPartition and pullBatchSize must be positive")

    def client(self) -> BrokerClient:
        from .pull_client import BrokerClient

        return BrokerClient(self.namesrv, self.group, self.timeout)

    def queues(self) -> list[QueueRef]:
        from . import live

        assert self.bounds.topics is not None
        return live.discover(self.namesrv, self.bounds.topics, self.timeout)


class QueueRangePartition(InputPartition):
    def __init__(self, queue: QueueRef, start: int, end: int) -> None:
        super().__init__((queue.topic, queue.key, start, end))
        self.queue = queue
        self.start = start
        self.end = end


def _read_ranges(settings: LiveSettings, partition: InputPartition) -> Iterator[Any]:
    from . import live

    assert isinstance(partition, QueueRangePartition)

    def messages() -> Iterator[Any]:
        with settings.client() as client:
            yield from live.read_range(
                client,
                partition.queue,
                partition.start,
                partition.end,
                batch=settings.pull_batch,
                bounds=settings.bounds,
                fail_on_data_loss=settings.fail_on_data_loss,
            )

    return batches(messages(), arrow_schema())


class LiveReader(DataSourceReader):
    """Batch read of [startingOffsets, endingOffsets) of every queue of the topics."""

    def __init__(self, settings: LiveSettings) -> None:
        self.settings = settings

    def pushFilters(self, filters: list[Any]) -> Any:
        self.settings.bounds, rest = push_filters(self.settings.bounds, filters)
        return iter(rest)

    def partitions(self) -> Sequence[InputPartition]:
        from . import live

        s = self.settings
        queues = s.queues()
        with s.client() as client:
            starts = live.resolve(client, queues, s.starting, live.EARLIEST)
            ends = live.resolve(client, queues, s.ending, live.LATEST)
            if s.bounds.since_ms is not None or s.bounds.until_ms is not None:
                for q in queues:
                    starts[q], ends[q] = live.narrow_by_time(client, q, starts[q], ends[q], s.bounds)
        return [QueueRangePartition(q, a, b) for q, a, b in live.plan_chunks(starts, ends, s.chunk)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_ranges(self.settings, partition)


class LiveStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of new messages; offsets are {topic: {"broker:queue": next offset}}.

    A queue that appears while the query runs (more queues, a new broker) first gets its
    earliest offset recorded in one micro-batch and is read from the next, so every range
    Spark plans has both ends in the checkpoint.
    """

    def __init__(self, settings: LiveSettings) -> None:
        self.settings = settings
        self._target: dict[str, dict[str, int]] | None = None

    def initialOffset(self) -> dict[str, Any]:
        from . import live

        s = self.settings
        with s.client() as client:
            return live.to_json(live.resolve(client, s.queues(), s.starting, live.LATEST))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.settings.max_per_trigger
        return ReadMaxRows(n) if n > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        from . import live

        s = self.settings
        with s.client() as client:
            self._target = live.to_json({q: client.max_offset(q) for q in s.queues()})

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        from . import live

        s = self.settings
        queues = s.queues()
        known = live.offsets_from_json(start, queues)
        target = self._target
        out: live.Offsets = {}
        with s.client() as client:
            for q in queues:
                if q not in known:
                    out[q] = client.min_offset(q)  # a new queue: record where it starts
                elif target is not None:
                    out[q] = max(known[q], target.get(q.topic, {}).get(q.key, known[q]))
                else:
                    out[q] = max(known[q], client.max_offset(q))
        end = live.to_json(out)
        for topic, qs in start.items():  # queues gone from the route keep their place
            for key, value in qs.items():
                end.setdefault(topic, {}).setdefault(key, value)
        if isinstance(limit, ReadMaxRows):
            end = _cap(start, end, limit.max_rows)
        return {t: dict(sorted(qs.items())) for t, qs in sorted(end.items())}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        from . import live

        s = self.settings
        queues = {(q.topic, q.key): q for q in s.queues()}
        out: list[InputPartition] = []
        for topic, qs in sorted(end.items()):
            for key, stop in sorted(qs.items()):
                begin = start.get(topic, {}).get(key)
                q = queues.get((topic, key))
                if begin is None or begin >= stop:
                    continue
                if q is None:
                    raise RuntimeError(f"queue {topic} {key} is in the offsets but no longer in the route")
                out.extend(QueueRangePartition(q, a, b) for _, a, b in live.plan_chunks({q: begin}, {q: stop}, s.chunk))
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_ranges(self.settings, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets Spark checkpoints are the only record of progress."""


def _cap(start: dict[str, Any], end: dict[str, dict[str, int]], max_rows: int) -> dict[str, dict[str, int]]:
    """Pull `end` back so at most `max_rows` messages lie past `start`, shared fairly by the queues."""
    out = {t: dict(qs) for t, qs in end.items()}
    pending = []
    for t, qs in end.items():
        for k, stop in qs.items():
            begin = start.get(t, {}).get(k)
            if begin is not None and stop > begin:
                out[t][k] = begin
                pending.append((t, k, stop))
    budget = max_rows
    while budget > 0 and pending:  # every round spends budget or finishes queues
        share = max(budget // len(pending), 1)
        still = []
        for t, k, stop in pending:
            take = min(share, stop - out[t][k], budget)
            out[t][k] += take
            budget -= take
            if out[t][k] < stop:
                still.append((t, k, stop))
        pending = still
    return out


class RocketMQDataSource(DataSource):
    """`format("rocketmq")`: topics on a live broker cluster, batch and streaming."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LiveReader(LiveSettings(normalize(self.options), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LiveStreamReader(LiveSettings(normalize(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RocketMQWriter(SinkSettings(normalize(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return RocketMQStreamWriter(SinkSettings(normalize(self.options)))
