"""GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): an admin asks a
broker, the broker asks the push consumer over its connection and passes the answer back.
In-process name server and broker on 127.0.0.1 (test_admin.py's fixture)."""

from __future__ import annotations

import io
import re

import pytest
import trio

from rmq.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, Producer, PullConsumer, PushConsumer
from rmq.client.admin import AdminResponseError, MQAdmin
from rmq.client.running_info import ConsumeCounters
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import headers as H
from rmq.tools.admin import run
from tests.interop.cpp_client import push_consume, requires_cpp_client, run_scenario
from tests.tools.test_admin import FAST, LIMIT, Servers, create_topic, servers

from .conftest import Cluster

__all__ = ["servers"]  # the fixture, imported for pytest


def test_consume_counters_rates() -> None:
    c = ConsumeCounters()
    c.pulled("T", 10, 0.004)
    c.pulled("T", 0, 0.002)
    c.consumed("T", True, 0.010)
    c.consumed("T", False, 0.030)
    (topic, st), = c.status_table().items()  # fmt: skip
    assert topic == "T"
    assert st["pullRT"] == 3.0 and st["consumeRT"] == 20.0 and st["consumeFailedMsgs"] == 1
    assert st["pullTPS"] > 0 and st["consumeOKTPS"] > 0
    st = c.status_table()["T"]  # nothing new since the last look
    assert (st["pullTPS"], st["consumeOKTPS"], st["consumeRT"], st["consumeFailedMsgs"]) == (0.0, 0.0, 0.0, 1)


async def test_running_info_and_consume_directly(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Direct", queues=2)
    seen: list[str] = []

    async def handler(msg: MessageExt) -> ConsumeStatus | None:
        seen.append(msg.body.decode())
        if msg.body == b"boom":
            raise ValueError("boom")
        return ConsumeStatus.RECONSUME_LATER if msg.body == b"later" else None

    consumer = PushConsumer("cg_direct", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.LAST_OFFSET, **FAST)
    consumer.subscribe("Direct", "TagD")
    async with consumer, Producer("pg_direct", s.ns) as producer, MQAdmin(s.ns) as a:
        await consumer.wait_for_assignment(LIMIT)
        cid = consumer.instance.client_id
        info = await a.consumer_running_info("cg_direct", cid)
        props = info["properties"]
        assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
        assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0
        subs = {sub["topic"]: sub["subString"] for sub in info["subscriptionSet"]}
        assert subs["Direct"] == "TagD" and "%RETRY%cg_direct" in subs
        queues = {(mq.topic, mq.queue_id) for mq in info["mqTable"]}
        assert {("Direct", 0), ("Direct", 1)} <= queues
        pq = next(v for mq, v in info["mqTable"].items() if mq.topic == "Direct")
        assert set(pq) >= {"commitOffset", "cachedMsgCount", "locked", "droped", "lastPullTimestamp"}

        results = {}
        for body in ("fine", "later", "boom"):
            sent = await producer.send(Message("Other", body))  # not a topic the group consumes
            results[body] = await a.consume_message_directly("cg_direct", cid, sent.offset_msg_id, "Other")
        assert [results[b]["consumeResult"] for b in ("fine", "later", "boom")] == [
            "CR_SUCCESS",
            "CR_LATER",
            "CR_THROW_EXCEPTION",
        ]
        assert "ValueError: boom" in results["boom"]["remark"]
        assert all(r["autoCommit"] is True and r["order"] is False for r in results.values())
        assert seen == ["fine", "later", "boom"]

        # the broker refuses a msgId that is no offset message id, and one it does not store
        for bad_id, why in (("ZZ", "bad msgId"), ("7F0000010000000000000000FFFFFFFF", "no message")):
            header = H.ConsumeMessageDirectlyRequestHeader("cg_direct", cid, bad_id)
            try:
                await a._request(s.addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
            except AdminResponseError as exc:
                assert exc.response_code == ResponseCode.SYSTEM_ERROR and why in str(exc)
            else:
                raise AssertionError(f"msgId {bad_id} accepted")
        response = await a.api.invoke(s.addr, RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), LIMIT)
        assert response.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in (response.remark or "")

        # a client id the broker does not know, and a message id that is no id
        for call in (
            a.consumer_running_info("cg_direct", "1.2.3.4@nobody"),
            a.consume_message_directly("cg_direct", cid, "ZZ"),
        ):
            try:
                with trio.fail_after(LIMIT):
                    await call
            except Exception as exc:
                assert (
                    isinstance(exc, AdminResponseError)
                    and exc.response_code == ResponseCode.SYSTEM_ERROR
                    or ("not an offset message id" in str(exc))
                )
            else:
                raise AssertionError("expected an error")


@pytest.mark.interop
@requires_cpp_client
async def test_cpp_consumer_running_info_is_passed_through(cluster: Cluster) -> None:
    """The official C++ client answers 307 itself; the broker hands its answer back as is."""
    await cluster.create_topic("CppInfo", queues=2)
    spec = push_consume(cluster.namesrv_addr, "CppInfo", 0, group="cg_cpp_info", time_limit=8)
    async with trio.open_nursery() as nursery, MQAdmin(cluster.namesrv_addr) as a:
        nursery.start_soon(run_scenario, spec)
        with trio.fail_after(LIMIT):
            while not cluster.broker.clients.consumer_channels("cg_cpp_info"):
                await trio.sleep(0.05)
        (channel,) = cluster.broker.clients.consumer_channels("cg_cpp_info")
        assert channel.language == "CPP"
        with trio.fail_after(LIMIT):
            info = await a.consumer_running_info("cg_cpp_info", channel.client_id)
        # the C++ client's own ConsumerRunningInfo, its quirks included ("flase")
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert {sub["topic"] for sub in info["subscriptionSet"]} == {"CppInfo", "%RETRY%cg_cpp_info"}
        assert {mq.queue_id for mq in info["mqTable"] if mq.topic == "CppInfo"} == {0, 1}
        r = await admin_in(cluster.namesrv_addr, "consumerStatus", "-g", "cg_cpp_info", "-i", channel.client_id)
        assert "#Consumer MQ Detail#" in r and re.search(r"^CppInfo\s+broker-a\s+1\s+0\s*$", r, re.M), r
        nursery.cancel_scope.cancel()


async def admin_in(namesrv: str, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with trio.fail_after(LIMIT):
        code = await run([*argv, "-n", namesrv], out, err)
    assert code == 0, err.getvalue()
    return out.getvalue()


async def test_consume_directly_refused_by_a_consumer_without_a_handler(servers: Servers) -> None:
    """A pull consumer has no handler to run: the client answers as Java's does for a group it
    cannot consume directly (the proxy's 5.x groups answer the same way)."""
    s = servers
    await create_topic(s, "DirectPull", queues=1)
    consumer = PullConsumer("cg_direct_pull", s.ns)
    consumer.subscribe("DirectPull")
    async with consumer, Producer("pg_direct_pull", s.ns) as producer, MQAdmin(s.ns) as a:
        sent = await producer.send(Message("DirectPull", "x"))
        cid = consumer.instance.client_id
        with trio.fail_after(LIMIT):
            while True:  # the broker learns of the consumer from its first heartbeat
                try:
                    await a.consume_message_directly("cg_direct_pull", cid, sent.offset_msg_id, "DirectPull")
                except AdminResponseError as exc:
                    if "not exist in this consumer" in str(exc):
                        break
                else:
                    raise AssertionError("a pull consumer consumed directly")
                await trio.sleep(0.1)
