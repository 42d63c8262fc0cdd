"""Messages: found by key, id or offset, read from a queue's range, their traces, sent by an
admin, and dead letters sent back to the topics they came from."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from rmq.client import Message, MessageQueue, MQClientError, MQNoRouteError, Producer, SendResult
from rmq.client.admin import DEFAULT_QUERY_MAX_NUM, MAX_TIMESTAMP, MQAdmin
from rmq.client.message import RESERVED_PROPERTIES
from rmq.client.subscription import Subscription
from rmq.protocol import properties as P
from rmq.protocol import trace as T
from rmq.protocol.constants import DLQ_PREFIX, TRACE_TOPIC
from rmq.protocol.message import MessageExt

from .common import AdminError, now_ms, parse_timestamp

RESEND_KEEPS = frozenset({P.TAGS, P.KEYS})  # reserved properties a resent dead letter keeps


# -- finding ----------------------------------------------------------------------------------


async def by_key(
    admin: MQAdmin,
    topic: str,
    key: str,
    *,
    max_num: int = DEFAULT_QUERY_MAX_NUM,
    begin: int = 0,
    end: int = MAX_TIMESTAMP,
) -> list[MessageExt]:
    """Messages of `topic` with business key `key`; AdminError if there is none."""
    msgs = await admin.query_message(topic, key, max_num=max_num, begin=begin, end=end)
    if not msgs:
        raise AdminError(f"no message with key {key!r} in topic {topic!r}")
    return msgs


async def by_unique_key(admin: MQAdmin, topic: str, key: str) -> list[MessageExt]:
    """Every stored copy of the message with unique key `key`, oldest first; AdminError if none."""
    msgs = await admin.query_message(topic, key, unique=True)
    if not msgs:
        raise AdminError(f"no message with unique key {key!r} in topic {topic!r}")
    return msgs


async def at_offset(admin: MQAdmin, mq: MessageQueue, offset: int) -> MessageExt:
    """The message at `offset` of `mq`; AdminError if there is none."""
    msgs = await admin.pull_queue(mq, offset, 1)
    if not msgs or msgs[0].queue_offset != offset:
        raise AdminError(f"no message at offset {offset} of {mq}")
    return msgs[0]


# -- reading a range --------------------------------------------------------------------------


async def matching(
    admin: MQAdmin, mq: MessageQueue, expression: str, begin: str | None, end: str | None
) -> tuple[int, int, list[MessageExt]]:
    """[first, end) offsets of `mq` within `begin`..`end` (timestamps as parse_timestamp takes
    them; the whole queue without), and the messages there whose tag matches `expression`."""
    low, high = await _queue_range(admin, mq, begin, end)
    sub = Subscription.parse(mq.topic, expression or "*", 0)
    msgs = await admin.pull_queue(mq, low, max(high - low, 0)) if high > low else []
    return low, high, [m for m in msgs if sub.matches(m.tags)]


async def matching_by_queue(
    admin: MQAdmin, topic: str, expression: str, begin: str | None, end: str | None
) -> AsyncGenerator[tuple[MessageQueue, int, int, list[MessageExt]], None]:
    """`matching` for every readable queue of `topic`, in queue order."""
    route = await admin.topic_route(topic)
    for mq in sorted(route.subscribe_queues(topic)):
        low, high, msgs = await matching(admin, mq, expression, begin, end)
        yield mq, low, high, msgs


# -- searching by time, a page at a time -------------------------------------------------------

PAGE_SIZE = 20
MAX_PAGE_SIZE = 1000
EDGE_STEPS = 8  # how far from the broker's answer a time's first offset is looked for


@dataclass(frozen=True)
class TimePage:
    """One page of the messages stored in a time range: `total` matched on every queue of
    the topic, and the ones at 1-based positions `first`..`last` of that order."""

    messages: list[MessageExt]
    total: int
    page: int
    size: int
    newest_first: bool

    @property
    def first(self) -> int:
        return (self.page - 1) * self.size + 1 if self.messages else 0

    @property
    def last(self) -> int:
        return self.first + len(self.messages) - 1 if self.messages else 0

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    def summary(self) -> str:
        order = "newest first" if self.newest_first else "oldest first"
        if not self.total:
            return "0 matched"
        if not self.messages:
            return f"{self.total} matched; page {self.page} is past the last page, {self.pages}"
        return f"{self.total} matched, showing {self.first}-{self.last} ({order}, page {self.page} of {self.pages})"


async def by_time(
    admin: MQAdmin,
    topic: str,
    begin_ms: int,
    end_ms: int,
    *,
    page: int = 1,
    size: int = PAGE_SIZE,
    newest_first: bool = True,
) -> TimePage:
    """Page `page` (of `size`) of the messages of `topic` stored within [begin_ms, end_ms],
    newest first unless asked otherwise, with how many matched in all. Each queue's range
    is found by time and only as many of its newest (or oldest) messages are read as the
    page can need, so a busy topic's recent messages are the first page, not never shown."""
    if page < 1:
        raise AdminError(f"page must be 1 or more, not {page}")
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise AdminError(f"the page size must be between 1 and {MAX_PAGE_SIZE}, not {size}")
    route = await admin.topic_route(topic)
    stats = await admin.topic_stats(topic)
    ranges: list[tuple[MessageQueue, int, int]] = []
    for mq in sorted(route.subscribe_queues(topic)):
        held = stats.get(mq)
        if held is None or held.max_offset <= held.min_offset:
            continue
        addr = await _addr(admin, mq)
        span = (held.min_offset, held.max_offset)
        low = await _first_stored_from(admin, addr, mq, begin_ms, span)
        high = await _first_stored_from(admin, addr, mq, min(end_ms, MAX_TIMESTAMP - 1) + 1, span)
        if high > low:
            ranges.append((mq, low, high))
    wanted = page * size  # no queue can give more than this to the page
    found: list[MessageExt] = []
    for mq, low, high in ranges:
        start = max(low, high - wanted) if newest_first else low
        count = min(high - start, wanted)
        found += [m for m in await admin.pull_queue(mq, start, count) if begin_ms <= m.store_timestamp <= end_ms]
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset), reverse=newest_first)
    total = sum(high - low for _, low, high in ranges)
    return TimePage(found[(page - 1) * size : wanted], total, page, size, newest_first)


