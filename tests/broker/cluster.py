"""A name server and a broker on 127.0.0.1 (port 0) with a small store in tmp_path.

    async def test_x(cluster: Cluster) -> None:
        response = await cluster.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0})

`cluster.restart()` stops the broker cleanly and starts a new one on the same store.

Tests that use `autojump_clock` get a broker whose wall clock (store timestamps, delay and
timer deadlines) follows Trio's clock, so virtual seconds pass for both alike.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode
from rmq.remoting import RemotingClient

SMALL_STORE = {
    "mappedFileSizeCommitLog": str(1024 * 1024),
    "mappedFileSizeConsumeQueue": str(300 * 20),
    "maxMessageSize": str(256 * 1024),
}


def broker_config(store: Path, namesrv: str | None = None, **props: str) -> BrokerConfig:
    base = {
        "brokerClusterName": "TestCluster",
        "brokerName": "broker-a",
        "brokerIP1": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "listenPort": "0",
        "storePathRootDir": str(store),
        **SMALL_STORE,
    }
    if namesrv:
        base["namesrvAddr"] = namesrv
    base.update(props)
    return BrokerConfig.from_properties(base, environ={})


@contextlib.asynccontextmanager
async def loopback_namesrv() -> AsyncIterator[NamesrvServer]:
    """A name server on 127.0.0.1, on a free port, keeping no KV file."""
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        yield ns


async def start_broker(nursery: trio.Nursery, store: Path, namesrv: NamesrvServer, **props: str) -> BrokerController:
    """A broker (broker_config with `props`) serving in `nursery`, registered with `namesrv`."""
    broker = BrokerController(broker_config(store, namesrv.address, **props))
    await nursery.start(broker.serve)
    return broker


@contextlib.contextmanager
def calm_clock() -> Iterator[None]:
    """Under autojump_clock, jump only after 20 ms of real idleness while this block runs.

    autojump moves virtual time whenever every task waits, also while an fsync runs in a
    worker thread; a broker stop or start does several, and on a loaded machine the clock
    raced through hours (42 h was seen), delivering timers a test expected still waiting.
    """
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, trio.testing.MockClock) or clock.autojump_threshold != 0:
        yield
        return
    clock.autojump_threshold = 0.02
    try:
        yield
    finally:
        clock.autojump_threshold = 0


# Operator changes the broker answers once a worker thread has written them to disk.
WRITTEN_BEFORE_ANSWER = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)


@contextlib.contextmanager
def still_clock() -> Iterator[None]:
    """Under autojump_clock, keep virtual time still while this block runs.

    For a call whose answer waits on a worker thread (a disk write): autojump would move
    the clock while the thread works, up to the next deadline, which may be the call's own
    timeout. Nothing the call needs waits on virtual time.
    """
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, trio.testing.MockClock) or clock.autojump_threshold == math.inf:
        yield
        return
    threshold, clock.autojump_threshold = clock.autojump_threshold, math.inf
    try:
        yield
    finally:
        clock.autojump_threshold = threshold


class Cluster:
    """One name server and one broker; `client` speaks the raw protocol to both."""

    def __init__(
        self,
        nursery: trio.Nursery,
        namesrv: NamesrvServer,
        client: RemotingClient,
        store: Path,
        props: dict[str, str],
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.nursery = nursery
        self.clock_ms = clock_ms
        self.namesrv = namesrv
        self.client = client
        self.store = store
        self.props = props
        self.broker: BrokerController
        self._scope: trio.CancelScope | None = None

    @property
    def config(self) -> BrokerConfig:
        return broker_config(self.store, self.namesrv.address, **self.props)

    async def start(self) -> BrokerController:
        if self.clock_ms is None:
            self.broker = BrokerController(self.config)
        else:
            self.broker = BrokerController(self.config, clock_ms=self.clock_ms)
        with calm_clock():
            await self.nursery.start(self.broker.serve)
        return self.broker

    async def stop(self) -> None:
        with calm_clock():
            self.broker.shutdown()
            await self.broker.wait_stopped()
        for addr in list(self.client.connections):
            self.client.close_connection(addr)

    async def restart(self) -> BrokerController:
        await self.stop()
        return await self.start()

    async def call(
        self,
        code: int,
        ext: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        addr: str | None = None,
        timeout: float = 5.0,
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, ext, body)
        with still_clock() if code in WRITTEN_BEFORE_ANSWER else contextlib.nullcontext():
            return await self.client.invoke(addr or self.broker.address, request, timeout)


def trio_wall_clock() -> Callable[[], int]:
    """Wall-clock ms that advance with Trio's clock (MockClock included) from now on."""
    offset = time.time() * 1000 - trio.current_time() * 1000
    return lambda: int(offset + trio.current_time() * 1000)
