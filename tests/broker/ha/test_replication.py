"""Master/slave replication in one process: real sockets, real stores (the multi-process and
SIGKILL tests are in test_ha_processes.py)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.client import Message, Producer
from rmq.namesrv.server import NamesrvServer
from rmq.tools.admin import run as admin_run

from ..cluster import loopback_namesrv, start_broker


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with loopback_namesrv() as ns:
        yield ns


start = start_broker


async def caught_up(master: BrokerController, slave: BrokerController, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while slave.message_store.max_phy_offset != master.message_store.max_phy_offset:
            await trio.sleep(0.01)
        await slave.store.wait_dispatched()


def commitlog_bytes(broker: BrokerController, start: int, end: int) -> bytes:
    out = b""
    offset = start
    while offset < end:
        chunk = broker.message_store.transfer_data(offset, end - offset)
        assert chunk
        out += chunk
        offset += len(chunk)
    return out


async def test_slave_copies_the_master_byte_for_byte(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv, brokerRole="ASYNC_MASTER")
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        async with Producer("PG", namesrv=namesrv.address) as producer:
            for i in range(200):
                await producer.send(Message("HaTopic", f"body-{i}".encode() * 20, keys=f"k{i}", tags="T"))
        await caught_up(master, slave)
        end = master.message_store.max_phy_offset
        assert commitlog_bytes(slave, 0, end) == commitlog_bytes(master, 0, end)
        for q in range(4):
            assert slave.message_store.get_max_offset_in_queue(
                "HaTopic", q
            ) == master.message_store.get_max_offset_in_queue("HaTopic", q)
        assert slave.message_store.query_message("HaTopic", "k7", 10, 0, 2**62).records
        assert isinstance(slave.ha.runtime_info(), dict)
        info = master.ha.runtime_info()
        assert info["master"] and info["inSyncSlaveNums"] == 1
        assert info["haConnectionInfo"][0]["slaveAckOffset"] == end
        master.shutdown()
        slave.shutdown()


async def test_a_slave_far_behind_gets_chunks_ending_inside_records_and_dispatches_every_one(
    tmp_path: Path, namesrv: NamesrvServer
) -> None:
    """The master cuts chunks at haTransferBatchSize wherever that falls; a slave that has to
    catch up gets many that end inside a record, and must still queue every record."""
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv, haTransferBatchSize="1000")
        async with Producer("PG", namesrv=namesrv.address) as producer:
            for i in range(300):
                await producer.send(Message("Behind", b"v" * (100 + 37 * (i % 50)), keys=f"k{i}", tags=f"t{i % 3}"))
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await caught_up(master, slave, timeout=30)
        assert slave.message_store.dispatcher.stalled is None
        for q in range(4):
            want = master.message_store.queues.get_or_create("Behind", q)
            got = slave.message_store.queues.get_or_create("Behind", q)
            assert got.max_offset == want.max_offset > 0
            assert [got.entry(i) for i in range(got.max_offset)] == [want.entry(i) for i in range(want.max_offset)]
        master.shutdown()
        slave.shutdown()


async def test_sync_master_answers_after_the_slave_acks(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv, brokerRole="SYNC_MASTER", syncFlushTimeout="1000")
        async with Producer("PG", namesrv=namesrv.address, retry_times=0) as producer:
            # no slave yet: the message is stored, the answer says no slave has it
            result = await producer.send(Message("SyncTopic", b"lonely"))
            assert result.status.value == "SLAVE_NOT_AVAILABLE"
            slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
            with trio.fail_after(10):
                while not master.ha.connections or min(c.ack_offset for c in master.ha.connections) < 0:
                    await trio.sleep(0.01)
            for i in range(50):
                result = await producer.send(Message("SyncTopic", f"m{i}".encode()))
                assert result.status.value == "SEND_OK"
                assert slave.message_store.max_phy_offset >= master.message_store.max_phy_offset
            # the slave goes away: waits end at once rather than hang
            slave.shutdown()
            await slave.wait_stopped()
            result = await producer.send(Message("SyncTopic", b"after"))
            assert result.status.value in ("SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT")
        master.shutdown()


async def test_slave_syncs_metadata_and_refuses_writes(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        master.topics.create_if_absent("OnlyOnMaster", 3, 6)
        master.offsets.commit("CG", "OnlyOnMaster", 1, 42)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        with trio.fail_after(10):
            while slave.slave_sync.rounds == 0:
                await trio.sleep(0.05)
        assert slave.topics.get("OnlyOnMaster") is not None
        assert slave.offsets.query("CG", "OnlyOnMaster", 1) == 42
        assert slave.ha.master_addr == master.address
        master.shutdown()
        slave.shutdown()


async def test_slave_restarted_catches_up_from_its_own_offset(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        async with Producer("PG", namesrv=namesrv.address) as producer:
            for _ in range(50):
                await producer.send(Message("R", b"x" * 500))
            await caught_up(master, slave)
            slave.shutdown()
            await slave.wait_stopped()
            before = slave.message_store  # closed; its end offset is where the new one resumes
            for _ in range(50):
                await producer.send(Message("R", b"y" * 500))
            slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
            await caught_up(master, slave)
        conn = next(iter(master.ha.connections))
        assert conn.transfer_from == before.commitlog.max_offset > 0
        master.shutdown()
        slave.shutdown()


async def test_empty_slave_starts_at_the_masters_last_file(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv)
        async with Producer("PG", namesrv=namesrv.address) as producer:
            while len(master.message_store.commitlog.files.files) < 3:
                await producer.send(Message("Big", b"z" * 60_000))
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        await caught_up(master, slave)
        last = master.message_store.commitlog.files.files[-1].start
        assert slave.message_store.min_phy_offset == last
        end = master.message_store.max_phy_offset
        assert commitlog_bytes(slave, last, end) == commitlog_bytes(master, last, end)
        # its consume queues start where the master's last file does
        ms = slave.message_store
        queues = [q for q in range(4) if ms.get_max_offset_in_queue("Big", q)]
        assert queues
        for q in queues:
            low = ms.get_min_offset_in_queue("Big", q)
            assert low > 0  # the queue starts where the copied part of the log does
            assert ms.get_max_offset_in_queue("Big", q) == master.message_store.get_max_offset_in_queue("Big", q)
            assert ms.get_message("Big", q, low, 32).status.name == "FOUND"
        master.shutdown()
        slave.shutdown()


async def test_mqadmin_shows_replication(tmp_path: Path, namesrv: NamesrvServer) -> None:
    async with trio.open_nursery() as nursery:
        master = await start(nursery, tmp_path / "m", namesrv, brokerRole="SYNC_MASTER")
        slave = await start(nursery, tmp_path / "s", namesrv, brokerRole="SLAVE", brokerId="1")
        async with Producer("PG", namesrv=namesrv.address) as producer:
            with trio.fail_after(20):
                while (await producer.send(Message("AdminHa", b"x" * 100))).status.value != "SEND_OK":
                    await trio.sleep(0.1)
        await caught_up(master, slave)
        end = master.message_store.max_phy_offset
        ns = ["-n", namesrv.address]

        async def mqadmin(*argv: str) -> str:
            out = io.StringIO()
            assert await admin_run([*argv, *ns], out, io.StringIO()) == 0
            return out.getvalue()

        text = await mqadmin("clusterList")
        rows = [line.split() for line in text.splitlines()[1:]]
        assert sorted((r[1], r[2], r[3]) for r in rows) == [
            ("broker-a", "0", master.address),
            ("broker-a", "1", slave.address),
        ]
        text = await mqadmin("haStatus", "-b", master.address)
        assert "#SlaveNum\t1" in text and "#InSyncSlaveNum\t1" in text
        assert f" {end} " in text.replace("  ", " ") and "OK" in text
        text = await mqadmin("haStatus", "-b", slave.address)
        assert f"#CommitLogMaxOffset\t{end}" in text and f"#MasterAddr\t{master.ha_address}" in text
        text = await mqadmin("brokerStatus", "-b", slave.address)
        fields = dict(line.split(": ", 1) for line in text.splitlines())
        assert fields["brokerRole".ljust(32)].strip() == "SLAVE"
        assert int(fields["masterPutWhere".ljust(32)]) == end
        assert int(fields["slaveFallBehind".ljust(32)]) == 0
        master.shutdown()
        slave.shutdown()
