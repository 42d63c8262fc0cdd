"""auto_batch (on by default): concurrent sends leave as SEND_BATCH_MESSAGE requests, each
send still gets its own SendResult, and every message is stored once, intact, against our
broker; a lone send is a plain one, and a failed batch's messages go again one by one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.stats import IN_MSGS, IN_SENDS
from rmq.client import Message, MQBrokerError, MQClientError, MQTimeoutError, Producer, SendResult, SendStatus
from rmq.client.batcher import _LANES_KEPT, AutoBatcher
from rmq.client.message import batch_item_size
from rmq.client.route import PublishInfo, TopicRoute
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import HeaderCommand, SendMessageResponseHeader
from rmq.protocol.message import decode_batch_items, make_offset_msg_id
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import serve_on_loopback

from .conftest import Cluster, open_cluster
from .test_producer import read_all


def idle(batcher: AutoBatcher) -> bool:
    """Nothing waits in, or is in flight from, any of the batcher's lanes."""
    lanes = [*batcher._lanes.values(), *batcher._unawaited.values()]
    return all(not lane.pending and not lane.in_flight and not lane.pending_bytes for lane in lanes)


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
        assert producer._batcher is not None and idle(producer._batcher)  # nothing left behind
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
        route = _route(broker.address, "mute")
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
        assert producer._batcher is not None and idle(producer._batcher)


def test_bad_batch_options() -> None:
    with pytest.raises(MQClientError, match="batch_max_bytes"):
        Producer("pg", "127.0.0.1:1", auto_batch=True, batch_max_bytes=0)
    with pytest.raises(MQClientError, match="batch_in_flight"):
        Producer("pg", "127.0.0.1:1", auto_batch=True, batch_in_flight=0)


async def test_senders_that_send_again_at_once_fill_their_batches(cluster: Cluster) -> None:
    """A closed loop, as a benchmark or a pipeline runs: an answer wakes the senders of its
    batch, who send again at once, and the first waiting send, which leads the next batch.
    It lets them queue first, so the batch tends to leave full instead of with the two that
    waited (a request of its own, and with SYNC_FLUSH a group commit of its own)."""
    body = b"x" * 1000
    per_request = 8 * 1024 // batch_item_size(Message("AutoLoop", body))
    senders, rounds = 2 * per_request + 2, 160  # two full batches in flight, two sends waiting
    ratios = []
    for run in range(2):
        topic = f"AutoLoop{run}"
        await cluster.create_topic(topic, queues=1)
        async with Producer("pg_loop", cluster.namesrv_addr, batch_max_bytes=8 * 1024) as producer:

            async def loop(producer: Producer, topic: str) -> None:
                for _ in range(rounds):
                    await producer.send(Message(topic, body))

            async with trio.open_nursery() as nursery:
                for _ in range(senders):
                    nursery.start_soon(loop, producer, topic)
        requests, messages = sends_and_messages(cluster, topic)
        assert messages == senders * rounds
        ratios.append(requests / -(-messages // per_request))
    # The first send leaves alone and the last rounds end unevenly: 5-10 % over one request
    # per full batch in quiet runs (the scheduler's order varies), and one run in a loaded CI
    # went to 17 %, hence the better of two. A head that leads at once with what waits makes
    # 11-15 % now that a connection hands answers to their callers eight at a time; a lane
    # that let every send lead alone would make seven times as many requests.
    assert min(ratios) <= 1.15, ratios


async def test_a_batch_the_broker_refuses_for_one_message_stores_the_others(tmp_path: Path) -> None:
    """Our broker refuses a batch holding a message over its max_message_size. Without
    batching only that send would fail: so it is here, each other message going again on
    its own and stored once."""
    async with open_cluster(tmp_path, max_message_size=2048) as cluster:
        await cluster.create_topic("AutoRefused", queues=1)
        async with Producer("pg_refused", cluster.namesrv_addr, batch_in_flight=1) as producer:
            assert producer._batcher is not None  # batching is on by default
            batches: list[int] = []
            send_batch = producer._batcher._send_batch

            async def recorded(msgs: Any, timeout: float) -> SendResult:  # noqa: ASYNC109  as the batcher's
                batches.append(len(msgs))
                return await send_batch(msgs, timeout)

            producer._batcher._send_batch = recorded
            outcomes: dict[int, SendResult | MQClientError] = {}

            async def one(i: int) -> None:
                outcomes[i] = await _outcome(producer, Message("AutoRefused", b"y" * 3000 if i == 5 else f"m{i}"))

            async with trio.open_nursery() as nursery:
                for i in range(12):
                    nursery.start_soon(one, i)
        assert any(n > 1 for n in batches), batches
        bad = outcomes.pop(5)
        assert isinstance(bad, MQBrokerError) and bad.response_code == ResponseCode.MESSAGE_ILLEGAL
        assert all(isinstance(r, SendResult) and r.status is SendStatus.SEND_OK for r in outcomes.values())
        stored = await read_all(cluster, "AutoRefused", 11, queues=1)
        assert sorted(m.body for m in stored) == sorted(f"m{i}".encode() for i in outcomes)


# -- a broker of our own making: what a batch meets on the wire ----------------------------


def _route(address: str, name: str) -> TopicRoute:
    return TopicRoute.from_json(
        {
            "brokerDatas": [{"brokerAddrs": {"0": address}, "brokerName": name, "cluster": "C"}],
            "queueDatas": [{"brokerName": name, "perm": 6, "readQueueNums": 1, "writeQueueNums": 1}],
        }
    )


def _stored(request: RemotingCommand, count: int, first_offset: int) -> RemotingCommand:
    """SUCCESS for `count` messages stored from `first_offset` on (comma-joined offset ids)."""
    ids = ",".join(make_offset_msg_id("127.0.0.1", 10911, (first_offset + i) * 100) for i in range(count))
    header = SendMessageResponseHeader(msg_id=ids, queue_id=0, queue_offset=first_offset)
    return HeaderCommand.response_to(request, ResponseCode.SUCCESS, header)


Handler = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]


@asynccontextmanager
async def _producer_on(send: Handler, topic: str, **options: Any) -> AsyncIterator[Producer]:
    """A producer of `topic` against a broker whose sends and batch sends `send` answers."""
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE_V2, send)
    dispatcher.register(RequestCode.SEND_BATCH_MESSAGE, send)
    async with (
        serve_on_loopback(dispatcher) as broker,
        Producer("pg_fake", "127.0.0.1:1", send_latency_fault_enable=False, **options) as producer,
    ):
        route = _route(broker.address, "fake")
        producer.instance.store_route(topic, route)
        producer._publish[topic] = PublishInfo(topic, route)
        yield producer


