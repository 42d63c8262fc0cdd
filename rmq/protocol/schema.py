"""Declarative descriptions (construct) of every rmq wire and disk format.

This module is the readable single source of truth and the tests' oracle: differential tests
parse the same bytes with these declarations and with the precompiled ``struct`` codecs in
``message.py`` and ``rmq/store/formats.py`` and require equal results. Import it only from
tests, ``bench/`` and tools; nothing on a per-message path may use it, and it is never
``.compile()``d (the compiled form must not see untrusted bytes).

Facts: PROTOCOL.md 1.1, 1.3 (remoting), 5.1, 5.6 (records, batches), 6.1-6.3 (store files).
"""

from __future__ import annotations

from construct import (  # type: ignore[import-untyped,unused-ignore]
    Bytes,
    Check,
    Const,
    GreedyBytes,
    GreedyRange,
    IfThenElse,
    Int8sb,
    Int8ub,
    Int16sb,
    Int24ub,
    Int32sb,
    Int32ub,
    Int64sb,
    OneOf,
    Padding,
    PascalString,
    Prefixed,
    Struct,
    Terminated,
    this,
)

MESSAGE_MAGIC_CODE = 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB
BLANK_MAGIC_CODE = 0xCBD43194
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20


def _host(flag: int) -> IfThenElse:
    # address (4 bytes, or 16 with the V6 flag) followed by an int32 port
    return IfThenElse(
        lambda ctx: bool(ctx.sys_flag & flag),
        Struct("address" / Bytes(16), "port" / Int32sb),
        Struct("address" / Bytes(4), "port" / Int32sb),
    )


def _record_length(ctx) -> int:  # type: ignore[no-untyped-def]
    hosts = (20 if ctx.sys_flag & BORNHOST_V6_FLAG else 8) + (20 if ctx.sys_flag & STOREHOST_V6_FLAG else 8)
    topic_len_size = 2 if ctx.magic_code == MESSAGE_MAGIC_CODE_V2 else 1
    return (
        4 * 5 + 8 * 2 + 4 + 8 + hosts + 8 + 4 + 8
        + 4 + len(ctx.body)
        + topic_len_size + len(ctx.topic.encode("utf-8"))
        + 2 + len(ctx.properties.encode("utf-8"))
    )  # fmt: skip


# One stored message (CommitLog, pull/query/view bodies). v1 has a 1-byte topic length,
# v2 (5.x) a 2-byte one; rmq writes v1 only.
COMMITLOG_RECORD = Struct(
    "total_size" / Int32sb,
    "magic_code" / OneOf(Int32ub, [MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2]),
    "body_crc" / Int32ub,  # crc32(body) & 0x7FFFFFFF
    "queue_id" / Int32sb,
    "flag" / Int32sb,
    "queue_offset" / Int64sb,
    "physical_offset" / Int64sb,
    "sys_flag" / Int32sb,
    "born_timestamp" / Int64sb,
    "born_host" / _host(BORNHOST_V6_FLAG),
    "store_timestamp" / Int64sb,
    "store_host" / _host(STOREHOST_V6_FLAG),
    "reconsume_times" / Int32sb,
    "prepared_transaction_offset" / Int64sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "topic"
    / IfThenElse(
        this.magic_code == MESSAGE_MAGIC_CODE_V2,
        PascalString(Int16sb, "utf8"),
        PascalString(Int8sb, "utf8"),
    ),
    "properties" / PascalString(Int16sb, "utf8"),
    Check(lambda ctx: ctx.total_size == _record_length(ctx)),
)

# Concatenated records: a PULL_MESSAGE / QUERY_MESSAGE body.
RECORDS = GreedyRange(COMMITLOG_RECORD)

# End-of-file filler: the rest of a CommitLog file when the next record does not fit.
BLANK_RECORD = Struct(
    "remaining" / Int32sb,  # bytes from here to the end of the file
    "magic_code" / Const(BLANK_MAGIC_CODE, Int32ub),
)

# One message inside a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessage).
BATCH_ITEM = Struct(
    "total_size" / Int32sb,  # 20 + bodyLength + 2 + propertiesLength
    "magic_code" / Int32sb,  # clients write 0
    "body_crc" / Int32sb,  # clients write 0
    "flag" / Int32sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "properties" / PascalString(Int16sb, "utf8"),
)
BATCH_BODY = Struct("items" / GreedyRange(BATCH_ITEM), Terminated)

# consumequeue/<topic>/<queueId>/<offset>: 20-byte units.
CQ_ENTRY = Struct(
    "commitlog_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,  # Java hash of TAGS, or delivery time in SCHEDULE_TOPIC_XXXX
)

# index/<yyyyMMddHHmmssSSS>: header, then hashSlotNum slots, then indexNum entries.
INDEX_HEADER = Struct(
    "begin_timestamp" / Int64sb,
    "end_timestamp" / Int64sb,
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,
    "index_count" / Int32sb,  # starts at 1: entry 0 is never used
)
INDEX_SLOT = Struct("index" / Int32sb)  # newest entry number for the slot, 0 = empty
INDEX_ENTRY = Struct(
    "key_hash" / Int32sb,  # abs(Java hash of "topic#key"), MIN_VALUE -> 0
    "phy_offset" / Int64sb,
    "time_diff" / Int32sb,  # seconds since the header's begin_timestamp
    "prev_index" / Int32sb,  # previous entry in the slot's chain, 0 = end
)

CHECKPOINT_RMQ_MAGIC = b"RMQCKPT1"
# checkpoint: 4096 bytes. 0-23 are RocketMQ 4.x, 24-39 5.x; rmq keeps the CommitLog offsets
# covered by durable data at 64 (ignored by Java), marked by a magic.
CHECKPOINT = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
    "master_flushed_offset" / Int64sb,
    "confirm_phy_offset" / Int64sb,
    Padding(24),
    "rmq_magic" / Bytes(8),
    "physic_offset" / Int64sb,  # CommitLog bytes below this are flushed
    "logics_offset" / Int64sb,  # records below this have durable ConsumeQueue entries
    "index_offset" / Int64sb,  # records below this have durable index entries
    Padding(4096 - 96),
)

# Remoting frame (PROTOCOL.md 1.1): length counts everything after itself.
REMOTING_FRAME = Struct(
    "length" / Int32ub,
    "serialize_type" / Int8ub,  # 0 JSON, 1 ROCKETMQ
    "header_length" / Int24ub,
    "header" / Bytes(this.header_length),
    "body" / Bytes(this.length - 4 - this.header_length),
)

# ROCKETMQ binary header (PROTOCOL.md 1.3); an empty string decodes as null.
ROCKETMQ_HEADER = Struct(
    "code" / Int16sb,
    "language" / Int8ub,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark" / PascalString(Int32sb, "utf8"),
    "ext_fields"
    / Prefixed(
        Int32sb,
        GreedyRange(
            Struct(
                "key" / PascalString(Int16sb, "utf8"),
                "value" / PascalString(Int32sb, "utf8"),
            )
        ),
    ),
)
