"""Automatic batching of concurrent sends (RocketMQ 5.x's `autoBatch`), without added delay.

Each send still returns its own SendResult once the broker has stored the message. What
changes is the wire: while a batch of a topic is in flight, later sends of that topic wait,
and the first of them takes everything waiting (up to `batch_max_bytes`) as one
SEND_BATCH_MESSAGE when a slot frees. A lone send therefore goes out at once, as a plain
send would (no timer, unlike Java's batchMaxDelayMs); sixty-four concurrent ones leave in
a few requests, which is what costs the client and the broker per message less. When an
answer frees a slot while another batch is still out, the waiting send it wakes lets one
scheduler pass go by before it leads: the answered batch's senders, woken with it, usually
send again at once, and their messages then leave with it instead of after a batch of the
two or three that were waiting (with SYNC_FLUSH such a batch costs a group commit of its
own). A send that finds a free slot on arrival still leaves at once.

It is on by default because a caller cannot tell it from plain sends:
* what waits for a slot is a batch's worth at most: once a full batch waits it leaves
  without one, so large messages or a slow link are not held to `batch_in_flight`
  requests where plain sends would all be out;
* a batch is one attempt. When it fails (the broker refused it, perhaps for one of its
  messages; a timeout; a lost connection; its leader cancelled), each of its messages is
  sent again on its own, as a plain send with its own retries, in the time its caller has
  left: each gets its own result or error, as without batching. As with any retry after
  a request that may have arrived, a message can then be stored twice (with the same
  UNIQ_KEY, its msg_id).

There is no background task: the waiting sends take turns leading, so cancellation and
errors stay with the callers. Only messages a batch can carry are batched (no delay level,
no timer, no retry topic, not over `compress_over`: batches are never compressed); the
producer sends the rest one by one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from rmq.protocol import properties as P
from rmq.protocol.constants import RETRY_PREFIX
from rmq.remoting.outbox import Parked

from .errors import MQClientError, MQTimeoutError
from .message import SendResult, batch_item_size

if TYPE_CHECKING:
    from rmq.protocol.message import Message as ProtocolMessage

# sends a batch of messages (one topic) in one attempt and returns the batch's SendResult;
# a batch of one is a plain send, retries included
SendBatch = Callable[[Sequence["ProtocolMessage"], float], Awaitable[SendResult]]


class _Waiter:
    __slots__ = ("deadline", "error", "failed", "msg", "parked", "queued", "result", "size")

    def __init__(self, msg: ProtocolMessage, deadline: float, uniq_key_length: int) -> None:
        self.msg = msg
        self.deadline = deadline
        self.queued = True  # still in its lane's pending queue (not yet in a batch)
        self.size = batch_item_size(msg, uniq_key_length)
        self.result: SendResult | None = None
        self.error: BaseException | None = None
        self.failed: MQClientError | None = None  # its batch failed: it goes again on its own
        # Where it waits for its turn or its result; a wake while it is not parked is lost,
        # which is harmless: a waiter looks at its lane again before it parks.
        self.parked = Parked()


_LANES_KEPT = 256  # idle lanes are kept (a lone send then makes none) up to this many


class _Lane:
    """The sends of one topic (and one waitStoreMsgOK) that wait, and its batches in flight."""

    __slots__ = ("in_flight", "pending", "pending_bytes")

    def __init__(self) -> None:
        self.pending: deque[_Waiter] = deque()
        self.pending_bytes = 0  # the sizes of `pending`
        self.in_flight = 0


# properties whose message never joins a batch (MSG_TYPE: a reply has a send code of its own)
_ALONE = frozenset((P.TRAN_MSG, P.MSG_TYPE, *P.TIMER_KEYS))


def batchable(msg: ProtocolMessage, compress_over: int) -> bool:
    """Whether a batch may carry `msg` (MessageBatch's rules, and no compression due). A
    timer message goes alone: a timer-wheel broker refuses a batch holding one."""
    props = msg.properties
    return (
        len(msg.body) <= compress_over
        and _ALONE.isdisjoint(props)
        and props.get(P.DELAY, "0") in ("", "0")
        and not msg.topic.startswith(RETRY_PREFIX)
    )


class AutoBatcher:
    """Coalesces the concurrent sends of one producer; see the module docstring.

    Args:
      send_batch: sends one batch, one attempt; one message: a plain send, retries included
        (a lone send, or one of a batch that failed).
      max_bytes: a batch's body at most this many bytes (batchMaxBytes).
      max_in_flight: batches of one topic in flight at once.
      uniq_key_length: characters of the UNIQ_KEY a message without one gets when it leaves.
    """

    def __init__(self, send_batch: SendBatch, max_bytes: int, max_in_flight: int, uniq_key_length: int) -> None:
        self._send_batch = send_batch
        self.max_bytes = max_bytes
        self.max_in_flight = max_in_flight
        self.uniq_key_length = uniq_key_length
        # by topic: the lanes of messages whose send waits for the store (WAIT, the
        # default), and of those that do not (a batch carries one waitStoreMsgOK)
        self._lanes: dict[str, _Lane] = {}
        self._unawaited: dict[str, _Lane] = {}

    def hold_alone(self, msg: ProtocolMessage) -> _Lane | None:
        """For a send that finds nothing of its topic waiting or in flight: its lane, marked
        in flight, so that sends arriving meanwhile queue behind it; it leaves at once as a
        plain send, and `release` follows. None: it queues (`send`)."""
        lanes = self._lanes_of(msg)
        lane = lanes.get(msg.topic)
        if lane is None:
            if len(lanes) >= _LANES_KEPT:
                self._forget_idle(lanes)
            lane = lanes[msg.topic] = _Lane()
        elif lane.in_flight or lane.pending:
            return None
        lane.in_flight = 1
        return lane

    def release(self, lane: _Lane) -> None:
        """A send `hold_alone` let go alone has ended."""
        lane.in_flight -= 1
        self._wake_head(lane)

    def _lanes_of(self, msg: ProtocolMessage) -> dict[str, _Lane]:
        # a batch carries one waitStoreMsgOK
        return self._lanes if msg.properties.get(P.WAIT) != "false" else self._unawaited

    async def send(self, msg: ProtocolMessage, timeout: float) -> SendResult:  # noqa: ASYNC109  the waiter's deadline, named by MQTimeoutError
        alone = self.hold_alone(msg)
        if alone is not None:
            try:
                return await self._send_batch((msg,), timeout)
            finally:
                self.release(alone)
        lane = self._lanes_of(msg)[msg.topic]  # hold_alone found it busy
        # No cancel scope per send (it costs more than the rest of the wait): a batch's
        # request is bounded by the earliest deadline among its messages, and the sends ahead
        # of this one, in order, have deadlines no later than its own when timeouts agree.
        me = _Waiter(msg, trio.current_time() + timeout, self.uniq_key_length)
        lane.pending.append(me)
        lane.pending_bytes += me.size
        if lane.pending_bytes >= self.max_bytes:
            self._wake_head(lane)  # a full batch waits for no slot
        woken = False
        try:
            while me.result is None and me.error is None and me.failed is None:
                full = lane.pending_bytes >= self.max_bytes
                if lane.pending and lane.pending[0] is me and (full or lane.in_flight < self.max_in_flight):
                    if trio.current_time() >= me.deadline:
                        break
                    if woken and lane.in_flight and not full:
                        # A batch's answer woke us with its senders, and another batch is
                        # out: let them queue their next messages first, or this batch
                        # leaves with the two or three that waited.
                        woken = False
                        await trio.lowlevel.checkpoint()
                        continue
                    await self._lead(lane)
                else:
                    await me.parked.wait()
                    woken = True
        finally:
            if me.queued:  # timed out or cancelled before it left: it never will
                lane.pending.remove(me)
                lane.pending_bytes -= me.size
                self._wake_head(lane)
        if me.failed is not None:
            left = me.deadline - trio.current_time()
            if left <= 0:
                raise me.failed
            return await self._send_batch((msg,), left)
        if me.error is not None:
            raise me.error
        if me.result is None:
            raise MQTimeoutError(f"topic {msg.topic}", timeout, "send")
        return me.result

    async def _lead(self, lane: _Lane) -> None:
        """Send the head of `lane` (this caller's message first) as one batch."""
        batch: list[_Waiter] = []
        size = 0
        while lane.pending and (not batch or size + lane.pending[0].size <= self.max_bytes):
            w = lane.pending.popleft()
            w.queued = False
            batch.append(w)
            size += w.size
        lane.pending_bytes -= size
        deadline = min(w.deadline for w in batch)
        lane.in_flight += 1
        self._wake_head(lane)  # another slot may be free: the next one can lead meanwhile
        try:
            result = await self._send_batch([w.msg for w in batch], max(deadline - trio.current_time(), 0.0))
        except MQClientError as exc:
            if len(batch) == 1:  # it went as a plain send, retries included: its own error
                batch[0].error = exc
            else:
                for w in batch:
                    w.failed = exc
        except BaseException:
            # cancelled while its batch was on the wire: the others go again on their own
            # (their messages may or may not be stored, as after any send cut short)
            for w in batch[1:]:
                w.failed = MQClientError("the request carrying this message was cancelled")
            raise
        else:
            try:
                results = split_result(result, len(batch))
            except MQClientError as exc:  # the batch is stored; its answer makes no sense
                for w in batch:
                    w.error = exc
            else:
                for w, one in zip(batch, results, strict=True):
                    w.result = one
        finally:
            lane.in_flight -= 1
            for w in batch[1:]:
                w.parked.wake()
            self._wake_head(lane)

    @staticmethod
    def _forget_idle(lanes: dict[str, _Lane]) -> None:
        """Drop the lanes nothing waits in or is in flight from (a producer of many topics)."""
        for topic in [t for t, lane in lanes.items() if not lane.pending and not lane.in_flight]:
            del lanes[topic]

    @staticmethod
    def _wake_head(lane: _Lane) -> None:
        if lane.pending:
            lane.pending[0].parked.wake()


def split_result(result: SendResult, count: int) -> list[SendResult]:
    """One SendResult per message of a batch: the comma-joined ids split, queue offsets
    counted up from the first (the batch's messages are consecutive in their queue)."""
    ids = result.msg_id.split(",")
    offset_ids = result.offset_msg_id.split(",")
    if len(ids) != count or len(offset_ids) != count:
        raise MQClientError(f"the broker answered a batch of {count} with {len(offset_ids)} message ids")
    r = result
    return [
        SendResult(
            r.status,
            ids[i],
            offset_ids[i],
            r.message_queue,
            r.queue_offset + i,
            r.transaction_id,
            r.region_id,
            r.trace_on,
        )  # fmt: skip
        for i in range(count)
    ]
