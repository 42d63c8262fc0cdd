"""The 5.x PullConsumer's RPCs: PullMessage, UpdateOffset, GetOffset and QueryOffset.

Java's proxy (5.3.3) has no activities for them yet, so they map plainly onto the broker's
remoting codes: PULL_MESSAGE (with the subscription in the request, as a lite pull
consumer's, since the proxy heartbeats no consumer data), UPDATE_CONSUMER_OFFSET,
QUERY_CONSUMER_OFFSET, and GET_MIN_OFFSET, GET_MAX_OFFSET or SEARCH_OFFSET_BY_TIMESTAMP.
The request's queue names its broker, and its id is the broker's queue id (QueryRoute's
ids are the broker's when a topic has as many read as write queues).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq.client.api import PullStatus
from rmq.client.errors import MQClientError
from rmq.client.message import MessageQueue
from rmq.client.subscription import Subscription
from rmq.protocol.constants import PULL_SUBSCRIPTION, PULL_SUSPEND
from rmq.protocol.headers import PullMessageRequestHeader

from .convert import OK_STATUS, Code, ProxyError, checked_name, received, status, status_of, timestamp_ms
from .grpc import Call, Send
from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rmq.client.instance import ClientInstance
    from rmq.client.route import TopicRoute


class Pulling:
    """The handlers, on the service's client instance, routes and polling time."""

    def __init__(
        self,
        instance: ClientInstance,
        route: Callable[[str], Awaitable[TopicRoute]],
        poll_ms: Callable[[Call, s.PullMessageRequest], int],
    ) -> None:
        self.instance = instance
        self._route = route  # MessagingService.route: cached, refreshed routes
        self._poll_ms = poll_ms  # MessagingService.poll_ms: ReceiveMessage's polling time

    async def _target(self, queue: d.MessageQueue) -> tuple[str, MessageQueue]:
        """(master address, the broker's queue) of a request's message queue."""
        topic = checked_name(queue.topic, Code.ILLEGAL_TOPIC, "topic")
        instance = self.instance
        addr = instance.master_addr(queue.broker.name)
        if addr is None:
            await self._route(topic)
            addr = instance.master_addr(queue.broker.name)
        if addr is None:
            raise ProxyError(Code.BAD_REQUEST, f"broker {queue.broker.name!r} serves no queue of {topic}")
        if queue.id < 0:
            raise ProxyError(Code.BAD_REQUEST, f"queue id {queue.id} is illegal")
        return addr, MessageQueue(topic, queue.broker.name, queue.id)

    async def update_offset(self, call: Call, request: s.UpdateOffsetRequest) -> s.UpdateOffsetResponse:
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is illegal")
        addr, mq = await self._target(request.message_queue)
        instance = self.instance
        await instance.broker_call(mq.topic, instance.api.update_consumer_offset(addr, group, mq, request.offset))
        return s.UpdateOffsetResponse(status=OK_STATUS)

    async def get_offset(self, call: Call, request: s.GetOffsetRequest) -> s.GetOffsetResponse:
        """The group's committed offset; OFFSET_NOT_FOUND when it has none."""
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        addr, mq = await self._target(request.message_queue)
        offset = await self.instance.broker_call(mq.topic, self.instance.api.query_consumer_offset(addr, group, mq))
        if offset < 0:
            return s.GetOffsetResponse(status=status(Code.OFFSET_NOT_FOUND, f"group {group} has no offset of {mq}"))
        return s.GetOffsetResponse(status=OK_STATUS, offset=offset)

    async def query_offset(self, call: Call, request: s.QueryOffsetRequest) -> s.QueryOffsetResponse:
        addr, mq = await self._target(request.message_queue)
        api = self.instance.api
        policy = request.query_offset_policy
        if policy == d.BEGINNING:
            work = api.get_min_offset(addr, mq)
        elif policy == d.END:
            work = api.get_max_offset(addr, mq)
        elif request.HasField("timestamp"):
            work = api.search_offset(addr, mq, timestamp_ms(request.timestamp))
        else:
            raise ProxyError(Code.BAD_REQUEST, "a TIMESTAMP query needs a timestamp")
        offset = await self.instance.broker_call(mq.topic, work)
        return s.QueryOffsetResponse(status=OK_STATUS, offset=offset)

    async def pull_message(self, call: Call, request: s.PullMessageRequest, send: Send) -> None:
        try:
            await self._pull(call, request, send)
        except (ProxyError, MQClientError) as exc:
            await send(s.PullMessageResponse(status=status_of(exc)))

    async def _pull(self, call: Call, request: s.PullMessageRequest, send: Send) -> None:
        """Streamed as ReceiveMessage: the status, the messages, then the next offset."""
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is illegal")
        batch = request.batch_size
        if batch <= 0 or batch > 32:
            raise ProxyError(Code.BAD_REQUEST, "batch size must be within [1, 32]")
        poll_ms = self._poll_ms(call, request)
        addr, mq = await self._target(request.message_queue)
        f = request.filter_expression
        sql = f.type == d.SQL
        sub = Subscription.parse(mq.topic, None if sql else f.expression)
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=request.offset,
            max_msg_nums=batch,
            sys_flag=PULL_SUBSCRIPTION | (PULL_SUSPEND if poll_ms > 0 else 0),
            suspend_timeout_millis=poll_ms,
            subscription=f.expression if sql else sub.expression,
            expression_type="SQL92" if sql else "TAG",
        )
        timeout = poll_ms / 1000 + self.instance.config.request_timeout
        result = await self.instance.broker_call(mq.topic, self.instance.api.pull(addr, header, timeout))
        # the broker filters tags by their hash codes only: the exact check is the client's
        messages = [m for m in result.messages if sql or sub.matches(m.tags)]
        if result.status == PullStatus.OFFSET_ILLEGAL:
            answer = status(Code.ILLEGAL_OFFSET, f"offset {request.offset} is out of the queue's range")
        elif messages:
            answer = OK_STATUS
        else:
            answer = status(Code.MESSAGE_NOT_FOUND, "no new message")
        await send(s.PullMessageResponse(status=answer))
        for msg in messages:
            await send(s.PullMessageResponse(message=received(msg)))
        await send(s.PullMessageResponse(next_offset=result.next_begin_offset))