async def _first_stored_from(admin: MQAdmin, addr: str, mq: MessageQueue, at: int, span: tuple[int, int]) -> int:
    """The offset of `mq`'s first message stored at or after `at` (the end of the queue when
    none is). The broker answers the offset of the message stored nearest `at`, which may be
    one before or after it: look at the neighbours to be exact."""
    low, high = span
    offset = min(max(await admin.api.search_offset(addr, mq, at, admin.timeout), low), high)
    for _ in range(EDGE_STEPS):
        if offset > low and await _stored_at(admin, mq, offset - 1) >= at:
            offset -= 1
        else:
            break
    for _ in range(EDGE_STEPS):
        if offset < high and await _stored_at(admin, mq, offset) < at:
            offset += 1
        else:
            break
    return offset


async def _stored_at(admin: MQAdmin, mq: MessageQueue, offset: int) -> int:
    msgs = await admin.pull_queue(mq, offset, 1)
    return msgs[0].store_timestamp if msgs else MAX_TIMESTAMP


async def _queue_range(admin: MQAdmin, mq: MessageQueue, begin: str | None, end: str | None) -> tuple[int, int]:
    stats = (await admin.topic_stats(mq.topic)).get(mq)
    if stats is None:
        raise AdminError(f"no queue {mq}")
    low, high = stats.min_offset, stats.max_offset
    now = now_ms()
    if begin:
        at = parse_timestamp(begin, now)
        low = max(low, await admin.api.search_offset(await _addr(admin, mq), mq, at, admin.timeout))
    if end:
        at = parse_timestamp(end, now)
        high = min(high, await admin.api.search_offset(await _addr(admin, mq), mq, at, admin.timeout))
    return low, high


async def _addr(admin: MQAdmin, mq: MessageQueue) -> str:
    bd = (await admin.topic_route(mq.topic)).broker(mq.broker_name)
    addr = bd.any_addr() if bd is not None else None
    if addr is None:
        raise AdminError(f"broker {mq.broker_name} is not in the route of {mq.topic}")
    return addr


