"""5.x consumers through the proxy are registered with the brokers (issue 44): the broker's
consumer list and consumerConnection show the group while its client runs, as CONSUME_POP
with the client's subscription, and not after the client shut down."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import trio

from rmq.client.admin import AdminResponseError, MQAdmin
from rmq.client.api import ClientAPI
from rmq.client.errors import MQBrokerError
from rmq.proxy import ProxyServer
from rmq.remoting import RemotingClient
from tests.client.conftest import Cluster

from .conftest import CHILD, CLIENT5, require_client5

TOPIC = "ProxyConsumersTopic"
GROUP = "ProxyConsumersGroup"


async def consumer_ids(cluster: Cluster) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP; [] for the broker's "no consumer for this group"."""
    async with RemotingClient() as remoting:
        try:
            return await ClientAPI(remoting).get_consumer_ids(cluster.broker_addr, GROUP, 3.0)
        except MQBrokerError:
            return []


async def test_consumer_group_registered_then_dropped(cluster: Cluster, proxy: ProxyServer) -> None:
    require_client5()
    await cluster.create_topic(TOPIC)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(CLIENT5)
    args = [sys.executable, str(CHILD), f"127.0.0.1:{proxy.port}", "hold", TOPIC, GROUP]
    child = await trio.lowlevel.open_process(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert child.stdin is not None and child.stdout is not None
    try:
        with trio.fail_after(60):
            out = b""
            while b"\n" not in out:
                chunk = await child.stdout.receive_some()
                assert chunk, "the client exited before it started"
                out += chunk
            assert json.loads(out.split(b"\n")[0]) == {"started": True}
            # the proxy's heartbeat registers the group soon after the client's settings
            ids: list[str] = []
            for _ in range(100):
                ids = await consumer_ids(cluster)
                if ids:
                    break
                await trio.sleep(0.1)
            assert ids == [proxy.instance.client_id]
            async with MQAdmin(cluster.namesrv_addr) as admin:
                connection = await admin.consumer_connection(GROUP)
            assert connection.consume_type == "CONSUME_POP"
            assert connection.message_model == "CLUSTERING"
            assert connection.subscriptions == {TOPIC: "TagA||TagB"}
            assert [c.client_id for c in connection.connections] == [proxy.instance.client_id]
            await child.stdin.send_all(b"stop\n")
            await child.stdin.aclose()
            while chunk := await child.stdout.receive_some():
                out += chunk
            assert await child.wait() == 0, out.decode()
    finally:
        if child.returncode is None:
            child.kill()
            with trio.CancelScope(shield=True):
                await child.wait()
    assert b'"stopped": true' in out
    assert await consumer_ids(cluster) == []
    async with MQAdmin(cluster.namesrv_addr) as admin:
        with pytest.raises(AdminResponseError):
            await admin.consumer_connection(GROUP)
