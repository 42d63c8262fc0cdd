"""mqadmin's replication views: clusterList, brokerStatus and haStatus.

The layouts are checked line for line against RocketMQ's printf formats with a stub admin
(no sockets, so `-i` runs on Trio's virtual clock); one test runs the commands against a
live master and slave on 127.0.0.1. Every wait is bounded by LIMIT.
"""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.client import Message, MQClientError, Producer
from rmq.client.admin import ClusterInfo
from rmq.client.route import BrokerData
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.tools.admin import build_parser, human_ms, run

LIMIT = 30  # seconds
HA_DOC = Path(__file__).resolve().parents[2] / "docs" / "ha.md"
CLUSTER = "HaCluster"
A0, A1, B0, B1 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931", "127.0.0.1:10941"

# RocketMQ 5.x HAStatusSubCommand's printf formats (Python's % formatting is printf's)
MASTER_HEAD = "\n#MasterAddr\t%s\n#MasterCommitLogMaxOffset\t%d\n#SlaveNum\t%d\n#InSyncSlaveNum\t%d\n"
SLAVES_HEAD = "%-32s  %-16s %16s %16s %16s %16s\n"
SLAVE_ROW = "%-32s  %-16d %16d %16.2f %16s %16d\n"
# BrokerStatusSubCommand's: -b, and -c (each line led by the broker's address)
STATUS_LINE = "%-32s: %s"
STATUS_ADDR_LINE = "%-24s %-32s: %s"


def master_info(end: int, *slaves: tuple[str, int, bool, int]) -> dict[str, Any]:
    conns = [
        {
            "addr": addr,
            "slaveAckOffset": ack,
            "diff": end - ack,
            "inSync": in_sync,
            "transferredByteInSecond": rate,
            "transferFromWhere": 0,
        }
        for addr, ack, in_sync, rate in slaves
    ]
    return {
        "master": True,
        "masterCommitLogMaxOffset": end,
        "inSyncSlaveNums": sum(c["inSync"] for c in conns),
        "haConnectionInfo": conns,
        "haClientRuntimeInfo": {},
    }


def slave_info(master_ha: str, end: int, read_ms: int, write_ms: int, rate: int) -> dict[str, Any]:
    return {
        "master": False,
        "masterCommitLogMaxOffset": 0,
        "inSyncSlaveNums": 0,
        "haConnectionInfo": [],
        "haClientRuntimeInfo": {
            "masterAddr": master_ha,
            "transferredByteInSecond": rate,
            "maxOffset": end,
            "lastReadTimestamp": read_ms,
            "lastWriteTimestamp": write_ms,
            "masterFlushOffset": end + 100,
            "isActivated": True,
        },
    }


@dataclass
class StubAdmin:
    """The part of MQAdmin these commands use, answering from tables."""

    ha: dict[str, dict[str, Any]]
    runtime: dict[str, dict[str, str]]
    asked: list[str]

    async def cluster_info(self) -> ClusterInfo:
        brokers = {
            "broker-a": BrokerData("broker-a", CLUSTER, {1: A1, 0: A0}),
            "broker-b": BrokerData("broker-b", CLUSTER, {0: B0, 1: B1}),
        }
        return ClusterInfo(brokers, {CLUSTER: ["broker-b", "broker-a"]})

    async def broker_ha_status(self, addr: str) -> dict[str, Any]:
        self.asked.append(addr)
        return self.ha[addr]

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        self.asked.append(addr)
        if addr not in self.runtime:
            raise MQClientError(f"connection to {addr} failed")
        return self.runtime[addr]


def stub() -> StubAdmin:
    ha = {
        A0: master_info(5000, ("127.0.0.1:40001", 5000, True, 2048)),
        B0: master_info(9000, ("127.0.0.1:40002", 1000, False, 0), ("127.0.0.1:40003", 9000, True, 512)),
        A1: slave_info("127.0.0.1:10912", 5000, 1_700_000_000_123, 1_700_000_000_456, 1536),
    }
    runtime = {
        A0: {"brokerRole": "SYNC_MASTER", "inSyncSlaveNums": "1", "slaveFallBehind": "0"},
        A1: {"brokerRole": "SLAVE", "masterAddr": A0, "masterPutWhere": "5000", "slaveFallBehind": "0"},
        B0: {"brokerRole": "SYNC_MASTER", "inSyncSlaveNums": "1", "slaveFallBehind": "0"},
    }  # B1 does not answer
    return StubAdmin(ha, runtime, [])


