"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), CONSUMER_SEND_MSG_BACK (36).

What a RocketMQ 4.x broker does before a message reaches the store (PROTOCOL.md 3.1,
3.4): check the topic name and permissions, auto-create the topic from its template,
pick a queue, reroute `%RETRY%` messages that ran out of retries to `%DLQ%`, turn
transactional messages into half messages, park timer and delay-level messages in their
system topics (timer.py, schedule.py), stamp born/store hosts and the CLUSTER property;
then map the store's status to a response code.

Whether a request is a batch is decided by the `batch` / `m` header flag, never by the
code alone: the C++ client sends batches on code 10 with `"batch":"1"`.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq.later import Later
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.bodies.configs import TopicConfig
from rmq.protocol.constants import (
    PERM_READ,
    PERM_WRITE,
    RETRY_PREFIX,
    TOPIC_MAX_LENGTH,
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    dlq_topic,
    retry_topic,
    topic_error,
)
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendAnswer,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from rmq.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    MULTI_TAGS_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageDraft,
    decode_batch_items,
    decompress_body,
    redraft,
)
from rmq.store.append import IllegalBatch, batch_drafts
from rmq.store.results import PutMessageResult, PutMessageStatus

from ..routing import TimerRefused, half_message, route_delay, route_later, to_dead_letters
from ..stats import message_type
from ..topics import NOT_ALLOWED_SEND_TOPICS
from .common import fail, host_port, ok

if TYPE_CHECKING:
    from rmq.protocol.bodies.configs import SubscriptionGroupConfig
    from rmq.remoting.abc import RequestContext
    from rmq.store.aio import PutWait

    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.send")

V3_4_9 = 73  # from this client version on, the header's maxReconsumeTimes is honoured
APPLY_TOPIC_URL = "http://rocketmq.apache.org/docs/faq/"

SERVICE_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full, messages are put to the slave, message store has been shut down, etc."
)
MESSAGE_ILLEGAL_REMARK = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit 128k, msg properties length limit 32k."
)

