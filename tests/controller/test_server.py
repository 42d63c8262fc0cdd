"""One ControllerServer in this process (a group of one): the controller's own election when
a master's heartbeats stop, NOTIFY_BROKER_ROLE_CHANGED to the group's alive brokers, and the
state replayed from the log after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from rmq.controller.config import ControllerConfig
from rmq.controller.server import ControllerServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetReplicaInfoRequestHeader,
    Header,
    RegisterBrokerToControllerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingServer, ServerConfig
from rmq.remoting.dispatcher import Dispatcher

from ..ports import free_ports

C, G = "OneCluster", "broker-o"


def request(code: int, header: Header | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, header.to_ext() if header else None, body)


def clock() -> int:
    return int(trio.current_time() * 1000)


async def test_a_silent_master_is_replaced_and_brokers_told(tmp_path: Path) -> None:
    notified: list[RemotingCommand] = []
    got = trio.Event()

    async def on_notify(ctx: Any, req: RemotingCommand) -> None:
        notified.append(req)
        got.set()

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, on_notify)
    broker2 = RemotingServer(dispatcher, ServerConfig(host="127.0.0.1", port=0))
    port = free_ports()
    config = ControllerConfig(
        group="one", peers={"n0": f"127.0.0.1:{port}"}, self_id="n0", store_path=str(tmp_path / "c"),
        mapped_file_size=1024 * 1024, bind_address="127.0.0.1", election_timeout_ms=200, heartbeat_interval_ms=50,
        scan_not_active_broker_interval_ms=100, scan_inactive_master_interval_ms=100,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(broker2.serve)
        addrs = {1: "127.0.0.1:1", 2: f"127.0.0.1:{broker2.port}"}
        async with ControllerServer(config, clock_ms=clock) as controller:
            with trio.fail_after(10):
                while not controller.leading:
                    await trio.sleep(0.02)

            def beat(broker_id: int, timeout_ms: int) -> BrokerHeartbeatRequestHeader:
                return BrokerHeartbeatRequestHeader(
                    cluster_name=C, broker_addr=addrs[broker_id], broker_name=G, broker_id=broker_id,
                    heartbeat_timeout_mills=timeout_ms,
                )  # fmt: skip

            async def ask(code: int, header: Header | None = None, body: bytes = b"") -> RemotingCommand:
                if code == RequestCode.BROKER_HEARTBEAT:
                    return await controller._on_heartbeat(_Ctx(), request(code, header, body))
                return await controller.handle(request(code, header, body))

            for i in (1, 2):
                apply = ApplyBrokerIdRequestHeader(C, G, i, f"{addrs[i]};{i}")
                assert (await ask(RequestCode.CONTROLLER_APPLY_BROKER_ID, apply)).code == ResponseCode.SUCCESS
                await ask(RequestCode.BROKER_HEARTBEAT, beat(i, 300 if i == 1 else 60_000))
                register = RegisterBrokerToControllerRequestHeader(C, G, i, addrs[i])
                assert (await ask(RequestCode.CONTROLLER_REGISTER_BROKER, register)).code == ResponseCode.SUCCESS
            r = await ask(RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(G, C, 1))
            assert r.code == ResponseCode.SUCCESS
            body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
            r = await ask(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(G, 1, 1), body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # broker 1 falls silent: the controller elects broker 2 and tells it
            with trio.fail_after(10):
                await got.wait()
            n = notified[0]
            assert n.ext_fields["masterBrokerId"] == "2" and n.ext_fields["masterEpoch"] == "2"
            assert n.ext_fields["masterAddress"] == addrs[2]
            assert json.loads(n.body) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
            r = await ask(RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(G))
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("2", "2")
            before = controller.replicas.snapshot()
        # a new member on the same log rebuilds the same state before it serves
        again = ControllerServer(config, clock_ms=clock)
        assert again.replicas.snapshot() == before
        again.node.dlog.close()
        nursery.cancel_scope.cancel()


class _Ctx:
    connection = None


def _one(tmp_path: Path, **kw: Any) -> ControllerConfig:
    port = free_ports()
    settings: dict[str, Any] = dict(
        group="one", peers={"n0": f"127.0.0.1:{port}"}, self_id="n0", store_path=str(tmp_path / "c"),
        mapped_file_size=1024 * 1024, bind_address="127.0.0.1", election_timeout_ms=200, heartbeat_interval_ms=50,
        scan_not_active_broker_interval_ms=600_000, scan_inactive_master_interval_ms=600_000,
    )  # fmt: skip
    return ControllerConfig(**{**settings, **kw})


async def _leading(controller: ControllerServer) -> None:
    with trio.fail_after(10):
        while not controller.leading:
            await trio.sleep(0.02)


async def test_update_controller_config(tmp_path: Path) -> None:
    config = _one(tmp_path, config_black_list="electMasterMaxRetryCount")
    async with ControllerServer(config) as controller, RemotingClient() as client:
        addr = config.address

        async def update(text: str) -> RemotingCommand:
            req = request(RequestCode.UPDATE_CONTROLLER_CONFIG, body=text.encode())
            return await client.invoke(addr, req, 5)

        async def shown() -> dict[str, str]:
            r = await client.invoke(addr, request(RequestCode.GET_CONTROLLER_CONFIG), 5)
            return dict(line.split("=", 1) for line in r.body.decode().splitlines())

        assert (await shown())["notifyBrokerRoleChanged"] == "true"
        r = await update(
            "notifyBrokerRoleChanged=false\nenableElectUncleanMaster=true\nscanInactiveMasterInterval=700\n"
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        now = await shown()
        assert (now["notifyBrokerRoleChanged"], now["enableElectUncleanMaster"]) == ("false", "true")
        assert now["scanInactiveMasterInterval"] == "700" and now["configBlackList"] == "electMasterMaxRetryCount"
        assert controller.replicas.enable_elect_unclean_master
        # RocketMQ's black list: its own keys always, and what configBlackList names
        for key in ("configStorePath", "rocketmqHome", "configBlackList", "electMasterMaxRetryCount"):
            r = await update(f"{key}=x\n")
            assert r.code == ResponseCode.NO_PERMISSION and r.remark == "Can not update config in black list.", key
        # what takes a restart, what is unknown or malformed: refused, and nothing changes
        for text, remark in [
            ("notifyBrokerRoleChanged=true\ncontrollerDLegerPeers=n0-127.0.0.1:1\n", "can only be set at startup"),
            ("notifyBrokerRoleChanged=true\nnoSuchKey=1\n", "noSuchKey"),
            ("notifyBrokerRoleChanged=true\ncontrollerType=jRaft\n", "controllerType"),
            ("scanNotActiveBrokerInterval=soon\n", "bad value"),
            ("scanNotActiveBrokerInterval=0\n", "must be positive"),
        ]:
            r = await update(text)
            assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or ""), (text, r.remark)
        r = await client.invoke(addr, request(RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"\xff=1"), 5)
        assert r.code == ResponseCode.SYSTEM_ERROR and "UTF-8" in (r.remark or "")
        assert (await shown()) == now


async def test_a_master_whose_connection_closes_is_replaced_at_once(tmp_path: Path) -> None:
    """Heartbeats that would last a minute and scans that never come: only the closed
    connection can tell the controller that the master is gone."""
    config = _one(tmp_path)
    async with ControllerServer(config, clock_ms=clock) as controller, RemotingClient() as admin:
        await _leading(controller)
        addr = config.address
        beaters = []
        for i in (1, 2):
            beater = RemotingClient()
            await beater.__aenter__()
            beaters.append(beater)
            for code, header in (
                (RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(C, G, i, f"127.0.0.1:{i};{i}")),
                (RequestCode.BROKER_HEARTBEAT, BrokerHeartbeatRequestHeader(
                    cluster_name=C, broker_addr=f"127.0.0.1:{i}", broker_name=G, broker_id=i,
                    heartbeat_timeout_mills=60_000)),
                (RequestCode.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
                    C, G, i, f"127.0.0.1:{i}")),
            ):  # fmt: skip
                r = await beater.invoke(addr, request(code, header), 5)
                assert r.code == ResponseCode.SUCCESS, r.remark
        r = await admin.invoke(addr, request(RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(G, C, 1)), 5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
        alter = request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(G, 1, 1), body)
        assert (await admin.invoke(addr, alter, 5)).code == ResponseCode.SUCCESS
        # the slave's connection closing changes nothing but its liveness
        await beaters[1].__aexit__(None, None, None)
        with trio.fail_after(5):
            while controller.heartbeats.live_info(C, G, 2) is not None:
                await trio.sleep(0.02)
        assert controller.replicas.sync_states[G].master_broker_id == 1
        # the master's: broker 2 is not alive either, so nobody can take over; it comes back
        await beaters[0].__aexit__(None, None, None)
        with trio.fail_after(5):
            while controller.replicas.sync_states[G].master_broker_id is not None:
                await trio.sleep(0.02)
        # each of the electMasterMaxRetryCount tries records "no master" in a new epoch, as RocketMQ's do
        assert controller.replicas.sync_states[G].master_epoch == 1 + config.elect_master_max_retry_count
        async with RemotingClient() as again:
            beat = BrokerHeartbeatRequestHeader(
                cluster_name=C, broker_addr="127.0.0.1:2", broker_name=G, broker_id=2, heartbeat_timeout_mills=60_000
            )
            assert (await again.invoke(addr, request(RequestCode.BROKER_HEARTBEAT, beat), 5)).code == 0
            r = await again.invoke(
                addr, request(RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(G, C, 2)), 5
            )
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["masterBrokerId"] == "2", r.remark
