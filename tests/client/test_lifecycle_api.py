"""Explicit start()/close() for frameworks, and waiting for the first assignment."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, MQAdmin, MQClientStateError, Producer, PullConsumer, PushConsumer
from rmq.client.errors import MQTimeoutError


async def test_start_and_close_without_async_with(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("Hooks", 2)
    ns = rmq_cluster.namesrv_addr
    producer = Producer("hooks-pg", namesrv=ns)
    consumer = PushConsumer("hooks-cg", namesrv=ns, handler=lambda m: got.append(m.body))
    consumer.subscribe("Hooks")
    got: list[bytes] = []

    async def startup() -> None:  # a framework calls these from different tasks
        await producer.start()
        await consumer.start()

    async def shutdown() -> None:
        await consumer.close()
        await producer.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(startup)
    assert producer.running and consumer.running
    with pytest.raises(MQClientStateError):
        await producer.start()
    await consumer.wait_for_assignment(timeout=20)
    await producer.send(Message("Hooks", b"hello"))
    with trio.fail_after(20):
        while not got:
            await trio.sleep(0.05)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(shutdown)
    assert not producer.running and not consumer.running
    await producer.close()  # twice is harmless


async def test_wait_for_assignment_then_send_sees_everything(rmq_cluster: Any) -> None:
    rmq_cluster.create_topic("Assigned", 4)
    ns = rmq_cluster.namesrv_addr
    consumer = PullConsumer("assign-cg", namesrv=ns, consume_from_where=ConsumeFromWhere.LAST_OFFSET)
    consumer.subscribe("Assigned")
    async with consumer, Producer("assign-pg", namesrv=ns) as producer:
        queues = await consumer.wait_for_assignment(timeout=20)
        assert len(queues) == 4 and queues == consumer.assignment
        for i in range(8):
            await producer.send(Message("Assigned", b"%d" % i))
        got: list[bytes] = []
        with trio.fail_after(20):
            while len(got) < 8:
                got += [m.body for m in await consumer.poll(timeout=1.0)]
        assert sorted(got) == sorted(b"%d" % i for i in range(8))


async def test_wait_for_assignment_times_out(rmq_cluster: Any) -> None:
    consumer = PullConsumer("nobody", namesrv=rmq_cluster.namesrv_addr)
    consumer.subscribe("NoSuchTopicAnywhere")
    async with consumer:
        with pytest.raises(MQTimeoutError):
            await consumer.wait_for_assignment(timeout=0.5)


async def test_mqadmin_is_part_of_the_public_api(rmq_cluster: Any) -> None:
    async with MQAdmin(namesrv=rmq_cluster.namesrv_addr) as admin:
        info = await admin.cluster_info()
    assert info.clusters
