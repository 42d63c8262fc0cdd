"""The asyncio and blocking clients: the same scenarios as under Trio, from plain tests.

The cluster fixture runs its servers in a background thread, so these tests are ordinary
functions that start an asyncio loop (asyncio.run) or just block.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import pytest

from rmq.client import ConsumeFromWhere, Message, MQClientError, SendStatus, aio, blocking

FIRST = ConsumeFromWhere.FIRST_OFFSET


def test_asyncio_producer_and_consumers(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("AioTopic", 2)
    ns = rmq_cluster.namesrv_addr

    async def main() -> None:
        async with aio.Producer("aio-pg", namesrv=ns) as producer:
            results = [await producer.send(Message("AioTopic", b"a%d" % i)) for i in range(6)]
            assert {r.status for r in results} == {SendStatus.SEND_OK}
            batch = await producer.send_batch([Message("AioTopic", b"b%d" % i) for i in range(4)])
            assert batch
        # a coroutine handler runs on this loop
        handled: list[bytes] = []
        loop = asyncio.get_running_loop()

        async def handler(msg: Any) -> None:
            assert asyncio.get_running_loop() is loop
            handled.append(msg.body)

        push = aio.PushConsumer("aio-push", namesrv=ns, handler=handler, consume_from_where=FIRST)
        push.subscribe("AioTopic")
        async with push:
            await push.wait_for_assignment(timeout=20)
            async with asyncio.timeout(20):
                while len(handled) < 10:
                    await asyncio.sleep(0.05)
        assert sorted(handled) == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(4)])
        # async for, and a pull consumer
        iterating = aio.PushConsumer("aio-iter", namesrv=ns, consume_from_where=FIRST)
        iterating.subscribe("AioTopic")
        seen: list[bytes] = []
        async with iterating:
            async for msg in iterating:
                seen.append(msg.body)
                if len(seen) == 10:
                    break
        assert len(set(seen)) == 10
        pull = aio.PullConsumer("aio-pull", namesrv=ns, consume_from_where=FIRST)
        pull.subscribe("AioTopic")
        got: list[bytes] = []
        async with pull:
            async with asyncio.timeout(20):
                while len(got) < 10:
                    got += [m.body for m in await pull.poll(timeout=1.0)]

    asyncio.run(main())


def test_blocking_producer_and_consumers(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("BlockingTopic", 2)
    ns = rmq_cluster.namesrv_addr
    with blocking.Producer("blk-pg", namesrv=ns) as producer:
        result = producer.send(Message("BlockingTopic", b"first"))
        assert result.status is SendStatus.SEND_OK and result.msg_id
        # one object, several threads
        threads = [
            threading.Thread(target=lambda i=i: producer.send(Message("BlockingTopic", b"t%d" % i))) for i in range(5)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    got: list[bytes] = []
    with blocking.PullConsumer("blk-pull", namesrv=ns, consume_from_where=FIRST) as consumer:
        consumer.subscribe("BlockingTopic")
        consumer.wait_for_assignment(timeout=20)
        for _ in range(40):
            got += [m.body for m in consumer.poll(timeout=0.5)]
            if len(got) >= 6:
                break
    assert sorted(got) == sorted([b"first"] + [b"t%d" % i for i in range(5)])
    handled: list[bytes] = []
    done = threading.Event()

    def handler(msg: Any) -> None:
        handled.append(msg.body)
        if len(handled) == 6:
            done.set()

    with blocking.PushConsumer("blk-push", namesrv=ns, handler=handler, consume_from_where=FIRST) as push:
        push.subscribe("BlockingTopic")
        assert done.wait(20)


def test_errors_are_the_clients_own(rmq_cluster: Any) -> None:
    with blocking.Producer("blk-err", namesrv=rmq_cluster.namesrv_addr, retry_times=0) as producer:
        with pytest.raises(MQClientError):
            producer.send(Message("bad topic name", b"x"))

    async def main() -> None:
        async with aio.Producer("aio-err", namesrv=rmq_cluster.namesrv_addr) as producer:
            with pytest.raises(MQClientError):
                await producer.send(Message("bad topic name", b"x"))

    asyncio.run(main())


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_producer_chooses_the_codec_and_consumers_inflate_it(rmq_cluster: Any, codec: str) -> None:
    topic = f"Codec{codec}"
    rmq_cluster.create_topic(topic, 1)
    ns = rmq_cluster.namesrv_addr
    body = b"compress me " * 1000
    with blocking.Producer("codec-pg", namesrv=ns, compress_type=codec) as producer:
        assert producer.send(Message(topic, body)).status is SendStatus.SEND_OK
    got: list[Any] = []
    with blocking.PullConsumer(f"codec-{codec}", namesrv=ns, consume_from_where=FIRST) as consumer:
        consumer.subscribe(topic)
        for _ in range(40):
            got += consumer.poll(timeout=0.5)
            if got:
                break
    assert got[0].body == body
    assert got[0].sys_flag & 0x700 == {"lz4": 0x100, "zstd": 0x200}[codec]


def test_blocking_and_asyncio_request_reply(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("FacadeRequests", 1)
    ns = rmq_cluster.namesrv_addr
    requests: queue.Queue[Any] = queue.Queue()
    replies: list[bytes] = []
    with (
        blocking.Producer("blk-replier", namesrv=ns) as replier,
        blocking.PushConsumer("blk-replier-c", namesrv=ns, handler=requests.put, consume_from_where=FIRST) as push,
    ):
        push.subscribe("FacadeRequests")
        with blocking.Producer("blk-requester", namesrv=ns) as requester:
            # the handler runs in the client's thread: the request waits in another one
            asking = threading.Thread(
                target=lambda: replies.append(requester.request(Message("FacadeRequests", b"blk"), timeout=20).body)
            )
            asking.start()
            replier.reply(requests.get(timeout=20), b"re: blk")
            asking.join(20)

        async def ask() -> None:
            async with aio.Producer("aio-requester", namesrv=ns) as producer:
                replies.append((await producer.request(Message("FacadeRequests", b"aio"), timeout=20)).body)

        asking = threading.Thread(target=lambda: asyncio.run(ask()))
        asking.start()
        replier.reply(requests.get(timeout=20), b"re: aio")
        asking.join(20)
    assert replies == [b"re: blk", b"re: aio"]
