"""auto_batch=True: concurrent sends leave as SEND_BATCH_MESSAGE requests, each send still
gets its own SendResult, and every message is stored once, intact, against our broker."""

from __future__ import annotations

import pytest
import trio

from rmq.broker.stats import IN_MSGS, IN_SENDS
from rmq.client import Message, MQClientError, MQTimeoutError, Producer, SendResult, SendStatus
from rmq.client.message import batch_item_size
from rmq.client.route import PublishInfo, TopicRoute
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import properties as P
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import serve_on_loopback

from .conftest import Cluster
from .test_producer import read_all


def sends_and_messages(cluster: Cluster, topic: str) -> tuple[int, int]:
    entry = cluster.broker.stats.topics_in.get(topic)
    return (entry[IN_SENDS], entry[IN_MSGS]) if entry else (0, 0)


async def test_concurrent_sends_share_requests_and_get_their_own_results(cluster: Cluster) -> None:
    await cluster.create_topic("AutoBatch", queues=2)
    results: dict[int, SendResult] = {}
    sent: dict[int, Message] = {}
    async with Producer("pg_auto", cluster.namesrv_addr, auto_batch=True) as producer:

        async def one(i: int) -> None:
            msg = Message("AutoBatch", f"body-{i}", tags="T", keys=[f"k{i}"], properties={"n": str(i)})
            sent[i] = msg
            results[i] = await producer.send(msg)

        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(one, i)
    requests, messages = sends_and_messages(cluster, "AutoBatch")
    assert messages == 200
    assert requests < 100  # many sends per request (a lone first send goes alone)
    assert all(r.status is SendStatus.SEND_OK for r in results.values())
    assert {r.msg_id for r in results.values()} == {m.uniq_key for m in sent.values()}
    for i, r in results.items():
        assert r.msg_id == sent[i].uniq_key
    # each result names its own place: distinct queue offsets per queue, distinct offset ids
    places = {(r.message_queue.queue_id, r.queue_offset) for r in results.values()}
    assert len(places) == 200 and len({r.offset_msg_id for r in results.values()}) == 200

    stored = await read_all(cluster, "AutoBatch", 200, queues=2)
    assert len(stored) == 200
    by_key = {m.properties[P.UNIQ_KEY]: m for m in stored}
    for i, r in results.items():
        m = by_key[r.msg_id]
        assert m.body == f"body-{i}".encode() and m.tags == "T" and m.keys == f"k{i}"
        assert m.properties["n"] == str(i)
        assert (m.queue_id, m.queue_offset) == (r.message_queue.queue_id, r.queue_offset)
        assert m.offset_msg_id == r.offset_msg_id


async def test_a_lone_send_is_a_plain_send_and_unbatchable_ones_go_alone(cluster: Cluster) -> None:
    await cluster.create_topic("AutoLone", queues=1)
    async with Producer("pg_lone", cluster.namesrv_addr, auto_batch=True, compress_over=2048) as producer:
        first = await producer.send(Message("AutoLone", b"alone"))
        assert first.status is SendStatus.SEND_OK and "," not in first.msg_id
        assert sends_and_messages(cluster, "AutoLone") == (1, 1)
        assert producer._batcher is not None and not producer._batcher._lanes  # nothing left behind
        # delayed, timer and to-be-compressed messages never ride in a batch (a broker refuses
        # a batch holding a timer message: all its sends would fail)
        delayed = [Message("AutoLone", f"d{i}", delay_level=1) for i in range(5)]
        timers = [Message("AutoLone", f"t{i}", properties={key: "1000"}) for i, key in enumerate(P.TIMER_KEYS)]
        big = [Message("AutoLone", b"z" * 4096) for _ in range(5)]
        results: list[SendResult] = []

        async def send(msg: Message) -> None:
            results.append(await producer.send(msg))

        async with trio.open_nursery() as nursery:
            for msg in delayed + timers + big:
                nursery.start_soon(send, msg)
    assert all(r.status is SendStatus.SEND_OK for r in results) and len(results) == 14
    assert sends_and_messages(cluster, "AutoLone") == (15, 15)


