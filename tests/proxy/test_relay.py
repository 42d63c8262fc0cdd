"""An admin's consumerStatus -s and consumeMessageDirectly (queryMsgById -g -d) against a 5.x
consumer group: the broker asks the proxy, the proxy asks the group's client down its
Telemetry stream (PrintThreadStackTraceCommand, VerifyMessageCommand) and answers with the
client's reply (rmq.proxy.relay).

A client written with grpcio (telemetry_client.py) answers the commands as the Java client
does; the official Python client 5.1.2 ignores both, so the proxy answers the broker with
"call remote timeout" once grpcProxyRelayRequestTimeoutInSeconds (1 s here) is over, well
before the broker's own 10 s.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from rmq.client import Message, Producer
from rmq.client.api import ClientAPI
from rmq.client.errors import MQBrokerError
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.remoting import RemotingClient
from rmq.tools.admin import run as mqadmin
from tests.client.conftest import Cluster

from .conftest import CHILD, CLIENT5, FAST, require_client5

ROOT = Path(__file__).resolve().parents[2]
ANSWERING = Path(__file__).with_name("telemetry_client.py")
LIMIT = 60


class Child:
    """A child process printing JSON lines; a line on its stdin ends it."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []
        self.changed = trio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        while chunk := await self.process.stdout.receive_some():
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            self.lines.extend(json.loads(line) for line in done if line.startswith(b"{"))
            self.changed.set()
            self.changed = trio.Event()
        self.changed.set()

    async def wait_for(self, key: str, count: int = 1) -> list[Any]:
        with trio.fail_after(LIMIT):
            while len(found := [line[key] for line in self.lines if key in line]) < count:
                assert self.process.returncode is None or self.changed.is_set(), self.lines
                await self.changed.wait()
        return found


