"""Decoded records → Arrow record batches in the column order of spark.schema.MESSAGE_SCHEMA.

Both sources hand Spark `pyarrow.RecordBatch`es rather than tuples: Spark then skips its
per-value Python conversion, which would cost more than decoding the records. The bench's
single-process baseline uses the same builder, so the two figures compare fairly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from rmq.protocol import properties as P
from rmq.protocol.constants import DLQ_PREFIX, RETRY_PREFIX
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZSTD,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    decompress_body,
    make_offset_msg_id,
)

from .schema import COLUMNS

TRANSACTION_TYPES = {0x0: "NOT", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}
_COMPRESSION_NAMES = {COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd"}

# A batch is cut at whichever comes first; a few MiB keeps Arrow transfers efficient
# while bounding a Python worker's memory.
MAX_BATCH_ROWS = 4096
MAX_BATCH_BYTES = 8 * 1024 * 1024


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _body(msg: MessageExt) -> tuple[bytes, str | None]:
    """(application body, name of the compression still on it or None)."""
    if not msg.sys_flag & COMPRESSED_FLAG:
        return msg.body, None
    try:
        return decompress_body(msg.body, msg.sys_flag), None
    except ProtocolError:
        # A corrupt stream, or LZ4 / ZSTD without their packages on this worker: keep the
        # stored bytes and say so in `compression`, rather than dropping the message.
        return msg.body, _COMPRESSION_NAMES.get(msg.sys_flag & COMPRESSION_TYPE_MASK, "zlib")


# (ip, port) → ("ip:port", offset-id prefix): a store has one store host and few born
# hosts, so formatting them once per host saves time on every row. Bounded.
_hosts: dict[tuple[str, int], tuple[str, str]] = {}


def _host(host: tuple[str, int]) -> tuple[str, str]:
    cached = _hosts.get(host)
    if cached is None:
        if len(_hosts) > 4096:
            _hosts.clear()
        # make_offset_msg_id ends with the 16 hex digits of the offset; keep what precedes them.
        cached = _hosts[host] = (f"{host[0]}:{host[1]}", make_offset_msg_id(host[0], host[1], 0)[:-16])
    return cached


def message_row(msg: MessageExt) -> tuple[Any, ...]:
    """One row, values in COLUMNS order; times are microseconds, as Arrow's timestamp[us]."""
    props = msg.properties
    topic = msg.topic
    body, compression = _body(msg)
    store, id_prefix = _host(msg.store_host)
    keys = props.get(P.KEYS)
    return (
        topic,
        msg.queue_id,
        msg.queue_offset,
        msg.commitlog_offset,
        f"{id_prefix}{msg.commitlog_offset:016X}",
        props.get(P.UNIQ_KEY),
        P.split_keys(keys) if keys else [],
        props.get(P.TAGS),
        props,
        msg.born_timestamp * 1000,
        msg.store_timestamp * 1000,
        _host(msg.born_host)[0],
        store,
        msg.reconsume_times,
        msg.sys_flag,
        msg.flag,
        body,
        msg.body_crc,
        msg.store_size,
        msg.prepared_transaction_offset,
        compression,
        TRANSACTION_TYPES[msg.sys_flag & TRANSACTION_TYPE_MASK],
        topic.startswith(RETRY_PREFIX),
        topic.startswith(DLQ_PREFIX),
        props.get(P.TRAN_MSG, "").lower() == "true",
        props.get(P.RETRY_TOPIC),
        _int_or_none(props.get(P.DELAY)),
        props.get(P.REAL_TOPIC),
        _int_or_none(props.get(P.REAL_QID)),
    )


_BODY_COLUMN = COLUMNS.index("body")


def rows_to_batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Transpose rows into one record batch of `schema` (spark.schema.arrow_schema())."""
    columns = list(zip(*rows, strict=False)) if rows else [()] * len(schema)
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=False)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def batches(messages: Iterable[MessageExt], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Group messages into record batches of at most MAX_BATCH_ROWS rows / ~MAX_BATCH_BYTES of bodies."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    for msg in messages:
        row = message_row(msg)
        rows.append(row)
        size += len(row[_BODY_COLUMN])
        if len(rows) >= MAX_BATCH_ROWS or size >= MAX_BATCH_BYTES:
            yield rows_to_batch(rows, schema)
            rows, size = [], 0
    if rows:
        yield rows_to_batch(rows, schema)
