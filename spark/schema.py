"""The Spark schema of one message row, shared by both sources and the export.

One row per stored CommitLog record (PROTOCOL.md 5.1). Conventions:

- Times are Spark TIMESTAMPs (UTC instants, exact: RocketMQ times are milliseconds and
  Spark keeps microseconds). `store_timestamp` is the broker's clock and the one that
  `since` / `until` and the export's `date` partition use.
- `body` is the message body as the producer meant it: compressed bodies are inflated,
  and `compression` names what the stored bytes were ("zlib", "lz4", "zstd") or is null.
- `keys` is the KEYS property split on spaces (empty when absent); `tags`, `uniq_key`,
  `delay_level`, `real_topic`, `real_queue_id` and `retry_topic` come from well-known
  properties (PROTOCOL.md 5.4) and are null when absent; `properties` holds every
  property, those included.
- Two ids, named as they have always been here (exports and queries depend on them):
  `msg_id` is the broker's offset message id (store host + CommitLog offset, 5.5; RocketMQ's
  offsetMsgId, `offset_msg_id` in rmq.client): one per stored copy, and the key by which
  `rmq export parquet` replaces rows it exports again. `uniq_key` is the UNIQ_KEY property,
  the id the producer gave the message (what clients call the message id: `msg.msg_id` in
  rmq.client, getMsgId() in RocketMQ's): a message sent twice, by a retried send or a re-run
  job, is two records with two `msg_id`s and one `uniq_key`, so de-duplicate by `uniq_key`.
  The rocketmq sink writes its `uniq_key` column (or `uniqKeyColumn`) there.
- Markers: `is_retry` / `is_dlq` from the `%RETRY%` / `%DLQ%` topic prefixes,
  `transaction_type` from sysFlag bits 2-3, `is_half` when TRAN_MSG=true.

`RECORD_FIELD_COLUMNS` maps every field of the stored record (as rmq/protocol/schema.py
declares it) to the column that carries it; a test keeps the two in step.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _f(name: str, dtype: object, nullable: bool = False) -> StructField:
    return StructField(name, dtype, nullable)  # type: ignore[arg-type]


MESSAGE_SCHEMA = StructType(
    [
        _f("topic", StringType()),
        _f("queue_id", IntegerType()),
        _f("queue_offset", LongType()),
        _f("commitlog_offset", LongType()),
        _f("msg_id", StringType()),
        _f("uniq_key", StringType(), True),
        _f("keys", ArrayType(StringType(), False)),
        _f("tags", StringType(), True),
        _f("properties", MapType(StringType(), StringType(), False)),
        _f("born_timestamp", TimestampType()),
        _f("store_timestamp", TimestampType()),
        _f("born_host", StringType()),
        _f("store_host", StringType()),
        _f("reconsume_times", IntegerType()),
        _f("sys_flag", IntegerType()),
        _f("flag", IntegerType()),
        _f("body", BinaryType()),
        _f("body_crc", IntegerType()),
        _f("store_size", IntegerType()),
        _f("prepared_transaction_offset", LongType()),
        _f("compression", StringType(), True),
        _f("transaction_type", StringType()),
        _f("is_retry", BooleanType()),
        _f("is_dlq", BooleanType()),
        _f("is_half", BooleanType()),
        _f("retry_topic", StringType(), True),
        _f("delay_level", IntegerType(), True),
        _f("real_topic", StringType(), True),
        _f("real_queue_id", IntegerType(), True),
    ]
)

COLUMNS: tuple[str, ...] = tuple(MESSAGE_SCHEMA.fieldNames())

# Stored record field (rmq/protocol/schema.py names) → the column carrying it, or None
# for a field that only frames the record and says nothing about the message.
RECORD_FIELD_COLUMNS: dict[str, str | None] = {
    "total_size": "store_size",
    "magic_code": None,
    "body_crc": "body_crc",
    "queue_id": "queue_id",
    "flag": "flag",
    "queue_offset": "queue_offset",
    "physical_offset": "commitlog_offset",
    "sys_flag": "sys_flag",
    "born_timestamp": "born_timestamp",
    "born_host": "born_host",
    "store_timestamp": "store_timestamp",
    "store_host": "store_host",
    "reconsume_times": "reconsume_times",
    "prepared_transaction_offset": "prepared_transaction_offset",
    "body": "body",
    "topic": "topic",
    "properties": "properties",
}


def arrow_schema() -> object:
    """The Arrow schema Spark expects from `read()` batches of MESSAGE_SCHEMA rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(MESSAGE_SCHEMA, timezone="UTC")
