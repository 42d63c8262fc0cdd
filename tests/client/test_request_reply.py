"""Request-reply with our client against our name server and broker (real sockets):
a requester's `request` gets the reply a push consumer's `reply` sends, through the
broker's SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT."""

from __future__ import annotations

import zlib

import pytest
import trio

from rmq.client import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    MQTimeoutError,
    Producer,
    PullConsumer,
    PushConsumer,
    SendResult,
)
from rmq.client.reply import ReplyRouter, prepare_request, pushed_reply, reply_message
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader
from rmq.protocol.message import COMPRESSED_FLAG
from rmq.remoting import RemotingClient

from .conftest import FAST, Cluster

LIMIT = 30  # seconds: every wait in these tests ends by then
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


async def read_all(cluster: Cluster, topic: str, count: int) -> list[MessageExt]:
    """`count` messages of the one-queue `topic`, read from its start."""
    reader = PullConsumer(
        "cg_read_" + topic, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    reader.assign([MessageQueue(topic, cluster.broker_name, 0)])
    async with reader:
        got: list[MessageExt] = []
        with trio.fail_after(LIMIT):
            while len(got) < count:
                got += await reader.poll(timeout=1.0)
    return got


def test_reply_message_is_built_from_the_request() -> None:
    request = Message("T", b"ping")
    correlation_id = prepare_request(request, "10.0.0.1@1", 2.5)
    assert request.properties[P.CORRELATION_ID] == correlation_id
    assert request.properties[P.REPLY_TO_CLIENT] == "10.0.0.1@1"
    assert request.properties[P.TTL] == "2500"
    assert prepare_request(Message("T", b""), "c", 1.0) != correlation_id
    with pytest.raises(MQClientError, match="CLUSTER"):
        reply_message(request, b"pong")  # not received from a broker: no CLUSTER
    request.properties[P.CLUSTER] = "C1"
    reply = reply_message(request, "pong")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"pong"
    assert reply.properties == {
        P.MSG_TYPE: "reply",
        P.CORRELATION_ID: correlation_id,
        P.REPLY_TO_CLIENT: "10.0.0.1@1",
        P.TTL: "2500",
    }


def test_a_pushed_reply_becomes_the_message_the_replier_sent() -> None:
    header = ReplyMessageRequestHeader(
        producer_group="pg",
        topic=REPLY_TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=-1,
        sys_flag=COMPRESSED_FLAG,
        born_timestamp=1700000000000,
        flag=3,
        born_host="127.0.0.1:50000",
        store_host="[::1]:10911",
        store_timestamp=1700000000123,
        properties=P.encode_properties({P.CORRELATION_ID: "c-1", "k": "v"}),
    )
    reply = pushed_reply(header, zlib.compress(b"x" * 5000), 1700000000200)
    assert reply.body == b"x" * 5000  # a body the replier compressed is inflated
    assert (reply.topic, reply.flag, reply.reconsume_times) == (REPLY_TOPIC, 3, 0)
    assert reply.properties == {P.CORRELATION_ID: "c-1", "k": "v", P.ARRIVE_TIME: "1700000000200"}
    assert reply.born_host == ("127.0.0.1", 50000) and reply.store_host == ("::1", 10911)
    assert (reply.born_timestamp, reply.store_timestamp) == (1700000000000, 1700000000123)


async def test_request_returns_the_reply_of_a_consumer(cluster: Cluster) -> None:
    await cluster.create_topic("RequestTopic")
    sent: list[SendResult] = []
    async with Producer("pg_replier", cluster.namesrv_addr) as replier:

        async def answer(msg: MessageExt) -> None:
            sent.append(await replier.reply(msg, msg.body.upper()))

        consumer = PushConsumer(
            "cg_replier", cluster.namesrv_addr, handler=answer, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
        )
        consumer.subscribe("RequestTopic", "*")
        async with consumer, Producer("pg_requester", cluster.namesrv_addr) as requester:
            replies: dict[int, MessageExt] = {}

            async def ask(i: int) -> None:
                replies[i] = await requester.request(Message("RequestTopic", f"ping {i}"), timeout=LIMIT)

            async with trio.open_nursery() as nursery:
                for i in range(5):  # at once: each reply finds its own request
                    nursery.start_soon(ask, i)
            router = ReplyRouter.of(requester.instance.dispatcher)
            assert router.pending == {}
    for i, reply in replies.items():
        assert reply.body == f"PING {i}".encode()
        assert reply.topic == REPLY_TOPIC
        assert reply.properties[P.MSG_TYPE] == "reply"
        assert reply.properties[P.REPLY_TO_CLIENT] == requester.instance.client_id
        assert P.ARRIVE_TIME in reply.properties and P.PUSH_REPLY_TIME in reply.properties
        assert reply.store_host == ("127.0.0.1", int(cluster.broker_addr.rsplit(":", 1)[1]))
    assert len({r.properties[P.CORRELATION_ID] for r in replies.values()}) == 5
    # the broker stored the replies too (storeReplyMessageEnable)
    assert all(r.offset_msg_id != "0" and r.message_queue.topic == REPLY_TOPIC for r in sent)
    stored = await read_all(cluster, REPLY_TOPIC, 5)
    assert sorted(m.body for m in stored) == sorted(f"PING {i}".encode() for i in range(5))


async def test_request_without_a_replier_times_out(cluster: Cluster) -> None:
    await cluster.create_topic("NobodyAnswers")
    async with Producer("pg_lonely", cluster.namesrv_addr) as requester:
        with pytest.raises(MQTimeoutError, match="no reply"):
            await requester.request(Message("NobodyAnswers", b"anyone?"), timeout=0.5)
        assert ReplyRouter.of(requester.instance.dispatcher).pending == {}


async def test_reply_to_a_requester_not_connected_is_refused_and_stored(cluster: Cluster) -> None:
    request = Message("Gone", b"?", properties={P.CLUSTER: "DefaultCluster", P.CORRELATION_ID: "c-1"})
    request.properties[P.REPLY_TO_CLIENT] = "127.0.0.9@nobody"
    async with Producer("pg_replier_gone", cluster.namesrv_addr, retry_times=0) as replier:
        with pytest.raises(MQBrokerError) as refused:
            await replier.reply(request, b"too late")
    assert refused.value.response_code == ResponseCode.SYSTEM_ERROR
    assert refused.value.remark == "push reply message fail, channel of <127.0.0.9@nobody> not found."
    (stored,) = await read_all(cluster, REPLY_TOPIC, 1)
    assert stored.body == b"too late" and stored.properties[P.CORRELATION_ID] == "c-1"


async def test_a_v1_reply_from_another_client_reaches_the_requester(cluster: Cluster) -> None:
    """SEND_REPLY_MESSAGE (324, the V1 header), as a Java replier without sendSmartMsg sends it."""
    await cluster.create_topic("RequestTopicV1")
    send, receive = trio.open_memory_channel[MessageExt](1)
    consumer = PushConsumer(
        "cg_v1", cluster.namesrv_addr, handler=send.send, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("RequestTopicV1", "*")
    replies: list[MessageExt] = []
    async with consumer, Producer("pg_requester_v1", cluster.namesrv_addr) as requester:
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                replies.append(await requester.request(Message("RequestTopicV1", b"v1?"), timeout=LIMIT))

            nursery.start_soon(ask)
            with trio.fail_after(LIMIT):
                request = await receive.receive()
            reply = reply_message(request, b"v1!")
            header = SendMessageRequestHeader(
                producer_group="pg_raw",
                topic=reply.topic,
                queue_id=0,
                born_timestamp=1700000000000,
                properties=P.encode_properties(reply.properties),
            )
            command = RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE, header.to_ext(), reply.body)
            async with RemotingClient() as raw:
                answer = await raw.invoke(cluster.broker_addr, command, 10.0)
    assert answer.code == ResponseCode.SUCCESS, answer
    assert SendMessageResponseHeader.from_ext(answer.ext_fields).msg_id != "0"  # stored
    (got,) = replies
    assert got.body == b"v1!" and got.properties[P.CORRELATION_ID] == request.properties[P.CORRELATION_ID]
