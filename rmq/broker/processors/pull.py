"""PULL_MESSAGE (11) with long polling (PROTOCOL.md 3.2, DESIGN.md 2.4).

A pull that finds nothing new and carries the SUSPEND flag is parked (long_polling.py): it
waits for a message on its queue for up to `suspendTimeoutMillis` (or for
`shortPollingTimeMills` when long polling is off), then runs once more without suspension
and answers whatever that finds (19 if still nothing). The store read and the `park` that
registers the wait are both synchronous, with no await between them, so an arrival cannot
slip into the gap.

Master/slave groups (PullMessageProcessor): only a master takes the offset a pull carries
with COMMIT_OFFSET; a slave ignores it. A slave asked for an offset it does not hold (it
lags its master, or its log starts later) answers PULL_RETRY_IMMEDIATELY at the same
offset instead of PULL_OFFSET_MOVED, and points the consumer at the group's brokerId.
suggestWhichBrokerId is the master unless slaveReadEnable: then a consumer reading further
behind the CommitLog's end than accessMessageInMemoryMaxRatio of memory is sent to the
group's whichBrokerWhenConsumeSlowly (1), any other to the group's brokerId (0).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.later import Later
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.bodies.heartbeat import SubscriptionData
from rmq.protocol.constants import (
    EXPRESSION_SQL92,
    MASTER_ID,
    PERM_READ,
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
)
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rmq.protocol.message import decode_record_meta
from rmq.store.results import GetMessageResult, GetMessageStatus

from ..filter import SqlFilter, SqlFilterError, compile_sql92
from .common import fail
from .send import APPLY_TOPIC_URL

if TYPE_CHECKING:
    from rmq.protocol.bodies.configs import SubscriptionGroupConfig
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.pull")

# PullSysFlag bits

NO_NEW_MESSAGE = "No new message"

# store status → response code, where it does not depend on the request
_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
# statuses of a read that went through consume queue entries
_SCANNED = (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING)
# statuses answered PULL_OFFSET_MOVED (21) by a master, PULL_RETRY_IMMEDIATELY by a slave
_MOVED = (
    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    GetMessageStatus.OFFSET_TOO_SMALL,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE,
)


class PullProcessor:
    CODES = (RequestCode.PULL_MESSAGE,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        rest = self.begin(ctx, request)
        return await rest if isinstance(rest, Later) else rest

    def begin(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | Later:
        """Serve the pull now, or park it: a Later answered when a message arrives on its
        queue or its suspend time is over, with no task waiting for it (see long_polling)."""
        broker = self.broker
        header = PullMessageRequestHeader.from_ext(request.ext_fields)
        checked = self._check(ctx, request, header)
        if isinstance(checked, RemotingCommand):
            # clients read the four offsets of every pull answer; an error leaves them as asked
            store = broker.message_store
            checked.ext_fields = PullMessageResponseHeader(
                MASTER_ID,
                header.queue_offset,
                store.get_min_offset_in_queue(header.topic, header.queue_id),
                store.get_max_offset_in_queue(header.topic, header.queue_id),
            ).to_ext()
            return checked
        sub, group_config, sql = checked
        response = self._pull(request, header, sub, group_config, sql)
        if header.sys_flag & PULL_COMMIT_OFFSET and not broker.config.is_slave:
            broker.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        if response.code != ResponseCode.PULL_NOT_FOUND or not header.sys_flag & PULL_SUSPEND:
            return response
        # Park: no await between the read above and `park`, so no arrival is missed.
        later = Later()
        ctx.suspended = True

        def again() -> None:  # the queue got a message, or the time is over: read once more
            if ctx.connection.closed:  # nobody to answer: leave the messages to the next pull
                later.settle(None)
            else:  # an exception is answered as a failed processor's
                later.settle_call(lambda: self._pull(request, header, sub, group_config, sql))

        if broker.config.long_polling_enable:
            timeout = max(0, header.suspend_timeout_millis) / 1000  # Java treats < 0 as 0
            broker.waiters.park(header.topic, header.queue_id, timeout, again)
        else:
            broker.waiters.park(header.topic, None, broker.config.short_polling_time_mills / 1000, again)
        return later

    def _check(
        self, ctx: RequestContext, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> RemotingCommand | tuple[SubscriptionData, SubscriptionGroupConfig, SqlFilter | None]:
        """Permissions, group, topic, queue id and subscription; an error response or what to pull with."""
        broker = self.broker
        config = broker.config
        if not config.broker_permission & PERM_READ:
            return fail(
                request, ResponseCode.NO_PERMISSION, f"the broker[{config.broker_ip1}] pulling message is forbidden"
            )
        group = header.consumer_group
        group_config = broker.subscriptions.find_or_create(group)
        if group_config is None:
            return fail(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist, {APPLY_TOPIC_URL}",
            )
        if not group_config.consume_enable:
            return fail(request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        tc = broker.topics.get(header.topic)
        if tc is None:
            return fail(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please! {APPLY_TOPIC_URL}",
            )
        if not tc.readable:
            return fail(request, ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden")
        if not 0 <= header.queue_id < tc.read_queue_nums:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{ctx.remote_address}]",
            )
        if header.sys_flag & PULL_SUBSCRIPTION:
            sub = SubscriptionData.build(header.topic, header.subscription, header.sub_version, header.expression_type)
        else:
            info = broker.clients.consumer_group(group)
            if info is None:
                return fail(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's group info not exist {APPLY_TOPIC_URL}",
                )
            if not group_config.consume_broadcast_enable and info.message_model == "BROADCASTING":
                return fail(
                    request, ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
                )
            found = info.subscriptions.get(header.topic)
            if found is None:
                return fail(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist {APPLY_TOPIC_URL}",
                )
            if found.sub_version < header.sub_version:
                return fail(request, ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            sub = found
        if sub.is_tag_type:
            return sub, group_config, None
        if not config.enable_property_filter or sub.expression_type != EXPRESSION_SQL92:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        try:
            return sub, group_config, compile_sql92(sub.sub_string)
        except SqlFilterError as exc:
            return fail(
                request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
            )

    def _pull(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        sub: SubscriptionData,
        group_config: SubscriptionGroupConfig,
        sql: SqlFilter | None = None,
    ) -> RemotingCommand:
        """Read the queue once and build the response (never parks)."""
        broker = self.broker
        result = broker.message_store.get_message(
            header.topic,
            header.queue_id,
            header.queue_offset,
            header.max_msg_nums,
            max_bytes=header.max_msg_bytes,
            tags_codes=None if sub.matches_all or sql else sub.code_set,
        )
        if sql is not None and result.records:
            _filter_records(result, sql)
        code, next_offset = self._code(header, result)
        if code == ResponseCode.PULL_RETRY_IMMEDIATELY and result.status in _MOVED:
            # a slave does not correct offsets (it may lag its master): "retry" at the same
            # offset, and go back to the group's broker (PullMessageProcessor)
            suggest = group_config.broker_id
        else:
            suggest = self._suggest(header, result, group_config)
        ext = PullMessageResponseHeader(
            suggest_which_broker_id=suggest,
            next_begin_offset=next_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        ).to_ext()
        if code == ResponseCode.SUCCESS:
            broker.stats.count_out(
                header.consumer_group,
                header.topic,
                header.queue_id,
                result.message_count,
                result.buffer_total_size,
                next_offset,
            )
            return request.make_response(code, result.status.value, ext, result.body)
        remark = NO_NEW_MESSAGE if code == ResponseCode.PULL_NOT_FOUND else result.status.value
        return request.make_response(code, remark, ext)

    def _suggest(
        self, header: PullMessageRequestHeader, result: GetMessageResult, group_config: SubscriptionGroupConfig
    ) -> int:
        """suggestWhichBrokerId: the master, unless slaveReadEnable. Then a consumer reading
        further behind the CommitLog's end than accessMessageInMemoryMaxRatio of memory (its
        reads come from disk) is sent to the group's whichBrokerWhenConsumeSlowly, sparing
        the master's page cache, and any other to the group's brokerId. As RocketMQ's
        getMessage, the distance is measured at the last consume queue entry the read went
        through, whether its message was returned or filtered out."""
        broker = self.broker
        if not broker.config.slave_read_enable:
            return MASTER_ID
        lagging = result.suggest_pulling_from_slave
        if not lagging and result.status in _SCANNED and result.next_begin_offset > header.queue_offset:
            lagging = broker.is_in_disk(header.topic, header.queue_id, result.next_begin_offset - 1)
        return group_config.which_broker_when_consume_slowly if lagging else group_config.broker_id

    def _code(self, header: PullMessageRequestHeader, result: GetMessageResult) -> tuple[int, int]:
        """(response code, nextBeginOffset) per the table in PROTOCOL.md 3.2."""
        status = result.status
        if status in _EMPTY_QUEUE:
            code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _CODES[status]
        next_offset = result.next_begin_offset
        if code == ResponseCode.PULL_OFFSET_MOVED and self.broker.config.is_slave:
            # a slave may lag its master: let the client retry rather than reset its offset
            return ResponseCode.PULL_RETRY_IMMEDIATELY, header.queue_offset
        return code, next_offset


def _filter_records(result: GetMessageResult, sql: SqlFilter) -> None:
    """Keep the records whose properties match `sql`; none left is NO_MATCHED_MESSAGE (the
    client re-pulls from nextBeginOffset at once)."""
    kept, offsets = [], []
    for record, offset in zip(result.records, result.queue_offsets, strict=True):
        try:
            props = P.decode_properties(decode_record_meta(record).properties)
        except ProtocolError:
            continue
        if sql.matches(props):
            kept.append(record)
            offsets.append(offset)
    result.records, result.queue_offsets = kept, offsets
    if not kept:
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
