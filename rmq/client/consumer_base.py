"""What push and pull consumers share: subscriptions, rebalance, offsets, pulling.

A consumer subscribes topics with tag expressions, learns each topic's readable queues
from its route, and rebalances: every `rebalance_interval` (20 s) and at once when a
broker says the group changed (NOTIFY_CONSUMER_IDS_CHANGED), it asks a broker of the
topic for the group's client ids (clustering) and takes its share with the allocation
strategy, or takes every queue (broadcasting). Subclasses start and stop work on the
queues they gain and lose (`_assign`).

A queue newly taken starts at its committed offset; with none, at the position
`consume_from_where` says (RebalancePushImpl.computePullFromWhere):

    LAST_OFFSET   the queue's max offset (a %RETRY% topic: 0)
    FIRST_OFFSET  0
    TIMESTAMP     the offset of `consume_timestamp` (a %RETRY% topic: the max offset)

Offsets are committed every `persist_consumer_offset_interval` (5 s) and when the
consumer stops.
"""

from __future__ import annotations

import abc
import logging
import math
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import trio

from rmq.protocol import properties as P
from rmq.protocol.bodies.heartbeat import ConsumerData
from rmq.protocol.constants import (
    MASTER_ID,
    PULL_COMMIT_OFFSET,
    PULL_LITE,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    RETRY_PREFIX,
    retry_topic,
)
from rmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rmq.protocol.message import MessageExt

from .api import BeforeDecode, PullAhead, PullResult, PullStatus
from .config import ConsumeFromWhere, ConsumerConfig, ConsumerOptions
from .errors import MQClientError, MQConnectError, MQTimeoutError
from .ids import wall_clock_ms
from .instance import ClientInstance
from .members import Instance
from .message import MessageQueue
from .offset_store import NO_OFFSET, LocalOffsetStore, OffsetStore, ReadType, RemoteOffsetStore
from .rebalance import AllocateStrategy
from .route import TopicRoute
from .service import AsyncService
from .subscription import Subscription

log = logging.getLogger("rmq.client.consumer")

HALF_AN_HOUR_MS = 30 * 60 * 1000


