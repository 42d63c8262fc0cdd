"""Where a new queue starts (computePullFromWhere), against a scripted broker on 127.0.0.1.

Our broker answers QUERY_CONSUMER_OFFSET with 0 while a fresh queue's first message is in
memory (as Java's does), so the 22 branch is scripted here over a real socket.
"""

from __future__ import annotations

from typing import Any

import pytest

from rmq.client import ConsumeFromWhere, PullConsumer
from rmq.client.message import MessageQueue
from rmq.client.route import TopicRoute
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import serve_on_loopback

MQ = MessageQueue("T", "broker-x", 0)
RETRY_MQ = MessageQueue("%RETRY%g", "broker-x", 0)


def _route(addr: str) -> TopicRoute:
    return TopicRoute.from_json(
        {
            "brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName": "broker-x", "cluster": "C"}],
            "queueDatas": [{"brokerName": "broker-x", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1}],
        }
    )


def _scripted(committed: int | None, seen: list[tuple[int, dict[str, str]]]) -> Dispatcher:
    async def answer(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        seen.append((request.code, dict(request.ext_fields)))
        if request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            if committed is None:
                return request.make_response(ResponseCode.QUERY_NOT_FOUND, "Not found")
            return request.make_response(ext_fields={"offset": committed})
        if request.code == RequestCode.GET_MAX_OFFSET:
            return request.make_response(ext_fields={"offset": 42})
        if request.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            return request.make_response(ext_fields={"offset": 7})
        return request.make_response(ResponseCode.SYSTEM_ERROR, "unexpected")

    dispatcher = Dispatcher()
    dispatcher.register(
        [RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MAX_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP], answer
    )
    return dispatcher


CASES: list[tuple[ConsumeFromWhere, int | None, MessageQueue, int, list[int]]] = [
    (ConsumeFromWhere.LAST_OFFSET, None, MQ, 42, [14, 30]),
    (ConsumeFromWhere.LAST_OFFSET, None, RETRY_MQ, 0, [14]),
    (ConsumeFromWhere.FIRST_OFFSET, None, MQ, 0, [14]),
    (ConsumeFromWhere.TIMESTAMP, None, MQ, 7, [14, 29]),
    (ConsumeFromWhere.TIMESTAMP, None, RETRY_MQ, 42, [14, 30]),
    (ConsumeFromWhere.LAST_OFFSET, 5, MQ, 5, [14]),
    (ConsumeFromWhere.FIRST_OFFSET, 5, MQ, 5, [14]),
    (ConsumeFromWhere.TIMESTAMP, 5, MQ, 5, [14]),
]


@pytest.mark.parametrize(("where", "committed", "mq", "expected", "codes"), CASES)
async def test_initial_offset(
    where: ConsumeFromWhere, committed: int | None, mq: MessageQueue, expected: int, codes: list[int]
) -> None:
    seen: list[tuple[int, dict[str, Any]]] = []
    async with serve_on_loopback(_scripted(committed, seen)) as server:
        consumer = PullConsumer("g", "127.0.0.1:1", consume_from_where=where, consume_timestamp=1_700_000_000_000)
        async with consumer.instance.running():
            consumer.instance.store_route(mq.topic, _route(server.address))
            assert await consumer.initial_offset(mq) == expected
    assert [code for code, _ in seen] == codes
    if 29 in codes:
        assert seen[-1][1]["timestamp"] == "1700000000000"
    assert seen[0][1] == {"consumerGroup": "g", "topic": mq.topic, "queueId": "0"}
