"""INVOKE_BROKER_TO_RESET_OFFSET (222): move a group back (or forward) in time (PROTOCOL.md 3.9).

For every queue of the topic the new offset is the first message stored at or after
`timestamp` (ms; -1 means the queue's end). Without `isForce` a group already behind
that point keeps its offset. The offset table is updated at once, which is all an idle
group needs; each live consumer of the group is also sent RESET_CONSUMER_CLIENT_OFFSET
(220, oneway) so it drops what it has in flight and restarts there. The C++ client
reads that body's offsetTable as an array of queues with an `offset`; everyone else
gets fastjson's MessageQueue-keyed map. The answer is the table that was applied.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rmq.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies.offsets import ResetOffsetBody
from rmq.protocol.body import MessageQueue
from rmq.protocol.headers import ResetOffsetRequestHeader
from rmq.remoting import RemotingError
from rmq.store import MessageStore

from .common import fail, ok

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.reset_offset")

NOTIFY_TIMEOUT = 5.0  # seconds to queue the oneway request on one connection


def offset_at_time(store: MessageStore, topic: str, queue_id: int, timestamp: int) -> int:
    """First queue offset whose message was stored at or after `timestamp` (the queue's
    end when none was; its end too for timestamp -1)."""
    lo = store.get_min_offset_in_queue(topic, queue_id)
    hi = store.get_max_offset_in_queue(topic, queue_id)
    if timestamp < 0:
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if store.get_message_store_timestamp(topic, queue_id, mid) < timestamp:
            lo = mid + 1
        else:
            hi = mid
    return lo


class ResetOffsetProcessor:
    CODES = (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        tc = broker.topics.get(header.topic)
        if tc is None:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={header.topic}",
            )
        table: dict[MessageQueue, int] = {}
        for queue_id in range(tc.write_queue_nums):
            target = offset_at_time(broker.message_store, header.topic, queue_id, header.timestamp)
            current = broker.offsets.query(header.group, header.topic, queue_id)
            if not header.is_force and 0 <= current < target:
                target = current  # already behind that point: keep it
            table[MessageQueue(header.topic, broker.config.broker_name, queue_id)] = target
        for mq, offset in table.items():
            broker.offsets.commit(header.group, header.topic, mq.queue_id, offset)
        channels = broker.clients.consumer_channels(header.group)
        if channels:
            await self._tell_consumers(header, table, channels)
        log.info(
            "offsets of group %s on %s reset to time %d for %d queues (%d consumers told)",
            header.group,
            header.topic,
            header.timestamp,
            len(table),
            len(channels),
        )
        return ok(request, body=json_body.dumps(ResetOffsetBody(table).to_json()))

    async def _tell_consumers(
        self, header: ResetOffsetRequestHeader, table: dict[MessageQueue, int], channels: list[Any]
    ) -> None:
        ext = ResetOffsetRequestHeader(header.topic, header.group, header.timestamp, header.is_force).to_ext()
        as_map = json_body.dumps(ResetOffsetBody(table).to_json())
        as_list = json_body.dumps(ResetOffsetBody(table).to_cpp_json())
        for channel in channels:
            body = as_list if channel.language == LanguageCode.CPP.name else as_map
            command = RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body, language=LanguageCode.JAVA)
            try:
                await channel.conn.invoke_oneway(command, NOTIFY_TIMEOUT)
            except RemotingError as exc:
                log.info("cannot tell %s to reset its offsets: %s", channel.address, exc)