class ConsumerBase(AsyncService):
    """Shared machinery; see the module docstring. Not used directly."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None,
        *,
        instance: Instance | None,
        allocate: AllocateStrategy,
        options: ConsumerOptions,
    ) -> None:
        if not group:
            raise MQClientError("the consumer group must not be empty")
        self.group = group
        namesrv = namesrv if instance is None else instance.namesrv
        self.config = ConsumerConfig.build(namesrv, options, type(self).__name__)
        self._own_instance = instance is None
        self.instance: Instance = instance if instance is not None else ClientInstance(self.config)
        self.allocate = allocate
        self._subs: dict[str, Subscription] = {}
        self._topic_queues: dict[str, list[MessageQueue]] = {}
        self.offsets: OffsetStore = (
            LocalOffsetStore(self.config.offset_store_dir, self.instance.client_id, group)
            if self.config.broadcasting
            else RemoteOffsetStore(self.instance, group)
        )
        self._rebalance_wanted = trio.Event()
        self._rebalance_lock = trio.Lock()
        self._running = False
        self._nursery: trio.Nursery | None = None  # the consumer's own, while running
        self._queue_added = trio.Event()  # set (and replaced) whenever a queue is assigned

    # -- assignment -------------------------------------------------------------------------

    @property
    def assignment(self) -> frozenset[MessageQueue]:
        """The queues this consumer owns now."""
        return frozenset(self._assigned())

    def _queues_assigned(self) -> None:
        added, self._queue_added = self._queue_added, trio.Event()
        added.set()

    async def wait_for_assignment(self, timeout: float | None = None) -> frozenset[MessageQueue]:  # noqa: ASYNC109  public API
        """Wait until this consumer owns at least one queue (its first rebalance, which needs
        the topic's route and the group's members), and return them. Send what it must see
        after this returns: with CONSUME_FROM_LAST_OFFSET, earlier messages are skipped.

        Raises:
          MQTimeoutError: still nothing assigned after `timeout` seconds.
        """
        with trio.move_on_after(math.inf if timeout is None else timeout):
            while not self.assignment:
                await self._queue_added.wait()
            return self.assignment
        raise MQTimeoutError(f"group {self.group}", timeout or 0.0, "queue assignment")

    # -- subscriptions ----------------------------------------------------------------------

    def _add_subscription(self, topic: str, expression: str | None) -> Subscription:
        sub = Subscription.parse(topic, expression, wall_clock_ms())
        self._subs[topic] = sub
        if self._running:
            if self._nursery is not None:
                self._nursery.start_soon(self._refresh_routes)  # the new topic's queues
            self.instance.heartbeat_soon()
            self.rebalance_soon()
        return sub

    def _remove_subscription(self, topic: str) -> None:
        self._subs.pop(topic, None)
        if self._running:
            self.instance.heartbeat_soon()
            self.rebalance_soon()

    @property
    def subscriptions(self) -> dict[str, Subscription]:
        return dict(self._subs)

    def _restore_retry_topic(self, msg: MessageExt) -> None:
        """A message from %RETRY%<group> shows its original topic (resetRetryAndNamespace)."""
        original = msg.properties.get(P.RETRY_TOPIC)
        if original and msg.topic == retry_topic(self.group):
            msg.topic = original

    # -- instance callbacks -----------------------------------------------------------------

    def route_topics(self) -> list[str]:
        return list(self._subs)

    def on_route(self, topic: str, route: TopicRoute) -> None:
        if topic not in self._subs:
            return
        queues = route.subscribe_queues(topic)
        if queues != self._topic_queues.get(topic):
            self._topic_queues[topic] = queues
            self.rebalance_soon()

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self.group,
            self.consume_type,
            self.config.message_model.value,
            self.config.consume_from_where.value,
            tuple(s.data() for s in self._subs.values()),
        )

    def on_ids_changed(self) -> None:
        self.rebalance_soon()

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Overridden by consumers that can act on an admin's offset reset."""
        log.info("offset reset of %s for group %s ignored", topic, self.group)

    def running_info(self, namesrv: Sequence[str]) -> dict[str, Any]:
        """ConsumerRunningInfo with the subscriptions only (push consumers tell more)."""
        data = self.consumer_data()
        return {
            "jstack": "",
            "mqTable": {},
            "properties": {
                "PROP_CLIENT_VERSION": "rmq",
                "PROP_CONSUME_TYPE": data.consume_type,
                "PROP_CONSUMER_START_TIMESTAMP": "0",
                "PROP_NAMESERVER_ADDR": ";".join(namesrv),
            },
            "statusTable": {},
            "subscriptionSet": [s.to_json() for s in data.subscriptions],
        }

    async def consume_directly(self, msg: MessageExt) -> dict[str, Any] | None:
        """None: no handler to run here (PushConsumer overrides this)."""
        return None

    # -- startup and loops ------------------------------------------------------------------

    async def _refresh_routes(self) -> None:
        for topic in list(self._subs):
            try:
                await self.instance.update_route(topic)
            except MQClientError as exc:
                log.warning("route of %s: %s", topic, exc)

    def rebalance_soon(self) -> None:
        self._rebalance_wanted.set()

    async def _rebalance_loop(self) -> None:
        """Rebalance now, then every `rebalance_interval` or when asked.

        While a subscribed topic has no route yet (a new group's %RETRY% topic is created
        by the broker at our first heartbeat), the rounds come sooner: 1 s, doubling up
        to the interval, so such a topic is consumed within seconds, not at the next
        30 s route refresh.
        """
        retry_delay = 1.0
        while True:
            await self.rebalance()
            wait = self.config.rebalance_interval
            if self._subs.keys() - self._topic_queues.keys():
                wait = min(wait, retry_delay)
                retry_delay *= 2
            else:
                retry_delay = 1.0
            with trio.move_on_after(wait):
                await self._rebalance_wanted.wait()
            self._rebalance_wanted = trio.Event()

    async def _persist_loop(self) -> None:
        while True:
            await trio.sleep(self.config.persist_consumer_offset_interval)
            await self.offsets.persist_all(self._assigned())

    # -- rebalance --------------------------------------------------------------------------

    @abc.abstractmethod
    def _assigned(self) -> list[MessageQueue]:
        """The queues this consumer works on now."""

    @abc.abstractmethod
    async def _assign(self, topic: str, queues: set[MessageQueue]) -> None:
        """Make `queues` this consumer's queues of `topic`: start new ones, stop lost ones."""

    async def rebalance(self) -> None:
        """Recompute this consumer's queues for every subscribed topic now."""
        async with self._rebalance_lock:
            for topic in list(self._subs):
                if topic not in self._topic_queues:
                    try:
                        await self.instance.update_route(topic)
                    except MQClientError as exc:
                        log.info("route of %s: %s", topic, exc)
                mq_all = self._topic_queues.get(topic)
                if mq_all is None:
                    continue
                if self.config.broadcasting:
                    mine = set(mq_all)
                else:
                    cids = await self._consumer_ids(topic)
                    if not cids:
                        continue
                    mine = set(self.allocate(self.group, self.instance.client_id, mq_all, cids))
                await self._assign(topic, mine)
            for topic in {mq.topic for mq in self._assigned()} - self._subs.keys():
                await self._assign(topic, set())

    async def _consumer_ids(self, topic: str) -> list[str]:
        route = self.instance.routes.get(topic)
        if route is None or not route.broker_datas:
            return []
        candidates = list(route.broker_datas)
        random.shuffle(candidates)
        for bd in candidates:
            # any broker of the group knows its consumers (they heartbeat to slaves too)
            addr = self.instance.read_addr(bd.broker_name) or bd.any_addr()
            if addr is None:
                continue
            try:
                return await self.instance.api.get_consumer_ids(addr, self.group)
            except MQClientError as exc:
                if isinstance(exc, (MQConnectError, MQTimeoutError)):
                    self.instance.unreachable(addr)
                log.info("consumer list of %s from %s: %s", self.group, addr, exc)
        return []

    # -- offsets and pulls ------------------------------------------------------------------

    async def initial_offset(self, mq: MessageQueue) -> int:
        """Where consumption of a newly taken queue starts; -1 if it cannot be known now."""
        committed = await self.offsets.read(mq, ReadType.STORE)
        if committed >= 0:
            return committed
        if committed != NO_OFFSET:
            return -1
        where = self.config.consume_from_where
        api = self.instance.api
        try:
            if where is ConsumeFromWhere.FIRST_OFFSET:
                return 0
            # a slave has the same consume queues: it answers while the master is gone
            if where is ConsumeFromWhere.LAST_OFFSET:
                if mq.topic.startswith(RETRY_PREFIX):
                    return 0
                return await self._read(mq, lambda addr: api.get_max_offset(addr, mq))
            if mq.topic.startswith(RETRY_PREFIX):
                return await self._read(mq, lambda addr: api.get_max_offset(addr, mq))
            when = self.config.consume_timestamp
            if when is None:
                when = wall_clock_ms() - HALF_AN_HOUR_MS
            return await self._read(mq, lambda addr: api.search_offset(addr, mq, when))
        except MQClientError as exc:
            log.warning("start offset of %s: %s", mq, exc)
            return -1

    async def _read(self, mq: MessageQueue, call: Callable[[str], Awaitable[int]]) -> int:
        """`call(addr)` on the master of `mq`'s group, or a slave while the master is gone
        or refuses connections (ClientInstance.read_call)."""
        return await self.instance.read_call(mq.topic, mq.broker_name, call)

    async def pull_failed(self, mq: MessageQueue, exc: MQClientError) -> None:
        """After a failed pull of `mq`: the topic's route is fetched again (at most once a
        second), so a group whose master is gone is read from its slave without waiting for
        the 30 s poll. The next pull follows after `pull_error_delay`, or at once when the
        broker that failed could not be reached and the group has another one to ask (the
        address is avoided for a while: a second failure in a row waits)."""
        await self.instance.route_failed(mq.topic)
        failed = exc.address if isinstance(exc, (MQConnectError, MQTimeoutError)) else None
        other = self.instance.read_addr(mq.broker_name)
        if failed is None or other is None or other == failed or not self.instance.reachable(other):
            await trio.sleep(self.config.pull_error_delay)

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        *,
        max_nums: int,
        suspend: float,
        timeout: float,  # noqa: ASYNC109  the pull's request deadline (long poll + margin)
        broker_id: int = MASTER_ID,
        commit: bool = True,
        lite: bool = False,
        ahead: PullAhead | None = None,
        ahead_if: Callable[[], bool] | None = None,
        deliver: Callable[[PullResult], bool] | None = None,
    ) -> PullResult:
        """One PULL_MESSAGE for `mq` from `offset`, committing the known offset on the way.

        A push consumer's pull carries no subscription (the broker uses the one from the
        heartbeat, as with Java clients); a `lite` pull sends its expression along.

        Messages whose tag the subscription does not want are removed (the broker
        filters by hash only). Raises MQClientError.

        Pulling ahead: when the answer brings messages and shows more beyond them, and
        `ahead_if()` says yes, the next pull (same settings, from the answer's next offset,
        without a commit) is sent before the answer's records are decoded, and comes back as
        the result's `next_pull`; the caller passes it as `ahead` to take its answer. A
        consumer that has caught up never pulls ahead: its early pull would only park at the
        broker, and its write would delay the message at hand. A next pull sent by a call
        that then fails is forgotten.

        `deliver(result)`, if given, hands a fresh pull's (not an `ahead` one's) messages on
        from the connection's reader as the answer arrives (ClientAPI.pull's `on_result`),
        after the filtering below; it says whether it took them, which the result's
        `delivered` then tells the caller.
        """
        sub = self._subs.get(mq.topic) or Subscription.parse(mq.topic, "*")
        on_result: Callable[[PullResult], None] | None = None
        if deliver is not None and ahead is None:
            hand_on = deliver

            def on_result(result: PullResult) -> None:
                self._filter(sub, result)
                result.delivered = hand_on(result)

        next_pull: PullAhead | None = None
        before_decode: BeforeDecode | None = None
        if ahead_if is not None:
            wanted = ahead_if

            def pull_next(status: str, h: PullMessageResponseHeader) -> None:
                nonlocal next_pull
                if status != PullStatus.FOUND or h.max_offset <= h.next_begin_offset or not wanted():
                    return
                at = self.instance.read_addr(mq.broker_name, h.suggest_which_broker_id)
                if at is not None:
                    header = self._pull_header(mq, sub, h.next_begin_offset, max_nums, suspend, lite, 0, at)
                    next_pull = self.instance.api.pull_ahead(at, header, timeout)

            before_decode = pull_next

        if ahead is None:
            addr = self.instance.read_addr(mq.broker_name, broker_id)
            if addr is None:
                await self.instance.update_route(mq.topic)
                addr = self.instance.read_addr(mq.broker_name, broker_id)
            if addr is None:
                raise MQClientError(f"the broker {mq.broker_name} does not exist")
            commit_offset = 0
            if commit and not self.config.broadcasting:
                commit_offset = max(await self.offsets.read(mq, ReadType.MEMORY), 0)
            header = self._pull_header(mq, sub, offset, max_nums, suspend, lite, commit_offset, addr)
            call = self.instance.api.pull(addr, header, timeout, before_decode=before_decode, on_result=on_result)
        else:
            addr = ahead.addr
            call = self.instance.api.pull_answer(ahead, before_decode=before_decode)
        try:
            result = await call
        except BaseException as exc:
            if next_pull is not None:  # sent before this answer's records proved unreadable
                next_pull.sent.forget()
            if isinstance(exc, (MQConnectError, MQTimeoutError)):
                self.instance.unreachable(addr)  # the next pull tries another broker of the group
            raise
        if on_result is None:
            self._filter(sub, result)
        result.next_pull = next_pull
        return result

    def _filter(self, sub: Subscription, result: PullResult) -> None:
        """Drop the messages whose tag `sub` does not want (the broker filters by hash only)
        and give retried messages their topic back."""
        if sub.tags:
            result.messages = [m for m in result.messages if sub.matches(m.tags)]
        for msg in result.messages:
            self._restore_retry_topic(msg)

    def _pull_header(
        self,
        mq: MessageQueue,
        sub: Subscription,
        offset: int,
        max_nums: int,
        suspend: float,
        lite: bool,
        commit_offset: int,
        addr: str,
    ) -> PullMessageRequestHeader:
        sys_flag = PULL_SUSPEND if suspend > 0 else 0
        if lite:
            sys_flag |= PULL_SUBSCRIPTION | PULL_LITE
        # only a master takes commits: a pull from a slave clears the flag (as Java's
        # PullAPIWrapper does), the offset goes to the master with the next persist
        if commit_offset > 0 and addr == self.instance.master_addr(mq.broker_name):
            sys_flag |= PULL_COMMIT_OFFSET
        return PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=int(suspend * 1000),
            sub_version=sub.sub_version,
            subscription=sub.expression,
            expression_type="TAG",
        )


def no_progress(result: PullResult, offset: int) -> bool:
    """A pull from `offset` answered "retry" without moving on: a slave asked for an offset it
    does not have (it lags its master, or starts later) answers PULL_RETRY_IMMEDIATELY with
    the same offset. The caller waits before asking again rather than spin."""
    return (
        not result.messages
        and result.next_begin_offset == offset
        and result.status in (PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL)
    )


def group_by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    out: dict[str, list[MessageQueue]] = {}
    for mq in sorted(mqs):
        out.setdefault(mq.broker_name, []).append(mq)
    return out
