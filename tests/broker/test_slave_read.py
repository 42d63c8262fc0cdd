"""PULL_MESSAGE on a master/slave group, as RocketMQ's PullMessageProcessor answers it: a
slave never takes the COMMIT_OFFSET flag's offset and answers an offset it cannot serve with
PULL_RETRY_IMMEDIATELY; suggestWhichBrokerId sends lagging consumers to the slave only with
slaveReadEnable. One process, real sockets, real replication."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.client import Message, MessageQueue, Producer
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rmq.remoting import RemotingClient

from .cluster import loopback_namesrv, start_broker

TOPIC = "SlaveRead"
GROUP = "CG-slave-read"
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUBSCRIPTION = 0x4


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


start = start_broker


async def replicated(master: BrokerController, slave: BrokerController, timeout: float = 10) -> None:
    """Until the slave holds the master's whole CommitLog, dispatched, and its metadata."""
    with trio.fail_after(timeout):
        while slave.message_store.max_phy_offset != master.message_store.max_phy_offset:
            await trio.sleep(0.01)
        await slave.store.wait_dispatched()
        assert slave.slave_sync is not None
        await slave.slave_sync.sync_all()  # topics and offsets now, not in 10 s


async def pull(
    client: RemotingClient,
    broker: BrokerController,
    queue_id: int,
    offset: int,
    *,
    sys_flag: int = FLAG_SUBSCRIPTION,
    commit_offset: int = 0,
    expression: str = "*",
) -> tuple[int, PullMessageResponseHeader]:
    header = PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=4,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription=expression,
        expression_type="TAG",
    )
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    response = await client.invoke(broker.address, request, 5.0)
    return response.code, PullMessageResponseHeader.from_ext(response.ext_fields)


async def fill(namesrv: NamesrvServer, count: int, body_size: int = 400, *, queue_id: int | None = None) -> None:
    """`count` messages tagged T to TOPIC (all to `queue_id` if given)."""
    queue = None if queue_id is None else MessageQueue(TOPIC, "broker-a", queue_id)
    async with Producer("PG-slave-read", namesrv=namesrv.address) as producer:
        for i in range(count):
            await producer.send(Message(TOPIC, f"{i:04d}".encode() + b"x" * body_size, tags="T"), queue=queue)


async def test_slave_ignores_commit_offset_and_does_not_correct_offsets(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        master = await start(nursery, tmp_path / "m", namesrv, brokerRole="ASYNC_MASTER")
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await fill(namesrv, 40)
        await replicated(master, slave)
        max_offset = master.message_store.get_max_offset_in_queue(TOPIC, 0)
        assert max_offset > 2 and slave.message_store.get_max_offset_in_queue(TOPIC, 0) == max_offset

        # the slave serves the messages, and drops the offset the pull carries
        flags = FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET
        code, h = await pull(client, slave, 0, 0, sys_flag=flags, commit_offset=2)
        assert code == ResponseCode.SUCCESS
        assert h.next_begin_offset == min(4, max_offset) and h.suggest_which_broker_id == 0
        assert slave.offsets.query(GROUP, TOPIC, 0) == -1
        # the master takes it
        code, _ = await pull(client, master, 0, 0, sys_flag=flags, commit_offset=2)
        assert code == ResponseCode.SUCCESS
        assert master.offsets.query(GROUP, TOPIC, 0) == 2

        # beyond the end: a master corrects the offset (21); a slave, which may only lag,
        # says "retry" at the same offset and points back at the master
        code, h = await pull(client, master, 0, max_offset + 5)
        assert code == ResponseCode.PULL_OFFSET_MOVED and h.next_begin_offset == max_offset
        code, h = await pull(client, slave, 0, max_offset + 5)
        assert code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert h.next_begin_offset == max_offset + 5 and h.suggest_which_broker_id == 0
        # an empty queue asked from a nonzero offset: the same
        master.topics.create_if_absent("SlaveReadEmpty", 1, 6)
        await replicated(master, slave)
        header = PullMessageRequestHeader(GROUP, "SlaveReadEmpty", 0, 3, sys_flag=FLAG_SUBSCRIPTION, subscription="*")
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await client.invoke(master.address, request, 5.0)
        assert response.code == ResponseCode.PULL_OFFSET_MOVED
        response = await client.invoke(slave.address, request, 5.0)
        assert response.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert PullMessageResponseHeader.from_ext(response.ext_fields).next_begin_offset == 3
        master.shutdown()
        slave.shutdown()


async def test_slave_read_enable_sends_lagging_consumers_to_the_slave(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        master = await start(nursery, tmp_path / "m", namesrv, brokerRole="ASYNC_MASTER", slaveReadEnable="true")
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await fill(namesrv, 8)  # the topic, with its 4 queues
        # more entries than one read goes through (800), to queue 0
        await fill(namesrv, 840, 20, queue_id=0)
        await replicated(master, slave)
        max_offset = master.message_store.get_max_offset_in_queue(TOPIC, 0)
        assert max_offset > 840
        # "in memory" is accessMessageInMemoryMaxRatio percent of this machine's RAM, which a
        # test cannot get behind; a budget of 2 KiB puts the head of the queue on "disk"
        master.role.memory_budget = 2048
        slave.role.memory_budget = 2048

        code, h = await pull(client, master, 0, 0)
        assert code == ResponseCode.SUCCESS and h.suggest_which_broker_id == 1  # whichBrokerWhenConsumeSlowly
        code, h = await pull(client, master, 0, max_offset - 1)
        assert code == ResponseCode.SUCCESS and h.suggest_which_broker_id == 0  # the group's brokerId
        # what counts is the last entry read, also when the filter let nothing through: from
        # 0 the read stops at the end of a consume queue file (300 entries here) or after 800
        # entries held in memory (where the flusher has not written them yet), far behind the
        # end
        code, h = await pull(client, master, 0, 0, expression="NoSuchTag")
        assert code == ResponseCode.PULL_RETRY_IMMEDIATELY and 0 < h.next_begin_offset < max_offset - 10
        assert h.suggest_which_broker_id == 1
        # reading on, the reads that stop far from the end go to the slave; the one that
        # reaches the end, which is in memory, stays on the master
        while h.next_begin_offset < max_offset:
            offset = h.next_begin_offset
            code, h = await pull(client, master, 0, offset, expression="NoSuchTag")
            assert code == ResponseCode.PULL_RETRY_IMMEDIATELY and h.next_begin_offset > offset
            assert h.suggest_which_broker_id == (0 if h.next_begin_offset == max_offset else 1)
        assert h.suggest_which_broker_id == 0
        # nothing to read, nothing to judge
        code, h = await pull(client, master, 0, max_offset)
        assert code == ResponseCode.PULL_NOT_FOUND and h.suggest_which_broker_id == 0
        # the group decides where slow consumers go
        group = master.subscriptions.find_or_create(GROUP)
        assert group is not None
        master.subscriptions.update(dataclasses.replace(group, which_broker_when_consume_slowly=2))
        code, h = await pull(client, master, 0, 0)
        assert h.suggest_which_broker_id == 2

        # without slaveReadEnable (the slave here) everyone is sent to the master
        code, h = await pull(client, slave, 0, 0)
        assert code == ResponseCode.SUCCESS and h.suggest_which_broker_id == 0
        master.shutdown()
        slave.shutdown()
