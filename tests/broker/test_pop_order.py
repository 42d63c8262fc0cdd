"""Orderly POP (order=true) end to end on a real broker, with raw POP_MESSAGE, ACK_MESSAGE,
BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME requests: one batch of a queue in flight
per group, redelivered in order with its pop counts, kept across a restart (docs/pop.md)."""

from __future__ import annotations

import trio
import trio.testing

from rmq.protocol import RequestCode, ResponseCode, body
from rmq.protocol import headers as H
from rmq.protocol.bodies.pop import BatchAck, BatchAckMessageRequestBody
from rmq.protocol.message import MessageExt, iter_records
from rmq.protocol.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    order_counts,
    receipt_handles,
)

from .cluster import Cluster
from .test_pop import BROKER, GROUP, TOPIC, Popped, send

HOUR_MS = 3_600_000  # beyond what a restart under autojump_clock takes, within the day order info is kept


async def pop(
    cluster: Cluster,
    *,
    n: int = 32,
    invisible_ms: int = 60_000,
    poll_ms: int = 0,
    queue_id: int = -1,
    attempt_id: str | None = None,
) -> Popped:
    header = PopMessageRequestHeader(
        GROUP,
        TOPIC,
        queue_id,
        n,
        invisible_ms,
        poll_ms,
        cluster.broker.clock_ms(),
        0,
        order=True,
        attempt_id=attempt_id,
    )
    r = await cluster.call(RequestCode.POP_MESSAGE, header.to_ext(), timeout=poll_ms / 1000 + 5)
    if r.code != ResponseCode.SUCCESS:
        return Popped(r, [], [])
    answer = PopMessageResponseHeader.from_ext(r.ext_fields)
    messages = list(iter_records(r.body))
    order_counts(answer, messages)  # reconsumeTimes from orderCountInfo, as a client sets it
    return Popped(r, messages, receipt_handles(answer, messages, BROKER, GROUP))


async def ack(cluster: Cluster, msg: MessageExt, handle: ExtraInfo) -> int:
    header = AckMessageRequestHeader(GROUP, TOPIC, handle.queue_id, handle.encode(), handle.queue_offset)
    r = await cluster.call(RequestCode.ACK_MESSAGE, header.to_ext())
    return r.code


async def ack_all(cluster: Cluster, popped: Popped) -> None:
    for msg, handle in zip(popped.messages, popped.handles, strict=True):
        assert await ack(cluster, msg, handle) == ResponseCode.SUCCESS


def offset(cluster: Cluster, queue_id: int = 0) -> int:
    return cluster.broker.offsets.query(GROUP, TOPIC, queue_id)


async def test_a_batch_blocks_its_queue_until_acked(cluster: Cluster) -> None:
    for i in range(5):
        await send(cluster, f"m{i}".encode())
    first = await pop(cluster, n=3)
    assert first.bodies == [b"m0", b"m1", b"m2"]
    assert {h.revive_qid for h in first.handles} == {POP_ORDER_REVIVE_QUEUE}
    assert PopMessageResponseHeader.from_ext(first.response.ext_fields).order_count_info == "0 0 0"
    assert all(m.reconsume_times == 0 for m in first.messages)
    assert offset(cluster) == 0  # at the batch's start until acks come
    assert (await pop(cluster)).response.code == ResponseCode.POLLING_TIMEOUT  # blocked
    await ack(cluster, first.messages[0], first.handles[0])
    await ack(cluster, first.messages[1], first.handles[1])
    assert offset(cluster) == 2
    assert (await pop(cluster)).messages == []  # m2 still in flight
    await ack(cluster, first.messages[2], first.handles[2])
    assert offset(cluster) == 3
    assert (await pop(cluster)).bodies == [b"m3", b"m4"]
    assert cluster.broker.revive.revived == 0  # no checkpoint was written for any of them


