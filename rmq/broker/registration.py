"""Registration with the name servers (REGISTER_BROKER / UNREGISTER_BROKER, PROTOCOL.md 3.8).

The broker registers with every name server at start, then every
`registerNameServerPeriod` (clamped to 10..60 s as RocketMQ does), and at once whenever
its topic table changes (`trigger`). Name servers never talk to each other, so each
gets the same request, concurrently. A name server that does not answer is logged and
tried again next round; it never stops the broker.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from typing import Any

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.headers import (
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingError

log = logging.getLogger("rmq.broker.registration")

REGISTER_TIMEOUT = 6.0  # registerBrokerTimeoutMills


def register_period(period_ms: int) -> float:
    """Seconds between rounds: max(10 s, min(period, 60 s)) (BrokerController.start)."""
    return max(10_000, min(period_ms, 60_000)) / 1000


class Registration:
    """Keeps this broker registered with every name server in `namesrv_addrs`.

    Args:
      client: the RemotingClient to talk to name servers with.
      namesrv_addrs: "ip:port" of each name server.
      identity: callable returning (brokerName, brokerAddr, clusterName, haServerAddr,
        brokerId) at call time (the address is known only once the port is bound).
      topic_wrapper: callable returning the TopicConfigSerializeWrapper to send.
      period: seconds between rounds.
      on_registered: told (masterAddr, haServerAddr) from each successful registration's
        answer; a slave learns its master there.
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: tuple[str, ...],
        identity: Callable[[], tuple[str, str, str, str, int]],
        topic_wrapper: Callable[[], dict[str, Any]],
        period: float,
        on_registered: Callable[[str | None, str | None], None] | None = None,
    ) -> None:
        self._client = client
        self.namesrv_addrs = namesrv_addrs
        self._identity = identity
        self._topic_wrapper = topic_wrapper
        self._period = period
        self._on_registered = on_registered
        self._wake = trio.Event()
        self.rounds = 0  # completed registration rounds, for tests and statistics

    def trigger(self) -> None:
        """Register again now (after a topic change). Safe to call from sync code."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register now, report started, then keep registering until cancelled."""
        self._wake = trio.Event()
        await self.register_all()
        task_status.started()
        while True:
            with trio.move_on_after(self._period):
                await self._wake.wait()
            # a change during the round below sets the new event: another round follows
            self._wake = trio.Event()
            await self.register_all()

    async def register_all(self) -> None:
        if not self.namesrv_addrs:
            return
        name, addr, cluster, ha_addr, broker_id = self._identity()
        body = json_body.dumps({"filterServerList": [], "topicConfigSerializeWrapper": self._topic_wrapper()})
        header = RegisterBrokerRequestHeader(
            broker_name=name,
            broker_addr=addr,
            cluster_name=cluster,
            ha_server_addr=ha_addr,
            broker_id=broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        async with trio.open_nursery() as nursery:
            for namesrv in self.namesrv_addrs:
                request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)
                nursery.start_soon(self._send, namesrv, request, "register", self._client)
        self.rounds += 1

    async def unregister_all(self, client: RemotingClient | None = None) -> None:
        """Tell every name server we are gone (best effort, bounded by the timeout).

        `client` replaces the registration's own, e.g. when that one is already closed.
        """
        if not self.namesrv_addrs:
            return
        name, addr, cluster, _, broker_id = self._identity()
        header = UnregisterBrokerRequestHeader(
            broker_name=name, broker_addr=addr, cluster_name=cluster, broker_id=broker_id
        )
        async with trio.open_nursery() as nursery:
            for namesrv in self.namesrv_addrs:
                request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext())
                nursery.start_soon(self._send, namesrv, request, "unregister", client or self._client)

    async def _send(self, namesrv: str, request: RemotingCommand, what: str, client: RemotingClient) -> None:
        try:
            response = await client.invoke(namesrv, request, REGISTER_TIMEOUT)
        except RemotingError as exc:
            log.warning("%s with name server %s failed: %s", what, namesrv, exc)
            return
        if response.code != ResponseCode.SUCCESS:
            log.warning("%s with name server %s refused: code %d %s", what, namesrv, response.code, response.remark)
        else:
            log.debug("%s with name server %s OK", what, namesrv)
            if self._on_registered is not None and what == "register":
                ext = response.ext_fields
                self._on_registered(ext.get("masterAddr") or None, ext.get("haServerAddr") or None)
