"""Message traces: the record format (rmq.protocol.trace, checked against bytes laid out
as RocketMQ's TraceDataEncoder writes them) and the end-to-end path: a producer and a
push consumer with tracing on write Pub, SubBefore and SubAfter to the trace topic of an
in-process broker, and `mqadmin queryMsgTraceById` shows the track."""

from __future__ import annotations

import re

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from rmq.client.admin import MQAdmin
from rmq.protocol import trace as T
from tests.tools.test_admin import FAST, LIMIT, Servers, admin, create_topic, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest

A, B = "\u0001", "\u0002"


def test_pub_record_bytes() -> None:
    ctx = T.TraceContext(T.PUB, 1700000000123, "DefaultRegion", "pg", cost_time=7)
    ctx.beans.append(
        T.TraceBean(
            msg_id="ID1",
            topic="Orders",
            tags="TagA",
            keys="k1 k2",
            store_host="10.0.0.1:10911",
            body_length=5,
            offset_msg_id="0A00000100002A9F0000000000000000",
        )  # fmt: skip
    )
    data = T.encode_context(ctx)
    assert data.encode() == (
        b"Pub\x011700000000123\x01DefaultRegion\x01pg\x01Orders\x01ID1\x01TagA\x01k1 k2\x01"
        b"10.0.0.1:10911\x015\x017\x010\x010A00000100002A9F0000000000000000\x01true\x02"
    )
    assert T.trace_keys(ctx) == ["ID1", "k1", "k2"]
    (back,) = T.decode_trace(data)
    assert back == ctx


def test_sub_records_bytes_and_missing_values() -> None:
    before = T.TraceContext(T.SUB_BEFORE, 1700000000200, group_name="cg", request_id="REQ")
    before.beans.append(T.TraceBean(msg_id="ID1", retry_times=2))
    after = T.TraceContext(T.SUB_AFTER, 1700000000300, group_name="cg", request_id="REQ", cost_time=12)
    after.success, after.context_code = False, int(T.ContextCode.FAILED)
    after.beans.append(T.TraceBean(msg_id="ID1", keys="k1"))
    data = T.encode_context(before) + T.encode_context(after)
    assert data == (
        f"SubBefore{A}1700000000200{A}DefaultRegion{A}cg{A}REQ{A}ID1{A}2{A}null{B}"
        f"SubAfter{A}REQ{A}ID1{A}12{A}false{A}k1{A}4{A}1700000000300{A}cg{B}"
    )
    got = T.decode_trace(data)
    assert [c.trace_type for c in got] == [T.SUB_BEFORE, T.SUB_AFTER]
    assert got[0].beans[0].keys == "" and got[0].beans[0].retry_times == 2
    assert (got[1].cost_time, got[1].success, got[1].context_code, got[1].group_name) == (12, False, 4, "cg")


def test_decoding_java_variants_and_bad_input() -> None:
    # the 13-field Pub of old clients (no offsetMsgId), and a type we do not read
    old = f"Pub{A}1{A}r{A}g{A}t{A}ID{A}null{A}null{A}h:1{A}3{A}4{A}3{A}true{B}EndTransaction{A}1{A}x{B}"
    (ctx,) = T.decode_trace(old)
    assert ctx.beans[0].msg_type is T.MessageType.DELAY and ctx.beans[0].offset_msg_id == "" and ctx.success
    # the short SubAfter of a cloud channel: no timestamp or group
    (short,) = T.decode_trace(f"SubAfter{A}R{A}ID{A}5{A}true{A}null{A}0{B}")
    assert (short.timestamp, short.group_name, short.cost_time) == (0, "", 5)
    assert T.decode_trace("") == []
    bad_records = (
        f"Pub{A}x{A}r{B}",  # too few fields
        f"Pub{A}notanumber{A}r{A}g{A}t{A}ID{A}a{A}b{A}h{A}1{A}1{A}0{A}true{B}",
        f"SubBefore{A}1{A}r{A}g{A}q{A}ID{A}many{A}k{B}",
        f"Pub{A}1{A}r{A}g{A}t{A}I{A}a{A}b{A}h{A}1{A}1{A}9{A}true",  # no such msgType
    )
    for bad in bad_records:
        with pytest.raises(T.TraceFormatError):
            T.decode_trace(bad)


async def test_traces_end_to_end(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Traced", queues=2)
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer(
        "cg_traced", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, enable_trace=True, **FAST
    )
    consumer.subscribe("Traced", "*")
    async with Producer("pg_traced", s.ns, enable_trace=True) as producer, consumer:
        sent = await producer.send(Message("Traced", "hello", tags="TagT", keys="biz-1"))
        with trio.fail_after(LIMIT):
            while not got:
                await trio.sleep(0.05)
    assert producer.tracer is not None and producer.tracer.dropped == 0 and producer.tracer.sent >= 1
    assert consumer.tracer is not None and consumer.tracer.sent >= 1

    async def traced() -> bool:
        r = await admin(s, "queryMsgTraceById", "-i", sent.msg_id)
        return r.code == 0 and "#ConsumerGroup" in r.out

    await wait_for(traced)
    r = await admin(s, "queryMsgTraceById", "-i", sent.msg_id)
    pub = next(x.split() for x in r.lines if x.startswith("Pub "))
    assert pub[1] == "pg_traced" and pub[-1] == "success"
    assert r.lines[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    sub = next(x.split() for x in r.lines if x.startswith("Sub "))
    assert sub[1] == "cg_traced" and sub[-1] == "success" and re.fullmatch(r"\d+ms", sub[-2])
    assert not any(x.startswith("SubBefore") for x in r.lines)  # Java shows Pub and SubAfter only

    async with MQAdmin(s.ns) as a:  # the raw records, findable by the business key too
        (stored,) = [m for m in await a.query_message(T.TRACE_TOPIC, "biz-1") if "Pub" in m.body.decode()]
        (ctx,) = [c for c in T.decode_trace(stored.body.decode()) if c.trace_type is T.PUB]
        bean = ctx.beans[0]
        assert (bean.topic, bean.tags, bean.keys, bean.body_length) == ("Traced", "TagT", "biz-1", 5)
        assert bean.offset_msg_id == sent.offset_msg_id and bean.store_host == s.addr
    r = await admin(s, "queryMsgTraceById", "-i", "NO_SUCH_ID")
    assert r.code == 1 and "no trace of message NO_SUCH_ID" in r.err


async def test_tracing_never_blocks_the_sender(servers: Servers) -> None:
    # a trace topic nobody can write: records are dropped, sends still succeed
    s = servers
    await create_topic(s, "Busy", queues=1)
    async with Producer("pg_busy", s.ns, enable_trace=True, trace_topic="%RETRY%not_allowed") as producer:
        assert producer.tracer is not None
        for _ in range(T_QUEUE_PROBE):
            producer.tracer.record(T.TraceContext(T.SUB_BEFORE, 1))
        assert producer.tracer.dropped > 0  # the queue is bounded: the surplus is dropped
        result = await producer.send(Message("Busy", "still fine"))
        assert result.status.value == "SEND_OK"


T_QUEUE_PROBE = 3000  # more than trace.QUEUE_SIZE