async def test_batches_stay_within_batch_max_bytes(cluster: Cluster) -> None:
    await cluster.create_topic("AutoSize", queues=1)
    async with Producer(
        "pg_size", cluster.namesrv_addr, auto_batch=True, batch_max_bytes=8 * 1024, batch_in_flight=1
    ) as producer:
        async with trio.open_nursery() as nursery:
            for _ in range(64):
                nursery.start_soon(producer.send, Message("AutoSize", b"x" * 1000))
    requests, messages = sends_and_messages(cluster, "AutoSize")
    assert messages == 64
    per_request = 8 * 1024 // batch_item_size(Message("AutoSize", b"x" * 1000))  # 8 of ~1 KiB
    assert -(-64 // per_request) <= requests < 64


async def test_a_silent_broker_fails_every_waiting_send_in_time() -> None:
    """No hang: the sends queued behind a batch that never gets an answer fail by their
    own deadlines, each with a timeout error."""

    async def silent(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await trio.sleep_forever()

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE_V2, silent)
    dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, silent)
    async with serve_on_loopback(dispatcher) as broker:
        route = TopicRoute.from_json(
            {
                "brokerDatas": [{"brokerAddrs": {"0": broker.address}, "brokerName": "mute", "cluster": "C"}],
                "queueDatas": [{"brokerName": "mute", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1}],
            }
        )
        errors: list[BaseException] = []
        async with Producer("pg_mute", "127.0.0.1:1", send_timeout=0.5, auto_batch=True, retry_times=0) as producer:
            producer.instance.store_route("Mute", route)
            producer._publish["Mute"] = PublishInfo("Mute", route)

            async def one() -> None:
                try:
                    await producer.send(Message("Mute", b"x"))
                except MQClientError as exc:
                    errors.append(exc)

            start = trio.current_time()
            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:
                    for _ in range(20):
                        nursery.start_soon(one)
            assert trio.current_time() - start < 3.0
    assert len(errors) == 20 and all(isinstance(e, MQTimeoutError) for e in errors)


async def test_cancelling_the_leader_fails_its_batch_not_the_producer(cluster: Cluster) -> None:
    await cluster.create_topic("AutoCancel", queues=1)
    async with Producer("pg_cancel", cluster.namesrv_addr, auto_batch=True, batch_in_flight=1) as producer:
        outcomes: list[object] = []

        async def one(i: int) -> None:
            try:
                outcomes.append(await producer.send(Message("AutoCancel", f"c{i}")))
            except MQClientError as exc:
                outcomes.append(exc)

        with trio.move_on_after(0):  # the first send is cancelled at its first checkpoint
            await producer.send(Message("AutoCancel", b"cut"))
        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(one, i)
        assert len(outcomes) == 10
        assert all(isinstance(o, SendResult) for o in outcomes)  # the lane was left clean
        assert producer._batcher is not None and not producer._batcher._lanes


def test_bad_batch_options() -> None:
    with pytest.raises(MQClientError, match="batch_max_bytes"):
        Producer("pg", "127.0.0.1:1", auto_batch=True, batch_max_bytes=0)
    with pytest.raises(MQClientError, match="batch_in_flight"):
        Producer("pg", "127.0.0.1:1", auto_batch=True, batch_in_flight=0)


async def test_senders_that_send_again_at_once_fill_their_batches(cluster: Cluster) -> None:
    """A closed loop, as a benchmark or a pipeline runs: an answer wakes the senders of its
    batch, who send again at once, and the first waiting send, which leads the next batch.
    It lets them queue first, so the batch leaves full instead of with the two that waited
    (a request of its own, and with SYNC_FLUSH a group commit of its own)."""
    await cluster.create_topic("AutoLoop", queues=1)
    body = b"x" * 1000
    per_request = 8 * 1024 // batch_item_size(Message("AutoLoop", body))
    senders, rounds = 2 * per_request + 2, 160  # two full batches in flight, two sends waiting
    async with Producer("pg_loop", cluster.namesrv_addr, auto_batch=True, batch_max_bytes=8 * 1024) as producer:

        async def loop() -> None:
            for _ in range(rounds):
                await producer.send(Message("AutoLoop", body))

        async with trio.open_nursery() as nursery:
            for _ in range(senders):
                nursery.start_soon(loop)
    requests, messages = sends_and_messages(cluster, "AutoLoop")
    assert messages == senders * rounds
    full = -(-messages // per_request)
    # the first send leaves alone and the last rounds end unevenly: 8-11 % over `full` here;
    # a head that led at once with the two waiting sends made 19-22 %
    assert requests <= full * 1.15, (requests, full)