async def test_an_expired_batch_comes_back_in_order_with_its_counts(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    for i in range(4):
        await send(cluster, f"m{i}".encode())
    got = await pop(cluster, n=2, invisible_ms=5000)
    assert got.bodies == [b"m0", b"m1"]
    await trio.sleep(3)
    assert (await pop(cluster)).messages == []
    await trio.sleep(3)
    again = await pop(cluster, n=2, invisible_ms=5000)
    assert again.bodies == [b"m0", b"m1"]
    assert [m.reconsume_times for m in again.messages] == [1, 1]
    assert again.handles[0].pop_time > got.handles[0].pop_time
    # an ack with the expired batch's handle is of an older batch: accepted, nothing moves
    assert await ack(cluster, got.messages[0], got.handles[0]) == ResponseCode.SUCCESS
    assert offset(cluster) == 0
    await ack(cluster, again.messages[0], again.handles[0])  # m1 is left to expire again
    await trio.sleep(6)
    third = await pop(cluster, n=3, invisible_ms=5000)
    assert third.bodies == [b"m1", b"m2", b"m3"]
    assert [m.reconsume_times for m in third.messages] == [2, 0, 0]
    counts = PopMessageResponseHeader.from_ext(third.response.ext_fields).order_count_info
    assert counts == "0 qo0%1 2;0 0 0"  # the message's own count, then the queue's least
    await ack_all(cluster, third)
    assert offset(cluster) == 4
    assert (await pop(cluster)).messages == []


async def test_acks_out_of_order_commit_only_up_to_the_first_unacked(cluster: Cluster) -> None:
    for i in range(3):
        await send(cluster, f"m{i}".encode())
    got = await pop(cluster)
    await ack(cluster, got.messages[2], got.handles[2])
    assert offset(cluster) == 0
    await ack(cluster, got.messages[1], got.handles[1])
    assert offset(cluster) == 0
    await ack(cluster, got.messages[0], got.handles[0])
    assert offset(cluster) == 3


async def test_two_poppers_never_hold_the_same_queue(cluster: Cluster) -> None:
    for k in range(3):
        for q in range(4):
            await send(cluster, f"q{q}-{k}".encode(), queue_id=q)
    results: list[Popped] = []

    async def one() -> None:
        results.append(await pop(cluster, n=2))

    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(one)
    holders = [{m.queue_id for m in r.messages} for r in results]
    assert sorted(q for held in holders for q in held) == [0, 1, 2, 3]  # each queue held once
    for r in results:  # a queue's messages from its start, in order
        for q in {m.queue_id for m in r.messages}:
            assert [m.body for m in r.messages if m.queue_id == q] == [f"q{q}-0".encode(), f"q{q}-1".encode()]
    assert (await pop(cluster)).messages == []  # every queue is held
    for r in results:
        await ack_all(cluster, r)
    rest = await pop(cluster)
    assert sorted(rest.bodies) == [f"q{q}-2".encode() for q in range(4)]


async def test_a_pop_repeating_its_attempt_id_gets_the_same_batch(cluster: Cluster) -> None:
    for i in range(2):
        await send(cluster, f"m{i}".encode())
    first = await pop(cluster, attempt_id="attempt-1")
    assert (await pop(cluster, attempt_id="attempt-2")).messages == []
    again = await pop(cluster, attempt_id="attempt-1")  # the client retries a lost answer
    assert again.bodies == first.bodies == [b"m0", b"m1"]
    assert [m.reconsume_times for m in again.messages] == [0, 0]  # the same attempt: not counted


async def test_a_waiting_pop_is_woken_by_the_ack_that_frees_the_queue(cluster: Cluster) -> None:
    for i in range(3):
        await send(cluster, f"m{i}".encode())
    held = await pop(cluster, n=2)
    got: list[Popped] = []
    async with trio.open_nursery() as nursery:

        async def waiting() -> None:
            got.append(await pop(cluster, poll_ms=10_000))

        nursery.start_soon(waiting)
        await trio.sleep(0.3)
        assert not got
        assert cluster.broker.pop_queues.pops.count((TOPIC, GROUP, -1)) == 1
        before = trio.current_time()
        await ack_all(cluster, held)
    assert got[0].bodies == [b"m2"]
    assert trio.current_time() - before < 2


async def test_a_waiting_pop_gets_the_batch_when_it_expires(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send(cluster, b"m0")
    await pop(cluster, invisible_ms=5000)
    before = trio.current_time()
    again = await pop(cluster, poll_ms=20_000, invisible_ms=5000)
    assert again.bodies == [b"m0"] and again.messages[0].reconsume_times == 1
    assert 4 <= trio.current_time() - before < 6


async def test_change_of_invisible_time_keeps_the_queue_blocked(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    await send(cluster, b"slow")
    await send(cluster, b"next")
    got = await pop(cluster, n=1, invisible_ms=5000)
    msg, handle = got.messages[0], got.handles[0]
    header = ChangeInvisibleTimeRequestHeader(GROUP, TOPIC, 0, handle.encode(), handle.queue_offset, 60_000)
    r = await cluster.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())
    assert r.code == ResponseCode.SUCCESS, r.remark
    changed = ChangeInvisibleTimeResponseHeader.from_ext(r.ext_fields)
    assert changed.pop_time == handle.pop_time and changed.revive_qid == POP_ORDER_REVIVE_QUEUE
    assert 60_000 <= changed.invisible_time < 61_000  # from the pop time to the new end
    await trio.sleep(20)
    assert (await pop(cluster)).messages == []  # the first 5 s are long over
    new = ExtraInfo(
        handle.queue_offset, changed.pop_time, changed.invisible_time, changed.revive_qid, "0", BROKER, 0, 0
    )
    assert await ack(cluster, msg, new) == ResponseCode.SUCCESS
    assert (await pop(cluster)).bodies == [b"next"]


async def test_batch_ack_of_an_orderly_batch(cluster: Cluster) -> None:
    for i in range(3):
        await send(cluster, f"b{i}".encode())
    got = await pop(cluster, queue_id=0)
    h = got.handles[0]
    acks = BatchAck(
        GROUP, TOPIC, "0", h.ck_queue_offset, 0, h.revive_qid, h.pop_time, h.invisible_time, frozenset({0, 1, 2})
    )
    r = await cluster.call(
        RequestCode.BATCH_ACK_MESSAGE, {}, body.dumps(BatchAckMessageRequestBody(BROKER, (acks,)).to_json())
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert offset(cluster) == 3


async def test_an_ack_of_an_offset_outside_the_batch_is_refused(cluster: Cluster) -> None:
    for i in range(3):
        await send(cluster, f"m{i}".encode())
    got = await pop(cluster, n=1)
    handle = got.handles[0]
    header = AckMessageRequestHeader(GROUP, TOPIC, 0, handle.encode(), 2)
    r = await cluster.call(RequestCode.ACK_MESSAGE, header.to_ext())
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "offset is illegal" in (r.remark or "")


async def test_the_batches_survive_a_restart(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    for i in range(3):
        await send(cluster, f"m{i}".encode())
    got = await pop(cluster, n=2, invisible_ms=HOUR_MS)
    await ack(cluster, got.messages[0], got.handles[0])
    await cluster.restart()
    saved = body.loads((cluster.store / "config" / "consumerOrderInfo.json").read_bytes())
    info = saved["table"][f"{TOPIC}@{GROUP}"][0]  # fastjson's unquoted queue id
    assert info["o"] == [0, 1] and info["cm"] == 1 and info["popTime"] == got.handles[0].pop_time
    assert (await pop(cluster)).messages == []  # m1 is still in flight
    autojump_clock.jump(HOUR_MS / 1000)
    back = await pop(cluster, n=2)
    assert back.bodies == [b"m1", b"m2"]
    assert [m.reconsume_times for m in back.messages] == [1, 0]


async def test_a_message_out_of_tries_goes_to_the_dlq_by_the_consumer(
    cluster: Cluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker counts; a consumer that sees a message popped too often stores it in the
    group's DLQ (CONSUMER_SEND_MSG_BACK, delay level -1) and acks it, as Java's proxy and
    clients do; the queue then moves on."""
    await send(cluster, b"poison")
    await send(cluster, b"fine")
    for times in range(3):
        got = await pop(cluster, n=1, invisible_ms=5000)
        assert got.bodies == [b"poison"] and got.messages[0].reconsume_times == times
        await trio.sleep(6)
    got = await pop(cluster, n=1, invisible_ms=5000)
    msg = got.messages[0]
    back = H.ConsumerSendMsgBackRequestHeader(
        offset=msg.commitlog_offset,
        group=GROUP,
        delay_level=-1,
        origin_msg_id=msg.msg_id,
        origin_topic=TOPIC,
        unit_mode=False,
        max_reconsume_times=3,
    )
    r = await cluster.call(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext())
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert await ack(cluster, msg, got.handles[0]) == ResponseCode.SUCCESS
    assert (await pop(cluster)).bodies == [b"fine"]
    assert cluster.broker.message_store.get_max_offset_in_queue(f"%DLQ%{GROUP}", 0) == 1
