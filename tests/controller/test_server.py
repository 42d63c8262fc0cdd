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
from rmq.remoting import RemotingServer, ServerConfig
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
