"""PullConsumer: the application asks for messages (RocketMQ's DefaultLitePullConsumer).

    consumer = PullConsumer("my_group", namesrv="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "*")        # or: consumer.assign([mq, ...])
    async with consumer:
        msgs = await consumer.poll(timeout=1.0)
        await consumer.seek(mq, 0)
        await consumer.commit()

Each owned queue has a pull task (long polling, with the subscription sent along) that
puts batches into one bounded buffer; `poll` takes the next batch. Owned queues come
from `subscribe` (rebalanced within the group like a push consumer) or are fixed by
`assign`. A batch counts as consumed once `poll` returned it; `commit` (automatic
every 5 s with `auto_commit`, and at close) sends those positions to the broker (or the
local file when broadcasting). `seek` restarts a queue's pulling at another offset;
batches already buffered for the old position are discarded.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Unpack

import trio

from rmq.protocol.constants import MASTER_ID
from rmq.protocol.message import MessageExt
from rmq.scheduling import after_woken

from .api import PullAhead, PullResult, PullStatus
from .config import ConsumerOptions
from .consumer_base import ConsumerBase, no_progress
from .errors import MQClientError, MQClientStateError, MQNoRouteError
from .members import Instance
from .message import MessageQueue, check_topic
from .offset_store import ReadType
from .rebalance import AllocateStrategy, allocate_averagely

log = logging.getLogger("rmq.client.pull_consumer")

LITE_SUSPEND = 20.0  # brokerSuspendMaxTimeMillis of the lite pull consumer
BUFFERED_BATCHES = 64  # pulled batches waiting for poll(), over all queues
STOP_TIMEOUT = 10.0


class _Queue:
    __slots__ = ("broker_id", "consumed", "gen", "mq", "next_offset", "scope")

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq
        self.scope = trio.CancelScope()
        self.gen = 0
        self.broker_id = MASTER_ID  # where the broker suggested pulling from next
        self.next_offset = -1  # where the pull task goes next; -1: ask the offset store
        self.consumed = -1  # offset after the last message poll() returned; -1: none


class PullConsumer(ConsumerBase):
    """A lite pull consumer; see the module docstring.

    Args:
      group, namesrv, allocate, instance, **options: as PushConsumer.
      auto_commit: commit polled positions every `persist_consumer_offset_interval` and at close.
    """

    consume_type = "CONSUME_ACTIVELY"

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        auto_commit: bool = True,
        allocate: AllocateStrategy = allocate_averagely,
        instance: Instance | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(group, namesrv, instance=instance, allocate=allocate, options=options)
        self.auto_commit = auto_commit
        self._queues: dict[MessageQueue, _Queue] = {}
        self._fixed: set[MessageQueue] | None = None
        self._buf_send, self._buf_recv = trio.open_memory_channel[tuple[_Queue, int, list[MessageExt]]](
            BUFFERED_BATCHES
        )

    def __repr__(self) -> str:
        return f"<PullConsumer {self.group} {self.instance.client_id} {len(self._queues)} queues>"

    # -- choosing queues --------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume `topic` (tags per `expression`), sharing its queues with the group."""
        if self._fixed is not None:
            raise MQClientStateError("this consumer uses assign(); subscribe() and assign() do not mix")
        check_topic(topic)
        self._add_subscription(topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance)."""
        if self._subs and self._fixed is None:
            raise MQClientStateError("this consumer uses subscribe(); subscribe() and assign() do not mix")
        self._fixed = set(queues)
        if self._nursery is not None:
            self._nursery.start_soon(self._apply_fixed)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, from the name servers."""
        self._check_running()
        route = await self.instance.update_route(topic)
        if route is None:
            raise MQNoRouteError(topic, self.instance.namesrv)
        return route.subscribe_queues(topic)

    # -- polling and positions --------------------------------------------------------------

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:  # noqa: ASYNC109  public API
        """The next pulled batch (one queue's messages, in order), or [] after `timeout` s."""
        self._check_running()
        with trio.move_on_after(timeout):
            while True:
                q, gen, msgs = await self._buf_recv.receive()
                if gen != q.gen or self._queues.get(q.mq) is not q:
                    continue  # pulled before a seek, or the queue is no longer ours
                q.consumed = msgs[-1].queue_offset + 1
                return msgs
        return []

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue `mq` at `offset` (within the queue's min..max offsets)."""
        q = self._owned(mq)
        api = self.instance.api
        lo = await self._read(mq, lambda addr: api.get_min_offset(addr, mq))
        hi = await self._read(mq, lambda addr: api.get_max_offset(addr, mq))
        if not lo <= offset <= hi:
            raise MQClientError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        self._restart(q, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        q = self._owned(mq)
        api = self.instance.api
        self._restart(q, await self._read(mq, lambda addr: api.get_min_offset(addr, mq)))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        q = self._owned(mq)
        api = self.instance.api
        self._restart(q, await self._read(mq, lambda addr: api.get_max_offset(addr, mq)))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message stored at or after `timestamp_ms` (nearest)."""
        self._check_running()
        api = self.instance.api
        return await self._read(mq, lambda addr: api.search_offset(addr, mq, timestamp_ms))

    async def seek_to_time(self, mq: MessageQueue, timestamp_ms: int) -> None:
        """Continue `mq` from the messages stored around `timestamp_ms`."""
        q = self._owned(mq)
        self._restart(q, await self.offset_for_timestamp(mq, timestamp_ms))

    async def committed(self, mq: MessageQueue) -> int:
        """The offset committed for `mq` (-1: none)."""
        self._check_running()
        return await self.offsets.read(mq, ReadType.STORE)

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Commit `offsets`, or by default the positions of everything polled so far."""
        if offsets is None:
            offsets = {q.mq: q.consumed for q in self._queues.values() if q.consumed >= 0}
        for mq, offset in offsets.items():
            self.offsets.update(mq, offset)
        await self.offsets.persist_all(set(offsets) | set(self._queues))

    def _owned(self, mq: MessageQueue) -> _Queue:
        self._check_running()
        q = self._queues.get(mq)
        if q is None:
            raise MQClientStateError(f"{mq} is not assigned to this consumer")
        return q

    def _restart(self, q: _Queue, offset: int) -> None:
        q.scope.cancel()
        q.scope = trio.CancelScope()
        q.gen += 1
        q.next_offset = offset
        q.consumed = offset
        assert self._nursery is not None
        self._nursery.start_soon(self._run_queue, q, q.scope, q.gen)

    def _check_running(self) -> None:
        if self._nursery is None:
            raise MQClientStateError("the consumer is not running: use it in `async with`")

    # -- lifecycle --------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifecycle(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self._own_instance:
                await stack.enter_async_context(self.instance.running())
            await self.offsets.load()
            self.instance.add_consumer(self)
            self._running = True
            await self._refresh_routes()
            await self.instance.send_heartbeat()
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    if self._fixed is not None:
                        await self._apply_fixed()
                    nursery.start_soon(self._rebalance_loop)
                    if self.auto_commit:
                        nursery.start_soon(self._commit_loop)
                    try:
                        yield
                    finally:
                        nursery.cancel_scope.cancel()
            finally:
                self._nursery = None
                await self._stop()

    async def _stop(self) -> None:
        self._running = False
        with trio.CancelScope(shield=True), trio.move_on_after(STOP_TIMEOUT):
            if self.auto_commit:
                await self.commit()
            else:
                await self.offsets.persist_all(self._queues)
        self._queues.clear()
        self.instance.remove(self)
        await self.instance.unregister(None, self.group)

    async def _commit_loop(self) -> None:
        while True:
            await trio.sleep(self.config.persist_consumer_offset_interval)
            await self.commit()

    def route_topics(self) -> list[str]:
        return sorted(set(self._subs) | {mq.topic for mq in self._fixed or ()})

    # -- queues -----------------------------------------------------------------------------

    async def rebalance(self) -> None:
        """Subscribed topics are rebalanced; assigned queues stay as assigned."""
        if self._fixed is None:
            await super().rebalance()

    async def _apply_fixed(self) -> None:
        fixed = self._fixed or set()
        for topic in {mq.topic for mq in fixed} | {mq.topic for mq in self._queues}:
            if topic not in self.instance.routes:
                try:
                    await self.instance.update_route(topic)
                except MQClientError as exc:
                    log.warning("route of %s: %s", topic, exc)
            await self._assign(topic, {mq for mq in fixed if mq.topic == topic})

    def _assigned(self) -> list[MessageQueue]:
        return list(self._queues)

    async def _assign(self, topic: str, queues: set[MessageQueue]) -> None:
        current = {mq for mq in self._queues if mq.topic == topic}
        for mq in sorted(current - queues):
            q = self._queues.pop(mq)
            q.scope.cancel()
            if q.consumed >= 0:
                self.offsets.update(mq, q.consumed)
            await self.offsets.persist(mq)
            self.offsets.remove(mq)
        for mq in sorted(queues - current):
            if self._nursery is None:
                return
            self.offsets.remove(mq)
            q = self._queues[mq] = _Queue(mq)
            self._nursery.start_soon(self._run_queue, q, q.scope, q.gen)
            self._queues_assigned()

    async def _run_queue(self, q: _Queue, scope: trio.CancelScope, gen: int) -> None:
        """Pull `q` from `q.next_offset` on, until `scope` is cancelled (a seek or a loss).

        The position is kept locally: a task that a seek replaced may still see one more
        response before its cancellation lands, and must not move the new position.

        While the queue has a backlog (an answer's header shows messages beyond the ones it
        brings), the next pull is sent before the answer's records are decoded and handed
        to `poll`, so that the broker reads the next batch while this one is decoded. A
        consumer that has caught up waits for each answer before its next pull: its early
        pull would only park at the broker, and its write would delay the message at hand.
        It also lets poll's caller take the answer's messages before it writes that pull.
        Such an answer's messages reach poll() from the connection's reader, as it decodes
        the answer (`hand_over`), rather than from this task a pass of the event loop later;
        when poll()'s buffer is full, this task hands them over itself once there is room.
        """
        cfg = self.config
        ahead: PullAhead | None = None  # the next pull, sent already (ConsumerBase.pull)

        def still_ours() -> bool:  # no seek or loss since this task began
            return q.gen == gen

        def hand_over(result: PullResult) -> bool:  # in the connection's reader (see pull)
            if not result.messages or q.gen != gen:
                return False
            try:
                self._buf_send.send_nowait((q, gen, result.messages))
            except trio.WouldBlock:  # poll() is behind: this task waits for room below
                return False
            return True

        with scope:
            offset = q.next_offset
            while offset < 0:
                offset = await self.initial_offset(q.mq)
                if offset < 0:
                    await trio.sleep(cfg.pull_error_delay)
            try:
                while True:
                    sent, ahead = ahead, None
                    try:
                        result = await self.pull(
                            q.mq,
                            offset,
                            max_nums=cfg.pull_batch_size,
                            suspend=LITE_SUSPEND,
                            timeout=cfg.consumer_timeout_when_suspend,
                            commit=False,
                            lite=True,
                            broker_id=q.broker_id,
                            ahead=sent,
                            ahead_if=still_ours,
                            deliver=hand_over,
                        )
                    except MQClientError as exc:
                        log.info("pull from %s failed: %s", q.mq, exc)
                        q.broker_id = MASTER_ID  # ask again where to pull; a lost master's slave serves
                        await self.pull_failed(q.mq, exc)
                        continue
                    ahead = result.next_pull
                    if result.delivered:  # poll's caller has the messages: its turn first
                        await after_woken()
                    q.broker_id = result.suggest_which_broker_id
                    if q.gen != gen:
                        return
                    if result.status == PullStatus.OFFSET_ILLEGAL:
                        log.warning("offset %d of %s is illegal, moving to %d", offset, q.mq, result.next_begin_offset)
                    stuck = no_progress(result, offset)
                    offset = q.next_offset = result.next_begin_offset
                    if result.messages:
                        if not result.delivered:
                            await self._buf_send.send((q, gen, result.messages))
                            if ahead is None:
                                # poll's caller takes them before the next pull's write, which
                                # wakes the broker and would delay every message by its cost
                                await after_woken()
                    elif stuck:
                        await trio.sleep(cfg.pull_error_delay)
            finally:
                if ahead is not None:  # a seek, a loss or the end, with a pull out
                    ahead.sent.forget()


@asynccontextmanager
async def open_pull_consumer(
    group: str,
    namesrv: str | Sequence[str] | None = None,
    *,
    subscriptions: Mapping[str, str] | None = None,
    assign: Iterable[MessageQueue] | None = None,
    **options: Unpack[ConsumerOptions],
) -> AsyncIterator[PullConsumer]:
    """`async with open_pull_consumer(group, namesrv=..., subscriptions={"T": "*"}) as c:`"""
    consumer = PullConsumer(group, namesrv, **options)
    for topic, expression in (subscriptions or {}).items():
        consumer.subscribe(topic, expression)
    if assign is not None:
        consumer.assign(assign)
    async with consumer:
        yield consumer
