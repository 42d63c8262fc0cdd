"""DLedger broker groups (enableDLegerCommitLog=true) as real processes: three brokers elect a
leader, the leader registers as the master, and when it is killed (SIGKILL) or paused
(SIGSTOP) another takes over; no send answered SEND_OK is ever lost."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from rmq.client import MQAdmin, Producer, PullConsumer
from rmq.client.errors import MQClientError
from rmq.namesrv.server import NamesrvServer
from rmq.protocol.message import Message
from tests.broker.cluster import loopback_namesrv

from .procs import DLedgerGroup

pytestmark = [pytest.mark.slow]


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


@pytest.fixture
def group(tmp_path: Path, namesrv: NamesrvServer) -> Iterator[DLedgerGroup]:
    g = DLedgerGroup(tmp_path, namesrv.address)
    try:
        yield g
    finally:
        g.stop()


async def master_of(ns: str, name: str, timeout: float = 30, not_: str | None = None) -> str:
    """The address the name server gives for the group's brokerId 0 (waits for one)."""
    async with MQAdmin(namesrv=ns) as admin:
        with trio.fail_after(timeout):
            while True:
                try:
                    info = await admin.cluster_info()
                    addr = info.brokers[name].addrs.get(0)
                    if addr and addr != not_:
                        return addr
                except (MQClientError, KeyError):
                    pass
                await trio.sleep(0.1)


async def drain(ns: str, topic: str, expect: set[bytes], timeout: float = 30) -> list[bytes]:
    """Every message of ``topic`` from the start, until all of ``expect`` are seen."""
    bodies: list[bytes] = []
    async with PullConsumer("drain", namesrv=ns) as consumer:
        queues = await consumer.fetch_message_queues(topic)
        consumer.assign(queues)
        await consumer.wait_for_assignment(10)
        for mq in queues:
            await consumer.seek_to_begin(mq)
        with trio.move_on_after(timeout):
            while not expect <= set(bodies):
                bodies += [m.body for m in await consumer.poll(1.0)]
    return bodies


async def test_group_elects_a_master_that_serves_sends_and_pulls(namesrv: NamesrvServer, group: DLedgerGroup) -> None:
    group.start()
    ns = namesrv.address
    master = await master_of(ns, "broker-d")
    async with Producer("p", namesrv=ns) as producer:
        for i in range(50):
            result = await producer.send(Message("DlTopic", f"m-{i}".encode()))
            assert result.status.value == "SEND_OK", result
    sent = {f"m-{i}".encode() for i in range(50)}
    bodies = await drain(ns, "DlTopic", sent)
    assert sorted(bodies) == sorted(sent)
    # every member holds the same records at the same offsets
    await trio.sleep(1.0)
    group.stop()
    logs = [m.commitlog() for m in group.members]
    assert logs[0] and logs[0] == logs[1] == logs[2]
    assert master in {m.address for m in group.members}