async def _outcome(producer: Producer, msg: Message, **options: Any) -> SendResult | MQClientError:
    try:
        return await producer.send(msg, **options)
    except MQClientError as exc:
        return exc


async def test_a_refused_batch_leaves_each_send_its_own_result() -> None:
    """A broker that refuses a batch (for one of its messages, or for being one) refuses no
    send: each message goes again on its own and gets its own answer."""
    offsets = iter(range(1_000_000))
    codes: list[int] = []

    async def send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        codes.append(request.code)
        if request.code == RequestCode.SEND_BATCH_MESSAGE or request.body == b"bad":
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, "the message is illegal")
        return _stored(request, 1, next(offsets))

    async with _producer_on(send, "Fake", batch_in_flight=1) as p:
        outcomes: dict[int, SendResult | MQClientError] = {}

        async def one(i: int) -> None:
            outcomes[i] = await _outcome(p, Message("Fake", b"bad" if i == 5 else f"m{i}"))

        async with trio.open_nursery() as nursery:
            for i in range(12):
                nursery.start_soon(one, i)
    assert RequestCode.SEND_BATCH_MESSAGE in codes  # there was a batch, and it was refused
    bad = outcomes.pop(5)
    assert isinstance(bad, MQBrokerError) and bad.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert all(isinstance(r, SendResult) and r.status is SendStatus.SEND_OK for r in outcomes.values())
    assert len({r.queue_offset for r in outcomes.values() if isinstance(r, SendResult)}) == 11


