"""Client registration and consumer coordination (ClientManageProcessor, ConsumerManageProcessor).

HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG, GET_CONSUMER_LIST_BY_GROUP,
QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
(PROTOCOL.md 3.3, 3.6). A heartbeat whose SQL92 subscription does not parse is refused
whole with SUBSCRIPTION_PARSE_FAILED, so the consumer hears about it at subscribe time.

A heartbeat may name thousands of groups: it is read and handled in steps of at most
STEP seconds with a turn for the other connections between, and it creates at most
NEW_GROUPS_PER_REQUEST groups (and their retry topics). Every consumer in it is
registered; a group left over is created by the client's next heartbeat (every 30 s) or
by its first pull, and the broker logs a WARNING naming them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from rmq.protocol import RemoteProtocolError, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies.clients import (
    CheckClientRequestBody,
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmq.protocol.bodies.heartbeat import HeartbeatData, SubscriptionData, read_heartbeat
from rmq.protocol.constants import EXPRESSION_SQL92, PERM_READ, PERM_WRITE, TOPIC_SYS_FLAG_UNIT_SUB, retry_topic
from rmq.protocol.headers import (
    GroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

from ..filter import SqlFilterError, compile_sql92
from .common import fail, json_of, ok

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.client_manage")

# Consumer groups (with their retry topics) one heartbeat may create; the rest of a bigger
# one are registered, and created by later heartbeats or their first pulls.
NEW_GROUPS_PER_REQUEST = 100
STEP = 0.002  # seconds a heartbeat holds the event loop before the other connections get a turn
NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


class ClientManageProcessor:
    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self._handlers: dict[int, Callable[[RequestContext, RemotingCommand], RemotingCommand]] = {
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.HEART_BEAT:
            return await self.heart_beat(ctx, request)
        return self._handlers[request.code](ctx, request)

    # -- registration ---------------------------------------------------------------------

    async def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        if not request.body:
            raise RemoteProtocolError("the heartbeat body is missing")
        turns = _Turns()
        hb = await _read_heartbeat(request.body, turns)
        for consumer in hb.consumers:
            for sub in consumer.subscriptions:
                why = _filter_error(sub)
                if why is not None:
                    return fail(
                        request,
                        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                        f"group {consumer.group_name}, topic {sub.topic}: {why}",
                    )
            await turns.take()
        conn = ctx.connection
        language = _language_name(request.language)
        created = 0
        deferred: list[str] = []
        for consumer in hb.consumers:
            group = consumer.group_name
            new = self._creates(group)
            if new and created >= NEW_GROUPS_PER_REQUEST:
                group_config = broker.subscriptions.get(group)
                deferred.append(group)
            else:
                created += new
                group_config = broker.subscriptions.find_or_create(group)
                if group_config is not None:
                    broker.topics.create_if_absent(
                        retry_topic(group),
                        group_config.retry_queue_nums,
                        PERM_READ | PERM_WRITE,
                        TOPIC_SYS_FLAG_UNIT_SUB if consumer.unit_mode else 0,
                    )
            changed = broker.clients.register_consumer(
                consumer, conn, hb.client_id, language, request.version, ctx.remote_address
            )
            if changed and (group_config is None or group_config.notify_consumer_ids_changed_enable):
                broker.notify_consumers(group)
            await turns.take()
        if deferred:
            log.warning(
                "heartbeat of %s from %s names %d new consumer groups; %d created, the other %d (%s%s) are "
                "created by a later heartbeat or their first pull (at most %d per request)",
                hb.client_id,
                ctx.remote_address,
                created + len(deferred),
                created,
                len(deferred),
                ", ".join(deferred[:3]),
                ", ..." if len(deferred) > 3 else "",
                NEW_GROUPS_PER_REQUEST,
            )
        for group in hb.producer_groups:
            broker.clients.register_producer(group, conn, hb.client_id, language, request.version, ctx.remote_address)
            await turns.take()
        return ok(request)

    def _creates(self, group: str) -> bool:
        """Whether registering `group` creates its config or its retry topic."""
        if self.broker.subscriptions.get(group) is None:
            return self.broker.config.auto_create_subscription_group
        return retry_topic(group) not in self.broker.topics

    def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """CheckClientRequestBody `{"clientId","group","subscriptionData"}`: can this broker
        filter with that subscription?"""
        sub = CheckClientRequestBody.from_json(json_of(request, "check client config")).subscription_data
        if sub is None:
            return ok(request)
        if sub.is_tag_type:
            return ok(request)
        if not self.broker.config.enable_property_filter:
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        why = _filter_error(sub)
        if why is not None:
            return fail(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, why)
        return ok(request)

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        broker = self.broker
        conn = ctx.connection
        if header.producer_group:
            broker.clients.unregister_producer(header.producer_group, conn)
        group = header.consumer_group
        if group and broker.clients.unregister_consumer(group, conn):
            group_config = broker.subscriptions.get(group)
            if group_config is None or group_config.notify_consumer_ids_changed_enable:
                broker.notify_consumers(group)
        return ok(request)

    def consumer_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = GroupRequestHeader.from_ext(request.ext_fields).consumer_group
        info = self.broker.clients.consumer_group(group)
        ids = info.client_ids() if info else []
        if not ids:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return ok(request, body=json_body.dumps(GetConsumerListByGroupResponseBody(tuple(ids)).to_json()))

    # -- offsets --------------------------------------------------------------------------

    def query_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        broker = self.broker
        offset = broker.offsets.query(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return ok(request, {"offset": offset})
        # A group that never committed starts at 0 if the queue still holds its first
        # message in the page cache (a young queue); otherwise the client decides (22).
        store = broker.message_store
        if store.get_min_offset_in_queue(header.topic, header.queue_id) <= 0 and not broker.is_in_disk(
            header.topic, header.queue_id, 0
        ):
            return ok(request, {"offset": 0})
        return fail(request, ResponseCode.QUERY_NOT_FOUND, NOT_FOUND_REMARK)

    def update_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        self.broker.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        return ok(request)

    # -- orderly consumers ----------------------------------------------------------------

    def lock_batch(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        lock = LockBatchRequestBody.from_json(json_of(request, "lock"))
        locked = self.broker.locks.try_lock_batch(lock.consumer_group, lock.mq_set, lock.client_id)
        answer = LockBatchResponseBody(tuple(mq for mq in lock.mq_set if mq in locked))
        return ok(request, body=json_body.dumps(answer.to_json()))

    def unlock_batch(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        unlock = UnlockBatchRequestBody.from_json(json_of(request, "unlock"))
        self.broker.locks.unlock_batch(unlock.consumer_group, unlock.mq_set, unlock.client_id)
        return ok(request)


class _Turns:
    """Lets the other tasks run once the caller has held the event loop STEP seconds."""

    def __init__(self) -> None:
        self._since = time.perf_counter()

    async def take(self) -> None:
        if time.perf_counter() - self._since >= STEP:
            await trio.lowlevel.checkpoint()
            self._since = time.perf_counter()


async def _read_heartbeat(data: bytes, turns: _Turns) -> HeartbeatData:
    steps = read_heartbeat(data)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await turns.take()


def _filter_error(sub: SubscriptionData) -> str | None:
    """Why a SQL92 subscription cannot be used, or None (other types are checked at pull)."""
    if sub.expression_type != EXPRESSION_SQL92:
        return None
    try:
        compile_sql92(sub.sub_string)
    except SqlFilterError as exc:
        return str(exc)
    return None


def _language_name(language: Any) -> str:
    return getattr(language, "name", str(language))
