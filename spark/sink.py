"""`df.write.format("rocketmq")` and `df.writeStream.format("rocketmq")`: data frames to topics.

    (df.write.format("rocketmq")
       .option("namesrv", "127.0.0.1:9876")
       .option("topic", "Orders")               # unless rows carry a `topic` column
       .option("uniqKeyColumn", "order_id")     # optional: idempotent re-runs, see below
       .mode("append").save())

Columns (others are ignored), named as the sources name them: `topic` (string), `body`
(binary or string, required), `keys` (string, or array of strings), `tags` (string),
`properties` (map<string,string>), `delay_level` (int), `uniq_key` (string). Options:
`namesrv` (required), `topic` (default topic), `group` (producer group, default
rmq-spark-sink), `uniqKeyColumn` (default `uniq_key`), `batchSize` (messages per
SEND_BATCH_MESSAGE, default 64; 1 sends one by one), `sendTimeout` (seconds, default 10),
`retryTimes` (default 2).

Delivery is at least once: a task that fails after sending some rows is retried by Spark and
sends them again, and so does a streaming micro-batch replayed after a restart. For idempotence
give every row a stable, unique value in the `uniq_key` column, or name the column that has one
with `uniqKeyColumn`: it becomes the message's UNIQ_KEY, the message id consumers see
(`msg.msg_id` in rmq.client, getMsgId() in RocketMQ's), and the `uniq_key` column when the
topic is read back with Spark. So `dropDuplicates(["uniq_key"])` drops what a re-run sent
again; `msg_id` cannot, it is the offset id of each stored copy (spark.schema). A row whose
`uniq_key` is null gets a fresh id from the producer, as a message sent without one does;
with `uniqKeyColumn` set, a null there is an error.

Executors send with rmq's blocking client (rmq.client.blocking), one producer per task.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from .options import option_int

DEFAULT_GROUP = "rmq-spark-sink"
UNIQ_KEY_COLUMN = "uniq_key"  # the column the sources fill from UNIQ_KEY
DEFAULT_BATCH = 64
BATCH_BYTES = 1024 * 1024  # keep a batch well under the broker's maxMessageSize


@dataclass
class SinkCommit(WriterCommitMessage):  # type: ignore[misc]
    rows: int


class SinkSettings:
    def __init__(self, options: dict[str, str]) -> None:
        self.namesrv = options.get("namesrv") or ""
        if not self.namesrv:
            raise ValueError('the rocketmq sink needs .option("namesrv", "host:port")')
        self.topic = options.get("topic") or None
        self.group = options.get("group") or DEFAULT_GROUP
        self.uniq_key_column = options.get("uniqkeycolumn") or None
        self.batch_size = max(1, option_int(options, "batchSize", DEFAULT_BATCH))
        self.send_timeout = float(options.get("sendtimeout") or 10)
        self.retry_times = option_int(options, "retryTimes", 2)


def _message(row: Any, s: SinkSettings) -> Any:
    from rmq.client import Message

    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    topic = fields.get("topic") or s.topic
    if not topic:
        raise ValueError('a row has no topic: add a "topic" column or .option("topic", ...)')
    body = fields.get("body")
    if body is None:
        raise ValueError('a row has no body: the rocketmq sink needs a "body" column')
    if isinstance(body, str):
        body = body.encode("utf-8")
    keys = fields.get("keys")
    if isinstance(keys, (list, tuple)):
        keys = " ".join(str(k) for k in keys if k)
    props = {str(k): str(v) for k, v in (fields.get("properties") or {}).items() if v is not None}
    msg = Message(topic, bytes(body), tags=fields.get("tags") or None, keys=keys or None, properties=props)
    delay = fields.get("delay_level")
    if delay:
        msg.delay_level = int(delay)
    unique = fields.get(s.uniq_key_column or UNIQ_KEY_COLUMN)
    if unique is None and s.uniq_key_column:
        raise ValueError(f"a row has no value in its uniqKeyColumn {s.uniq_key_column!r}")
    if unique is not None:
        msg.properties["UNIQ_KEY"] = str(unique)
    return msg


def _send_rows(s: SinkSettings, rows: Iterator[Any]) -> int:
    """Send every row of a partition; returns how many. Raises (and Spark retries the task)
    on the first row that cannot be sent."""
    from rmq.client import SendStatus
    from rmq.client.blocking import Producer

    sent = 0
    pending: dict[str, list[Any]] = {}
    pending_bytes: dict[str, int] = {}

    def check(status: Any) -> None:
        if status is not SendStatus.SEND_OK:
            raise RuntimeError(f"the broker stored a message but answered {status.name}")

    with Producer(s.group, namesrv=s.namesrv, send_timeout=s.send_timeout, retry_times=s.retry_times) as producer:

        def flush(topic: str) -> None:
            nonlocal sent
            batch = pending.pop(topic, [])
            pending_bytes.pop(topic, None)
            if len(batch) == 1:
                check(producer.send(batch[0]).status)
            elif batch:
                for result in producer.send_batch(batch):
                    check(result.status)
            sent += len(batch)

        for row in rows:
            msg = _message(row, s)
            if s.batch_size == 1 or msg.delay_level:
                check(producer.send(msg).status)
                sent += 1
                continue
            batch = pending.setdefault(msg.topic, [])
            batch.append(msg)
            pending_bytes[msg.topic] = pending_bytes.get(msg.topic, 0) + len(msg.body) + 200
            if len(batch) >= s.batch_size or pending_bytes[msg.topic] >= BATCH_BYTES:
                flush(msg.topic)
        for topic in list(pending):
            flush(topic)
    return sent


class RocketMQWriter(DataSourceWriter):  # type: ignore[misc]
    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return SinkCommit(_send_rows(self.settings, iterator))

    def commit(self, messages: list[Any]) -> None:
        """Every task's rows are on the broker: nothing more to do."""

    def abort(self, messages: list[Any]) -> None:
        """Sent rows cannot be taken back (at least once); a re-run sends them again."""


class RocketMQStreamWriter(DataSourceStreamWriter):  # type: ignore[misc]
    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return SinkCommit(_send_rows(self.settings, iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        """The micro-batch is on the broker; Spark's checkpoint records it."""

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        """Spark replays the micro-batch: its rows are sent again (at least once)."""
