"""Where a message stands with each group consuming its topic, and sending it again: what
mqadmin queryMsgById prints after the message (DefaultMQAdminExtImpl.messageTrackDetail)
and does with -g/-d (consume it directly in one client) or -s (send it again).

A group whose consumers are offline is NOT_ONLINE; pull consumers (CONSUME_ACTIVELY) keep
their offsets themselves, so Java says PULL for them and so do we; for push consumers the
message is CONSUMED when the group's offset on the queue that stores it is past it (and
CONSUMED_BUT_FILTERED when the group's subscription of the topic leaves its tag out), else
NOT_CONSUME_YET.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rmq.client import Message
from rmq.client.admin import AdminResponseError, MQAdmin
from rmq.client.errors import MQClientError
from rmq.protocol import ResponseCode
from rmq.protocol.message import MessageExt

_SQL_MARKS = frozenset(" =<>()")  # a subscription with these is SQL92: Java's tag set is empty then


class TrackType(enum.Enum):
    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass
class MessageTrack:
    consumer_group: str
    track_type: TrackType = TrackType.UNKNOWN
    exception_desc: str | None = None

    def __str__(self) -> str:
        """As Java's MessageTrack.toString prints it."""
        return (
            f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type.value}, "
            f"exceptionDesc={'null' if self.exception_desc is None else self.exception_desc}]"
        )


async def message_tracks(admin: MQAdmin, msg: MessageExt) -> list[MessageTrack]:
    """One MessageTrack per group the topic's brokers know consumes it (QUERY_TOPIC_CONSUME_BY_WHO)."""
    tracks = []
    for group in await admin.topic_consumed_by(msg.topic):
        track = MessageTrack(group)
        tracks.append(track)
        try:
            cc = await admin.consumer_connection(group)
        except AdminResponseError as exc:
            if exc.response_code == ResponseCode.CONSUMER_NOT_ONLINE:
                track.track_type = TrackType.NOT_ONLINE
            track.exception_desc = f"CODE:{exc.response_code} DESC:{exc.remark}"
            continue
        except MQClientError as exc:
            track.exception_desc = str(exc)
            continue
        if cc.consume_type == "CONSUME_ACTIVELY":
            track.track_type = TrackType.PULL
        elif cc.consume_type == "CONSUME_PASSIVELY":
            try:
                done = await consumed(admin, msg, group)
            except MQClientError as exc:
                track.exception_desc = str(exc)
                done = False
            if not done:
                track.track_type = TrackType.NOT_CONSUME_YET
            elif _filtered(cc.subscriptions.get(msg.topic), msg.tags):
                track.track_type = TrackType.CONSUMED_BUT_FILTERED
            else:
                track.track_type = TrackType.CONSUMED
    return tracks


async def consumed(admin: MQAdmin, msg: MessageExt, group: str) -> bool:
    """Whether `group`'s offset on the queue storing `msg` (on the master that stored it)
    is past the message."""
    stats = await admin.consume_stats(group)
    cluster = await admin.cluster_info()
    stored_at = f"{msg.store_host[0]}:{msg.store_host[1]}"
    for mq, offsets in stats.offsets.items():
        if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
            continue
        broker = cluster.brokers.get(mq.broker_name)
        if broker is not None and broker.master_addr == stored_at:
            if offsets.consumer_offset > msg.queue_offset:
                return True
    return False


def _filtered(expression: str | None, tag: str | None) -> bool:
    """Whether a subscription expression leaves out messages of `tag`."""
    if expression is None:
        return False  # the group does not subscribe the topic by name: Java does not judge
    tags = {t.strip() for t in expression.split("||") if t.strip()}
    if not tags or "*" in tags or any(_SQL_MARKS & set(t) for t in tags):
        return False
    return tag not in tags


def direct_result_text(result: dict[str, Any]) -> str:
    """A ConsumeMessageDirectlyResult as Java's toString prints it."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "null" if value is None else str(value)

    return (
        f"ConsumeMessageDirectlyResult [order={text(result.get('order', False))}, "
        f"autoCommit={text(result.get('autoCommit', True))}, consumeResult={text(result.get('consumeResult'))}, "
        f"remark={text(result.get('remark'))}, spentTimeMills={text(result.get('spentTimeMills', 0))}]"
    )


def resend_copy(msg: MessageExt) -> Message:
    """The message to send again (queryMsgById -s true): topic, body, flag and properties."""
    return Message(msg.topic, msg.body, flag=msg.flag, properties=dict(msg.properties))
