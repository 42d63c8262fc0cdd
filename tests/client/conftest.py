"""An in-process name server and broker on 127.0.0.1 (real sockets) for client tests.

The broker's delay levels are all 1 s, so retried messages come back quickly.
Client options used by the tests shorten RocketMQ's intervals the same way (FAST).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.remoting import RemotingClient

FAST_DELAYS = " ".join(["1s"] * 18)

# client options that shorten the waits a test would otherwise sit through
FAST: dict[str, Any] = {
    "poll_name_server_interval": 1.0,
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.5,
    "lock_interval": 1.0,
    "pull_error_delay": 0.2,
    "suspend_current_queue_time": 0.1,
}


@dataclass
class Cluster:
    namesrv: NamesrvServer
    broker: BrokerController

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    @property
    def broker_addr(self) -> str:
        return self.broker.address

    @property
    def broker_name(self) -> str:
        return self.broker.config.broker_name

    async def create_topic(self, topic: str, queues: int = 4, *, order: bool = False) -> None:
        await create_topic(self.broker_addr, self.namesrv_addr, topic, queues, order=order)


async def create_topic(
    broker_addr: str, namesrv_addr: str, topic: str, queues: int = 4, *, order: bool = False
) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until the name server has the route."""
    header = CreateTopicRequestHeader(topic, read_queue_nums=queues, write_queue_nums=queues, perm=6, order=order)
    async with RemotingClient() as client:
        response = await client.invoke(
            broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext()), 3.0
        )
        assert response.code == ResponseCode.SUCCESS, response
        with trio.fail_after(10):
            while True:
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                response = await client.invoke(namesrv_addr, request, 3.0)
                if response.code == ResponseCode.SUCCESS:
                    return
                await trio.sleep(0.05)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(tmp_path) as cluster:
        yield cluster


@asynccontextmanager
async def open_cluster(tmp_path: Path, **overrides: Any) -> AsyncIterator[Cluster]:
    """The `cluster` fixture's name server and broker; `overrides` are BrokerConfig fields."""
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            namesrv_addr=(ns.address,),
            broker_ip1="127.0.0.1",
            listen_port=0,
            bind_address="127.0.0.1",
            vip_channel_enable=False,
            store_path_root_dir=tmp_path / "store",
            mapped_file_size_commit_log=64 * 1024 * 1024,
            mapped_file_size_consume_queue=30_000 * 20,
            message_delay_level=FAST_DELAYS,
            **overrides,
        )
        async with BrokerController(config) as broker:
            cluster = Cluster(ns, broker)
            with trio.fail_after(10):  # first registration with the name server
                while not ns.routes.live:
                    await trio.sleep(0.02)
            yield cluster


def record_pulls(consumer: Any, events: list[str], handed: list[bool] | None = None) -> None:
    """Append "pull" to `events` each time `consumer` sends a pull (not one sent ahead),
    and to `handed`, for each answer with messages, whether the reader handed them over."""
    api = consumer.instance.api
    pull = api.pull

    async def recorded_pull(*args: Any, **kwargs: Any) -> Any:
        events.append("pull")
        result = await pull(*args, **kwargs)
        if handed is not None and result.messages:
            handed.append(result.delivered)
        return result

    api.pull = recorded_pull
