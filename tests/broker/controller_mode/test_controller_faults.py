"""The controller group's own faults during a broker failover, and a paused master."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.client import Message, MQAdmin, Producer
from rmq.client.errors import MQClientError
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import properties as P
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.remoting import RemotingClient, RemotingError
from tests.broker.cluster import loopback_namesrv

from .group import ControllerGroup, all_in_sync, master_of

pytestmark = [pytest.mark.slow]

TOPIC = "CtlFaults"


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


async def send_until_ok(producer: Producer, body: bytes, timeout: float = 30.0) -> str:
    """Send ``body`` until SEND_OK; the address of the broker that took it."""
    with trio.fail_after(timeout):
        while True:
            try:
                r = await producer.send(Message(TOPIC, body))
                if r.status.name == "SEND_OK":
                    return r.msg_id
            except Exception:
                pass
            await trio.sleep(0.1)


async def controller_leader(client: RemotingClient, group: ControllerGroup) -> int:
    with trio.fail_after(20):
        while True:
            for i, c in enumerate(group.controllers):
                if c.proc is None or c.proc.poll() is not None:
                    continue
                try:
                    r = await client.invoke(
                        c.address, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 2.0
                    )
                except RemotingError:
                    continue
                if r.ext_fields.get("isLeader") == "true":
                    return i
            await trio.sleep(0.1)


async def test_the_controller_leader_killed_during_a_failover(tmp_path: Path, namesrv: NamesrvServer) -> None:
    group = ControllerGroup(tmp_path, namesrv.address)
    try:
        await trio.to_thread.run_sync(group.start)
        async with RemotingClient() as client, Producer("ctl-f", namesrv=namesrv.address, send_timeout=3.0) as producer:
            old, epoch = await master_of(client, group)
            await send_until_ok(producer, b"before")
            await all_in_sync(client, old)
            leader = await controller_leader(client, group)
            old.kill()
            group.controllers[leader].kill()  # the survivors elect a controller leader, then a master
            new, new_epoch = await master_of(client, group, timeout=30)
            assert new is not old and new_epoch > epoch
            await send_until_ok(producer, b"after", timeout=30)
    finally:
        await trio.to_thread.run_sync(group.stop)


async def test_a_paused_master_acknowledges_nothing_once_replaced(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """SIGSTOP the master past the controller's heartbeat timeout, then SIGCONT: sends
    straight to it (as a client with a stale route would) get no SEND_OK once another
    master's epoch began, and it follows the new master."""
    group = ControllerGroup(tmp_path, namesrv.address)
    try:
        await trio.to_thread.run_sync(group.start)
        async with RemotingClient() as client, Producer("ctl-p", namesrv=namesrv.address, send_timeout=3.0) as producer:
            old, epoch = await master_of(client, group)
            await send_until_ok(producer, b"before")
            await all_in_sync(client, old)
            old.pause()
            try:
                new, new_epoch = await master_of(client, group, timeout=30)
            finally:
                old.resume()
            assert new is not old and new_epoch > epoch
            header = SendMessageRequestHeader(
                producer_group="ctl-pinned", topic=TOPIC, queue_id=0, born_timestamp=int(time.time() * 1000),
                properties=P.encode_properties({P.WAIT: "true"}),
            )  # fmt: skip
            oks = 0
            async with MQAdmin(namesrv=namesrv.address, timeout=3.0) as admin:
                with trio.move_on_after(8):
                    while True:
                        try:
                            result = await admin.api.send_message(
                                old.address, "broker-c", RequestCode.SEND_MESSAGE_V2, header, b"stale", "", 3.0
                            )
                            oks += result is not None and result.status.value == "SEND_OK"
                        except MQClientError:
                            pass
                        await trio.sleep(0.05)
            assert oks == 0
    finally:
        await trio.to_thread.run_sync(group.stop)
