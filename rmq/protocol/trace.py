"""Message trace records, as RocketMQ's TraceDataEncoder writes them (sans I/O).

A trace message's body is a run of records; each record is its fields joined by
CONTENT_SPLITOR (\\u0001) and ended by FIELD_SPLITOR (\\u0002). Fields by type:

    Pub        type, timestamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
               bodyLength, costTime, msgType (ordinal), offsetMsgId, success
    SubBefore  type, timestamp, regionId, groupName, requestId, msgId, retryTimes, keys
    SubAfter   type, requestId, msgId, costTime, success, keys, contextCode, timestamp,
               groupName

Java writes a missing value as "null", so we do too. The trace message's keys are the
records' message ids and business keys, so `QUERY_MESSAGE` on the trace topic by a
message id finds its track.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .constants import TRACE_TOPIC as TRACE_TOPIC  # the topic the records go to by default

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
KEY_SEPARATOR = " "


class TraceType(enum.Enum):
    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"


PUB, SUB_BEFORE, SUB_AFTER = TraceType.PUB, TraceType.SUB_BEFORE, TraceType.SUB_AFTER


class MessageType(enum.IntEnum):
    NORMAL = 0  # Normal_Msg
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3
    ORDER = 4


class ContextCode(enum.IntEnum):
    """ConsumeReturnType ordinals (SubAfter's contextCode)."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    msg_id: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    client_host: str = ""
    body_length: int = 0
    msg_type: MessageType = MessageType.NORMAL
    offset_msg_id: str = ""
    retry_times: int = 0


@dataclass(slots=True)
class TraceContext:
    trace_type: TraceType
    timestamp: int = 0
    region_id: str = "DefaultRegion"
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


class TraceFormatError(ValueError):
    """A trace record that cannot be read."""


def _text(value: object) -> str:
    if value is None or value == "":
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _join(*values: object) -> str:
    return CONTENT_SPLITOR.join(_text(v) for v in values)


def encode_context(ctx: TraceContext) -> str:
    """One context's records (Pub writes its first bean; Sub* one record per bean)."""
    out = []
    if ctx.trace_type is PUB:
        b = ctx.beans[0]
        out.append(_join("Pub", ctx.timestamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id, b.tags, b.keys,
                         b.store_host, b.body_length, ctx.cost_time, int(b.msg_type), b.offset_msg_id,
                         ctx.success) + FIELD_SPLITOR)  # fmt: skip
    elif ctx.trace_type is SUB_BEFORE:
        for b in ctx.beans:
            out.append(_join("SubBefore", ctx.timestamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                             b.retry_times, b.keys) + FIELD_SPLITOR)  # fmt: skip
    else:
        for b in ctx.beans:
            out.append(_join("SubAfter", ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                             ctx.context_code, ctx.timestamp, ctx.group_name) + FIELD_SPLITOR)  # fmt: skip
    return "".join(out)


def trace_keys(ctx: TraceContext) -> list[str]:
    """The keys the trace message is indexed by: message ids, then business keys."""
    keys = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys += [k for k in b.keys.split(KEY_SEPARATOR) if k]
    return keys


def _value(text: str) -> str:
    return "" if text == "null" else text


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TraceFormatError(f"{what} is not a number: {text!r}") from None


def _decode_one(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == "Pub":
        if len(line) < 13:
            raise TraceFormatError(f"a Pub record has {len(line)} fields, at least 13 expected")
        ctx = TraceContext(PUB, _int(line[1], "timestamp"), _value(line[2]), _value(line[3]))
        bean = TraceBean(
            msg_id=_value(line[5]), topic=_value(line[4]), tags=_value(line[6]), keys=_value(line[7]),
            store_host=_value(line[8]), body_length=_int(line[9], "bodyLength"),
        )  # fmt: skip
        ctx.cost_time = _int(line[10], "costTime")
        try:
            bean.msg_type = MessageType(_int(line[11], "msgType"))
        except ValueError:
            raise TraceFormatError(f"unknown msgType {line[11]!r}") from None
        if len(line) == 13:
            ctx.success = line[12] == "true"
        else:
            bean.offset_msg_id = _value(line[12])
            ctx.success = line[13] == "true"
            if len(line) >= 15:
                bean.client_host = _value(line[14])
        ctx.beans.append(bean)
        return ctx
    if kind == "SubBefore":
        if len(line) < 8:
            raise TraceFormatError(f"a SubBefore record has {len(line)} fields, 8 expected")
        ctx = TraceContext(SUB_BEFORE, _int(line[1], "timestamp"), _value(line[2]), _value(line[3]))
        ctx.request_id = _value(line[4])
        ctx.beans.append(
            TraceBean(msg_id=_value(line[5]), retry_times=_int(line[6], "retryTimes"), keys=_value(line[7]))
        )
        return ctx
    if kind == "SubAfter":
        if len(line) < 6:
            raise TraceFormatError(f"a SubAfter record has {len(line)} fields, at least 6 expected")
        ctx = TraceContext(SUB_AFTER, request_id=_value(line[1]), cost_time=_int(line[3], "costTime"))
        ctx.success = line[4] == "true"
        ctx.beans.append(TraceBean(msg_id=_value(line[2]), keys=_value(line[5])))
        if len(line) >= 7:
            ctx.context_code = _int(line[6], "contextCode")
        if len(line) >= 9:
            ctx.timestamp = _int(line[7], "timestamp")
            ctx.group_name = _value(line[8])
        return ctx
    return None  # EndTransaction, Recall and types to come: skipped


def decode_trace(data: str) -> list[TraceContext]:
    """Every record of a trace message body; records of unknown types are skipped,
    a malformed known record raises TraceFormatError."""
    out = []
    for record in data.split(FIELD_SPLITOR):
        if not record:
            continue
        ctx = _decode_one(record.split(CONTENT_SPLITOR))
        if ctx is not None:
            out.append(ctx)
    return out
