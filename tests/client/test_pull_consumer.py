"""The lite pull consumer: assign, poll, seek, seek_to_time, commit, subscribe."""

from __future__ import annotations

import pytest
import trio

from rmq.client import Message, MessageExt, MessageQueue, MQClientError, Producer, PullConsumer, open_pull_consumer
from rmq.client.api import ClientAPI, PullResult
from rmq.client.ids import wall_clock_ms
from rmq.client.pull_consumer import BUFFERED_BATCHES
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import PullMessageRequestHeader
from rmq.remoting import Dispatcher, RemotingClient, RequestContext
from rmq.remoting.testing import serve_on_loopback

from .conftest import FAST, Cluster, record_pulls

LIMIT = 30


async def poll_n(consumer: PullConsumer, n: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    with trio.fail_after(LIMIT):
        while len(out) < n:
            out.extend(await consumer.poll(timeout=1.0))
    return out


async def test_assign_poll_seek_and_commit(cluster: Cluster) -> None:
    await cluster.create_topic("PullTopic", queues=1)
    mq = MessageQueue("PullTopic", cluster.broker_name, 0)
    async with Producer("pg_pull", cluster.namesrv_addr) as producer:
        for i in range(10):
            await producer.send(Message("PullTopic", f"first {i}"), queue=mq)
        await trio.sleep(0.3)
        middle = wall_clock_ms()  # much nearer the second part (the search finds the nearest)
        for i in range(10):
            await producer.send(Message("PullTopic", f"second {i}"), queue=mq)

    async with PullConsumer("cg_pull", cluster.namesrv_addr, auto_commit=False, pull_batch_size=4, **FAST) as consumer:
        assert await consumer.fetch_message_queues("PullTopic") == [mq]
        consumer.assign([mq])
        first = await poll_n(consumer, 20)
        assert [m.queue_offset for m in first] == list(range(20))
        assert all(len(batch) <= 4 for batch in [first[i : i + 4] for i in range(0, 20, 4)])

        await consumer.seek(mq, 5)
        again = await poll_n(consumer, 15)
        assert [m.queue_offset for m in again] == list(range(5, 20))

        await consumer.seek_to_time(mq, middle)
        later = await poll_n(consumer, 10)
        assert [m.body.decode() for m in later] == [f"second {i}" for i in range(10)]

        await consumer.seek_to_begin(mq)
        assert (await poll_n(consumer, 1))[0].queue_offset == 0
        await consumer.seek_to_end(mq)
        assert await consumer.poll(timeout=0.3) == []

        with pytest.raises(MQClientError, match="outside"):
            await consumer.seek(mq, 21)
        with pytest.raises(MQClientError, match="not assigned"):
            await consumer.seek(MessageQueue("PullTopic", cluster.broker_name, 3), 0)

        assert await consumer.committed(mq) in (-1, 0)
        await consumer.commit({mq: 12})
        assert await consumer.committed(mq) == 12

    # a new consumer of the group starts at the committed offset
    async with PullConsumer("cg_pull", cluster.namesrv_addr, **FAST) as consumer:
        consumer.assign([mq])
        resumed = await poll_n(consumer, 8)
        assert resumed[0].queue_offset == 12
    # auto_commit committed what that consumer polled
    async with PullConsumer("cg_pull", cluster.namesrv_addr, **FAST) as consumer:
        assert await consumer.committed(mq) == 20


async def test_subscribe_shares_queues_and_filters_tags(cluster: Cluster) -> None:
    await cluster.create_topic("PullSubTopic", queues=4)
    async with Producer("pg_pullsub", cluster.namesrv_addr) as producer:
        for i in range(40):
            await producer.send(Message("PullSubTopic", f"{i}", tags="X" if i % 2 else "Y"))
    async with (
        open_pull_consumer(
            "cg_pullsub", cluster.namesrv_addr, subscriptions={"PullSubTopic": "X"}, instance_name="one", **FAST
        ) as one,
        open_pull_consumer(
            "cg_pullsub", cluster.namesrv_addr, subscriptions={"PullSubTopic": "X"}, instance_name="two", **FAST
        ) as two,
    ):
        with trio.fail_after(LIMIT):
            while not (len(one.assignment) == 2 and len(two.assignment) == 2):
                await trio.sleep(0.05)
        assert one.assignment | two.assignment == {
            MessageQueue("PullSubTopic", cluster.broker_name, q) for q in range(4)
        }
        got: list[MessageExt] = []
        with trio.fail_after(LIMIT):
            while len(got) < 20:
                got.extend(await one.poll(timeout=0.2))
                got.extend(await two.poll(timeout=0.2))
    assert sorted(int(m.body) for m in got) == list(range(1, 40, 2))


async def test_a_backlog_is_pulled_ahead_in_order(cluster: Cluster) -> None:
    """While its queue has more than an answer brings, the pull task sends its next pull
    before the answer is decoded: with poll()'s buffer full it holds one answer beyond the
    batch it waits to hand over. Order and exactly-once hold, across a seek too."""
    await cluster.create_topic("PullAheadTopic", queues=1)
    mq = MessageQueue("PullAheadTopic", cluster.broker_name, 0)
    count = BUFFERED_BATCHES + 40
    async with Producer("pg_ahead", cluster.namesrv_addr) as producer:
        for start in range(0, count, 32):
            await producer.send_batch(
                [Message("PullAheadTopic", f"m {i:03d}") for i in range(start, min(count, start + 32))]
            )
    stats = cluster.broker.stats
    served = stats.get_total
    async with PullConsumer("cg_ahead", cluster.namesrv_addr, auto_commit=False, pull_batch_size=1, **FAST) as consumer:
        consumer.assign([mq])
        with trio.fail_after(LIMIT):
            while consumer._buf_recv.statistics().current_buffer_used < BUFFERED_BATCHES:
                await trio.sleep(0.01)
            await trio.sleep(0.2)  # the answers of the pulls out come in
        # the buffer's batches, the one the task waits to hand over, and the pull sent ahead
        assert stats.get_total - served == BUFFERED_BATCHES + 2
        first = await poll_n(consumer, 30)
        await consumer.seek(mq, 10)
        again = await poll_n(consumer, count - 10)
    assert [m.body.decode() for m in first] == [f"m {i:03d}" for i in range(30)]
    assert [m.queue_offset for m in again] == list(range(10, count))


async def test_a_caught_up_consumer_hands_messages_over_before_its_next_pull(cluster: Cluster) -> None:
    """With nothing left to pull, each answer's messages reach poll()'s caller before the
    next pull is written (that write wakes the broker: ahead of the hand-over, it would
    delay every message by its cost). Trio orders a pass's tasks at random: 30 rounds in
    the right order would otherwise happen once in a billion runs. The messages go to
    poll() from the connection's reader, as it decodes the answer: a pass of the event
    loop sooner than from the pull task."""
    await cluster.create_topic("PullCaughtUpTopic", queues=1)
    mq = MessageQueue("PullCaughtUpTopic", cluster.broker_name, 0)
    events: list[str] = []
    handed: list[bool] = []
    count = 30
    async with (
        Producer("pg_caught_up", cluster.namesrv_addr) as producer,
        PullConsumer("cg_caught_up", cluster.namesrv_addr, auto_commit=False, **FAST) as consumer,
    ):
        record_pulls(consumer, events, handed)
        consumer.assign([mq])

        async def produce() -> None:
            for i in range(count):
                await trio.sleep(0.02)  # the consumer waits in poll() meanwhile
                await producer.send(Message("PullCaughtUpTopic", f"m {i}"), queue=mq)

        got: list[MessageExt] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            with trio.fail_after(LIMIT):
                while len(got) < count:
                    batch = await consumer.poll(timeout=1.0)
                    if batch:
                        events.append("polled")
                        got.extend(batch)
    assert [m.queue_offset for m in got] == list(range(count))
    # every pull after a message follows the hand-over of the answer before it
    first = events.index("polled")
    assert all(events[i - 1] == "polled" for i in range(first, len(events)) if events[i] == "pull"), events
    assert handed and all(handed), handed


async def test_a_pull_answer_the_reader_cannot_decode_fails_the_pull() -> None:
    """ClientAPI.pull with `on_result` decodes in the reader; what fails there is raised in
    the caller, and the connection goes on serving."""

    async def garbled(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        return request.make_response(ResponseCode.SUCCESS, ext_fields=header, body=b"\x00\x00\x00\x40 not a record")

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.PULL_MESSAGE, garbled)
    called: list[PullResult] = []
    async with serve_on_loopback(dispatcher) as server, RemotingClient() as remoting:
        api = ClientAPI(remoting)
        header = PullMessageRequestHeader("g", "T", 0, 0)
        with pytest.raises(MQClientError, match="malformed pull body"):
            await api.pull(server.address, header, 5.0, on_result=called.append)
        assert called == []
        with pytest.raises(MQClientError, match="malformed pull body"):
            await api.pull(server.address, header, 5.0)  # decoded in the caller's task
