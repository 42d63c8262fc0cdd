"""Reading a topic's messages as a tool's pull consumer does (mqadmin consumeMessage): the
offsets of a queue between two times, and the pulls over them, each answer as the broker
gave it (FOUND, NO_MATCHED_MSG, NO_NEW_MSG, OFFSET_ILLEGAL). Nothing is committed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from rmq.client import MessageQueue
from rmq.client.admin import PULL_BATCH, MQAdmin
from rmq.client.api import PullResult, PullStatus
from rmq.protocol import headers as H
from rmq.protocol.constants import PULL_SUBSCRIPTION

from .common import AdminError


@dataclass(frozen=True)
class QueueRange:
    """Where to read `mq`: at `addr`, offsets `first` to `last` inclusive (Java's minOffset and
    maxOffset: `last` is the queue's end, one past its newest message, when not cut short)."""

    mq: MessageQueue
    addr: str
    first: int
    last: int


async def queue_range(admin: MQAdmin, mq: MessageQueue, begin_ms: int = 0, end_ms: int = 0) -> QueueRange:
    """The queue's offsets, from the first stored at `begin_ms` and to the one at `end_ms`
    when given (> 0), as Java's searchOffset finds them."""
    bd = (await admin.topic_route(mq.topic)).broker(mq.broker_name)
    addr = bd.any_addr() if bd is not None else None
    if addr is None:
        raise AdminError(f"broker {mq.broker_name} is not in the route of {mq.topic}")
    first = await admin.api.get_min_offset(addr, mq, admin.timeout)
    last = await admin.api.get_max_offset(addr, mq, admin.timeout)
    if begin_ms > 0:
        first = await admin.api.search_offset(addr, mq, begin_ms, admin.timeout)
    if end_ms > 0:
        last = await admin.api.search_offset(addr, mq, end_ms, admin.timeout)
    return QueueRange(mq, addr, first, last)


async def topic_ranges(admin: MQAdmin, topic: str, begin_ms: int = 0, end_ms: int = 0) -> list[QueueRange]:
    """`queue_range` of every readable queue of `topic`, in queue order."""
    return [
        await queue_range(admin, mq, begin_ms, end_ms)
        for mq in (await admin.topic_route(topic)).subscribe_queues(topic)
    ]


async def pulls(admin: MQAdmin, r: QueueRange, group: str) -> AsyncIterator[PullResult]:
    """The answers to pulls over `r` as `group`, one after another: it ends after a
    NO_NEW_MSG or OFFSET_ILLEGAL, past `r.last`, or when an answer does not move on."""
    offset = r.first
    while offset <= r.last:
        header = H.PullMessageRequestHeader(
            consumer_group=group,
            topic=r.mq.topic,
            queue_id=r.mq.queue_id,
            queue_offset=offset,
            max_msg_nums=min(PULL_BATCH, r.last - offset + 1),
            sys_flag=PULL_SUBSCRIPTION,
            suspend_timeout_millis=0,
            subscription="*",
            expression_type="TAG",
        )
        result = await admin.api.pull(r.addr, header, admin.timeout)
        yield result
        if result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL) or result.next_begin_offset <= offset:
            return
        offset = result.next_begin_offset
