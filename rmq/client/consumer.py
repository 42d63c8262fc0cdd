"""PushConsumer: long-polling pull loops that push messages to a handler or an `async for`.

    consumer = PushConsumer("my_group", namesrv="127.0.0.1:9876", handler=handle)
    consumer.subscribe("TopicTest", "TagA || TagB")
    async with consumer:
        await trio.sleep_forever()

    async with open_push_consumer("my_group", namesrv=..., subscriptions={"TopicTest": "*"}) as consumer:
        async for msg in consumer:          # acknowledged when the loop asks for the next one
            ...

Theory of operation
-------------------
The consumer's nursery runs the rebalance loop (consumer_base.py), the offset commit
loop, the consume workers (concurrent mode) and, for each queue it owns, a queue task in
its own cancel scope: it finds the start offset, then pulls with long polling (the
broker holds the request up to 15 s; we wait up to 30 s) and hands messages over.
Losing a queue in a rebalance cancels its scope; messages of a dropped queue are not
committed, so the next owner gets them again (at least once).

Flow control: a queue's pulling pauses while it holds more than
`pull_threshold_for_queue` messages or `pull_threshold_size_for_queue` bytes, or (concurrent
mode) spans more than `consume_concurrently_max_span` offsets; the consume channel is
bounded, so a slow handler slows the pulls.

Concurrent mode: `consume_concurrency` workers call the handler, one message per call.
The committed offset of a queue is its oldest message not yet done. A failure (the
handler raises or returns RECONSUME_LATER) sends the message back to the broker
(CONSUMER_SEND_MSG_BACK to its store host; if that fails, a new message to
%RETRY%<group>) for a later retry with a growing delay; after `max_reconsume_times`
(16) the broker moves it to %DLQ%<group>. In broadcasting a failure is only logged.

Orderly mode: each queue is locked on its broker (LOCK_BATCH_MQ, renewed every 20 s)
and consumed by one task, one message at a time in queue order. A failure suspends the
queue for `suspend_current_queue_time` and retries the same message in place.

Leaving `async with` cancels the loops, commits offsets, releases orderly locks,
unregisters the group from the brokers and closes the connections.
"""

from __future__ import annotations

import enum
import inspect
import logging
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Unpack

import trio

from rmq.protocol import properties as P
from rmq.protocol.constants import CLIENT_INNER_PRODUCER_GROUP, MASTER_ID
from rmq.protocol.message import MessageExt
from rmq.scheduling import after_woken

from .api import PullAhead, PullResult, PullStatus
from .config import ConsumerOptions
from .consumer_base import ConsumerBase, group_by_broker, no_progress
from .errors import MQClientError, MQClientStateError
from .ids import wall_clock_ms
from .members import Instance
from .message import Message, MessageQueue, check_topic, retry_topic
from .process_queue import ProcessQueue
from .producer import Producer
from .rebalance import AllocateStrategy, allocate_averagely
from .running_info import ConsumeCounters, push_running_info
from .subscription import Subscription
from .trace import TraceDispatcher, inner_producer_group

log = logging.getLogger("rmq.client.consumer")

DEFAULT_MAX_RECONSUME_TIMES = 16
RECONSUME_LATER_DELAY = 5.0  # a message that could not be sent back is consumed again after this
LOCK_VALID_FOR = 30.0  # ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME
LOCK_RETRY_DELAY = 1.0
DROP_WAIT = 1.0  # orderly: how long a rebalance waits for a queue's handler call to end
STOP_TIMEOUT = 10.0  # commits, unlocks and unregistration at shutdown
_WORKER_RUN = 16  # messages a consume worker takes from the buffer between yields


