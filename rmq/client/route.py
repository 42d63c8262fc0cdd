"""Topic routes as the client sees them: parsing, publish and subscribe queues.

A TopicRouteData body (PROTOCOL.md 4.2) lists queue data per broker name and the
addresses of each broker (id 0 = master). From it a producer derives its publish
queues (`topicRouteData2TopicPublishInfo`: writable queues of brokers that have a
master, or the `orderTopicConf` override) and a consumer its subscribe queues (readable
queues). Route bodies come in two dialects (quoted and unquoted broker-id keys);
`rmq.protocol.body.loads` reads both, giving int or str keys, and both are accepted.

`PublishInfo.select` is the producer's queue choice: round-robin over the publish
queues, skipping the broker that just failed and, with fault avoidance, brokers marked
unavailable by `LatencyFaultTolerance`.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rmq.protocol.bodies.routes import BrokerData as BrokerData
from rmq.protocol.bodies.routes import QueueData, TopicRouteData
from rmq.protocol.constants import PERM_READ, PERM_WRITE

from .latency import LatencyFaultTolerance
from .message import MessageQueue

if TYPE_CHECKING:
    from .plain_send import SendTemplate


class TopicRoute(TopicRouteData):
    """A TopicRouteData with the queues a producer and a consumer derive from it."""

    __slots__ = ()

    def broker(self, broker_name: str) -> BrokerData | None:
        for bd in self.broker_datas:
            if bd.broker_name == broker_name:
                return bd
        return None

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues of brokers with a master, or the orderTopicConf queues."""
        out: list[MessageQueue] = []
        if self.order_topic_conf:
            for item in self.order_topic_conf.split(";"):
                name, _, num = item.partition(":")
                if name and num.strip().isdigit():
                    out.extend(MessageQueue(topic, name, i) for i in range(int(num)))
            return out
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if not qd.perm & PERM_WRITE:
                continue
            bd = self.broker(qd.broker_name)
            if bd is None or bd.master_addr is None:
                continue
            out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
        return out

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """Readable queues of every broker name in the route."""
        out: list[MessageQueue] = []
        for qd in self.queue_datas:
            if qd.perm & PERM_READ:
                out.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
        return sorted(out)

    def with_queue_limit(self, limit: int) -> TopicRoute:
        """The route with every broker's queue counts capped (auto-create from TBW102)."""
        qds = tuple(
            QueueData(
                q.broker_name, min(limit, q.read_queue_nums), min(limit, q.read_queue_nums), q.perm, q.topic_sys_flag
            )
            for q in self.queue_datas
        )
        return dataclasses.replace(self, queue_datas=qds)


class PublishInfo:
    """A topic's publish queues with the producer's round-robin position."""

    def __init__(self, topic: str, route: TopicRoute, *, from_default_topic: bool = False) -> None:
        self.topic = topic
        self.route = route
        self.queues = route.publish_queues(topic)
        self.order_topic = bool(route.order_topic_conf)
        # true when the queues are TBW102's: the broker creates the topic on first send
        self.from_default_topic = from_default_topic
        self._index = itertools.count(random.randrange(1 << 16))
        # by queue index: the plain send's header templates (producer.py), made on first use
        self.templates: list[SendTemplate | None] = [None] * len(self.queues)

    def __repr__(self) -> str:
        return f"<PublishInfo {self.topic} {len(self.queues)} queues>"

    def next_index(self) -> int:
        return next(self._index)

    def select(
        self, last_broker: str | None = None, faults: LatencyFaultTolerance | None = None, now: float | None = None
    ) -> MessageQueue:
        """The next queue for a send; see the module docstring. IndexError if there are none.

        `now` is the faults' clock read by the caller (read here when not given)."""
        queues = self.queues
        n = len(queues)
        if n == 0:
            raise IndexError(f"topic {self.topic} has no writable queue")
        start = self.next_index()
        if faults is not None:
            for i in range(n):
                mq = queues[(start + i) % n]
                if mq.broker_name != last_broker and faults.is_available(mq.broker_name, now):
                    return mq
            name = faults.pick_one_at_least()
            if name is not None:
                own = [q for q in queues if q.broker_name == name]
                if own:
                    return own[start % len(own)]
                faults.remove(name)
        for i in range(n):
            mq = queues[(start + i) % n]
            if mq.broker_name != last_broker:
                return mq
        return queues[start % n]


def brokers_of(routes: Iterable[TopicRoute]) -> dict[str, BrokerData]:
    """broker name → BrokerData over several routes (later routes win)."""
    out: dict[str, BrokerData] = {}
    for route in routes:
        for bd in route.broker_datas:
            out[bd.broker_name] = bd
    return out