# store status → (response code, remark); None remark = use the store's own
_PUT_CODES: dict[PutMessageStatus, tuple[int, str | None]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL, MESSAGE_ILLEGAL_REMARK),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL, MESSAGE_ILLEGAL_REMARK),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, SERVICE_NOT_AVAILABLE_REMARK),
    PutMessageStatus.OS_PAGECACHE_BUSY: (
        ResponseCode.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


_TIMER_MARKS = P.property_marks(P.TIMER_KEYS)
_LATER_KEYS = frozenset((P.DELAY, *P.TIMER_KEYS))  # what `_route_later` may act on
_CACHE_LIMIT = 4096  # entries of SendProcessor's small caches before they start again


def _timer_item(properties: bytes) -> bool:
    """Whether a batch item's encoded properties ask for a delivery time."""
    return P.may_have(properties, _TIMER_MARKS) and any(k in P.decode_properties(properties) for k in P.TIMER_KEYS)


class Refused(Exception):
    """A send check failed: answer `code` with `remark`."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(slots=True)
class Destination:
    """Where a message goes after topic checks, retry/DLQ rerouting and queue choice."""

    topic: str
    queue_id: int
    config: TopicConfig


class SendProcessor:
    CODES = (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    )

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        # what a plain send would otherwise work out again each time: topic names that pass
        # the name checks (a pure function of the name), and "ip:port" → (ip, port)
        self._good_topics: set[str] = set()
        self._hosts: dict[str, tuple[str, int]] = {}

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        rest = self.begin(ctx, request)
        return rest if isinstance(rest, RemotingCommand) else await rest

    def begin(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        """Check and append now, without a checkpoint, so that the sends of one connection
        are stored in the order they came (the dispatcher calls this in the reader).

        Returns the response, or an awaitable of it when a flush (or slave) is waited for.
        """
        if request.code == RequestCode.CONSUMER_SEND_MSG_BACK:
            return self._send_back_refusals(self.send_back(ctx, request), request)
        if request.code == RequestCode.SEND_MESSAGE:
            header = SendMessageRequestHeader.from_ext(request.ext_fields)
        else:
            header = SendMessageRequestHeader.from_v2_ext(request.ext_fields)
        return self._begin_send(ctx, request, header)

    def _begin_send(self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader) -> Any:
        """`begin` once the header is parsed."""
        try:
            if header.batch:
                queue_id, result = self.send_batch(ctx, request, header)
                kind = message_type(header.properties or "")
            else:  # draft_one works out the kind from the properties it decodes anyway
                queue_id, draft, kind = self.draft_one(ctx, request, header)
                result = self.broker.store.put_now(draft)
        except Refused as refused:
            return fail(request, refused.code, refused.remark)
        if isinstance(result, PutMessageResult):
            return self._respond(request, result, header.topic, queue_id, kind)
        return self._respond_later(request, result, header.topic, queue_id, kind)

    def begin_many(self, jobs: list[tuple[RequestContext, RemotingCommand]]) -> list[Any]:
        """`begin` for sends that came in one read, in their order: the plain ones are
        checked one by one and their messages appended together (``put_group_now``: one write,
        one dispatch, one group-commit wait), each answered with its own result; any other
        request starts on its own, after the plain ones before it are stored. What a request
        raises is its outcome in the list (the route answers it as a failed processor's)."""
        out: list[Any] = [None] * len(jobs)
        drafts: list[MessageDraft] = []
        waiting: list[tuple[int, RemotingCommand, str, int, str]] = []  # (index, request, topic, queue, kind)
        plain = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE)
        for n, (ctx, request) in enumerate(jobs):
            header = None
            if request.code in plain:
                try:
                    if request.code == RequestCode.SEND_MESSAGE_V2:
                        header = SendMessageRequestHeader.from_v2_ext(request.ext_fields)
                    else:
                        header = SendMessageRequestHeader.from_ext(request.ext_fields)
                    if not header.batch:
                        queue_id, draft, kind = self.draft_one(ctx, request, header)
                        drafts.append(draft)
                        waiting.append((n, request, header.topic, queue_id, kind))
                        continue
                except Refused as refused:
                    out[n] = fail(request, refused.code, refused.remark)
                    continue
                except Exception as exc:  # noqa: BLE001 - answered as a failed processor's (Route.start_many)
                    out[n] = exc
                    continue
            if drafts:
                self._put_group(drafts, waiting, out)
                drafts, waiting = [], []
            try:  # a batch (its header parsed above) or a send-back
                out[n] = self.begin(ctx, request) if header is None else self._begin_send(ctx, request, header)
            except Exception as exc:  # noqa: BLE001 - as above
                out[n] = exc
        if drafts:
            self._put_group(drafts, waiting, out)
        return out

    def _put_group(
        self, drafts: list[MessageDraft], waiting: list[tuple[int, RemotingCommand, str, int, str]], out: list[Any]
    ) -> None:
        results = self.broker.store.put_group_now(drafts)
        for (n, request, topic, queue_id, kind), result in zip(waiting, results, strict=True):
            try:
                if isinstance(result, PutMessageResult):
                    out[n] = self._respond(request, result, topic, queue_id, kind)
                else:
                    out[n] = self._respond_later(request, result, topic, queue_id, kind)
            except Exception as exc:  # noqa: BLE001 - as in begin_many
                out[n] = exc

    def _respond_later(self, request: RemotingCommand, waiting: PutWait, topic: str, queue_id: int, kind: str) -> Later:
        """The answer once the store's wait (flush, slave, group commit) is over: built in
        the task that ended it, with no task of its own."""
        # an exception from _respond is answered as a failed processor's
        waiting.map(lambda result: self._respond(request, result, topic, queue_id, kind))
        return waiting

    @staticmethod
    async def _send_back_refusals(work: Any, request: RemotingCommand) -> RemotingCommand:
        try:
            return await work  # type: ignore[no-any-return]
        except Refused as refused:
            return fail(request, refused.code, refused.remark)

    # -- checks shared by single and batch sends ------------------------------------------

    def check(self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader) -> TopicConfig:
        """msgCheck: broker state, topic name and permission, auto-create, queue id."""
        broker = self.broker
        config = broker.config
        if config.is_slave:
            raise Refused(ResponseCode.SERVICE_NOT_AVAILABLE, SERVICE_NOT_AVAILABLE_REMARK)
        if not config.broker_permission & PERM_WRITE:
            raise Refused(ResponseCode.NO_PERMISSION, f"the broker[{config.broker_ip1}] sending message is forbidden")
        topic = header.topic
        if topic not in self._good_topics:
            why = topic_error(topic)
            if why is not None:
                raise Refused(ResponseCode.SYSTEM_ERROR, why)
            if topic in NOT_ALLOWED_SEND_TOPICS:
                raise Refused(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
            if len(self._good_topics) >= _CACHE_LIMIT:
                self._good_topics.clear()
            self._good_topics.add(topic)
        tc = broker.topics.get(topic)
        if tc is None:
            retry = topic.startswith(RETRY_PREFIX)
            sys_flag = (TOPIC_SYS_FLAG_UNIT_SUB if retry else TOPIC_SYS_FLAG_UNIT) if header.unit_mode else 0
            tc = broker.topics.create_in_send(topic, header.default_topic, header.default_topic_queue_nums, sys_flag)
            if tc is None and retry:
                tc = broker.topics.create_if_absent(topic, 1, PERM_READ | PERM_WRITE, sys_flag)
            if tc is None:
                raise Refused(
                    ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {APPLY_TOPIC_URL}"
                )
        if not tc.writable:
            raise Refused(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        limit = max(tc.read_queue_nums, tc.write_queue_nums)
        if header.queue_id >= limit:
            raise Refused(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, {tc} Producer: {ctx.remote_address}",
            )
        return tc

    def choose_queue(self, tc: TopicConfig, queue_id: int) -> int:
        if queue_id >= 0:
            return queue_id
        if tc.write_queue_nums <= 0:
            raise Refused(ResponseCode.SYSTEM_ERROR, f"topic[{tc.topic_name}] has no writable queue")
        return random.randrange(tc.write_queue_nums)

    def _group(self, group: str) -> SubscriptionGroupConfig:
        config = self.broker.subscriptions.find_or_create(group)
        if config is None:
            raise Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        return config

    def _dlq(self, group: str) -> TopicConfig:
        return self.broker.topics.create_if_absent(dlq_topic(group), 1, PERM_READ | PERM_WRITE)

    @staticmethod
    def _max_reconsume_times(request: RemotingCommand, group: SubscriptionGroupConfig, asked: int | None) -> int:
        """The client's maxReconsumeTimes if it is new enough to send one, else the group's."""
        if request.version >= V3_4_9 and asked is not None:
            return asked
        return group.retry_max_times

    def _retry_or_dlq(self, request: RemotingCommand, header: SendMessageRequestHeader, dest: Destination) -> None:
        """A `%RETRY%` message that used up its retries goes to the group's DLQ."""
        if not dest.topic.startswith(RETRY_PREFIX):
            return
        group = dest.topic[len(RETRY_PREFIX) :]
        max_times = self._max_reconsume_times(request, self._group(group), header.max_reconsume_times)
        if to_dead_letters(header.reconsume_times or 0, max_times):
            self.broker.stats.count_dlq(group, dest.topic)
            dest.config = self._dlq(group)
            dest.topic, dest.queue_id = dest.config.topic_name, 0

    # -- single message -------------------------------------------------------------------

    def draft_one(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[int, MessageDraft, str]:
        """Check one message and make its draft: (the queue picked, the draft, its
        ``message_type``).

        Raises:
            Refused: a check failed.
        """
        broker = self.broker
        tc = self.check(ctx, request, header)
        if len(request.body) > broker.config.max_message_size:
            raise Refused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size over max value, MAX: {broker.config.max_message_size}",
            )
        queue_id = self.choose_queue(tc, header.queue_id)
        props = P.decode_properties(header.properties or "")
        topic, sys_flag = header.topic, header.sys_flag
        if topic.startswith(RETRY_PREFIX) or P.TRAN_MSG in props or not props.keys().isdisjoint(_LATER_KEYS):
            dest = Destination(topic, queue_id, tc)
            self._retry_or_dlq(request, header, dest)
            if dest.config.topic_filter_type == "MULTI_TAG":
                sys_flag |= MULTI_TAGS_FLAG
            if props.get(P.TRAN_MSG) == "true":
                if broker.config.reject_transaction_message:
                    raise Refused(
                        ResponseCode.NO_PERMISSION,
                        f"the broker[{broker.config.broker_ip1}] sending transaction message is forbidden",
                    )
                dest, sys_flag = self._half_message(props, dest, sys_flag)
            else:
                self._route_later(dest, props)
            topic, put_queue = dest.topic, dest.queue_id
            kind = message_type(header.properties or "")
        else:  # most sends: stored where they were sent, as they came
            if tc.topic_filter_type == "MULTI_TAG":
                sys_flag |= MULTI_TAGS_FLAG
            put_queue = queue_id
            # message_type, from the properties at hand: no TRAN_MSG, DELAY or TIMER_* here
            kind = "fifo" if P.SHARDING_KEY in props else "normal"
        wait = props.pop(P.WAIT, None) != "false"  # not stored (saves 9 bytes), but obeyed
        props[P.CLUSTER] = broker.config.broker_cluster_name
        address = ctx.remote_address
        born_host = self._hosts.get(address)
        if born_host is None:
            if len(self._hosts) >= _CACHE_LIMIT:
                self._hosts.clear()
            born_host = self._hosts[address] = host_port(address)
        # positionally, in MessageDraft's field order: a third of the keyword call's cost, per send
        draft = MessageDraft._make(
            (topic, put_queue, request.body, header.flag, props, sys_flag, header.born_timestamp, born_host,
             broker.store_host, header.reconsume_times or 0, 0, None, wait)
        )  # fmt: skip
        return queue_id, draft, kind

    def _route_later(self, dest: Destination, props: dict[str, str]) -> None:
        """Timer and delay-level messages wait in their system topics until due
        (``routing.route_later``)."""
        if props.keys().isdisjoint(_LATER_KEYS):  # most messages: no clock read, no lookups
            return
        config = self.broker.config
        try:
            dest.topic, dest.queue_id = route_later(
                dest.topic,
                dest.queue_id,
                props,
                now_ms=self.broker.clock_ms(),
                timer_wheel=config.timer_wheel_enable,
                max_delay_sec=config.timer_max_delay_sec,
                levels=len(config.delay_levels_ms),
            )
        except TimerRefused as exc:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None

    def _half_message(self, props: dict[str, str], dest: Destination, sys_flag: int) -> tuple[Destination, int]:
        """A prepared transactional message becomes a half message (``routing.half_message``)."""
        topic, queue_id, sys_flag = half_message(dest.topic, dest.queue_id, props, sys_flag)
        half = self.broker.topics.create_if_absent(topic, 1, PERM_READ | PERM_WRITE)
        return Destination(topic, queue_id, half), sys_flag

    # -- batch ----------------------------------------------------------------------------

    def send_batch(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[int, Any]:
        """Store a batch: (the queue picked, which RocketMQ answers; the PutMessageResult
        or an awaitable of it, see `begin`)."""
        broker = self.broker
        tc = self.check(ctx, request, header)
        topic = header.topic
        if len(topic) > TOPIC_MAX_LENGTH:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}")
        if topic.startswith(RETRY_PREFIX):
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        if header.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        sys_flag = header.sys_flag
        try:
            body = request.body
            if sys_flag & COMPRESSED_FLAG:
                # The C++ client zlib-compresses a whole batch body past 4 KiB; its items are
                # stored uncompressed, each as the plain message it is.
                body = decompress_body(body, sys_flag, max_size=broker.config.max_message_size)
                sys_flag &= ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)
            messages = decode_batch_items(body)
        except ProtocolError as exc:
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from None
        if (
            broker.config.timer_wheel_enable
            and P.may_any_have((m.properties for m in messages), _TIMER_MARKS)
            and any(_timer_item(m.properties) for m in messages)
        ):
            raise Refused(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be timer messages")
        queue_id = self.choose_queue(tc, header.queue_id)
        extra = P.decode_properties(header.properties or "")
        wait = extra.pop(P.WAIT, None) != "false"
        extra[P.CLUSTER] = broker.config.broker_cluster_name
        head = MessageDraft(
            topic,
            queue_id,
            b"",
            properties=extra,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=host_port(ctx.remote_address),
            store_host=broker.store_host,
            reconsume_times=header.reconsume_times or 0,
            wait=wait,
        )
        try:
            drafts = batch_drafts(head, messages)
        except IllegalBatch as exc:
            return queue_id, PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
        return queue_id, broker.store.put_many_now(drafts)

    def _respond(
        self, request: RemotingCommand, result: PutMessageResult, topic: str, queue_id: int, kind: str = "normal"
    ) -> RemotingCommand:
        code, remark = _PUT_CODES.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        if not result.ok:
            detail = f"{remark} ({result.remark})" if remark and result.remark else (remark or result.remark)
            return fail(request, code, detail or result.status.value)
        self.broker.stats.count_in(topic, max(result.msg_num, 1), len(request.body or b""), kind)
        config = self.broker.config
        header = SendMessageResponseHeader(
            msg_id=result.msg_id,
            queue_id=queue_id,
            queue_offset=result.queue_offset,
            msg_region=config.region_id,
            trace_on="true" if config.trace_on else "false",
        )
        return SendAnswer.to(request, code, header, remark)

    # -- CONSUMER_SEND_MSG_BACK -----------------------------------------------------------

    async def send_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """A consumer failed a message: send a copy to `%RETRY%<group>` through delay level
        `delayLevel` (0: 3 + reconsumeTimes, as RocketMQ does), or to `%DLQ%<group>` at once
        when it has been retried maxReconsumeTimes times (or delayLevel < 0)."""
        broker = self.broker
        header = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        group_config = self._group(header.group)
        if not broker.config.broker_permission & PERM_WRITE:
            raise Refused(
                ResponseCode.NO_PERMISSION, f"the broker[{broker.config.broker_ip1}] sending message is forbidden"
            )
        if group_config.retry_queue_nums <= 0:
            return ok(request)  # the group asked for no retries: drop it
        msg = broker.message_store.look_message_by_offset(header.offset)
        if msg is None:
            raise Refused(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        props = dict(msg.properties)
        origin_topic = props.setdefault(P.RETRY_TOPIC, msg.topic)
        max_times = self._max_reconsume_times(request, group_config, header.max_reconsume_times)
        props.pop(P.WAIT, None)
        props.pop(P.DELAY, None)
        if to_dead_letters(msg.reconsume_times, max_times, header.delay_level):
            broker.stats.count_dlq(header.group, header.origin_topic or origin_topic)
            topic, queue_id = self._dlq(header.group).topic_name, 0
        else:
            topic = retry_topic(header.group)
            tc = broker.topics.create_if_absent(topic, group_config.retry_queue_nums, PERM_READ | PERM_WRITE)
            queue_id = random.randrange(max(tc.write_queue_nums, 1))
            level = header.delay_level or 3 + msg.reconsume_times
            props[P.DELAY] = str(level)
            topic, queue_id = route_delay(topic, queue_id, props, len(broker.config.delay_levels_ms))
        if not props.get(P.ORIGIN_MESSAGE_ID):
            props[P.ORIGIN_MESSAGE_ID] = msg.offset_msg_id
        props[P.CLUSTER] = broker.config.broker_cluster_name
        result = await broker.store.put(
            redraft(
                msg,
                topic=topic,
                queue_id=queue_id,
                properties=props,
                store_host=broker.store_host,
                reconsume_times=msg.reconsume_times + 1,
                wait=True,
            )
        )
        if not result.ok:
            code, remark = _PUT_CODES.get(result.status, (ResponseCode.SYSTEM_ERROR, None))
            return fail(request, code, remark or result.remark or result.status.value)
        log.debug("message %s of %s sent back to %s for group %s", msg.msg_id, origin_topic, topic, header.group)
        broker.stats.put_total += 1
        return ok(request)