class ConsumeStatus(enum.Enum):
    """What a handler may return; returning None means SUCCESS."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # concurrent: retry later via the broker
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"  # orderly: retry in place


Handler = Callable[[MessageExt], Awaitable[ConsumeStatus | None] | ConsumeStatus | None]
# a message handed to `async for`: the message, its worker's wake-up, what success records
_Delivery = tuple[MessageExt, trio.Event, Callable[[], None]]


class _QueueState:
    """One owned queue: its process queue, scope, pull position and orderly lock."""

    __slots__ = ("broker_id", "consume_lock", "mq", "next_offset", "nursery", "pq", "scope", "wakeup")

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq
        self.pq = ProcessQueue()
        self.scope = trio.CancelScope()
        self.next_offset = -1
        self.broker_id = MASTER_ID
        self.nursery: trio.Nursery | None = None
        self.wakeup = trio.Event()
        self.consume_lock = trio.Lock()

    def __repr__(self) -> str:
        return f"<queue {self.mq} next={self.next_offset} {self.pq}>"


class PushConsumer(ConsumerBase):
    """A push consumer; see the module docstring.

    Args:
      group: the consumer group.
      namesrv: name server addresses ("a:9876;b:9876" or a list); None reads $NAMESRV_ADDR.
      handler: `async def handler(msg) -> ConsumeStatus | None` (a plain function works
        too); raising counts as a failure. Without a handler, iterate the consumer.
      orderly: orderly consumption (queue locks, one message at a time per queue).
      allocate: allocation strategy (rebalance.py); default averagely.
      instance: share another client's connections (expert; the caller runs it).
      **options: ConsumerOptions (ConsumerConfig's fields: message_model, consume_from_where, ...);
        TypeError names an unknown one.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        handler: Handler | None = None,
        orderly: bool = False,
        allocate: AllocateStrategy = allocate_averagely,
        instance: Instance | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(group, namesrv, instance=instance, allocate=allocate, options=options)
        self.handler = handler
        self.orderly = orderly
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._retry_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, instance=self.instance)
        workers = self.config.consume_concurrency
        self._consume_send, self._consume_recv = trio.open_memory_channel[tuple[_QueueState, MessageExt]](workers)
        self._iter_send, self._iter_recv = trio.open_memory_channel[_Delivery](0)
        self._iter_pending: _Delivery | None = None
        self.counters = ConsumeCounters()  # for running info (307)
        self.start_timestamp = 0  # epoch ms of the last start
        # SubBefore/SubAfter records to the trace topic (trace.py), sent in the background
        self.tracer = (
            TraceDispatcher(
                self.instance.ip, group, Producer(inner_producer_group(group), instance=self.instance), trace_topic
            )
            if enable_trace
            else None
        )

    def __repr__(self) -> str:
        return f"<PushConsumer {self.group} {self.instance.client_id} {len(self._queues)} queues>"

    # -- public API -------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume `topic`'s messages whose tag matches `expression` ("*" or "TagA || TagB")."""
        check_topic(topic)
        self._add_subscription(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._remove_subscription(topic)

    @property
    def queue_states(self) -> dict[MessageQueue, _QueueState]:
        """The queues owned now, with their process queues (for running info)."""
        return dict(self._queues)

    # -- what admins ask through a broker (running_info.py) ---------------------------------

    def running_info(self, namesrv: Sequence[str]) -> dict[str, Any]:
        return push_running_info(self, namesrv)

    async def consume_directly(self, msg: MessageExt) -> dict[str, Any]:
        """Run the handler on `msg` (nothing is committed or sent back) and answer a
        ConsumeMessageDirectlyResult."""
        start = time.monotonic()
        remark = None
        if self.handler is None:
            result, remark = "CR_THROW_EXCEPTION", "the consumer has no handler (it is iterated)"
        else:
            try:
                status = self.handler(msg)
                if inspect.isawaitable(status):
                    status = await status
            except Exception:
                result, remark = "CR_THROW_EXCEPTION", traceback.format_exc(limit=8)
            else:
                result = "CR_SUCCESS" if status is None or status is ConsumeStatus.SUCCESS else "CR_LATER"
        return {
            "autoCommit": True,
            "consumeResult": result,
            "order": self.orderly,
            "remark": remark,
            "spentTimeMills": int((time.monotonic() - start) * 1000),
        }

    def __aiter__(self) -> PushConsumer:
        if self.handler is not None:
            raise MQClientStateError("this consumer has a handler; iterate only a consumer without one")
        return self

    async def __anext__(self) -> MessageExt:
        """The next message; asking for it acknowledges the previous one, and so does
        leaving `async with` without an exception. After an exception the last message
        is not acknowledged: it is delivered again (to this group) later."""
        if self._nursery is None:
            raise MQClientStateError("the consumer is not running: iterate it inside `async with`")
        self._acknowledge()
        try:
            delivery = await self._iter_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        self._iter_pending = delivery
        return delivery[0]

    def _acknowledge(self) -> None:
        """The last iterated message was handled: record it, release its worker."""
        if self._iter_pending is not None:
            _, done, on_success = self._iter_pending
            self._iter_pending = None
            on_success()
            done.set()

    # -- lifecycle --------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifecycle(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self._own_instance:
                await stack.enter_async_context(self.instance.running())
            await stack.enter_async_context(self._retry_producer)
            await self._start()
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    if self.tracer is not None:
                        await nursery.start(self.tracer.run)
                    nursery.start_soon(self._rebalance_loop)
                    nursery.start_soon(self._persist_loop)
                    if self.orderly and not self.config.broadcasting:
                        nursery.start_soon(self._lock_loop)
                    if not self.orderly:
                        for i in range(self.config.consume_concurrency):
                            nursery.start_soon(self._consume_worker, name=f"ConsumeMessageThread_{i + 1}")
                    try:
                        yield
                        # reached on a clean exit only (say `break` after handling the
                        # message): that acknowledges the last message iterated
                        self._acknowledge()
                    finally:
                        nursery.cancel_scope.cancel()
            finally:
                self._nursery = None
                await self._stop()

    async def _start(self) -> None:
        if not self.config.broadcasting:
            retry = retry_topic(self.group)
            self._subs.setdefault(retry, Subscription.parse(retry, "*", wall_clock_ms()))
        await self.offsets.load()
        self.start_timestamp = wall_clock_ms()
        self.instance.add_consumer(self)
        self._running = True
        await self._refresh_routes()
        await self.instance.send_heartbeat()

    async def _stop(self) -> None:
        self._running = False
        with trio.CancelScope(shield=True), trio.move_on_after(STOP_TIMEOUT):
            mqs = sorted(self._queues)
            for state in self._queues.values():
                state.pq.dropped = True
            self._queues.clear()
            await self.offsets.persist_all(mqs)
            if self.orderly and not self.config.broadcasting:
                await self._unlock(mqs)
        self.instance.remove(self)
        await self.instance.unregister(None, self.group)

    # -- rebalance --------------------------------------------------------------------------

    def _assigned(self) -> list[MessageQueue]:
        return list(self._queues)

    async def _assign(self, topic: str, queues: set[MessageQueue]) -> None:
        current = {mq for mq in self._queues if mq.topic == topic}
        changed = False
        for mq in sorted(current - queues):
            changed |= await self._drop_queue(mq)
        new = sorted(queues - current)
        if new and self.orderly and not self.config.broadcasting:
            locked = await self._lock(new)
            new = [mq for mq in new if mq in locked]
        now = trio.current_time()
        for mq in new:
            if self._nursery is None:
                return
            self.offsets.remove(mq)
            state = _QueueState(mq)
            state.pq.locked = True
            state.pq.lock_time = now
            self._queues[mq] = state
            self._nursery.start_soon(self._run_queue, state)
            changed = True
            self._queues_assigned()
        if changed:
            log.info("group %s now consumes %s", self.group, sorted(self._queues))
            self.instance.heartbeat_soon()

    async def _drop_queue(self, mq: MessageQueue) -> bool:
        """Stop consuming `mq`; False if an orderly handler call would not finish in time."""
        state = self._queues.get(mq)
        if state is None:
            return False
        if self.orderly and not self.config.broadcasting:
            with trio.move_on_after(DROP_WAIT):
                async with state.consume_lock:
                    state.pq.dropped = True
                    state.scope.cancel()
            if not state.pq.dropped:
                return False
        else:
            state.pq.dropped = True
            state.scope.cancel()
        del self._queues[mq]
        await self.offsets.persist(mq)
        self.offsets.remove(mq)
        if self.orderly and not self.config.broadcasting:
            await self._unlock([mq])
        return True

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._reset, offsets)

    async def _reset(self, offsets: Mapping[MessageQueue, int]) -> None:
        async with self._rebalance_lock:
            for mq, offset in sorted(offsets.items()):
                await self._drop_queue(mq)
                self.offsets.update(mq, offset)
                await self.offsets.persist(mq)
                self.offsets.remove(mq)
        self.rebalance_soon()

    # -- orderly locks ----------------------------------------------------------------------

    async def _lock(self, mqs: Sequence[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ per broker; updates the lock state of owned queues."""
        locked_all: set[MessageQueue] = set()
        for broker, batch in group_by_broker(mqs).items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            try:
                locked = await self.instance.api.lock_batch(addr, self.group, self.instance.client_id, batch)
            except MQClientError as exc:
                log.info("lock of %s on %s failed: %s", batch, addr, exc)
                continue
            now = trio.current_time()
            for mq in batch:
                state = self._queues.get(mq)
                if state is not None:
                    state.pq.locked = mq in locked
                    if mq in locked:
                        state.pq.lock_time = now
            locked_all |= locked
        return locked_all

    async def _unlock(self, mqs: Sequence[MessageQueue]) -> None:
        for broker, batch in group_by_broker(mqs).items():
            addr = self.instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch(addr, self.group, self.instance.client_id, batch)
            except MQClientError as exc:
                log.info("unlock of %s on %s failed: %s", batch, addr, exc)

    async def _lock_loop(self) -> None:
        while True:
            await trio.sleep(self.config.lock_interval)
            await self._lock(sorted(self._queues))

    # -- one queue --------------------------------------------------------------------------

    async def _run_queue(self, state: _QueueState) -> None:
        with state.scope:
            offset = await self.initial_offset(state.mq)
            while offset < 0:
                await trio.sleep(self.config.pull_error_delay)
                offset = await self.initial_offset(state.mq)
            state.next_offset = offset
            async with trio.open_nursery() as nursery:
                state.nursery = nursery
                if self.orderly:
                    nursery.start_soon(self._orderly_loop, state, name=f"ConsumeMessageThread_{state.mq.queue_id}")
                await self._pull_loop(state)
                nursery.cancel_scope.cancel()

    async def _pull_loop(self, state: _QueueState) -> None:
        """Pull the queue while it is ours, within the flow limits. While it has a backlog and
        the limits leave room for this answer's batch and one more, the next pull is sent
        before the answer's records are decoded (as the PullConsumer does). When caught up,
        the answer's messages go to idle workers from the connection's reader as it decodes
        the answer (`hand_over`; this task queues them when too few workers wait), and
        the workers take them before this task writes the next pull."""
        cfg = self.config
        pq, mq = state.pq, state.mq
        orderly_locks = self.orderly and not cfg.broadcasting
        ahead: PullAhead | None = None  # the next pull, sent already (ConsumerBase.pull)
        room = 2 * cfg.pull_batch_size  # for the answer's batch and the next

        def ahead_if() -> bool:
            return (
                not pq.dropped
                and pq.msg_count + room <= cfg.pull_threshold_for_queue
                and 2 * pq.msg_size <= cfg.pull_threshold_size_for_queue
                and pq.max_span() + room <= cfg.consume_concurrently_max_span
            )

        def hand_over(result: PullResult) -> bool:  # in the connection's reader (ConsumerBase.pull)
            msgs = result.messages
            if self.orderly or pq.dropped or not msgs:
                return False
            send = self._consume_send
            idle = send.statistics()
            if idle.current_buffer_used or idle.tasks_waiting_receive < len(msgs):
                # only straight to idle workers, one message each: queued behind busy ones,
                # a run of theirs could take them in the same scheduler pass as a run of
                # buffered ones, and hold the loop twice as long; this task queues them
                return False
            pq.pulled_to = result.next_begin_offset  # first: a worker's commit covers what was filtered
            pq.put(msgs)
            for msg in msgs:
                send.send_nowait((state, msg))
            return True

        try:
            while not pq.dropped:
                sent, ahead = ahead, None
                if sent is None and not await self._may_pull(state, orderly_locks):
                    continue
                pull_start = trio.current_time() if sent is None else sent.start  # for the pull RT
                try:
                    result = await self.pull(
                        mq,
                        state.next_offset,
                        max_nums=cfg.pull_batch_size,
                        suspend=cfg.broker_suspend_max_time,
                        timeout=cfg.consumer_timeout_when_suspend,
                        broker_id=state.broker_id,
                        ahead=sent,
                        ahead_if=None if self.orderly else ahead_if,
                        deliver=hand_over,
                    )
                except MQClientError as exc:
                    log.info("pull from %s failed: %s", mq, exc)
                    state.broker_id = MASTER_ID  # ask again where to pull; a lost master's slave serves
                    await self.pull_failed(mq, exc)
                    continue
                ahead = result.next_pull  # first: forgotten in `finally` should this task end here
                if result.delivered:  # the workers have the messages: their turn first
                    await after_woken()
                state.broker_id = result.suggest_which_broker_id
                pq.last_pull_time = trio.current_time()
                self.counters.pulled(mq.topic, len(result.messages), pq.last_pull_time - pull_start)
                if pq.dropped:
                    return
                if result.status == PullStatus.OFFSET_ILLEGAL:
                    log.warning(
                        "offset %d of %s is illegal, moving to %d", state.next_offset, mq, result.next_begin_offset
                    )
                    state.next_offset = pq.pulled_to = result.next_begin_offset
                    self.offsets.update(mq, result.next_begin_offset)
                    await self.offsets.persist(mq)
                    continue
                stuck = no_progress(result, state.next_offset)
                state.next_offset = pq.pulled_to = result.next_begin_offset
                if result.messages:
                    if not result.delivered:
                        pq.put(result.messages)
                        await self._dispatch(state, result.messages)
                        if ahead is None:
                            # the workers take them before the next pull's write, which
                            # wakes the broker and would delay every message by its cost
                            await after_woken()
                elif pq.msg_count == 0:  # nothing new, or nothing we want: move the commit along
                    self.offsets.update(mq, pq.commit_offset(), increase_only=True)
                if stuck:
                    await trio.sleep(cfg.pull_error_delay)
        finally:
            if ahead is not None:  # dropped or stopped with a pull out
                ahead.sent.forget()

    async def _may_pull(self, state: _QueueState, orderly_locks: bool) -> bool:
        """Whether the flow limits, the queue's lock and the subscription let a pull go now;
        if not, waits the delay that applies and says no."""
        cfg = self.config
        pq = state.pq
        if pq.msg_count > cfg.pull_threshold_for_queue or pq.msg_size > cfg.pull_threshold_size_for_queue:
            await trio.sleep(cfg.flow_control_delay)
            return False
        if not self.orderly and pq.max_span() > cfg.consume_concurrently_max_span:
            await trio.sleep(cfg.flow_control_delay)
            return False
        if orderly_locks and not pq.locked:
            await trio.sleep(cfg.pull_error_delay)
            return False
        if state.mq.topic not in self._subs:
            await trio.sleep(cfg.pull_error_delay)
            return False
        return True

    async def _dispatch(self, state: _QueueState, msgs: list[MessageExt]) -> None:
        if self.orderly:
            state.wakeup.set()
            return
        # Without a yield per message while the buffer has room: a pulled batch of 32 made
        # the pull task and a worker take turns through the scheduler 32 times.
        send = self._consume_send
        for msg in msgs:
            try:
                send.send_nowait((state, msg))
            except trio.WouldBlock:
                await send.send((state, msg))

    # -- consuming --------------------------------------------------------------------------

    async def _call_handler(self, msg: MessageExt, on_success: Callable[[], None]) -> bool:
        """Run the handler, or hand the message to the iterator; True on success.

        `on_success` records the success (commit position). With a handler it runs here;
        when iterating it runs inside `__anext__` at acknowledgement, with no checkpoint
        in between, so an acknowledgement is never lost to a shutdown's cancellation.
        """
        msg.properties[P.CONSUME_START_TIME] = str(wall_clock_ms())
        if self.handler is None:
            done = trio.Event()
            await self._iter_send.send((msg, done, on_success))
            await done.wait()
            return True
        start = trio.current_time()
        if self.tracer is not None:
            request_id = self.tracer.before_consume(msg)
        try:
            status = self.handler(msg)
            if inspect.isawaitable(status):
                status = await status
        except Exception:
            log.exception("handler of group %s failed on message %s", self.group, msg.msg_id)
            status = ConsumeStatus.RECONSUME_LATER
        ok = status is None or status is ConsumeStatus.SUCCESS
        self.counters.consumed(msg.topic, ok, trio.current_time() - start)
        if self.tracer is not None:
            self.tracer.after_consume(msg, request_id, trio.current_time() - start, ok)
        if ok:
            on_success()
        return ok

    async def _consume_worker(self) -> None:
        """Take messages while there are some without going through the scheduler for each;
        a handler that never awaits still lets the other tasks run every `_WORKER_RUN`."""
        recv = self._consume_recv
        run = 0
        while True:
            try:
                state, msg = recv.receive_nowait()
                run += 1
                if run == _WORKER_RUN:
                    run = 0
                    await trio.lowlevel.checkpoint()
            except trio.WouldBlock:
                run = 0
                try:
                    state, msg = await recv.receive()
                except trio.EndOfChannel:
                    return
            except trio.EndOfChannel:
                return
            if not state.pq.dropped:
                await self._consume_concurrently(state, msg)

    def _done_concurrently(self, state: _QueueState, msg: MessageExt) -> None:
        """`msg` is finished with (consumed, or sent back): advance the commit position."""
        if state.pq.dropped:
            return
        offset = state.pq.remove([msg])
        state.pq.last_consume_time = trio.current_time()  # ProcessQueue.removeMessage's lastConsumeTimestamp
        if offset >= 0:
            self.offsets.update(state.mq, offset, increase_only=True)

    async def _consume_concurrently(self, state: _QueueState, msg: MessageExt) -> None:
        if await self._call_handler(msg, lambda: self._done_concurrently(state, msg)) or state.pq.dropped:
            return
        if self.config.broadcasting:
            log.warning("broadcast message %s failed and is dropped", msg.msg_id)
        elif not await self._send_back(msg):
            msg.reconsume_times += 1
            if not state.pq.dropped and state.nursery is not None:
                state.nursery.start_soon(self._consume_later, state, msg)
            return
        self._done_concurrently(state, msg)

    async def _consume_later(self, state: _QueueState, msg: MessageExt) -> None:
        await trio.sleep(RECONSUME_LATER_DELAY)
        await self._consume_send.send((state, msg))

    def _max_reconsume_times(self) -> int:
        times = self.config.max_reconsume_times
        if times >= 0:
            return times
        return -1 if self.orderly else DEFAULT_MAX_RECONSUME_TIMES

    async def _send_back(self, msg: MessageExt) -> bool:
        """A failed message goes back to the broker for a later retry; False if it could not."""
        addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
        try:
            await self.instance.api.consumer_send_back(addr, msg, self.group, 0, self._max_reconsume_times())
            return True
        except MQClientError as exc:
            log.info("send back of %s to %s failed (%s); resending to the retry topic", msg.msg_id, addr, exc)
        return await self._resend_to_retry_topic(msg, msg.reconsume_times + 1)

    async def _resend_to_retry_topic(self, msg: MessageExt, reconsume_time: int) -> bool:
        """sendMessageBack's fallback: a new message to %RETRY%<group> carrying the retry count."""
        props = {
            k: v
            for k, v in msg.properties.items()
            if k not in (P.MIN_OFFSET, P.MAX_OFFSET, P.CONSUME_START_TIME, P.TRAN_MSG)
        }
        props.setdefault(P.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[P.RETRY_TOPIC] = msg.topic
        props[P.RECONSUME_TIME] = str(reconsume_time)
        props[P.MAX_RECONSUME_TIMES] = str(max(self._max_reconsume_times(), 0))
        retry = Message(
            retry_topic(self.group), msg.body, properties=props, flag=msg.flag, delay_level=3 + msg.reconsume_times
        )
        try:
            await self._retry_producer.send(retry)
            return True
        except MQClientError as exc:
            log.warning("resend of %s to %s failed: %s", msg.msg_id, retry.topic, exc)
            return False

    async def _orderly_loop(self, state: _QueueState) -> None:
        pq, mq = state.pq, state.mq
        locks = not self.config.broadcasting
        max_times = self._max_reconsume_times()

        def committed() -> None:
            if not pq.dropped:
                self.offsets.update(mq, pq.commit())

        while not pq.dropped:
            if locks and (not pq.locked or trio.current_time() - pq.lock_time > LOCK_VALID_FOR):
                await self._lock([mq])
                if not pq.locked:
                    await trio.sleep(LOCK_RETRY_DELAY)
                continue
            msgs = pq.take(1)
            pq.last_consume_time = trio.current_time()  # as Java's takeMessages
            if not msgs:
                state.wakeup = trio.Event()
                await state.wakeup.wait()
                continue
            async with state.consume_lock:
                if pq.dropped:
                    return
                msg = msgs[0]
                if await self._call_handler(msg, committed):
                    continue
                if pq.dropped:
                    return
                # exhausted: to the DLQ through the retry topic (the broker moves it)
                if 0 <= max_times <= msg.reconsume_times and await self._resend_to_retry_topic(
                    msg, msg.reconsume_times
                ):
                    committed()
                    continue
                msg.reconsume_times += 1
                pq.give_back(msgs)
            await trio.sleep(self.config.suspend_current_queue_time)


@asynccontextmanager
async def open_push_consumer(
    group: str,
    namesrv: str | Sequence[str] | None = None,
    *,
    subscriptions: Mapping[str, str] | None = None,
    handler: Handler | None = None,
    orderly: bool = False,
    allocate: AllocateStrategy = allocate_averagely,
    **options: Unpack[ConsumerOptions],
) -> AsyncIterator[PushConsumer]:
    """`async with open_push_consumer(group, namesrv=..., subscriptions={"T": "*"}) as c:`"""
    consumer = PushConsumer(group, namesrv, handler=handler, orderly=orderly, allocate=allocate, **options)
    for topic, expression in (subscriptions or {}).items():
        consumer.subscribe(topic, expression)
    async with consumer:
        yield consumer
