"""Controller mode with real processes: three controllers, three brokers of one group."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.client import Message, Producer
from rmq.namesrv.server import NamesrvServer
from rmq.remoting import RemotingClient
from rmq.tools.admin import run as admin_run
from tests.broker.cluster import loopback_namesrv

from .group import GROUP, ControllerGroup, all_in_sync, master_of, runtime

pytestmark = [pytest.mark.slow]

TOPIC = "CtlTopic"


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


async def test_a_group_elects_a_master_and_replicates(tmp_path: Path, namesrv: NamesrvServer) -> None:
    group = ControllerGroup(tmp_path, namesrv.address)
    try:
        await trio.to_thread.run_sync(group.start)
        async with RemotingClient() as client:
            master, epoch = await master_of(client, group)
            assert epoch >= 1
            async with Producer("ctl-p", namesrv=namesrv.address, send_timeout=5.0) as producer:
                with trio.fail_after(30):
                    while True:
                        try:
                            r = await producer.send(Message(TOPIC, b"warm"))
                            if r.status.name == "SEND_OK":
                                break
                        except Exception:
                            pass
                        await trio.sleep(0.2)
                for i in range(50):
                    r = await producer.send(Message(TOPIC, f"m{i}".encode()))
                    assert r.status.name == "SEND_OK"
            with trio.fail_after(20):
                while True:
                    ends = {
                        b.address: (await runtime(client, b.address) or {}).get("commitLogMaxOffset")
                        for b in group.brokers
                    }
                    if len(set(ends.values())) == 1:
                        break
                    await trio.sleep(0.2)
            await all_in_sync(client, master)  # every slave caught up joins the SyncStateSet
        # mqadmin sees the same from the controller and from the brokers
        controller = group.controllers[0].address
        out, err = io.StringIO(), io.StringIO()
        assert await admin_run(["getSyncStateSet", "-a", controller, "-b", GROUP], out, err) == 0, err.getvalue()
        assert out.getvalue().count("InSyncReplica:\tReplicaIdentity{brokerName='broker-c'") == 3, out.getvalue()
        out = io.StringIO()
        assert await admin_run(["getBrokerEpoch", "-n", namesrv.address, "-b", GROUP], out, err) == 0, err.getvalue()
        assert out.getvalue().count(f"#Epoch: EpochEntry{{epoch={epoch}, startOffset=0") == 3, out.getvalue()
    finally:
        await trio.to_thread.run_sync(group.stop)


async def test_a_replica_joining_late_copies_the_whole_log(tmp_path: Path, namesrv: NamesrvServer) -> None:
    """A new broker copies its master's log from the first file, not the last (RocketMQ's
    syncFromLastFile=false): once in the SyncStateSet it may be elected, and must then hold
    everything acknowledged before it joined."""
    group = ControllerGroup(tmp_path, namesrv.address)
    late = group.brokers.pop()
    try:
        await trio.to_thread.run_sync(group.start)
        async with RemotingClient() as client, Producer("ctl-l", namesrv=namesrv.address, send_timeout=5.0) as p:
            master, _ = await master_of(client, group)
            body = b"x" * 4096
            with trio.fail_after(60):
                sent = 0
                while sent < 400:  # 1.6 MiB: past the first 1 MiB CommitLog file
                    try:
                        sent += (await p.send(Message(TOPIC, body))).status.name == "SEND_OK"
                    except Exception:
                        await trio.sleep(0.1)
            await trio.to_thread.run_sync(late.start)
            group.brokers.append(late)
            await all_in_sync(client, master)
        records = late.commitlog()
        assert min(records) == 0
        assert records == {k: v for k, v in master.commitlog().items() if k <= max(records)}
    finally:
        await trio.to_thread.run_sync(group.stop)
