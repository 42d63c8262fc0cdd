"""A broker process whose store is on a small real filesystem (a tmpfs, tests/small_disk.py)
is sent to until it refuses, then another file takes the rest of the disk; the broker serves
every acknowledged message on the full disk, takes sends again by itself once space is freed,
restarts on a full disk read-only, and is never killed by a signal.

cleanFileForciblyEnable=false: above diskSpaceCleanForciblyRatio RocketMQ's default deletes
CommitLog files that have not expired, acknowledged and unconsumed messages with them
(tests/store/test_retention.py); here nothing may go."""

from __future__ import annotations

import os
import struct

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, Producer, PullConsumer
from rmq.client.errors import MQBrokerError
from rmq.protocol import ResponseCode
from tests.metrics.scrape import scrape, value
from tests.small_disk import SmallDisk

from .cluster import loopback_namesrv
from .full_disk import DiskBroker

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("not SmallDisk.allowed()", reason="no user and mount namespace for a small tmpfs"),
]

TOPIC = "FullDisk"
DISK_KIB = 24 * 1024
BODY = 3000
SENDERS = 4
MAX_SENDS = 20_000  # the disk refuses long before
GROUPS = ("on-full", "after-free", "restarted-full", "restarted")


class Traffic:
    """Sends numbered messages and remembers which were acknowledged."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.next = 0
        self.acked: set[int] = set()
        self.refusals: list[str] = []

    async def send_one(self) -> bool:
        n = self.next
        self.next += 1
        body = struct.pack(">Q", n) + os.urandom(BODY - 8)  # incompressible
        try:
            await self.producer.send(Message(TOPIC, body))
        except MQBrokerError as exc:
            assert exc.response_code == ResponseCode.SERVICE_NOT_AVAILABLE, exc
            self.refusals.append(exc.remark)
            return False
        self.acked.add(n)
        return True

    async def until_refused(self) -> None:
        """SENDERS tasks send until each was refused; bounded in count and time."""

        async def sender() -> None:
            while self.next < MAX_SENDS and await self.send_one():
                pass

        with trio.fail_after(180):
            async with trio.open_nursery() as nursery:
                for _ in range(SENDERS):
                    nursery.start_soon(sender)

    async def until_taken(self, seconds: float) -> float:
        """Send one message at a time until one is taken; how long that took."""
        start = trio.current_time()
        with trio.fail_after(seconds):
            while not await self.send_one():
                await trio.sleep(0.1)
        return trio.current_time() - start


async def consume_all(namesrv: str, group: str, acked: set[int]) -> set[int]:
    """What ``group`` reads from the first offset (it never commits): every acknowledged
    message, or what it got within the time limit."""
    consumer = PullConsumer(group, namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False)
    consumer.subscribe(TOPIC)
    seen: set[int] = set()
    async with consumer:
        await consumer.wait_for_assignment(timeout=20)
        with trio.move_on_after(90):
            while not acked <= seen:
                for msg in await consumer.poll(timeout=1):
                    seen.add(struct.unpack_from(">Q", msg.body)[0])
    return seen


async def test_a_broker_whose_disk_fills_up(tmp_path) -> None:
    async with loopback_namesrv() as ns:
        with SmallDisk(tmp_path, DISK_KIB) as disk:
            disk.fill(leave_kib=18 * 1024)  # room to free later: the broker alone stays below the levels
            broker = DiskBroker(tmp_path, disk.root / "store", ns.address, cleanFileForciblyEnable="false")
            await trio.to_thread.run_sync(broker.start)
            try:
                async with Producer("disk-producer", ns.address, retry_times=0, send_timeout=10) as producer:
                    traffic = Traffic(producer)
                    assert await traffic.send_one()  # the topic is made
                    for group in GROUPS:  # known before the disk fills (a new group's metadata needs a write)
                        await consume_all(ns.address, group, traffic.acked)
                    await traffic.until_refused()
                    assert len(traffic.acked) > 1000
                    assert all(r.startswith("service not available") and "disk full" in r for r in traffic.refusals)
                    # another file takes every block left: sends are refused, nothing dies
                    disk.fill()
                    assert disk.used_ratio() == 1.0
                    for _ in range(10):
                        assert not await traffic.send_one()
                    with trio.fail_after(10):  # measured by the next retention round (cleanResourceInterval)
                        while (samples := await scrape(broker.metrics_port)) and not value(
                            samples, "rocketmq_storage_disk_level_exceeded", level="refuse_writes"
                        ):
                            await trio.sleep(0.2)
                    assert value(samples, "rocketmq_storage_disk_used_ratio") > 0.9
                    assert value(samples, "rocketmq_storage_writes_refused") == 1
                    assert value(samples, "rocketmq_storage_commitlog_files_deleted_total") == 0
                    assert await consume_all(ns.address, "on-full", traffic.acked) >= traffic.acked
                    assert broker.alive(), broker.log()
                    # space is freed: sends are taken again without anyone asking
                    disk.free()
                    await traffic.until_taken(15)
                    for _ in range(200):
                        assert await traffic.send_one()
                    assert await consume_all(ns.address, "after-free", traffic.acked) >= traffic.acked
                    # a restart on a full disk: reads served, sends refused until space is back
                    disk.fill()
                    assert await trio.to_thread.run_sync(broker.stop) == 0, broker.log()
                    await trio.to_thread.run_sync(broker.start)
                    assert await consume_all(ns.address, "restarted-full", traffic.acked) >= traffic.acked
                    assert not await traffic.send_one()
                    disk.free()
                    await traffic.until_taken(15)
                    assert await consume_all(ns.address, "restarted", traffic.acked) >= traffic.acked
                    assert broker.alive(), broker.log()
            finally:
                code = await trio.to_thread.run_sync(broker.stop)
            assert broker.exit_codes == [0, 0], (code, broker.log())
