"""mqadmin's controller commands (rmq/tools/admin/controller.py) against three real `rmq
controller` processes, with broker groups registered by hand through the controller's requests
(no broker in controller mode takes part), and getBrokerEpoch against small remoting servers
that answer GET_BROKER_EPOCH_CACHE as a RocketMQ 5 broker does, found through a name server."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rmq.namesrv import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.bodies.controller import EpochEntry, EpochEntryCache
from rmq.protocol.body import dumps
from rmq.protocol.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingServer, ServerConfig
from rmq.remoting.dispatcher import Dispatcher
from rmq.tools.admin import run

from ..broker.ha.procs import ControllerProcess
from ..controller.test_processes import BY_REQUEST, call, leader_of
from ..namesrv.helpers import loopback_config, register_request
from ..ports import free_ports
from .test_admin import Result, one_line_error

CLUSTER = "CtlCluster"
LIMIT = 20


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ControllerProcess]]:
    tmp = tmp_path_factory.mktemp("controllers")
    ports = [free_ports() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    group = [ControllerProcess(tmp, f"n{i}", peers, f"127.0.0.1:{p}", **BY_REQUEST) for i, p in enumerate(ports)]
    try:
        for m in group:
            m.start()
        yield group
    finally:
        for m in group:
            m.stop()


async def mqadmin(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with trio.fail_after(LIMIT):
        code = await run(list(argv), out, err)
    return Result(code, out.getvalue(), err.getvalue())


def addr_of(group: str, broker_id: int) -> str:
    """A broker's address as registered (nothing listens there: notifications to it fail, logged)."""
    return f"127.0.0.1:{21000 + broker_id}"


