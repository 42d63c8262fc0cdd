"""Three `rmq controller` processes: a broker group registers through raw remoting requests
with the controller's headers, the controller leader is SIGKILLed, another member takes over
knowing the group, and a new master is elected there. The same with the controller inside
three name servers (`rmq namesrv` with enableControllerInNamesrv=true)."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    Header,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingError
from tests.broker.ha.procs import ControllerProcess

from ..ports import free_ports

C, G = "ProcCluster", "broker-p"
TIMEOUT = 3.0


# elections by request only: no election of the controller's own gets there first
BY_REQUEST = {
    "controllerDLegerGroup": "pgroup",
    "controllerDLegerElectionTimeoutMs": "600", "controllerDLegerHeartbeatIntervalMs": "100",
    "scanNotActiveBrokerInterval": "600000", "scanInactiveMasterInterval": "600000",
}  # fmt: skip


async def call(
    client: RemotingClient, addr: str, code: int, header: Header | None = None, body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header.to_ext() if header else None, body), TIMEOUT)


async def leader_of(client: RemotingClient, members: list[ControllerProcess]) -> ControllerProcess:
    """The member that says it leads (and is caught up), polled for at most 20 s."""
    with trio.fail_after(20):
        while True:
            for m in members:
                try:
                    r = await call(client, m.address, RequestCode.CONTROLLER_GET_METADATA_INFO)
                except RemotingError:
                    continue
                if r.ext_fields.get("isLeader") == "true":
                    assert r.ext_fields["controllerLeaderAddress"] == m.address
                    assert r.ext_fields["group"] == "pgroup"
                    return m
            await trio.sleep(0.1)


async def beat(client: RemotingClient, members: list[ControllerProcess], broker_id: int, timeout_ms: int) -> None:
    header = BrokerHeartbeatRequestHeader(
        cluster_name=C, broker_addr=f"127.0.0.1:{20000 + broker_id}", broker_name=G, broker_id=broker_id,
        epoch=1, max_offset=100, heartbeat_timeout_mills=timeout_ms,
    )  # fmt: skip
    for m in members:
        try:
            r = await call(client, m.address, RequestCode.BROKER_HEARTBEAT, header)
            assert r.code == ResponseCode.SUCCESS
        except RemotingError:
            pass


async def test_the_group_survives_its_leader(tmp_path: Path) -> None:
    ports = [free_ports() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    members = [ControllerProcess(tmp_path, f"n{i}", peers, f"127.0.0.1:{p}", **BY_REQUEST) for i, p in enumerate(ports)]
    try:
        for m in members:
            m.start()
        async with RemotingClient() as client:
            leader = await leader_of(client, members)
            other = next(m for m in members if m is not leader)
            # a follower refuses and names the leader
            r = await call(
                client, other.address, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(G)
            )
            assert r.code == ResponseCode.CONTROLLER_NOT_LEADER and leader.address in (r.remark or "")

            # two brokers register: an id each, then heartbeats and registration
            for broker_id in (1, 2):
                r = await call(client, leader.address, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                               GetNextBrokerIdRequestHeader(C, G))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBrokerId"] == str(broker_id)
                addr = f"127.0.0.1:{20000 + broker_id}"
                r = await call(client, leader.address, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                               ApplyBrokerIdRequestHeader(C, G, broker_id, f"{addr};{broker_id}"))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
                await beat(client, members, broker_id, 60_000 if broker_id == 2 else 1500)
                r = await call(client, leader.address, RequestCode.CONTROLLER_REGISTER_BROKER,
                               RegisterBrokerToControllerRequestHeader(C, G, broker_id, addr))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
            r = await call(client, leader.address, RequestCode.CONTROLLER_ELECT_MASTER,
                           ElectMasterRequestHeader(G, C, 1))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("1", "1")
            body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
            r = await call(client, leader.address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                           AlterSyncStateSetRequestHeader(G, 1, 1), body)  # fmt: skip
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["newSyncStateSetEpoch"] == "2", r.remark

            leader.kill()
            survivors = [m for m in members if m is not leader]
            new = await leader_of(client, survivors)
            r = await call(client, new.address, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(G))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("1", "1")
            assert json.loads(r.body) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}

            # broker 1 has stopped beating: broker 2, in the SyncStateSet, is elected
            with trio.fail_after(20):
                while True:
                    await beat(client, survivors, 2, 60_000)
                    r = await call(client, new.address, RequestCode.CONTROLLER_ELECT_MASTER,
                                   ElectMasterRequestHeader(G, C, 2))  # fmt: skip
                    if r.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                        break
                    await trio.sleep(0.2)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("2", "2")
            assert json.loads(r.body)["brokerMemberGroup"]["brokerAddrs"] == {
                "1": "127.0.0.1:20001",
                "2": "127.0.0.1:20002",
            }
            # the old leader comes back (its state from its log, the rest from the leader);
            # then the new leader dies too, and the two left elect one that knows it all
            leader.start()
            await trio.sleep(1.0)
            new.kill()
            third = await leader_of(client, [m for m in members if m is not new])
            r = await call(
                client, third.address, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(G)
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("2", "2")
    finally:
        for m in members:
            m.stop()


async def test_the_controller_inside_name_servers_survives_its_leader(tmp_path: Path) -> None:
    ports = [free_ports() for _ in range(3)]
    namesrv_ports = [free_ports() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    members = [
        ControllerProcess(tmp_path, f"n{i}", peers, f"127.0.0.1:{p}", namesrv_ports[i], **BY_REQUEST)
        for i, p in enumerate(ports)
    ]
    try:
        for m in members:
            m.start()
        async with RemotingClient() as client:
            for m in members:  # each process is a name server too
                assert m.namesrv is not None
                r = await call(client, m.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
                assert r.code == ResponseCode.SUCCESS, r.remark
            leader = await leader_of(client, members)
            for broker_id in (1, 2):
                addr = f"127.0.0.1:{20000 + broker_id}"
                r = await call(client, leader.address, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                               ApplyBrokerIdRequestHeader(C, G, broker_id, f"{addr};{broker_id}"))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
                await beat(client, members, broker_id, 60_000 if broker_id == 2 else 1500)
                r = await call(client, leader.address, RequestCode.CONTROLLER_REGISTER_BROKER,
                               RegisterBrokerToControllerRequestHeader(C, G, broker_id, addr))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
            r = await call(client, leader.address, RequestCode.CONTROLLER_ELECT_MASTER,
                           ElectMasterRequestHeader(G, C, 1))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["masterBrokerId"] == "1", r.remark
            body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
            r = await call(client, leader.address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                           AlterSyncStateSetRequestHeader(G, 1, 1), body)  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark

            leader.kill()  # SIGKILL: the name server and its controller member together
            survivors = [m for m in members if m is not leader]
            new = await leader_of(client, survivors)
            with trio.fail_after(20):
                while True:
                    await beat(client, survivors, 2, 60_000)
                    r = await call(client, new.address, RequestCode.CONTROLLER_ELECT_MASTER,
                                   ElectMasterRequestHeader(G, C, 2))  # fmt: skip
                    if r.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                        break
                    await trio.sleep(0.2)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("2", "2")
            for m in survivors:  # and the name servers left still serve
                assert m.namesrv is not None
                r = await call(client, m.namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
                assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        for m in members:
            m.stop()
