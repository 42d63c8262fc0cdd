"""Request-reply with the official C++ client (PyPI rocketmq 0.4.4) in the loop.

That client has no request API (librocketmq 1.2.3 exports no request or reply symbols, and
no Java, Go or Node.js client with one is installed here), so it plays the parts it can: the
consumer that receives our requester's request, whose properties it hands back for our
replier to answer, and a reader of the reply the broker stored in the reply topic.
"""

from __future__ import annotations

import pytest
import trio

from rmq.client import Message, MessageExt, Producer
from rmq.protocol import properties as P
from tests.interop.cpp_client import (
    ReceivedMessage,
    pull_consume,
    push_consume,
    requires_cpp_client,
    run_scenario,
    start_scenario,
)

from .conftest import Cluster

pytestmark = [pytest.mark.interop, requires_cpp_client]

LIMIT = 40  # seconds: every wait in this test ends by then
REQUEST_KEYS = (P.CORRELATION_ID, P.REPLY_TO_CLIENT, P.TTL, P.CLUSTER)


async def test_a_request_consumed_by_the_cpp_client_is_answered(cluster: Cluster) -> None:
    await cluster.create_topic("RequestToCpp")
    spec = push_consume(
        cluster.namesrv_addr, "RequestToCpp", 1, group="cg_cpp_replier", property_keys=REQUEST_KEYS, time_limit=LIMIT
    )
    replies: list[MessageExt] = []
    async with (
        start_scenario(spec) as run,
        Producer("pg_requester_cpp", cluster.namesrv_addr) as requester,
        Producer("pg_replier_cpp", cluster.namesrv_addr) as replier,
    ):
        await run.wait_for("started", timeout=LIMIT)

        async def ask() -> None:
            replies.append(await requester.request(Message("RequestToCpp", b"ping"), timeout=LIMIT))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            received = ReceivedMessage.from_event(await run.wait_for("message", timeout=LIMIT))
            # the request as the C++ client read it carries what a replier needs
            request = Message(received.topic, received.body, properties=dict(received.properties))
            await replier.reply(request, b"pong: " + received.body)
        (await run.wait()).check()
    (reply,) = replies
    assert reply.body == b"pong: ping"
    assert received.properties[P.CORRELATION_ID] == reply.properties[P.CORRELATION_ID]
    assert received.properties[P.REPLY_TO_CLIENT] == requester.instance.client_id
    assert received.properties[P.TTL] == str(LIMIT * 1000)
    assert received.properties[P.CLUSTER] == "DefaultCluster"

    # the stored reply is a message as any other to a real client
    keys = (P.MSG_TYPE, P.CORRELATION_ID)
    stored = (
        await run_scenario(pull_consume(cluster.namesrv_addr, "DefaultCluster_REPLY_TOPIC", property_keys=keys))
    ).check()
    (message,) = stored.messages
    assert message.body == b"pong: ping"
    assert message.properties[P.MSG_TYPE] == "reply"
    assert message.properties[P.CORRELATION_ID] == reply.properties[P.CORRELATION_ID]