async def test_a_batch_that_times_out_leaves_each_send_the_time_it_has() -> None:
    """A batch's request is bounded by its earliest deadline. When that passes unanswered,
    the sends with time left go again on their own, as a plain send would retry."""
    offsets = iter(range(1_000_000))

    async def send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            await trio.sleep_forever()
        return _stored(request, 1, next(offsets))

    async with _producer_on(send, "Slow", batch_in_flight=1) as p:
        outcomes: dict[int, SendResult | MQClientError] = {}

        async def one(i: int) -> None:
            outcomes[i] = await _outcome(p, Message("Slow", f"m{i}"), timeout=0.3 if i % 2 else 5.0)

        with trio.fail_after(4):
            async with trio.open_nursery() as nursery:
                for i in range(12):
                    nursery.start_soon(one, i)
    patient = [outcomes[i] for i in range(0, 12, 2)]
    assert all(isinstance(r, SendResult) for r in patient), patient
    hasty = [outcomes[i] for i in range(1, 12, 2)]
    # the one that went first went alone and was answered; the rest waited in the batch
    assert sum(isinstance(r, MQTimeoutError) for r in hasty) >= 5, hasty


async def test_full_batches_leave_without_waiting_for_a_slot() -> None:
    """batch_in_flight bounds the batches that leave part full: once a batch's worth waits,
    it goes, so large messages or a slow broker are not held to fewer requests than plain
    sends would have out. This broker answers no batch before three are in flight."""
    offsets = iter(range(1_000_000))
    held = 0
    three = trio.Event()

    async def send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        nonlocal held
        if request.code != RequestCode.SEND_BATCH_MESSAGE:
            return _stored(request, 1, next(offsets))
        held += 1
        if held >= 3:
            three.set()
        await three.wait()
        count = len(decode_batch_items(request.body))
        return _stored(request, count, next(offsets) * 100)

    body = b"x" * 1000
    per_batch = 4
    max_bytes = per_batch * batch_item_size(Message("Big", body))
    async with _producer_on(send, "Big", batch_in_flight=1, batch_max_bytes=max_bytes) as p:
        results: list[SendResult] = []

        async def one() -> None:
            results.append(await p.send(Message("Big", body)))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                for _ in range(1 + 4 * per_batch):
                    nursery.start_soon(one)
    assert len(results) == 1 + 4 * per_batch and three.is_set()


async def test_a_cancelled_leader_leaves_the_rest_of_its_batch_to_go_alone() -> None:
    """Cancelling the send that carries a batch cancels that send only: the others in the
    batch go again on their own."""
    offsets = iter(range(1_000_000))
    leaders: list[bytes] = []
    batch_came = trio.Event()

    async def send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.SEND_BATCH_MESSAGE:
            leaders.append(decode_batch_items(request.body)[0].body)
            batch_came.set()
            await trio.sleep_forever()
        return _stored(request, 1, next(offsets))

    async with _producer_on(send, "Cut", batch_in_flight=1) as p:
        outcomes: dict[bytes, object] = {}
        scopes: dict[bytes, trio.CancelScope] = {}

        async def one(body: bytes) -> None:
            with trio.CancelScope() as scope:
                scopes[body] = scope
                outcomes[body] = await p.send(Message("Cut", body))
                return
            outcomes[body] = "cancelled"

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(one, f"m{i}".encode())
                await batch_came.wait()
                scopes[leaders[0]].cancel()
    assert outcomes.pop(leaders[0]) == "cancelled"
    assert len(outcomes) == 7 and all(isinstance(r, SendResult) for r in outcomes.values()), outcomes


def test_idle_lanes_are_kept_within_a_bound() -> None:
    """A lone send reuses its topic's idle lane; a producer of many topics keeps at most
    _LANES_KEPT of them."""
    batcher = AutoBatcher(None, 32 * 1024, 2, 32)  # type: ignore[arg-type]  no sends here
    first = batcher.hold_alone(Message("T0", b"x"))
    assert first is not None and batcher.hold_alone(Message("T0", b"y")) is None  # it is out: queue
    batcher.release(first)
    assert batcher.hold_alone(Message("T0", b"z")) is first  # idle again: the same lane
    batcher.release(first)
    for n in range(1, 1000):
        lane = batcher.hold_alone(Message(f"T{n}", b"x"))
        assert lane is not None
        batcher.release(lane)
    assert len(batcher._lanes) <= _LANES_KEPT and idle(batcher)
    unawaited = batcher.hold_alone(Message("T0", b"x", properties={P.WAIT: "false"}))
    assert unawaited is not None and unawaited is not batcher._lanes.get("T0")  # its own lane