async def command(admin: StubAdmin, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(list(argv))
    out = io.StringIO()
    code = await args.run(admin, args, out)
    return code, out.getvalue()


async def test_ha_status_of_a_master_prints_its_slaves_as_rocketmq_does() -> None:
    code, text = await command(stub(), "haStatus", "-b", B0)
    assert code == 0
    want = MASTER_HEAD % (B0, 9000, 2, 1)
    want += SLAVES_HEAD % ("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                           "#TransferFromWhere")  # fmt: skip
    want += SLAVE_ROW % ("127.0.0.1:40002", 1000, 8000, 0.0, "Fall Behind", 0)
    want += SLAVE_ROW % ("127.0.0.1:40003", 9000, 0, 0.5, "OK", 0)
    assert text == want


async def test_ha_status_of_a_slave_prints_its_master_as_rocketmq_does() -> None:
    code, text = await command(stub(), "haStatus", "-b", A1)
    assert code == 0
    assert text == (
        "\n#MasterAddr\t127.0.0.1:10912\n"
        "#CommitLogMaxOffset\t5000\n"
        "#TransferSpeed(KB/s)\t1.50\n"
        f"#LastReadTime\t{human_ms(1_700_000_000_123)}\n"
        f"#LastWriteTime\t{human_ms(1_700_000_000_456)}\n"
        "#MasterFlushOffset\t5100\n"
    )


async def test_ha_status_of_a_cluster_asks_its_masters_only() -> None:
    admin = stub()
    code, text = await command(admin, "haStatus", "-c", CLUSTER)
    assert code == 0
    assert admin.asked == [A0, B0]
    assert [line for line in text.splitlines() if line.startswith("#MasterAddr")] == [
        f"#MasterAddr\t{A0}",
        f"#MasterAddr\t{B0}",
    ]


async def test_interval_repeats_on_the_virtual_clock(autojump_clock: trio.testing.MockClock) -> None:
    for argv, times in ((["haStatus", "-b", A1, "-i"], 4), (["haStatus", "-b", A1, "-i", "2"], 5)):
        admin = stub()
        with trio.move_on_after(9.5):  # -i alone: every 3 s, as mqadmin
            await command(admin, *argv)
        assert admin.asked == [A1] * times, argv
    admin = stub()
    with trio.move_on_after(9.5):
        await command(admin, "clusterList", "-i", "5")
    assert admin.asked == [A0, A1, B0, B1] * 2


@pytest.mark.parametrize("bad", ["0", "-1", "x"])
def test_interval_must_be_positive_seconds(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["clusterList", "-i", bad])
    assert "seconds" in capsys.readouterr().err


async def test_cluster_list_has_a_row_per_master_and_slave() -> None:
    admin = stub()
    code, text = await command(admin, "clusterList")
    assert code == 1  # broker-b's slave did not answer: its row is printed anyway
    rows = [line.split()[:4] for line in text.splitlines()[1:]]
    assert rows == [
        [CLUSTER, "broker-a", "0", A0],
        [CLUSTER, "broker-a", "1", A1],
        [CLUSTER, "broker-b", "0", B0],
        [CLUSTER, "broker-b", "1", B1],
    ]


async def test_broker_status_of_a_cluster_covers_slaves_and_goes_on_after_a_failure() -> None:
    admin = stub()
    code, text = await command(admin, "brokerStatus", "-c", CLUSTER)
    assert code == 1  # B1 failed
    assert admin.asked == [A0, A1, B0, B1]
    lines = text.splitlines()
    assert STATUS_ADDR_LINE % (A1, "masterPutWhere", "5000") in lines
    assert STATUS_ADDR_LINE % (A1, "brokerRole", "SLAVE") in lines
    assert {line.split()[0] for line in lines} == {A0, A1, B0}
    code, text = await command(stub(), "brokerStatus", "-b", A1)
    assert code == 0
    assert text.splitlines() == [STATUS_LINE % (k, v) for k, v in sorted(stub().runtime[A1].items())]


# -- a live group ---------------------------------------------------------------------------


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        yield ns


def _config(store: Path, namesrv: str, **props: str) -> BrokerConfig:
    base = {
        "brokerClusterName": CLUSTER,
        "brokerName": "broker-a",
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "listenPort": "0",
        "vipChannelEnable": "false",
        "namesrvAddr": namesrv,
        "storePathRootDir": str(store),
        "mappedFileSizeCommitLog": str(1024 * 1024),
        "mappedFileSizeConsumeQueue": str(300 * 20),
        "haSendHeartbeatInterval": "200",
    }
    return BrokerConfig.from_properties({**base, **props}, environ={})


async def test_live_master_and_slave(tmp_path: Path, namesrv: NamesrvServer) -> None:
    ns = namesrv.address

    async def mqadmin(*argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        with trio.fail_after(LIMIT):
            code = await run([*argv, "-n", ns], out, err)
        assert code == 0, err.getvalue()
        return out.getvalue()

    async with trio.open_nursery() as nursery:
        master = await nursery.start(BrokerController(_config(tmp_path / "m", ns, brokerRole="SYNC_MASTER")).serve)
        slave = await nursery.start(
            BrokerController(_config(tmp_path / "s", ns, brokerRole="SLAVE", brokerId="1")).serve
        )
        # the name server carries the slave under id 1 (GET_BROKER_CLUSTER_INFO)
        with trio.fail_after(LIMIT):
            while len(namesrv.routes.live) < 2:
                await trio.sleep(0.02)
        assert namesrv.routes.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
            0: master.address,
            1: slave.address,
        }
        async with Producer("HaAdminPG", namesrv=ns) as producer:
            with trio.fail_after(LIMIT):
                while (await producer.send(Message("HaAdmin", b"x" * 100))).status.value != "SEND_OK":
                    await trio.sleep(0.05)
        end = master.message_store.max_phy_offset

        rows = [line.split()[:4] for line in (await mqadmin("clusterList")).splitlines()[1:]]
        assert rows == [[CLUSTER, "broker-a", "0", master.address], [CLUSTER, "broker-a", "1", slave.address]]

        text = await mqadmin("haStatus", "-c", CLUSTER)
        assert text.startswith(MASTER_HEAD % (master.address, end, 1, 1))
        last = text.splitlines()[-1].split()
        assert (int(last[1]), int(last[2]), last[4]) == (end, 0, "OK")

        text = await mqadmin("haStatus", "-b", slave.address)
        assert f"#MasterAddr\t{master.ha_address}\n#CommitLogMaxOffset\t{end}\n" in text

        text = await mqadmin("brokerStatus", "-c", CLUSTER)
        fields = {}
        for line in text.splitlines():
            addr, rest = line.split(None, 1)
            key, value = rest.split(":", 1)
            fields[addr, key.strip()] = value.strip()
        assert fields[master.address, "brokerRole"] == "SYNC_MASTER"
        assert fields[master.address, "inSyncSlaveNums"] == "1"
        assert fields[slave.address, "brokerRole"] == "SLAVE"
        assert fields[slave.address, "brokerId"] == "1"
        assert fields[slave.address, "masterPutWhere"] == str(end)
        assert fields[slave.address, "slaveFallBehind"] == "0"
        # every key docs/ha.md promises is there
        for role, keys in re.findall(r"^\| (master|slave) \| (`[^|]+) \|", HA_DOC.read_text(), re.M):
            addr = master.address if role == "master" else slave.address
            for key in re.findall(r"`(\w+)`", keys):
                assert (addr, key) in fields, f"docs/ha.md lists {key} for a {role}"
        master.shutdown()
        slave.shutdown()
