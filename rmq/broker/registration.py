"""Registration with the name servers (REGISTER_BROKER / UNREGISTER_BROKER, PROTOCOL.md 3.8).

The broker registers with every name server at start, then every
`registerNameServerPeriod` (clamped to 10..60 s as RocketMQ does), and at once whenever
its topic table or its role changes (`trigger`). Name servers never talk to each other, so
each gets the same request, concurrently. A name server that does not answer SUCCESS is
logged and asked again soon: after RETRY_FIRST seconds, doubling up to the period, until
it does. A new master is so in every name server's routes within a second or two of one
answering again, rather than a period later; nothing of this ever stops the broker.

A DLedger member sends its Raft term as `dataVersion.stateVersion` (the field RocketMQ 5
brokers fill with their controller's master epoch): the name server refuses a brokerId
registration from an address while another one holds that id with a greater stateVersion,
so a deposed leader's late registration cannot displace the master elected after it
(route_info.py).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from typing import Any

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies.register import register_body_json
from rmq.protocol.headers import (
    RegisterBrokerRequestHeader,
    UnregisterBrokerRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingError

log = logging.getLogger("rmq.broker.registration")

REGISTER_TIMEOUT = 6.0  # registerBrokerTimeoutMills
RETRY_FIRST = 0.5  # seconds before a name server that did not answer SUCCESS is asked again


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
      state_version: callable returning the dataVersion.stateVersion to send (a DLedger
        member's term), read with `identity`; None or returning None: none is sent.
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: tuple[str, ...],
        identity: Callable[[], tuple[str, str, str, str, int]],
        topic_wrapper: Callable[[], dict[str, Any]],
        period: float,
        on_registered: Callable[[str | None, str | None], None] | None = None,
        state_version: Callable[[], int | None] | None = None,
    ) -> None:
        self._client = client
        self.namesrv_addrs = namesrv_addrs
        self._identity = identity
        self._topic_wrapper = topic_wrapper
        self._period = period
        self._on_registered = on_registered
        self._state_version = state_version
        self._wake = trio.Event()
        self.rounds = 0  # completed registration rounds, for tests and statistics
        self.unconfirmed: tuple[str, ...] = ()  # name servers whose last answer was not SUCCESS

    def trigger(self) -> None:
        """Register again now (after a topic change). Safe to call from sync code."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register now, report started, then keep registering until cancelled: every
        period and when triggered with every name server, and in between with the ones
        that have not answered SUCCESS yet (see the module docstring)."""
        self._wake = trio.Event()
        last_round = trio.current_time()
        await self.register_all()
        task_status.started()
        retry = RETRY_FIRST
        while True:
            wake_at = last_round + self._period
            if self.unconfirmed:
                wake_at = min(wake_at, trio.current_time() + retry)
            with trio.move_on_at(wake_at):
                await self._wake.wait()
            # a change during the round below sets the new event: another round follows
            triggered = self._wake.is_set()
            self._wake = trio.Event()
            if triggered or not self.unconfirmed or trio.current_time() >= last_round + self._period:
                last_round = trio.current_time()
                retry = RETRY_FIRST
                await self.register_all()
            else:
                retry = min(retry * 2, self._period)
                await self.register_all(self.unconfirmed)

    async def register_all(self, namesrv_addrs: tuple[str, ...] | None = None) -> None:
        """One registration with every name server (or those of `namesrv_addrs`), at once;
        afterwards `unconfirmed` lists the ones that did not answer SUCCESS."""
        if not self.namesrv_addrs:
            return
        targets = self.namesrv_addrs if namesrv_addrs is None else namesrv_addrs
        name, addr, cluster, ha_addr, broker_id = self._identity()
        state = None if self._state_version is None else self._state_version()
        body = json_body.dumps(register_body_json(self._topic_wrapper(), state_version=state))
        header = RegisterBrokerRequestHeader(
            broker_name=name,
            broker_addr=addr,
            cluster_name=cluster,
            ha_server_addr=ha_addr,
            broker_id=broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        confirmed: set[str] = set()
        async with trio.open_nursery() as nursery:
            for namesrv in targets:
                request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)
                nursery.start_soon(self._send, namesrv, request, "register", self._client, confirmed)
        self.unconfirmed = tuple(a for a in targets if a not in confirmed)
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

    async def _send(
        self,
        namesrv: str,
        request: RemotingCommand,
        what: str,
        client: RemotingClient,
        confirmed: set[str] | None = None,
    ) -> None:
        try:
            response = await client.invoke(namesrv, request, REGISTER_TIMEOUT)
        except RemotingError as exc:
            log.warning("%s with name server %s failed: %s", what, namesrv, exc)
            return
        if response.code != ResponseCode.SUCCESS:
            log.warning("%s with name server %s refused: code %d %s", what, namesrv, response.code, response.remark)
        else:
            log.debug("%s with name server %s OK", what, namesrv)
            if confirmed is not None:
                confirmed.add(namesrv)
            if self._on_registered is not None and what == "register":
                ext = response.ext_fields
                self._on_registered(ext.get("masterAddr") or None, ext.get("haServerAddr") or None)
