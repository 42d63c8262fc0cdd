"""A name server, a broker and a cluster-mode proxy in this process (real sockets on
127.0.0.1), and the official 5.x Python client in child processes (tests/proxy/client5.py).

The client is installed apart by scripts/bootstrap.sh (.cache/rocketmq5): its import name
`rocketmq` is also the C++ client's, which the interop tests use. Tests skip without it (fail in CI).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.protocol.message import MessageExt, decode_record
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.remoting import RemotingClient
from tests.broker.cluster import broker_config, loopback_namesrv
from tests.client.conftest import Cluster, cluster, open_cluster  # noqa: F401  the fixture

CLIENT5 = Path(__file__).resolve().parents[2] / ".cache" / "rocketmq5"
CHILD = Path(__file__).with_name("client5.py")

# short waits for tests: receives poll 1 s at least, messages may be invisible for 1 s
FAST = {
    "grpcClientConsumerMinLongPollingTimeoutMillis": 500,
    "minInvisibleTimeMillsForRecv": 1000,
}


def require_client5() -> None:
    """Skip without the 5.x client, except in CI, where bootstrap.sh installs it: fail there."""
    if not (CLIENT5 / "rocketmq" / "v5").is_dir():
        why = "the 5.x client is not installed (scripts/bootstrap.sh puts it in .cache/rocketmq5)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


async def run_client(
    endpoint: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Run client5.py; its JSON lines. Fails unless it ended with {"done": true}."""
    require_client5()
    child_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    child_env.update(env or {})
    child_env["PYTHONPATH"] = str(CLIENT5)
    with trio.fail_after(timeout):
        result = await trio.run_process(
            [sys.executable, str(CHILD), endpoint, *args],
            capture_stdout=True,
            capture_stderr=True,
            env=child_env,
            check=False,
        )
    lines = [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines or lines[-1] != {"done": True}:
        raise AssertionError(f"client5 {args} exited {result.returncode}: {lines}\n{result.stderr.decode()[-3000:]}")
    return lines[:-1]


TX_TOPIC = "TxTopic"


@pytest.fixture
async def tx_cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A cluster whose half messages are checked once 1 s old, every 0.5 s; TX_TOPIC made."""
    async with open_cluster(tmp_path, transaction_time_out=1000, transaction_check_interval=500) as made:
        await made.create_topic(TX_TOPIC)
        yield made


@pytest.fixture
async def tx_proxy(tx_cluster: Cluster) -> AsyncIterator[ProxyServer]:
    config = ProxyConfig.from_mapping({"namesrvAddr": tx_cluster.namesrv_addr, "grpcServerPort": 0, **FAST})
    async with ProxyServer(config, host="127.0.0.1") as server:
        yield server


@pytest.fixture
async def proxy(cluster: Cluster) -> AsyncIterator[ProxyServer]:  # noqa: F811
    config = ProxyConfig.from_mapping({"namesrvAddr": cluster.namesrv_addr, "grpcServerPort": 0, **FAST})
    async with ProxyServer(config, host="127.0.0.1") as server:
        yield server


# the brokers of `two_groups`: larger files than tests/broker/cluster.py's small store
TWO_GROUPS_STORE = {
    "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(30_000 * 20),
    "maxMessageSize": str(4 * 1024 * 1024),
}


@dataclass
class TwoGroups:
    """A name server, two broker groups (masters broker-a and broker-b) and a cluster-mode
    proxy in front of both, all in this process."""

    namesrv: NamesrvServer
    brokers: list[BrokerController]
    proxy: ProxyServer

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        """The topic on both brokers; returns once the proxy's route names both."""
        header = CreateTopicRequestHeader(topic, read_queue_nums=queues, write_queue_nums=queues, perm=6)
        async with RemotingClient() as client:
            for broker in self.brokers:
                request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                response = await client.invoke(broker.address, request, 5.0)
                assert response.code == ResponseCode.SUCCESS, response
        names = {b.config.broker_name for b in self.brokers}
        with trio.fail_after(10):
            while True:
                route = await self.proxy.instance.update_route(topic)
                if route is not None and {b.broker_name for b in route.broker_datas} == names:
                    return
                await trio.sleep(0.05)

    async def create_group(self, group: str, **config: Any) -> None:
        """The subscription group on both brokers, `config` its camelCase fields (retryMaxTimes)."""
        body = json_body.dumps({"groupName": group, **config})
        async with RemotingClient() as client:
            for broker in self.brokers:
                request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
                response = await client.invoke(broker.address, request, 5.0)
                assert response.code == ResponseCode.SUCCESS, response

    def stored(self, topic: str) -> list[tuple[str, int, MessageExt]]:
        """(broker, queue id, message) of every message of `topic` in both stores, in queue order."""
        out = []
        for broker in self.brokers:
            store = broker.message_store
            topic_config = broker.topics.get(topic)
            for queue_id in range(topic_config.read_queue_nums if topic_config is not None else 0):
                offset, end = 0, store.get_max_offset_in_queue(topic, queue_id)
                while offset < end:
                    records = store.get_message(topic, queue_id, offset, 1000).records
                    if not records:
                        break
                    out.extend((broker.config.broker_name, queue_id, decode_record(r)[0]) for r in records)
                    offset += len(records)
        return out


@pytest.fixture
async def two_groups(tmp_path: Path) -> AsyncIterator[TwoGroups]:
    async with AsyncExitStack() as stack:
        namesrv = await stack.enter_async_context(loopback_namesrv())
        brokers = []
        for name in ("broker-a", "broker-b"):
            config = broker_config(tmp_path / name, namesrv.address, brokerName=name, **TWO_GROUPS_STORE)
            brokers.append(await stack.enter_async_context(BrokerController(config)))
        values = {"namesrvAddr": namesrv.address, "grpcServerPort": 0, **FAST}
        proxy = await stack.enter_async_context(ProxyServer(ProxyConfig.from_mapping(values), host="127.0.0.1"))
        yield TwoGroups(namesrv, brokers, proxy)
