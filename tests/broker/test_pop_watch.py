"""PEEK_MESSAGE, NOTIFICATION and POLLING_INFO on a real broker, with raw requests: a peek
changes nothing, a notification long-polls until the group has something to pop, polling
info counts the waiting pops (docs/pop.md)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.protocol.message import iter_records
from rmq.protocol.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageResponseHeader,
)

from .cluster import Cluster
from .test_pop import GROUP, TOPIC, ack_all, pop, send
from .test_pop_order import pop as pop_orderly


@pytest.fixture
async def topic(cluster: Cluster) -> str:
    """The topic, made with the 4 queues a first send would make."""
    create = CreateTopicRequestHeader(TOPIC, read_queue_nums=4, write_queue_nums=4)
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())).code == ResponseCode.SUCCESS
    return TOPIC


async def peek(cluster: Cluster, n: int = 32, queue_id: int = -1) -> RemotingCommand:
    header = PeekMessageRequestHeader(TOPIC, queue_id, n, GROUP)
    return await cluster.call(RequestCode.PEEK_MESSAGE, header.to_ext())


def bodies(r: RemotingCommand) -> list[bytes]:
    return [m.body for m in iter_records(r.body)] if r.body else []


async def notification(
    cluster: Cluster, poll_ms: int = 0, queue_id: int = -1, order: bool | None = None
) -> NotificationResponseHeader:
    header = NotificationRequestHeader(GROUP, TOPIC, queue_id, poll_ms, cluster.broker.clock_ms(), order)
    r = await cluster.call(RequestCode.NOTIFICATION, header.to_ext(), timeout=poll_ms / 1000 + 5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return NotificationResponseHeader.from_ext(r.ext_fields)


async def polling_num(cluster: Cluster, queue_id: int = -1) -> int:
    r = await cluster.call(RequestCode.POLLING_INFO, PollingInfoRequestHeader(GROUP, TOPIC, queue_id).to_ext())
    assert r.code == ResponseCode.SUCCESS, r.remark
    return PollingInfoResponseHeader.from_ext(r.ext_fields).polling_num


async def test_a_peek_changes_nothing(topic: str, cluster: Cluster) -> None:
    assert (await peek(cluster)).code == ResponseCode.PULL_NOT_FOUND
    for i in range(3):
        await send(cluster, f"m{i}".encode())
    first = await peek(cluster, n=2, queue_id=0)
    assert first.code == ResponseCode.SUCCESS and first.remark == "FOUND"
    assert bodies(first) == [b"m0", b"m1"]
    assert PopMessageResponseHeader.from_ext(first.ext_fields).rest_num == 3
    assert bodies(await peek(cluster)) == [b"m0", b"m1", b"m2"]  # again: nothing moved
    assert cluster.broker.offsets.query(GROUP, TOPIC, 0) == -1
    popped = await pop(cluster)
    assert popped.bodies == [b"m0", b"m1", b"m2"]
    assert (await peek(cluster)).code == ResponseCode.PULL_NOT_FOUND  # the group is past them now
    await ack_all(cluster, popped)


async def test_a_notification_says_whether_there_is_a_message(topic: str, cluster: Cluster) -> None:
    assert not (await notification(cluster)).has_msg  # pollTime 0: at once
    await send(cluster, b"m0", queue_id=1)
    assert (await notification(cluster)).has_msg
    assert (await notification(cluster, queue_id=1)).has_msg
    assert not (await notification(cluster, queue_id=0)).has_msg
    await ack_all(cluster, await pop(cluster))
    assert not (await notification(cluster)).has_msg


async def test_a_notification_waits_for_an_arrival(topic: str, cluster: Cluster) -> None:
    got: list[NotificationResponseHeader] = []
    async with trio.open_nursery() as nursery:

        async def waiting() -> None:
            got.append(await notification(cluster, poll_ms=10_000))

        nursery.start_soon(waiting)
        await trio.sleep(0.3)
        assert not got and len(cluster.broker.pop_queues.notifications) == 1
        await send(cluster, b"arrived", queue_id=3)
    assert got[0].has_msg
    assert len(cluster.broker.pop_queues.notifications) == 0


async def test_a_notification_times_out(topic: str, cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    before = trio.current_time()
    answer = await notification(cluster, poll_ms=3000)
    assert not answer.has_msg and not answer.polling_full
    assert 2.5 <= trio.current_time() - before < 4


async def test_an_orderly_notification_waits_for_the_batch(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send(cluster, b"m0")
    await send(cluster, b"m1")
    held = await pop_orderly(cluster, n=1, invisible_ms=5000)
    assert (await notification(cluster)).has_msg  # a plain group would pop m1
    assert not (await notification(cluster, order=True)).has_msg  # the orderly one waits for m0
    before = trio.current_time()
    assert (await notification(cluster, poll_ms=20_000, order=True)).has_msg  # m0 expired
    assert 4 <= trio.current_time() - before < 6
    assert held.bodies == [b"m0"]


async def test_polling_info_counts_the_waiting_pops(topic: str, cluster: Cluster) -> None:
    assert await polling_num(cluster) == 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: pop(cluster, poll_ms=10_000))
        nursery.start_soon(lambda: pop(cluster, poll_ms=10_000))
        nursery.start_soon(lambda: pop(cluster, poll_ms=10_000, queue_id=2))
        await trio.sleep(0.3)
        assert await polling_num(cluster) == 2
        assert await polling_num(cluster, 2) == 1
        assert await polling_num(cluster, 1) == 0
        await send(cluster, b"a", queue_id=2)
        await send(cluster, b"b", queue_id=2)
        await send(cluster, b"c", queue_id=2)
    assert await polling_num(cluster) == 0


@pytest.mark.parametrize("broker_props", [{"maxPopPollingSize": "1"}])
async def test_notifications_beyond_the_polling_size_are_answered_full(topic: str, cluster: Cluster) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: notification(cluster, poll_ms=10_000))
        await trio.sleep(0.3)
        full = await notification(cluster, poll_ms=10_000)
        assert not full.has_msg and full.polling_full
        await send(cluster, b"x")


PEEK = {"topic": TOPIC, "queueId": "-1", "maxMsgNums": "4", "consumerGroup": GROUP}
NOTE = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "pollTime": "0", "bornTime": "0"}
INFO = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1"}


@pytest.mark.parametrize(
    ("code", "base", "change", "answer", "words"),
    [
        (RequestCode.PEEK_MESSAGE, PEEK, {"maxMsgNums": None}, ResponseCode.SYSTEM_ERROR, "maxMsgNums"),
        (RequestCode.PEEK_MESSAGE, PEEK, {"maxMsgNums": "0"}, ResponseCode.INVALID_PARAMETER, "maxMsgNums"),
        (RequestCode.PEEK_MESSAGE, PEEK, {"queueId": "x"}, ResponseCode.SYSTEM_ERROR, "queueId"),
        (RequestCode.PEEK_MESSAGE, PEEK, {"queueId": "9"}, ResponseCode.INVALID_PARAMETER, "queueId[9] is illegal"),
        (RequestCode.PEEK_MESSAGE, PEEK, {"topic": "Nope"}, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (RequestCode.NOTIFICATION, NOTE, {"pollTime": None}, ResponseCode.SYSTEM_ERROR, "pollTime"),
        (RequestCode.NOTIFICATION, NOTE, {"bornTime": "soon"}, ResponseCode.SYSTEM_ERROR, "bornTime"),
        (RequestCode.NOTIFICATION, NOTE, {"queueId": "4"}, ResponseCode.INVALID_PARAMETER, "queueId[4] is illegal"),
        (RequestCode.NOTIFICATION, NOTE, {"topic": "Nope"}, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (RequestCode.POLLING_INFO, INFO, {"consumerGroup": None}, ResponseCode.SYSTEM_ERROR, "consumerGroup"),
        (RequestCode.POLLING_INFO, INFO, {"queueId": "7"}, ResponseCode.INVALID_PARAMETER, "queueId[7] is illegal"),
        (RequestCode.POLLING_INFO, INFO, {"topic": "Nope"}, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
    ],
)
async def test_bad_requests_are_refused_clearly(
    cluster: Cluster, code: int, base: dict[str, str], change: dict[str, Any], answer: int, words: str
) -> None:
    await send(cluster, b"x")  # the topic exists
    ext = {**base}
    for key, value in change.items():
        if value is None:
            del ext[key]
        else:
            ext[key] = value
    r = await cluster.call(code, ext)
    assert r.code == answer and words in (r.remark or ""), (r.code, r.remark)
