"""Requests that look at a POP group's queues without popping them: PEEK_MESSAGE,
NOTIFICATION and POLLING_INFO (RocketMQ 5.3.3's PeekMessageProcessor, NotificationProcessor
and PollingInfoProcessor; docs/pop.md).

- PEEK_MESSAGE answers the messages the group would pop next (from its offsets, its POP
  retry topic first in a fifth of the requests, else after the topic), and changes
  nothing: no offset, checkpoint or batch. PULL_NOT_FOUND when there is none.
- NOTIFICATION answers hasMsg=true once the group has something to pop, waiting as a pop
  does (until bornTime + pollTime, for an arrival or an orderly batch to free its queue),
  else hasMsg=false (pollingFull=true beyond maxPopPollingSize waiting notifications).
- POLLING_INFO answers how many pops wait on (topic, group, queueId), -1 being the pops of
  every queue.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.constants import PERM_READ
from rmq.protocol.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageResponseHeader,
    pop_retry_topic,
)
from rmq.store.results import GetMessageStatus

from .common import fail, ok
from .pop import check_pop_target, polling_refusal, read_queues, wait_for_messages

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts

RETRY_FIRST_ONE_IN = 5  # a peek or notification looks at the retry topic first in 1 of 5 (randomQ % 5)
_RESET = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)


def peek_offset(broker: BrokerParts, topic: str, group: str, queue_id: int) -> int:
    """Where the group pops the queue next, without committing an offset for a group new
    to it (its first message then)."""
    offset = broker.offsets.query(group, topic, queue_id)
    return offset if offset >= 0 else broker.message_store.get_min_offset_in_queue(topic, queue_id)


def _unreadable_broker(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand | None:
    if broker.config.broker_permission & PERM_READ:
        return None
    return fail(
        request, ResponseCode.NO_PERMISSION, f"the broker[{broker.config.broker_ip1}] peeking message is forbidden"
    )


def _topic_order(broker: BrokerParts, topic: str, queue_id: int, start: int) -> list[tuple[str, int]]:
    """The queues a request for `queue_id` (-1: all, from the `start`th) reads, in order."""
    queues = read_queues(broker, topic, queue_id)
    n = len(queues)
    return [(topic, queues[(start + i) % n]) for i in range(n)]


@dataclass
class _Peeked:
    want: int
    records: list[bytes]
    rest: int = 0


class PeekProcessor:
    CODES = (RequestCode.PEEK_MESSAGE,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = PeekMessageRequestHeader.from_ext(request.ext_fields)
        refused = _unreadable_broker(broker, request) or check_pop_target(
            broker, ctx, request, header.topic, header.queue_id, header.consumer_group
        )
        if refused is not None:
            return refused
        if header.max_msg_nums <= 0:
            return fail(request, ResponseCode.INVALID_PARAMETER, "maxMsgNums must be > 0")
        start = random.randrange(100)
        retry = _topic_order(broker, pop_retry_topic(header.topic, header.consumer_group), -1, start)
        queues = _topic_order(broker, header.topic, header.queue_id, start)
        queues = retry + queues if start % RETRY_FIRST_ONE_IN == 0 else queues + retry
        peeked = _Peeked(header.max_msg_nums, [])
        for topic, queue_id in queues:
            self._peek_queue(peeked, topic, queue_id, header.consumer_group)
        ext = PopMessageResponseHeader(0, 0, 0, peeked.rest).to_ext()
        if not peeked.records:
            return request.make_response(ResponseCode.PULL_NOT_FOUND, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, ext)
        return request.make_response(ResponseCode.SUCCESS, GetMessageStatus.FOUND.name, ext, b"".join(peeked.records))

    def _peek_queue(self, peeked: _Peeked, topic: str, queue_id: int, group: str) -> None:
        store = self.broker.message_store
        offset = peek_offset(self.broker, topic, group, queue_id)
        peeked.rest += max(0, store.get_max_offset_in_queue(topic, queue_id) - offset)
        want = peeked.want - len(peeked.records)
        if want <= 0:
            return
        result = store.get_message(topic, queue_id, offset, want)
        if result.status in _RESET:  # the offset is out of the queue: read from where it says
            result = store.get_message(topic, queue_id, result.next_begin_offset, want)
        peeked.records.extend(result.records)


class NotificationProcessor:
    CODES = (RequestCode.NOTIFICATION,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = NotificationRequestHeader.from_ext(request.ext_fields)
        if header.born_time == 0:  # as a pop's: Java fills in an absent or zero born time
            header.born_time = broker.clock_ms()
        refused = _unreadable_broker(broker, request) or check_pop_target(
            broker, ctx, request, header.topic, header.queue_id, header.consumer_group
        )
        if refused is not None:
            return refused
        parked = broker.pop_queues.notifications
        group = header.consumer_group
        retry = pop_retry_topic(header.topic, group)
        while True:
            has_msg, free_at = self._has_msg(header)
            if has_msg:
                return ok(request, NotificationResponseHeader(True).to_ext())
            refusal = polling_refusal(broker, len(parked), header.born_time, header.poll_time)
            if refusal is None:  # park: no await between the look above and the parks
                queues = [(header.topic, q) for q in read_queues(broker, header.topic, header.queue_id)]
                queues += [(retry, q) for q in read_queues(broker, retry, -1)]
                until = header.born_time + header.poll_time
                if free_at is not None:
                    until = min(until, free_at)
                await wait_for_messages(broker, ctx, parked, (header.topic, group, header.queue_id), queues, until)
                if not broker.waiters.closed:
                    continue
                refusal = ResponseCode.POLLING_TIMEOUT
            full = refusal == ResponseCode.POLLING_FULL
            return ok(request, NotificationResponseHeader(False, full).to_ext())

    def _has_msg(self, header: NotificationRequestHeader) -> tuple[bool, int | None]:
        """(whether the group has a message to pop, when an orderly batch blocking a queue
        stops blocking it). An orderly group looks at the topic only: its pops read no
        retry topic."""
        broker = self.broker
        group = header.consumer_group
        start = random.randrange(100)
        queues = _topic_order(broker, header.topic, header.queue_id, start)
        if not header.order:
            retry = _topic_order(broker, pop_retry_topic(header.topic, group), -1, start)
            queues = retry + queues if start % RETRY_FIRST_ONE_IN == 0 else queues + retry
        free_at: int | None = None
        for topic, queue_id in queues:
            if header.order and broker.order_info.check_block(header.attempt_id, topic, group, queue_id, 0):
                at = broker.order_info.lock_free_time(topic, group, queue_id)
                if at is not None and (free_at is None or at < free_at):
                    free_at = at
                continue
            offset = peek_offset(broker, topic, group, queue_id)
            if broker.message_store.get_max_offset_in_queue(topic, queue_id) > offset:
                return True, None
        return False, free_at


class PollingInfoProcessor:
    CODES = (RequestCode.POLLING_INFO,)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        header = PollingInfoRequestHeader.from_ext(request.ext_fields)
        refused = _unreadable_broker(broker, request) or check_pop_target(
            broker, ctx, request, header.topic, header.queue_id, header.consumer_group
        )
        if refused is not None:
            return refused
        waiting = broker.pop_queues.pops.count((header.topic, header.consumer_group, header.queue_id))
        return ok(request, PollingInfoResponseHeader(waiting).to_ext())
