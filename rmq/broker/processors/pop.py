"""POP consumption (RocketMQ 5.x, RIP-19): POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME (docs/pop.md).

A pop takes up to maxMsgNums messages of a group from one queue of a topic, or from all of
them (queueId -1, starting at a random one), and from the group's POP retry topic: first
in popFromRetryProbability % of pops, else after the topic when the topic left room. For
each queue it read it appends a checkpoint to a revive queue (revive.py) and then moves the
group's offset past what it read, so the next pop gets the next messages; the checkpoint
brings back after invisibleTime whatever is not acked by then. One pop of a (topic, group,
queue) at a time: a pop that finds the queue busy skips it, so two consumers of a group
never get the same message while it is invisible.

A pop that finds nothing waits for a message on the queues it read until bornTime +
pollTime, then answers POLLING_TIMEOUT (also at once with pollTime 0); beyond
maxPopPollingSize waiting pops it answers POLLING_FULL.

Orderly pops (order=true), PEEK_MESSAGE, NOTIFICATION and POLLING_INFO are not served yet.
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
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    offset_info,
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


@dataclass(frozen=True)
class _Filter:
    tags: frozenset[int] | None  # consume-queue tag codes, None: all
    sql: SqlFilter | None


class PopProcessor:
    CODES = (RequestCode.POP_MESSAGE,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self._busy: set[tuple[str, str, int]] = set()  # (topic, group, queue) being popped
        self._ck_number = itertools.count()
        self.polling = 0  # pops waiting for messages

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
                refusal = self._polling(header)
                if refusal is None:  # park: no await between the reads above and the parks
                    await self._wait(header, ctx)
                    if not broker.waiters.closed:
                        continue
                    refusal = ResponseCode.POLLING_TIMEOUT
                code = refusal
            start_info, msg_info = offset_info(popped.read) if popped.read else ("", "")
            ext = PopMessageResponseHeader(
                pop_time, header.invisible_time, revive_qid, popped.rest, start_info, msg_info
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
        if header.order:
            return fail(request, ResponseCode.SYSTEM_ERROR, "orderly POP (order=true) is not supported by this broker")
        tc = broker.topics.get(header.topic)
        if tc is None:
            return fail(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please! {APPLY_TOPIC_URL}",
            )
        if not tc.readable:
            return fail(request, ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.queue_id >= tc.read_queue_nums:
            return fail(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{ctx.remote_address}]",
            )
        group = broker.subscriptions.find_or_create(header.consumer_group)
        if group is None:
            return fail(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist, {APPLY_TOPIC_URL}",
            )
        if not group.consume_enable:
            return fail(
                request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )
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
        revive_qid = next(self._ck_number) % config.revive_queue_num
        popped = _Popped(header.max_msg_nums)
        retry = pop_retry_topic(header.topic, header.consumer_group)
        start = random.randrange(100)
        retry_first = start < config.pop_from_retry_probability
        if retry_first:
            await self._pop_topic(retry, True, header, popped, pop_time, revive_qid, filt, start)
        tc = broker.topics.get(header.topic)
        if header.queue_id < 0 and tc is not None:
            await self._pop_topic(header.topic, False, header, popped, pop_time, revive_qid, filt, start)
        elif tc is not None:
            await self._pop_queue(header.topic, header.queue_id, False, header, popped, pop_time, revive_qid, filt)
        if not retry_first and len(popped.records) < popped.want:
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
        offset = self._offset(topic, group, queue_id, header.init_mode)
        if key in self._busy or len(popped.records) >= popped.want:
            popped.rest += max(0, store.get_max_offset_in_queue(topic, queue_id) - offset)
            return
        self._busy.add(key)
        try:
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
                ck = PopCheckPoint(
                    start_offset=offset,
                    pop_time=pop_time,
                    invisible_time=header.invisible_time,
                    num=len(records),
                    queue_id=queue_id,
                    topic=topic,
                    cid=group,
                    queue_offset_diff=tuple(o - offset for o in offsets),
                    broker_name=broker.config.broker_name,
                )
                put = await append_checkpoint(broker, ck, revive_qid)
                if not put.ok:  # without its checkpoint a message could be lost: leave it
                    log.error("pop: cannot append the checkpoint of %s queue %d: %s", topic, queue_id, put.status)
                    popped.rest += result.max_offset - offset
                    return
                broker.stats.count_out(group, topic, queue_id, len(records), sum(map(len, records)), offset)
                if is_retry:
                    records = [self._as_origin(r, header, offset, pop_time, revive_qid) for r in records]
                popped.records.extend(records)
                popped.read.append((topic, queue_id, offsets))
            if result.next_begin_offset > offset:  # popped, or filtered out: this group is past them
                broker.offsets.commit(group, topic, queue_id, result.next_begin_offset)
            popped.rest += max(0, result.max_offset - result.next_begin_offset)
        finally:
            self._busy.discard(key)

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

    def _polling(self, header: PopMessageRequestHeader) -> ResponseCode | None:
        """None to park the pop, else the code to answer it with now."""
        if header.poll_time <= 0 or self.broker.waiters.closed:
            return ResponseCode.POLLING_TIMEOUT
        if self.polling >= self.broker.config.max_pop_polling_size:
            return ResponseCode.POLLING_FULL
        if self.broker.clock_ms() > header.born_time + header.poll_time - POLL_MARGIN_MS:
            return ResponseCode.POLLING_TIMEOUT
        return None

    async def _wait(self, header: PopMessageRequestHeader, ctx: RequestContext) -> None:
        """Until a message arrives on a queue the pop reads, or its poll time is over."""
        broker = self.broker
        arrived = trio.Event()
        timeout = max(0, header.born_time + header.poll_time - broker.clock_ms()) / 1000
        queues = [(header.topic, q) for q in self._queues(header.topic, header.queue_id)]
        retry = pop_retry_topic(header.topic, header.consumer_group)
        queues += [(retry, q) for q in self._queues(retry, -1)]
        for topic, queue_id in queues:
            broker.waiters.park(topic, queue_id, timeout, arrived.set)
        ctx.suspended = True
        self.polling += 1
        try:
            with trio.move_on_after(timeout):
                await arrived.wait()
        finally:
            self.polling -= 1

    def _queues(self, topic: str, queue_id: int) -> range:
        if queue_id >= 0:
            return range(queue_id, queue_id + 1)
        tc = self.broker.topics.get(topic)
        return range(tc.read_queue_nums if tc is not None else 0)


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
    the revive queue the receipt handle names."""

    CODES = (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE, RequestCode.CHANGE_MESSAGE_INVISIBLETIME)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.ACK_MESSAGE:
            return await self._ack(ctx, request)
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return await self._batch_ack(request)
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
        if info.is_order:
            return fail(request, ResponseCode.SYSTEM_ERROR, "orderly POP is not supported by this broker")
        if not 0 <= info.revive_qid < self.broker.config.revive_queue_num:
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
        ack = _ack_of(header, info)
        put = await append_ack(broker, ack, info.revive_qid)
        if not put.ok:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"cannot append the ack: {put.status.value}")
        return ok(request)

    async def _batch_ack(self, request: RemotingCommand) -> RemotingCommand:
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
            if not 0 <= b.revive_queue_id < broker.config.revive_queue_num:
                return fail(request, ResponseCode.MESSAGE_ILLEGAL, f"batch ack names revive queue {b.revive_queue_id}")
            low = store.get_min_offset_in_queue(topic, b.queue_id)
            high = store.get_max_offset_in_queue(topic, b.queue_id)
            offsets = tuple(o for o in (b.start_offset + i for i in sorted(b.bits)) if low <= o <= high)
            if not offsets:
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
