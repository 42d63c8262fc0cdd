"""A name server, a broker and the dashboard, all in process on 127.0.0.1 (real sockets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.controller import BrokerController
from rmq.dashboard.app import Settings, serve
from rmq.namesrv.server import NamesrvServer

from ..broker.cluster import loopback_namesrv, start_broker

LIMIT = 20.0
FAST_DELAYS = " ".join(["1s"] * 18)


@dataclass
class Stack:
    namesrv: NamesrvServer
    broker: BrokerController
    url: str  # the dashboard, "http://127.0.0.1:port"
    nursery: trio.Nursery

    @property
    def ns(self) -> str:
        return self.namesrv.address

    async def dashboard(self, **settings: Any) -> str:
        """Another dashboard on the same cluster (read-only, with login, ...); its URL."""
        where = await self.nursery.start(
            serve, Settings(namesrv=[self.ns], sample_interval=0.5, topics_interval=0.5, **settings), "127.0.0.1", 0
        )
        return f"http://{where}"


async def wait_for(check: Callable[[], Any], limit: float = LIMIT) -> None:
    with trio.fail_after(limit):
        while not await check():
            await trio.sleep(0.05)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with loopback_namesrv() as ns, trio.open_nursery() as nursery:
        broker = await start_broker(
            nursery, tmp_path / "store", ns, traceTopicEnable="true", messageDelayLevel=FAST_DELAYS
        )
        with trio.fail_after(LIMIT):
            while not ns.routes.live:
                await trio.sleep(0.02)
        where = await nursery.start(
            serve, Settings(namesrv=[ns.address], sample_interval=0.5, topics_interval=0.5), "127.0.0.1", 0
        )
        yield Stack(ns, broker, f"http://{where}", nursery)
        nursery.cancel_scope.cancel()


ACL_ADMIN = ("RocketMQAdmin", "12345678admin")
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQAdmin
    secretKey: 12345678admin
    admin: true
  - accessKey: RocketMQUser
    secretKey: 12345678user
    defaultTopicPerm: DENY
    topicPerms:
      - TopicPub=PUB|SUB
"""


@pytest.fixture
async def acl_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    """The stack with a broker that has aclEnable=true, and a dashboard signing as its admin."""
    from rmq.broker.acl import service

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL, encoding="utf-8")
    monkeypatch.setattr(service, "WATCH_INTERVAL", 0.05)
    async with loopback_namesrv() as ns, trio.open_nursery() as nursery:
        broker = await start_broker(nursery, tmp_path / "store", ns, aclEnable="true", rocketmqHome=str(home))
        with trio.fail_after(LIMIT):
            while not ns.routes.live:
                await trio.sleep(0.02)
        settings = Settings(
            namesrv=[ns.address], sample_interval=0.5, topics_interval=0.5,
            access_key=ACL_ADMIN[0], secret_key=ACL_ADMIN[1],
        )  # fmt: skip
        where = await nursery.start(serve, settings, "127.0.0.1", 0)
        yield Stack(ns, broker, f"http://{where}", nursery)
        nursery.cancel_scope.cancel()
