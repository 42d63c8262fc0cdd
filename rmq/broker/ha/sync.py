"""A slave's copy of its master's metadata (RocketMQ's SlaveSynchronize).

Every SYNC_INTERVAL (first after FIRST_SYNC) a slave asks its master for the topic table,
consumer offsets, delay-level progress and subscription groups (GET_ALL_TOPIC_CONFIG,
GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and takes
them as its own, so that consumers reading from the slave see the master's offsets and a
slave restarted as master after an operator's switch has the master's metadata.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies.lists import KVTable
from rmq.protocol.errors import ProtocolError
from rmq.remoting import RemotingClient, RemotingError

if TYPE_CHECKING:
    from ..parts import BrokerParts
    from ..schedule import ScheduleService

log = logging.getLogger("rmq.broker.ha")

FIRST_SYNC = 3.0  # seconds after start
SYNC_INTERVAL = 10.0
CALL_TIMEOUT = 3.0
STATUS_TIMEOUT = 1.0


class SlaveSynchronize:
    def __init__(self, broker: BrokerParts, client: RemotingClient, schedule: ScheduleService) -> None:
        self.broker = broker
        self.schedule = schedule  # takes the master's delay progress
        self._client = client
        self.rounds = 0  # completed rounds, for tests and status
        self._wake = trio.Event()

    @property
    def master_addr(self) -> str:
        role = self.broker.role
        return role.master_addr if role.config.is_slave else ""

    def trigger(self) -> None:
        """Sync now (the master address just became known)."""
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        with trio.move_on_after(FIRST_SYNC):
            await self._wake.wait()  # or sooner, when the master becomes known (trigger)
        while True:
            if self.master_addr:
                await self.sync_all()
            self._wake = trio.Event()
            with trio.move_on_after(SYNC_INTERVAL):
                await self._wake.wait()

    async def _fetch(self, code: int) -> bytes | None:
        addr = self.master_addr
        try:
            response = await self._client.invoke(addr, RemotingCommand.request(code), CALL_TIMEOUT)
        except RemotingError as exc:
            log.info("slave sync: master %s unreachable: %s", addr, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("slave sync: master %s answered code %d to %d: %s", addr, response.code, code, response.remark)
            return None
        return response.body

    async def sync_all(self) -> None:
        broker = self.broker
        steps = (
            (
                RequestCode.GET_ALL_TOPIC_CONFIG,
                "topics",
                lambda raw: broker.topics.sync_from_master(json_body.loads(raw)),
            ),
            (
                RequestCode.GET_ALL_CONSUMER_OFFSET,
                "consumer offsets",
                lambda raw: broker.offsets.sync_from_master(json_body.loads(raw)),
            ),
            (RequestCode.GET_ALL_DELAY_OFFSET, "delay offsets", self.schedule.sync_from_master),
            (
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                "subscription groups",
                lambda raw: broker.subscriptions.sync_from_master(json_body.loads(raw)),
            ),
        )
        for code, what, apply in steps:
            raw = await self._fetch(code)
            if raw is None:
                return
            try:
                apply(raw)
            except (ValueError, ProtocolError, OSError) as exc:
                log.warning("slave sync: cannot take the master's %s: %s", what, exc)
        self.rounds += 1

    async def master_max_offset(self) -> int | None:
        """The master's CommitLog end, asked now (None when it does not answer quickly)."""
        addr = self.master_addr
        try:
            response = await self._client.invoke(
                addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), STATUS_TIMEOUT
            )
            if response.code != ResponseCode.SUCCESS:
                return None
            return int(KVTable.from_json(json_body.loads(response.body)).table["commitLogMaxOffset"])
        except (RemotingError, ProtocolError, KeyError, ValueError, TypeError, AttributeError):
            return None
