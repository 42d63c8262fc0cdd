"""POP consumption end to end on a real broker: raw POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME requests over the remoting client, and
the revive service bringing back what was not acked (docs/pop.md)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode, body
from rmq.protocol.bodies.pop import BatchAck, BatchAckMessageRequestBody
from rmq.protocol.message import MessageExt, iter_records
from rmq.protocol.pop import (
    FIRST_POP_TIME,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    real_topic,
    receipt_handles,
)

from .cluster import Cluster
from .test_send_pull import send_ext

TOPIC = "PopTopic"
GROUP = "PopGroup"
BROKER = "broker-a"
LATE_MS = 365 * 86_400_000  # beyond what a restart under autojump_clock can take


@dataclass
class Popped:
    response: RemotingCommand
    messages: list[MessageExt]
    handles: list[ExtraInfo]

    @property
    def bodies(self) -> list[bytes]:
        return [m.body for m in self.messages]


async def send(cluster: Cluster, body_: bytes, queue_id: int = 0, tags: str = "TagA") -> None:
    ext = send_ext(topic=TOPIC, queue_id=queue_id, props={"TAGS": tags, "WAIT": "true"})
    r = await cluster.call(RequestCode.SEND_MESSAGE, ext, body_)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def pop(
    cluster: Cluster,
    *,
    n: int = 32,
    invisible_ms: int = 60_000,
    poll_ms: int = 0,
    queue_id: int = -1,
    exp: str | None = None,
    group: str = GROUP,
) -> Popped:
    header = PopMessageRequestHeader(
        group, TOPIC, queue_id, n, invisible_ms, poll_ms, cluster.broker.clock_ms(), 0, "TAG" if exp else None, exp
    )
    r = await cluster.call(RequestCode.POP_MESSAGE, header.to_ext(), timeout=poll_ms / 1000 + 5)
    if r.code != ResponseCode.SUCCESS:
        return Popped(r, [], [])
    answer = PopMessageResponseHeader.from_ext(r.ext_fields)
    messages = list(iter_records(r.body))
    return Popped(r, messages, receipt_handles(answer, messages, BROKER, group))


async def ack(cluster: Cluster, msg: MessageExt, handle: ExtraInfo) -> RemotingCommand:
    topic = real_topic(msg.topic, GROUP, handle.retry)  # a retry message is acked on its retry topic
    header = AckMessageRequestHeader(GROUP, topic, handle.queue_id, handle.encode(), handle.queue_offset)
    return await cluster.call(RequestCode.ACK_MESSAGE, header.to_ext())


async def ack_all(cluster: Cluster, popped: Popped) -> None:
    for msg, handle in zip(popped.messages, popped.handles, strict=True):
        r = await ack(cluster, msg, handle)
        assert r.code == ResponseCode.SUCCESS, r.remark


async def test_acked_messages_are_gone(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    for i in range(3):
        await send(cluster, f"m{i}".encode(), queue_id=i % 2)
    got = await pop(cluster, invisible_ms=5000)
    assert sorted(got.bodies) == [b"m0", b"m1", b"m2"]
    assert got.response.remark == "FOUND"
    assert {h.revive_qid for h in got.handles} == {got.handles[0].revive_qid}
    assert all(h.retry == "0" and h.broker_name == BROKER for h in got.handles)
    empty = await pop(cluster)
    assert empty.response.code == ResponseCode.POLLING_TIMEOUT  # pollTime 0: answered at once
    await ack_all(cluster, got)
    await trio.sleep(10)
    assert (await pop(cluster)).response.code == ResponseCode.POLLING_TIMEOUT
    assert cluster.broker.revive.revived == 0


async def test_unacked_message_comes_back_via_the_retry_topic(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send(cluster, b"acked")
    await send(cluster, b"forgotten")
    first = await pop(cluster, invisible_ms=5000)
    assert first.bodies == [b"acked", b"forgotten"]
    await ack(cluster, first.messages[0], first.handles[0])
    await trio.sleep(3)
    assert (await pop(cluster)).messages == []  # still invisible
    await trio.sleep(4)
    again = await pop(cluster, invisible_ms=5000)
    assert again.bodies == [b"forgotten"]
    msg, handle = again.messages[0], again.handles[0]
    assert msg.topic == TOPIC and msg.reconsume_times == 1  # under its own topic, one more try
    assert msg.properties[FIRST_POP_TIME] == str(first.handles[1].pop_time)
    assert handle.retry == "1"
    assert cluster.broker.topics.get(f"%RETRY%{GROUP}_{TOPIC}") is not None
    assert (await ack(cluster, msg, handle)).code == ResponseCode.SUCCESS
    await trio.sleep(10)
    assert (await pop(cluster)).messages == []
    assert cluster.broker.revive.revived == 1


async def test_batch_ack(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    for i in range(3):
        await send(cluster, f"b{i}".encode())
    got = await pop(cluster, invisible_ms=5000, queue_id=0)
    h = got.handles[0]
    acks = BatchAck(
        GROUP, TOPIC, "0", h.ck_queue_offset, 0, h.revive_qid, h.pop_time, h.invisible_time, frozenset({0, 2})
    )
    request_body = body.dumps(BatchAckMessageRequestBody(BROKER, (acks,)).to_json())
    r = await cluster.call(RequestCode.BATCH_ACK_MESSAGE, {}, request_body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    await trio.sleep(10)
    assert (await pop(cluster)).bodies == [b"b1"]


async def test_change_invisible_time_extends(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send(cluster, b"slow")
    got = await pop(cluster, invisible_ms=5000)
    msg, handle = got.messages[0], got.handles[0]
    header = ChangeInvisibleTimeRequestHeader(GROUP, TOPIC, 0, handle.encode(), handle.queue_offset, 60_000)
    r = await cluster.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())
    assert r.code == ResponseCode.SUCCESS, r.remark
    changed = ChangeInvisibleTimeResponseHeader.from_ext(r.ext_fields)
    assert changed.invisible_time == 60_000 and changed.revive_qid == handle.revive_qid
    await trio.sleep(20)
    assert (await pop(cluster)).messages == []  # the old 5 s are long over
    await trio.sleep(50)
    back = await pop(cluster)
    assert back.bodies == [b"slow"] and back.messages[0].reconsume_times == 1
    # the new handle (ckQueueOffset = the message's offset) acks what the changed one made
    new = ExtraInfo(msg.queue_offset, changed.pop_time, changed.invisible_time, changed.revive_qid, "0", BROKER, 0, 0)
    assert (await ack(cluster, msg, new)).code == ResponseCode.SUCCESS


async def test_a_restart_between_pop_and_revive_loses_nothing(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send(cluster, b"survivor")
    await send(cluster, b"acked")
    got = await pop(cluster, invisible_ms=LATE_MS)
    await ack(cluster, got.messages[1], got.handles[1])
    await cluster.restart()
    assert (await pop(cluster)).messages == []
    autojump_clock.jump(LATE_MS / 1000)
    await trio.sleep(2)
    back = await pop(cluster)
    assert back.bodies == [b"survivor"]
    await ack_all(cluster, back)
    assert cluster.broker.offsets.topics_of_group("CID_RMQ_SYS_REVIVE_GROUP") == {"rmq_sys_REVIVE_LOG_TestCluster"}
    await cluster.restart()  # nothing pending is left for the revive service to find again
    await trio.sleep(10)
    assert (await pop(cluster)).messages == []


async def test_two_poppers_of_a_group_never_share_an_invisible_message(cluster: Cluster) -> None:
    for i in range(8):
        await send(cluster, f"s{i}".encode(), queue_id=i % 4)
    results: list[Popped] = []

    async def one() -> None:
        results.append(await pop(cluster, n=3))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(one)
    got = [b for r in results for b in r.bodies]
    assert len(got) == len(set(got))
    rest = await pop(cluster)
    assert sorted(got + rest.bodies) == sorted(f"s{i}".encode() for i in range(8))


async def test_long_polling_returns_when_a_message_arrives(cluster: Cluster) -> None:
    await send(cluster, b"first")
    await ack_all(cluster, await pop(cluster))
    async with trio.open_nursery() as nursery:
        got: list[Popped] = []

        async def waiting() -> None:
            got.append(await pop(cluster, poll_ms=10_000))

        nursery.start_soon(waiting)
        await trio.sleep(0.2)
        assert not got
        await send(cluster, b"arrived", queue_id=2)
    assert got[0].bodies == [b"arrived"]


async def test_long_polling_times_out(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send(cluster, b"x")
    await ack_all(cluster, await pop(cluster))
    before = trio.current_time()
    r = (await pop(cluster, poll_ms=3000)).response
    assert r.code == ResponseCode.POLLING_TIMEOUT and r.remark == "NO_MESSAGE_IN_QUEUE"
    assert 2.5 <= trio.current_time() - before < 4


async def test_tag_expression(cluster: Cluster) -> None:
    await send(cluster, b"a", tags="TagA")
    await send(cluster, b"b", tags="TagB")
    assert (await pop(cluster, exp="TagB")).bodies == [b"b"]


async def test_unacked_messages_go_to_the_dlq_when_retries_are_used_up(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    r = await cluster.call(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body.dumps({"groupName": GROUP, "retryMaxTimes": 1})
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    await send(cluster, b"doomed")
    for times in (0, 1):
        got = await pop(cluster, invisible_ms=5000)
        assert got.bodies == [b"doomed"] and got.messages[0].reconsume_times == times
        await trio.sleep(7)
    assert (await pop(cluster)).messages == []
    assert cluster.broker.message_store.get_max_offset_in_queue(f"%DLQ%{GROUP}", 0) == 1


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"consumerGroup": None}, ResponseCode.SYSTEM_ERROR, "consumerGroup"),
        ({"maxMsgNums": "33"}, ResponseCode.INVALID_PARAMETER, "greater than 32"),
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        ({"queueId": "9"}, ResponseCode.INVALID_PARAMETER, "queueId[9] is illegal"),
        ({"bornTime": "1000"}, ResponseCode.POLLING_TIMEOUT, "timeout too much"),
        ({"invisibleTime": "x"}, ResponseCode.SYSTEM_ERROR, "invisibleTime"),
    ],
)
async def test_bad_pops_are_refused_clearly(
    cluster: Cluster, change: dict[str, str | None], code: int, words: str
) -> None:
    await send(cluster, b"x")
    ext = PopMessageRequestHeader(GROUP, TOPIC, -1, 1, 1000, 0, cluster.broker.clock_ms(), 0).to_ext()
    for key, value in change.items():
        if value is None:
            del ext[key]
        else:
            ext[key] = value
    r = await cluster.call(RequestCode.POP_MESSAGE, ext)
    assert r.code == code and words in (r.remark or "")


async def test_bad_acks_are_refused_clearly(cluster: Cluster) -> None:
    await send(cluster, b"x")
    good = "0 1700000000000 60000 0 0 broker-a 0 0"
    cases = [
        (AckMessageRequestHeader(GROUP, TOPIC, 0, "1 2", 0), ResponseCode.SYSTEM_ERROR, "extraInfo"),
        (AckMessageRequestHeader(GROUP, TOPIC, 0, good, 99), ResponseCode.NO_MESSAGE, "offset is illegal"),
        (AckMessageRequestHeader(GROUP, TOPIC, 7, good, 0), ResponseCode.MESSAGE_ILLEGAL, "queueId[7]"),
        (AckMessageRequestHeader(GROUP, "Nope", 0, good, 0), ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (
            AckMessageRequestHeader(GROUP, TOPIC, 0, good.replace(" 0 0 broker", " 77 0 broker"), 0),
            ResponseCode.MESSAGE_ILLEGAL,
            "revive queue 77",
        ),
    ]
    for header, code, words in cases:
        r = await cluster.call(RequestCode.ACK_MESSAGE, header.to_ext())
        assert r.code == code and words in (r.remark or ""), (header, r.code, r.remark)
    r = await cluster.call(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[]}')
    assert r.code == ResponseCode.NO_MESSAGE