async def register_group(client: RemotingClient, members: list[ControllerProcess], group: str) -> ControllerProcess:
    """Brokers 1 and 2 of `group`, alive for a minute; 1 the master, both in the SyncStateSet."""
    leader = await leader_of(client, members)
    for broker_id in (1, 2):
        addr = addr_of(group, broker_id)
        header = ApplyBrokerIdRequestHeader(CLUSTER, group, broker_id, f"{addr};{broker_id}")
        r = await call(client, leader.address, RequestCode.CONTROLLER_APPLY_BROKER_ID, header)
        assert r.code == ResponseCode.SUCCESS, r.remark
        beat = BrokerHeartbeatRequestHeader(
            cluster_name=CLUSTER, broker_addr=addr, broker_name=group, broker_id=broker_id,
            heartbeat_timeout_mills=60_000,
        )  # fmt: skip
        for m in members:
            assert (await call(client, m.address, RequestCode.BROKER_HEARTBEAT, beat)).code == ResponseCode.SUCCESS
        header2 = RegisterBrokerToControllerRequestHeader(CLUSTER, group, broker_id, addr)
        r = await call(client, leader.address, RequestCode.CONTROLLER_REGISTER_BROKER, header2)
        assert r.code == ResponseCode.SUCCESS, r.remark
    r = await call(
        client, leader.address, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(group, CLUSTER, 1)
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
    header3 = AlterSyncStateSetRequestHeader(group, 1, 1)
    r = await call(client, leader.address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header3, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return leader


def replica(group: str, broker_id: int) -> str:
    return (
        f"ReplicaIdentity{{brokerName='{group}', brokerId={broker_id}, brokerAddress='{addr_of(group, broker_id)}', "
        "alive=true}"
    )


async def test_metadata_and_settings(members: list[ControllerProcess]) -> None:
    async with RemotingClient() as client:
        leader = await leader_of(client, members)
    follower = next(m for m in members if m is not leader)
    r = await mqadmin("getControllerMetaData", "-a", follower.address)
    assert r.code == 0, r.err
    peers = [f"#Peer:\t{m.id}:{m.address}" for m in members]
    assert r.out.split("\n") == [
        "", "#ControllerGroup\tpgroup", f"#ControllerLeaderId\t{leader.id}",
        f"#ControllerLeaderAddress\t{leader.address}", *peers, "",
    ]  # fmt: skip

    everyone = ";".join(m.address for m in members)
    r = await mqadmin("getControllerConfig", "-a", everyone)
    assert r.code == 0, r.err
    for m in members:
        assert f"============{m.address}============" in r.lines
        assert f"{'controllerDLegerSelfId':<50}=  {m.id}" in r.lines
    assert r.lines.count(f"{'notifyBrokerRoleChanged':<50}=  true") == 3

    r = await mqadmin("updateControllerConfig", "-a", everyone, "-k", "notifyBrokerRoleChanged", "-v", "false")
    assert r.code == 0, r.err
    assert r.lines == [
        f"update controller config success![{everyone.replace(';', ', ')}]",
        "notifyBrokerRoleChanged : false",
    ]
    r = await mqadmin("getControllerConfig", "-a", everyone)
    assert r.lines.count(f"{'notifyBrokerRoleChanged':<50}=  false") == 3
    r = await mqadmin("updateControllerConfig", "-a", everyone, "-k", "notifyBrokerRoleChanged", "-v", "true")
    assert r.code == 0, r.err

    one_line_error(
        await mqadmin("updateControllerConfig", "-a", everyone, "-k", "configStorePath", "-v", "/tmp/x"),
        "UPDATE_CONTROLLER_CONFIG", "NO_PERMISSION", "Can not update config in black list.",
    )  # fmt: skip
    one_line_error(
        await mqadmin("updateControllerConfig", "-a", follower.address, "-k", "controllerDLegerSelfId", "-v", "n9"),
        "can only be set at startup",
    )
    one_line_error(await mqadmin("getControllerMetaData", "-a", "127.0.0.1:1"), "127.0.0.1:1")


async def test_sync_state_set_election_and_cleaning(members: list[ControllerProcess], tmp_path: Path) -> None:
    group = "broker-ctl"
    async with (
        RemotingClient() as client,
        NamesrvServer(loopback_config(tmp_path)) as ns,
    ):
        leader = await register_group(client, members, group)
        follower = next(m for m in members if m is not leader)
        # the name server knows the group's brokers (getSyncStateSet -c asks it for the names)
        for broker_id in (0, 1):
            req = register_request(broker_name=group, broker_addr=addr_of(group, broker_id + 1),
                                   broker_id=broker_id, cluster=CLUSTER)  # fmt: skip
            assert (await client.invoke(ns.address, req, 5)).code == ResponseCode.SUCCESS

        expected = [
            "", f"#brokerName\t{group}", "#MasterBrokerId\t1", f"#MasterAddr\t{addr_of(group, 1)}", "#MasterEpoch\t1",
            "#SyncStateSetEpoch\t2", "#SyncStateSetNums\t2", "", f"InSyncReplica:\t{replica(group, 1)}", "",
            f"InSyncReplica:\t{replica(group, 2)}",
        ]  # fmt: skip
        r = await mqadmin("getSyncStateSet", "-a", f"{follower.address};{leader.address}", "-b", group)
        assert r.code == 0 and r.lines == expected, r.err
        r = await mqadmin("getSyncStateSet", "-a", follower.address, "-c", CLUSTER, "-n", ns.address)
        assert r.code == 0 and r.lines == expected, r.err
        r = await mqadmin("getSyncStateSet", "-a", follower.address, "-b", "no-such-group")
        assert r.code == 0 and r.out == "", r.err
        assert (await mqadmin("getSyncStateSet", "-a", follower.address)).code == 2  # -b or -c

        # an admin's election: broker 2, in the SyncStateSet and alive, is made master
        r = await mqadmin("electMaster", "-a", follower.address, "-c", CLUSTER, "-bn", group, "-b", "2")
        assert r.code == 0, r.err
        assert r.lines == [
            "", f"#ClusterName\t{CLUSTER}", f"#BrokerName\t{group}", f"#BrokerMasterAddr\t{addr_of(group, 2)}",
            "#MasterEpoch\t2", "#SyncStateSetEpoch\t3", f"\t#Broker\t1\t{addr_of(group, 1)}",
            f"\t#Broker\t2\t{addr_of(group, 2)}",
        ]  # fmt: skip
        one_line_error(
            await mqadmin("electMaster", "-a", follower.address, "-c", CLUSTER, "-bn", group, "-b", "2"),
            "CONTROLLER_ELECT_MASTER", "CONTROLLER_MASTER_STILL_EXIST",
        )  # fmt: skip
        one_line_error(
            await mqadmin("electMaster", "-a", follower.address, "-c", CLUSTER, "-bn", "no-such-group", "-b", "1"),
            "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED",
        )

        # cleaning: an alive broker only with -l; without -l the cluster must be named
        one_line_error(await mqadmin("cleanBrokerMetadata", "-a", follower.address, "-bn", group, "-b", "1"),
                       "clusterName option can not be empty")  # fmt: skip
        one_line_error(
            await mqadmin("cleanBrokerMetadata", "-a", follower.address, "-bn", group, "-b", "one", "-l"), "1;2;3"
        )
        one_line_error(
            await mqadmin("cleanBrokerMetadata", "-a", follower.address, "-c", CLUSTER, "-bn", group, "-b", "1"),
            "CLEAN_BROKER_DATA", "is still alive",
        )  # fmt: skip
        r = await mqadmin("cleanBrokerMetadata", "-a", follower.address, "-c", CLUSTER, "-bn", group, "-b", "1", "-l")
        assert r.code == 0 and r.out == f"clear broker {group} metadata from controller success! \n", r.err
        r = await mqadmin("getSyncStateSet", "-a", leader.address, "-b", group)
        assert r.code == 0 and "#SyncStateSetNums\t1" in r.lines and replica(group, 1) not in r.out, r.out
        r = await mqadmin("cleanBrokerMetadata", "-a", leader.address, "-bn", group, "-l")
        assert r.code == 0, r.err
        r = await mqadmin("getSyncStateSet", "-a", leader.address, "-b", group)
        assert r.code == 0 and r.out == "", r.out


async def test_broker_epochs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = "broker-ep"
    master_cache = EpochEntryCache(CLUSTER, group, 1, (EpochEntry(1, 0, 4096), EpochEntry(2, 4096)), 10_000)
    slave_cache = EpochEntryCache(CLUSTER, group, 2, (EpochEntry(1, 0, 4096), EpochEntry(2, 4096)), 9_000)

    def serving(body: EpochEntryCache | None) -> RemotingServer:
        async def on_epochs(ctx: object, request: RemotingCommand) -> RemotingCommand:
            if body is None:  # RocketMQ's answer from a broker not in controller mode
                return request.make_response(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
            return request.make_response(ResponseCode.SUCCESS, None, None, dumps(body.to_json()))

        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.GET_BROKER_EPOCH_CACHE, on_epochs)
        return RemotingServer(dispatcher, ServerConfig(host="127.0.0.1", port=0))

    async with (
        RemotingClient() as client,
        NamesrvServer(loopback_config(tmp_path)) as ns,
        serving(master_cache) as master,
        serving(slave_cache) as slave,
        serving(None) as plain,
    ):
        for name, broker_id, server in ((group, 0, master), (group, 1, slave), ("broker-plain", 0, plain)):
            req = register_request(broker_name=name, broker_addr=server.address, broker_id=broker_id, cluster=CLUSTER)
            assert (await client.invoke(ns.address, req, 5)).code == ResponseCode.SUCCESS

        def shown(addr: str, cache: EpochEntryCache) -> list[str]:
            return [
                "", f"#clusterName\t{CLUSTER}", f"#brokerName\t{group}", f"#brokerAddr\t{addr}",
                f"#brokerId\t{cache.broker_id}", "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4096}",
                f"#Epoch: EpochEntry{{epoch=2, startOffset=4096, endOffset={cache.max_offset}}}",
            ]  # fmt: skip

        both = sorted([(master.address, master_cache), (slave.address, slave_cache)])
        r = await mqadmin("getBrokerEpoch", "-n", ns.address, "-b", group)
        assert r.code == 0, r.err
        assert r.lines == [line for addr, cache in both for line in shown(addr, cache)]
        # -c: every broker of the cluster; the one not in controller mode is named, the others shown
        r = await mqadmin("getBrokerEpoch", "-n", ns.address, "-c", CLUSTER)
        assert r.code == 1 and r.lines == [line for addr, cache in both for line in shown(addr, cache)]
        warned = capsys.readouterr().err  # as brokerStatus -c: a warning on stderr, and on with the others
        assert "this request only for controllerMode" in warned and plain.address in warned
        one_line_error(await mqadmin("getBrokerEpoch", "-n", ns.address, "-b", "no-such-group"), "no-such-group")