@asynccontextmanager
async def child(args: list[str], pythonpath: Path) -> AsyncIterator[Child]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(pythonpath)
    process = await trio.lowlevel.open_process(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    c = Child(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.read)
            yield c
            assert process.stdin is not None
            await process.stdin.send_all(b"stop\n")
            with trio.fail_after(LIMIT):
                await c.wait_for("done")
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


@asynccontextmanager
async def relaying_proxy(cluster: Cluster) -> AsyncIterator[ProxyServer]:
    values = {"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, "grpcProxyRelayRequestTimeoutInSeconds": 1}
    async with ProxyServer(ProxyConfig.from_mapping({**values, **FAST}), host="127.0.0.1") as proxy:
        yield proxy


async def registered(cluster: Cluster, group: str) -> None:
    """Until the broker knows the group (the proxy heartbeats it soon after the settings)."""
    async with RemotingClient() as remoting:
        with trio.fail_after(LIMIT):
            while True:
                try:
                    if await ClientAPI(remoting).get_consumer_ids(cluster.broker_addr, group, 3.0):
                        return
                except MQBrokerError:
                    pass
                await trio.sleep(0.05)


async def verify(cluster: Cluster, offset_msg_id: str, group: str, client_id: str) -> tuple[int, str]:
    """mqadmin queryMsgById -g -d: the client named consumes the message (directly)."""
    return await admin(cluster, "queryMsgById", "-i", offset_msg_id, "-g", group, "-d", client_id)


async def admin(cluster: Cluster, *argv: str) -> tuple[int, str]:
    """mqadmin's exit status and what it printed (stdout and stderr)."""
    out = io.StringIO()
    with trio.fail_after(LIMIT):
        code = await mqadmin([*argv, "-n", cluster.namesrv_addr], out, out)
    return code, out.getvalue()


async def test_a_client_that_answers(cluster: Cluster) -> None:
    topic, group = "RelayTopic", "RelayGroup"
    await cluster.create_topic(topic, queues=2)
    async with (
        relaying_proxy(cluster) as proxy,
        child([str(ANSWERING), f"127.0.0.1:{proxy.port}", group, topic], ROOT) as client,
    ):
        await client.wait_for("settings")
        await registered(cluster, group)
        proxy_id = proxy.instance.client_id

        code, out = await admin(cluster, "consumerStatus", "-g", group, "-i", proxy_id, "-s")
        assert code == 0, out
        assert "#Consumer jstack#" in out
        assert "client telemetry-client@test (JAVA 5.0.8):" in out
        assert "telemetry_client.py" in out and '"MainThread"' in out  # the child's own stack
        assert "PROP_CLIENT_IDS" in out and f"Topic: {topic}" in out
        assert len(await client.wait_for("stack")) == 1
        code, out = await admin(cluster, "consumerStatus", "-g", group, "-s")  # every client of the group
        assert code == 0, out
        assert proxy_id in out and "Same subscription" in out
        code, out = await admin(cluster, "consumerStatus", "-g", group, "-i", proxy_id)  # no stack asked
        assert code == 0 and "#Consumer jstack#" not in out, out
        assert len(await client.wait_for("stack")) == 2

        async with Producer("RelayProducer", cluster.namesrv_addr) as producer:
            sent = {body: await producer.send(Message(topic, body)) for body in ("ok", "fail", "corrupt", "fifo")}
        expected = {"ok": "CR_SUCCESS", "fail": "CR_LATER", "corrupt": "CR_RETURN_NULL"}
        for body, result in expected.items():
            code, out = await verify(cluster, sent[body].offset_msg_id, group, proxy_id)
            assert code == 0, out
            assert f"consumeResult={result}, remark=from gRPC client" in out, out
        code, out = await verify(cluster, sent["fifo"].offset_msg_id, group, proxy_id)
        assert code != 0 and "forbidden to verify message" in out, out
        assert await client.wait_for("verify", 4) == ["ok", "fail", "corrupt", "fifo"]

        # a message the client never answers for: SYSTEM_BUSY once the relay's 1 s is over
        async with Producer("RelayProducer", cluster.namesrv_addr) as producer:
            silent = await producer.send(Message(topic, "silent"))
        start = trio.current_time()
        code, out = await verify(cluster, silent.offset_msg_id, group, proxy_id)
        assert code != 0 and "call remote timeout" in out, out
        assert trio.current_time() - start < 5
        assert not proxy.service.channels._waiting  # nothing left waiting for a reply


async def test_the_official_client_does_not_answer(cluster: Cluster) -> None:
    """The Python client 5.1.2 reads neither command: clear errors within the relay's 1 s."""
    require_client5()
    topic, group = "RelayTopic5", "RelayGroup5"
    await cluster.create_topic(topic, queues=2)
    async with (
        relaying_proxy(cluster) as proxy,
        child([str(CHILD), f"127.0.0.1:{proxy.port}", "hold", topic, group], CLIENT5) as client,
    ):
        await client.wait_for("started")
        await registered(cluster, group)
        proxy_id = proxy.instance.client_id

        code, out = await admin(cluster, "consumerStatus", "-g", group, "-i", proxy_id)
        assert code == 0 and "#Consumer jstack#" not in out, out
        (client_id,) = proxy.service.consumers.groups[group].clients
        assert f"PROP_CLIENT_IDS{' ' * 25}: {client_id}" in out
        start = trio.current_time()
        code, out = await admin(cluster, "consumerStatus", "-g", group, "-i", proxy_id, "-s")
        assert code != 0 and f"call remote timeout: client {client_id} did not answer within 1 s" in out, out
        assert trio.current_time() - start < 5

        async with Producer("RelayProducer5", cluster.namesrv_addr) as producer:
            sent = await producer.send(Message(topic, "verify me"))
        start = trio.current_time()
        code, out = await verify(cluster, sent.offset_msg_id, group, proxy_id)
        assert code != 0 and "call remote timeout" in out, out
        assert trio.current_time() - start < 5