async def consume_queue(
    admin: MQAdmin, topic: str, queue: int, index: int, count: int, group: str | None, broker_addr: str | None
) -> dict[Any, Any]:
    """QUERY_CONSUME_QUEUE of `broker_addr`, else of the topic's first master."""
    addr = broker_addr
    if not addr:
        route = await admin.topic_route(topic)
        addr = next((bd.master_addr for bd in route.broker_datas if bd.master_addr), None)
        if addr is None:
            raise AdminError(f"no master serves topic {topic!r}")
    return await admin.query_consume_queue(addr, topic, queue, index, count, group)


# -- traces -----------------------------------------------------------------------------------


async def trace_views(
    admin: MQAdmin,
    msg_id: str,
    topic: str = TRACE_TOPIC,
    *,
    max_num: int = DEFAULT_QUERY_MAX_NUM,
    begin: int = 0,
    end: int = MAX_TIMESTAMP,
) -> list[tuple[T.TraceContext, str]]:
    """The trace records naming `msg_id` in the trace topic, each with its client host (the
    trace message's born host). A trace message that cannot be read is skipped, as Java does."""
    msgs = await admin.query_message(topic, msg_id, max_num=max_num, begin=begin, end=end)
    views: list[tuple[T.TraceContext, str]] = []
    for m in msgs:
        try:
            contexts = T.decode_trace(m.body.decode("utf-8", "replace"))
        except T.TraceFormatError:
            continue
        host = m.born_host[0]
        views += [(ctx, host) for ctx in contexts if any(b.msg_id == msg_id for b in ctx.beans)]
    return views


# -- sending ----------------------------------------------------------------------------------


def admin_producer(admin: MQAdmin) -> Producer:
    """A one-off producer on the admin's name servers, TLS and credentials, its group named
    by the time as mqadmin names it. Not started: use it in `async with`."""
    credentials: dict[str, Any] = {}
    if admin.credentials:
        credentials = dict(zip(("access_key", "secret_key"), admin.credentials, strict=True))
    return Producer(f"RMQ_ADMIN_{now_ms()}", list(admin.namesrv) or None, tls=admin.tls, **credentials)


async def send(admin: MQAdmin, msg: Message, queue: MessageQueue | None = None) -> SendResult:
    """Send one message (to `queue`, else to a queue the producer picks)."""
    async with admin_producer(admin) as producer:
        return await producer.send(msg, queue=queue)


# -- dead letters -----------------------------------------------------------------------------


async def dead_letters(admin: MQAdmin, group: str, count: int) -> list[MessageExt]:
    """Up to `count` messages of `%DLQ%<group>`; none when the group has no such topic
    (the broker creates it with the first dead letter)."""
    try:
        return await admin.pull_messages(DLQ_PREFIX + group, max_messages=count)
    except MQNoRouteError:
        return []


def with_id(msgs: list[MessageExt], msg_id: str) -> list[MessageExt]:
    """The messages whose unique key or offset id is `msg_id`."""
    return [m for m in msgs if msg_id in (m.msg_id, m.offset_msg_id)]


def origin_topic(msg: MessageExt) -> str | None:
    """The topic a dead letter (or a retried message) first went to."""
    return msg.properties.get(P.RETRY_TOPIC) or msg.properties.get(P.REAL_TOPIC)


def resend_copy(msg: MessageExt, topic: str) -> Message:
    """A new message for `topic` with the dead letter's body, flag, tags, keys and user
    properties (it gets a new unique key)."""
    props = {k: v for k, v in msg.properties.items() if k in RESEND_KEEPS or k not in RESERVED_PROPERTIES}
    return Message(topic, msg.body, properties=props, flag=msg.flag)


@dataclass
class Resent:
    """A dead letter sent back to `topic` (None: no origin recorded, so not sent): the
    result, or the error that stopped it."""

    msg: MessageExt
    topic: str | None
    result: SendResult | None = None
    error: MQClientError | None = None


async def resend(producer: Producer, msg: MessageExt, topic: str | None = None) -> Resent:
    """Send a copy of dead letter `msg` to `topic`, else to the topic it came from."""
    target = topic or origin_topic(msg)
    if not target:
        return Resent(msg, None)
    try:
        return Resent(msg, target, result=await producer.send(resend_copy(msg, target)))
    except MQClientError as exc:
        return Resent(msg, target, error=exc)
