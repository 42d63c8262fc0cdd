"""POP consumption (RocketMQ 5.x, RIP-19): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME (docs/pop.md).

A pop takes up to maxMsgNums messages of a group from one queue of a topic, or from all of
them (queueId -1, starting at a random one), and from the group's POP retry topic: first
in popFromRetryProbability % of pops, else after the topic when the topic left room. For
each queue it read it appends a checkpoint to a revive queue (revive.py) and then moves the
group's offset past what it read, so the next pop gets the next messages; the checkpoint
brings back after invisibleTime whatever is not acked by then. One pop of a (topic, group,
queue) at a time: a pop that finds the queue locked skips it, so two consumers of a group
never get the same message while it is invisible.

An orderly pop (order=true) reads no retry topic and appends no checkpoint: it records its
batch of each queue for the group (order_info.py) and leaves the group's offset at the
batch's start. Until the batch is acked or its invisible time is over, the group's next pops
skip the queue; acks move the offset on in order; then the next pop gets the messages after
the acked ones, or the unacked ones again with their pop counts (orderCountInfo). Handles
name revive queue 999.

A pop that finds nothing waits for a message on the queues it read until bornTime +
pollTime, or for an orderly batch blocking it to be acked or to expire; then it answers
POLLING_TIMEOUT (also at once with pollTime 0); beyond maxPopPollingSize waiting pops it
answers POLLING_FULL.
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.bodies.heartbeat import SubscriptionData
from rmq.protocol.bodies.pop import AckMsg, BatchAckMessageRequestBody, PopCheckPoint
from rmq.protocol.constants import EXPRESSION_SQL92, PERM_READ
from rmq.protocol.errors import BodyError, HeaderError, ProtocolError
from rmq.protocol.message import decode_record, decode_record_meta, encode_message_ext
from rmq.protocol.pop import (
    MAX_POP_NUMS,
    POP_CK,
    POP_ORDER_REVIVE_QUEUE,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    offset_info,
    order_count_info,
    pop_retry_topic,
    real_topic,
)
from rmq.store.results import GetMessageStatus

from ..filter import SqlFilter, SqlFilterError, compile_sql92
from ..revive import append_ack, append_checkpoint
from .common import fail, json_of, ok
from .send import APPLY_TOPIC_URL

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts
    from ..pop_queues import Key, Parked

log = logging.getLogger("rmq.broker.pop")

INIT_MODE_MIN = 0  # ConsumeInitMode: a group new to a queue starts at its first message…
POLL_MARGIN_MS = 50  # a pop due within this is not parked (PopRequest.isTimeout)
TIMEOUT_SLACK_MS = 500  # a pop born longer than pollTime + this ago is refused (isTimeoutTooMuch)
_RESET = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL)


@dataclass
class _Popped:
    """What one pop gathered across queues."""

    want: int
    records: list[bytes] = field(default_factory=list)
    read: list[tuple[str, int, list[int]]] = field(default_factory=list)  # (topic, queue, offsets)
    rest: int = 0  # messages left behind in the queues read
    order_counts: list[str] = field(default_factory=list)  # an orderly pop's orderCountInfo parts
    free_at: int | None = None  # when the first orderly batch that blocked a queue stops blocking it

    def blocked_until(self, at: int | None) -> None:
        if at is not None and (self.free_at is None or at < self.free_at):
            self.free_at = at


@dataclass(frozen=True)
class _Filter:
    tags: frozenset[int] | None  # consume-queue tag codes, None: all
    sql: SqlFilter | None


class PopProcessor:
    CODES = (RequestCode.POP_MESSAGE,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self._ck_number = itertools.count()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = PopMessageRequestHeader.from_ext(request.ext_fields)
        if header.born_time == 0:  # Java fills in an absent or zero born time
            header.born_time = broker.clock_ms()
        checked = self._check(ctx, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        while True:
            popped, pop_time, revive_qid = await self._pop(header, checked)
            code = ResponseCode.SUCCESS
            if not popped.records:
                refusal = polling_refusal(broker, len(broker.pop_queues.pops), header.born_time, header.poll_time)
                if refusal is None:  # park: no await between the reads above and the parks
                    await self._wait(header, ctx, popped.free_at)
                    if not broker.waiters.closed:
                        continue
                    refusal = ResponseCode.POLLING_TIMEOUT
                code = refusal
            start_info, msg_info = offset_info(popped.read) if popped.read else ("", "")
            ext = PopMessageResponseHeader(
                pop_time,
                header.invisible_time,
                revive_qid,
                popped.rest,
                start_info,
                msg_info,
                ";".join(popped.order_counts) if header.order else None,
            ).to_ext()
            if code != ResponseCode.SUCCESS:
                return request.make_response(code, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, ext)
            return request.make_response(code, GetMessageStatus.FOUND.name, ext, b"".join(popped.records))

    def _check(
        self, ctx: RequestContext, request: RemotingCommand, header: PopMessageRequestHeader
    ) -> RemotingCommand | _Filter:
        broker = self.broker
        config = broker.config
        if broker.clock_ms() - header.born_time - header.poll_time > TIMEOUT_SLACK_MS:
            return fail(
                request,
                ResponseCode.POLLING_TIMEOUT,
                f"the broker[{config.broker_ip1}] pop message is timeout too much",
            )
        if not config.broker_permission & PERM_READ:
            return fail(
                request, ResponseCode.NO_PERMISSION, f"the broker[{config.broker_ip1}] pop message is forbidden"
            )
        if header.max_msg_nums > MAX_POP_NUMS:
            return fail(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{config.broker_ip1}] pop message's num is greater than {MAX_POP_NUMS}",
            )
        if header.max_msg_nums <= 0 or header.invisible_time <= 0:
            return fail(request, ResponseCode.INVALID_PARAMETER, "maxMsgNums and invisibleTime must be > 0")
        refused = check_pop_target(broker, ctx, request, header.topic, header.queue_id, header.consumer_group)
        if refused is not None:
            return refused
        if not header.exp:
            return _Filter(None, None)
        sub = SubscriptionData.build(header.topic, header.exp, 0, header.exp_type)
        if sub.is_tag_type:
            return _Filter(None if sub.matches_all else sub.code_set, None)
        if not config.enable_property_filter or sub.expression_type != EXPRESSION_SQL92:
            return fail(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        try:
            return _Filter(None, compile_sql92(sub.sub_string))
        except SqlFilterError:
            return fail(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")

    async def _pop(self, header: PopMessageRequestHeader, filt: _Filter) -> tuple[_Popped, int, int]:
        """One pass over the queues: (what it got, pop time, revive queue)."""
        broker = self.broker
        config = broker.config
        pop_time = broker.clock_ms()
        if header.order:
            revive_qid = POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = next(self._ck_number) % config.revive_queue_num
        popped = _Popped(header.max_msg_nums)
        retry = pop_retry_topic(header.topic, header.consumer_group)
        start = random.randrange(100)
        # an orderly pop keeps to the topic: its unacked messages come back from their queue
        retry_first = start < config.pop_from_retry_probability and not header.order
        if retry_first:
            await self._pop_topic(retry, True, header, popped, pop_time, revive_qid, filt, start)
        tc = broker.topics.get(header.topic)
        if header.queue_id < 0 and tc is not None:
            await self._pop_topic(header.topic, False, header, popped, pop_time, revive_qid, filt, start)
        elif tc is not None:
            await self._pop_queue(header.topic, header.queue_id, False, header, popped, pop_time, revive_qid, filt)
        if not retry_first and len(popped.records) < popped.want and not header.order:
            await self._pop_topic(retry, True, header, popped, pop_time, revive_qid, filt, start)
        return popped, pop_time, revive_qid

    async def _pop_topic(
        self,
        topic: str,
        is_retry: bool,
        header: PopMessageRequestHeader,
        popped: _Popped,
        pop_time: int,
        revive_qid: int,
        filt: _Filter,
        start: int,
    ) -> None:
        tc = self.broker.topics.get(topic)
        if tc is None:
            return
        n = tc.read_queue_nums
        for i in range(n):
            await self._pop_queue(topic, (start + i) % n, is_retry, header, popped, pop_time, revive_qid, filt)

    async def _pop_queue(
        self,
        topic: str,
        queue_id: int,
        is_retry: bool,
        header: PopMessageRequestHeader,
        popped: _Popped,
        pop_time: int,
        revive_qid: int,
        filt: _Filter,
    ) -> None:
        broker = self.broker
        store = broker.message_store
        group = header.consumer_group
        key = (topic, group, queue_id)
        order = bool(header.order)
        offset = self._offset(topic, group, queue_id, header.init_mode)
        locks = broker.pop_queues.locks
        if not locks.try_lock(key):
            if not order:
                popped.rest += max(0, store.get_max_offset_in_queue(topic, queue_id) - offset)
            return
        try:
            # a blocked queue's backlog is not counted: it would wake waiting pops for nothing
            if order and broker.order_info.check_block(
                header.attempt_id, topic, group, queue_id, header.invisible_time
            ):
                popped.blocked_until(broker.order_info.lock_free_time(topic, group, queue_id))
                return
            if len(popped.records) >= popped.want:
                popped.rest += max(0, store.get_max_offset_in_queue(topic, queue_id) - offset)
                return
            # the retry topic is read whole: its messages matched the filter when first popped
            tags = None if is_retry else filt.tags
            want = popped.want - len(popped.records)
            result = store.get_message(topic, queue_id, offset, want, tags_codes=tags)
            if result.status in _RESET:  # the offset is out of the queue: start where it says
                broker.offsets.commit(group, topic, queue_id, result.next_begin_offset)
                offset = result.next_begin_offset
                result = store.get_message(topic, queue_id, offset, want, tags_codes=tags)
            records, offsets = result.records, result.queue_offsets
            if records and filt.sql is not None and not is_retry:
                kept = [(r, o) for r, o in zip(records, offsets, strict=True) if _sql_matches(filt.sql, r)]
                records, offsets = [r for r, _ in kept], [o for _, o in kept]
            if records:
                if order:  # the batch instead of a checkpoint; the offset stays at its start
                    counts, least = broker.order_info.update(
                        header.attempt_id, topic, group, queue_id, pop_time, header.invisible_time, offsets
                    )
                    popped.order_counts.append(order_count_info(topic, queue_id, counts, least))
                    broker.offsets.commit(group, topic, queue_id, offset)
                elif not await self._checkpoint(header, topic, queue_id, offset, offsets, pop_time, revive_qid):
                    popped.rest += result.max_offset - offset
                    return
                broker.stats.count_out(group, topic, queue_id, len(records), sum(map(len, records)), offset)
                if is_retry:
                    records = [self._as_origin(r, header, offset, pop_time, revive_qid) for r in records]
                popped.records.extend(records)
                popped.read.append((topic, queue_id, offsets))
            if result.next_begin_offset > offset and not (order and records):  # popped or filtered out
                broker.offsets.commit(group, topic, queue_id, result.next_begin_offset)
            popped.rest += max(0, result.max_offset - result.next_begin_offset)
        finally:
            locks.unlock(key)

    async def _checkpoint(
        self,
        header: PopMessageRequestHeader,
        topic: str,
        queue_id: int,
        offset: int,
        offsets: list[int],
        pop_time: int,
        revive_qid: int,
    ) -> bool:
        """Append the checkpoint of what a pop read from the queue; False when the store
        refused it (the messages are then left where they are: without a checkpoint one
        could be lost)."""
        broker = self.broker
        ck = PopCheckPoint(
            start_offset=offset,
            pop_time=pop_time,
            invisible_time=header.invisible_time,
            num=len(offsets),
            queue_id=queue_id,
            topic=topic,
            cid=header.consumer_group,
            queue_offset_diff=tuple(o - offset for o in offsets),
            broker_name=broker.config.broker_name,
        )
        put = await append_checkpoint(broker, ck, revive_qid)
        if not put.ok:
            log.error("pop: cannot append the checkpoint of %s queue %d: %s", topic, queue_id, put.status)
        return put.ok

    def _offset(self, topic: str, group: str, queue_id: int, init_mode: int) -> int:
        """Where the group pops the queue next (getPopOffset): its offset, or where a group
        new to the queue starts (getInitOffset) — also committed, as RocketMQ does."""
        broker = self.broker
        offset = broker.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = broker.message_store
        if init_mode == INIT_MODE_MIN or topic.startswith("%RETRY%"):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif store.get_min_offset_in_queue(topic, queue_id) <= 0 and not broker.is_in_disk(topic, queue_id, 0):
            offset = 0  # initPopOffsetByCheckMsgInMem: the whole queue is still in memory
        else:
            offset = max(0, store.get_max_offset_in_queue(topic, queue_id) - 1)
        broker.offsets.commit(group, topic, queue_id, offset)
        return offset

    def _as_origin(
        self, record: bytes, header: PopMessageRequestHeader, ck_offset: int, pop_time: int, revive_qid: int
    ) -> bytes:
        """A retry message as the consumer sees it: under its origin topic, with its receipt
        handle in POP_CK (popResponseReturnActualRetryTopic=false)."""
        msg = decode_record(record)[0]
        info = ExtraInfo(
            ck_offset,
            pop_time,
            header.invisible_time,
            revive_qid,
            "1",
            self.broker.config.broker_name,
            msg.queue_id,
            msg.queue_offset,
        )
        msg.properties.setdefault(POP_CK, info.encode())
        msg.topic = header.topic
        return encode_message_ext(msg)

    async def _wait(self, header: PopMessageRequestHeader, ctx: RequestContext, free_at: int | None) -> None:
        """Until a message arrives on a queue the pop reads, an orderly batch that blocked one
        is acked or expires (`free_at`), or the poll time is over."""
        broker = self.broker
        group = header.consumer_group
        queues = [(header.topic, q) for q in read_queues(broker, header.topic, header.queue_id)]
        if not header.order:
            retry = pop_retry_topic(header.topic, group)
            queues += [(retry, q) for q in read_queues(broker, retry, -1)]
        until = header.born_time + header.poll_time
        if free_at is not None:
            until = min(until, free_at)
        await wait_for_messages(
            broker, ctx, broker.pop_queues.pops, (header.topic, group, header.queue_id), queues, until
        )


def read_queues(broker: BrokerParts, topic: str, queue_id: int) -> range:
    """The queue ids a request for `queue_id` (-1: all) of `topic` reads."""
    if queue_id >= 0:
        return range(queue_id, queue_id + 1)
    tc = broker.topics.get(topic)
    return range(tc.read_queue_nums if tc is not None else 0)


def polling_refusal(broker: BrokerParts, parked: int, born_time: int, poll_time: int) -> ResponseCode | None:
    """None to park a request that found nothing, else the code to answer it with now
    (PopLongPollingService.polling)."""
    if poll_time <= 0 or broker.waiters.closed:
        return ResponseCode.POLLING_TIMEOUT
    if parked >= broker.config.max_pop_polling_size:
        return ResponseCode.POLLING_FULL
    if broker.clock_ms() > born_time + poll_time - POLL_MARGIN_MS:
        return ResponseCode.POLLING_TIMEOUT
    return None


async def wait_for_messages(
    broker: BrokerParts,
    ctx: RequestContext,
    parked: Parked,
    key: Key,
    queues: list[tuple[str, int]],
    until: int,
) -> None:
    """Park a request on `queues` (their arrivals wake it) and under `key` in `parked`
    (orderly acks wake it) until `until`, clock ms."""
    arrived = trio.Event()
    timeout = max(0, until - broker.clock_ms()) / 1000
    for topic, queue_id in queues:
        broker.waiters.park(topic, queue_id, timeout, arrived.set)
    ctx.suspended = True
    parked.park(key, arrived.set)
    try:
        with trio.move_on_after(timeout):
            await arrived.wait()
    finally:
        parked.unpark(key, arrived.set)


def check_pop_target(
    broker: BrokerParts,
    ctx: RequestContext,
    request: RemotingCommand,
    topic: str,
    queue_id: int,
    group: str,
) -> RemotingCommand | None:
    """The refusal of a pop, peek or notification of `topic`'s queue `queue_id` (-1: all) by
    `group`, or None: the topic must exist and be readable, the queue be one of it, the group
    exist (created when allowed) and may consume."""
    tc = broker.topics.get(topic)
    if tc is None:
        return fail(
            request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {APPLY_TOPIC_URL}"
        )
    if not tc.readable:
        return fail(request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
    if queue_id >= tc.read_queue_nums:
        return fail(
            request,
            ResponseCode.INVALID_PARAMETER,
            f"queueId[{queue_id}] is illegal, topic:[{topic}] "
            f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{ctx.remote_address}]",
        )
    config = broker.subscriptions.find_or_create(group)
    if config is None:
        return fail(
            request,
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{group}] does not exist, {APPLY_TOPIC_URL}",
        )
    if not config.consume_enable:
        return fail(request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    return None


def _sql_matches(sql: SqlFilter, record: bytes) -> bool:
    try:
        return sql.matches(P.decode_properties(decode_record_meta(record).properties))
    except ProtocolError:
        return False


def _ack_of(header: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader, info: ExtraInfo) -> AckMsg:
    """The ack of the one message a header names, under the checkpoint its extraInfo names."""
    return AckMsg(
        header.offset,
        info.ck_queue_offset,
        header.consumer_group,
        header.topic,
        header.queue_id,
        info.pop_time,
        info.broker_name,
    )


class AckProcessor:
    """ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME: records appended to
    the revive queue the receipt handle names, or for an orderly pop's message (revive queue
    999) a change of its batch (order_info.py)."""

    CODES = (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.ACK_MESSAGE:
            return await self._ack(ctx, request)
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return await self._batch_ack(ctx, request)
        return await self._change_invisible_time(ctx, request)

    def _check_queue(
        self, ctx: RequestContext, request: RemotingCommand, topic: str, queue_id: int
    ) -> RemotingCommand | None:
        tc = self.broker.topics.get(topic)
        if tc is None:
            return fail(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{topic}] not exist, apply first please! {APPLY_TOPIC_URL}",
            )
        if not 0 <= queue_id < tc.read_queue_nums:
            return fail(
                request,
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                f"consumer:[{ctx.remote_address}]",
            )
        return None

    def _extra_info(self, request: RemotingCommand, text: str) -> ExtraInfo | RemotingCommand:
        info = ExtraInfo.parse(text)
        if not info.is_order and not 0 <= info.revive_qid < self.broker.config.revive_queue_num:
            return fail(request, ResponseCode.MESSAGE_ILLEGAL, f"extraInfo names revive queue {info.revive_qid}")
        return info

    async def _ack(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        header = AckMessageRequestHeader.from_ext(request.ext_fields)
        refused = self._check_queue(ctx, request, header.topic, header.queue_id)
        if refused is not None:
            return refused
        store = broker.message_store
        low = store.get_min_offset_in_queue(header.topic, header.queue_id)
        high = store.get_max_offset_in_queue(header.topic, header.queue_id)
        if not low <= header.offset <= high:
            return fail(
                request,
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{header.topic}@{header.queue_id}, commit:{header.offset}, store:{low}~{high}",
            )
        info = self._extra_info(request, header.extra_info)
        if isinstance(info, RemotingCommand):
            return info
        if info.is_order:
            illegal = await self._ack_orderly(
                ctx,
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.offset,
                info.pop_time,
                info.invisible_time,
            )
            return ok(request) if illegal is None else fail(request, ResponseCode.MESSAGE_ILLEGAL, illegal)
        ack = _ack_of(header, info)
        put = await append_ack(broker, ack, info.revive_qid)
        if not put.ok:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"cannot append the ack: {put.status.value}")
        return ok(request)

    async def _ack_orderly(
        self,
        ctx: RequestContext,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        pop_time: int,
        invisible_time: int,
    ) -> str | None:
        """Ack one message of an orderly batch: the group's offset moves to the batch's first
        unacked message, and pops waiting for the queue try again once nothing blocks it
        (ackOrderly). The refusal's remark when the batch has no such message, else None
        (also for a message the offset is past, or of an older batch: nothing to do)."""
        broker = self.broker
        if offset < broker.offsets.query(group, topic, queue_id):
            return None
        key = (topic, group, queue_id)
        locks = broker.pop_queues.locks
        await locks.lock(key)
        try:
            old = broker.offsets.query(group, topic, queue_id)
            if offset < old:
                return None
            next_offset = broker.order_info.commit_and_next(topic, group, queue_id, offset, pop_time)
            if next_offset == -1:
                return (
                    f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{offset}, "
                    f"next:{next_offset}, {ctx.remote_address}"
                )
            if next_offset >= 0:
                broker.offsets.commit(group, topic, queue_id, next_offset)
                if not broker.order_info.check_block(None, topic, group, queue_id, invisible_time):
                    broker.pop_queues.notify(topic, group, queue_id)
            return None
        finally:
            locks.unlock(key)

    async def _batch_ack(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        try:
            body = BatchAckMessageRequestBody.from_json(json_of(request, "BatchAckMessageRequestBody"))
        except BodyError as exc:
            return fail(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if not body.acks:
            return fail(request, ResponseCode.NO_MESSAGE, "no acks")
        store = broker.message_store
        for b in body.acks:
            try:
                topic = real_topic(b.topic, b.consumer_group, b.retry)
            except HeaderError as exc:
                return fail(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
            order = b.revive_queue_id == POP_ORDER_REVIVE_QUEUE
            if not order and not 0 <= b.revive_queue_id < broker.config.revive_queue_num:
                return fail(request, ResponseCode.MESSAGE_ILLEGAL, f"batch ack names revive queue {b.revive_queue_id}")
            low = store.get_min_offset_in_queue(topic, b.queue_id)
            high = store.get_max_offset_in_queue(topic, b.queue_id)
            offsets = tuple(o for o in (b.start_offset + i for i in sorted(b.bits)) if low <= o <= high)
            if not offsets:
                continue
            if order:
                for offset in offsets:
                    illegal = await self._ack_orderly(
                        ctx, b.consumer_group, topic, b.queue_id, offset, b.pop_time, b.invisible_time
                    )
                    if illegal is not None:
                        return fail(request, ResponseCode.MESSAGE_ILLEGAL, illegal)
                continue
            ack = AckMsg(-1, b.start_offset, b.consumer_group, topic, b.queue_id, b.pop_time, body.broker_name, offsets)
            put = await append_ack(broker, ack, b.revive_queue_id)
            if not put.ok:
                return fail(request, ResponseCode.SYSTEM_ERROR, f"cannot append the ack: {put.status.value}")
        return ok(request)

    async def _change_invisible_time(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """A new checkpoint for the one message from now on, then an ack of the old one."""
        broker = self.broker
        header = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        refused = self._check_queue(ctx, request, header.topic, header.queue_id)
        if refused is not None:
            return refused
        store = broker.message_store
        low = store.get_min_offset_in_queue(header.topic, header.queue_id)
        high = store.get_max_offset_in_queue(header.topic, header.queue_id)
        if not low <= header.offset < high:
            return fail(request, ResponseCode.NO_MESSAGE, f"offset {header.offset} is not in {low}~{high}")
        if header.invisible_time <= 0:
            return fail(request, ResponseCode.INVALID_PARAMETER, "invisibleTime must be > 0")
        info = self._extra_info(request, header.extra_info)
        if isinstance(info, RemotingCommand):
            return info
        if info.is_order:
            return ok(request, await self._change_invisible_time_orderly(header, info))
        now = broker.clock_ms()
        ck = PopCheckPoint(
            start_offset=header.offset,
            pop_time=now,
            invisible_time=header.invisible_time,
            num=1,
            queue_id=header.queue_id,
            topic=header.topic,
            cid=header.consumer_group,
            queue_offset_diff=(0,),
            broker_name=info.broker_name,
        )
        put = await append_checkpoint(broker, ck, info.revive_qid)
        if not put.ok:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"cannot append the checkpoint: {put.status.value}")
        ack = _ack_of(header, info)
        put = await append_ack(broker, ack, info.revive_qid)
        if not put.ok:  # the old checkpoint will revive it too: twice rather than never
            log.error("change invisible time: cannot append the ack of the old checkpoint: %s", put.status)
        ext = ChangeInvisibleTimeResponseHeader(now, header.invisible_time, info.revive_qid).to_ext()
        return ok(request, ext)

    async def _change_invisible_time_orderly(
        self, header: ChangeInvisibleTimeRequestHeader, info: ExtraInfo
    ) -> dict[str, str]:
        """An orderly batch's message stays invisible, and its queue blocked, until now +
        invisibleTime; the answer keeps the batch's pop time, so the new handle still acks
        it (processChangeInvisibleTimeForOrder). A message the group's offset is past
        changes nothing (an answer of zeros, as Java's)."""
        broker = self.broker
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        if header.offset < broker.offsets.query(group, topic, queue_id):
            return ChangeInvisibleTimeResponseHeader(0, 0, 0).to_ext()
        key = (topic, group, queue_id)
        locks = broker.pop_queues.locks
        await locks.lock(key)
        try:
            if header.offset < broker.offsets.query(group, topic, queue_id):
                return ChangeInvisibleTimeResponseHeader(0, 0, 0).to_ext()
            at = broker.clock_ms() + header.invisible_time
            broker.order_info.update_next_visible_time(topic, group, queue_id, header.offset, info.pop_time, at)
            return ChangeInvisibleTimeResponseHeader(info.pop_time, at - info.pop_time, info.revive_qid).to_ext()
        finally:
            locks.unlock(key)
