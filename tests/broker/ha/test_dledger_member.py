"""A DLedger member in this process: what it does before it knows its role (docs/dledger.md,
"Restarts"). The group's other members are not running, so it never leads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.config import BrokerRole
from rmq.broker.controller import BrokerController
from rmq.broker.ha.sync import SlaveSynchronize
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.constants import MASTER_ID
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.remoting import RemotingClient, RemotingError

from ...ports import free_ports
from ..cluster import broker_config


def member_config(store: Path, **props: str) -> Any:
    ports = [free_ports(5, below=2) for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p + 2}" for i, p in enumerate(ports))
    return broker_config(
        store,
        listenPort=str(ports[0]),
        enableDLegerCommitLog="true",
        dLegerGroup="broker-d",
        dLegerPeers=peers,
        dLegerSelfId="n0",
        **props,
    )


async def send(client: RemotingClient, addr: str, body: bytes) -> RemotingCommand | None:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic="TBW102",
        queue_id=0,
        born_timestamp=1_700_000_000_000,
        properties=P.encode_properties({"WAIT": "true"}),
    )
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), body)
    try:
        return await client.invoke(addr, request, 2.0)
    except RemotingError:
        return None  # not listening yet


@pytest.mark.parametrize("conf", [{}, {"brokerId": "0", "brokerRole": "SYNC_MASTER"}])
async def test_a_member_that_does_not_know_its_role_refuses_sends_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conf: dict[str, str]
) -> None:
    """The client port opens before the member has started its Raft part; sends that arrive
    then (a client's cached route still names the member) are refused as a slave refuses
    them, never answered SEND_OK from a store nobody replicates."""
    gate = trio.Event()
    started = trio.Event()
    real_run = SlaveSynchronize.run

    async def late_run(self: SlaveSynchronize, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # started after the client port and before the member's Raft part: hold it, and the
        # start with it, in that window
        started.set()
        await gate.wait()
        await real_run(self, task_status=task_status)

    monkeypatch.setattr(SlaveSynchronize, "run", late_run)
    config = member_config(tmp_path / "n0", **conf)
    broker = BrokerController(config)
    assert broker.config.broker_role is BrokerRole.SLAVE and broker.config.broker_id != MASTER_ID
    addr = f"127.0.0.1:{config.listen_port}"
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        nursery.start_soon(broker.serve)
        with trio.fail_after(20):
            await started.wait()
        answers = []
        for i in range(20):
            r = await send(client, addr, b"in the window %d" % i)
            if r is not None:
                answers.append(r.code)
        assert answers, "the client port was not open in the window"
        assert set(answers) == {ResponseCode.SERVICE_NOT_AVAILABLE}
        gate.set()
        with trio.fail_after(20):
            while broker.registration is None:
                await trio.sleep(0.01)
        # started as a follower of nobody: still refused, still nothing stored
        r = await send(client, addr, b"after the start")
        assert r is not None and r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert broker.message_store.max_phy_offset == 0
        broker.shutdown()
