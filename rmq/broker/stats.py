"""Broker statistics: message counters, TPS figures and the counters the metrics read.

RocketMQ keeps per-second samples in BrokerStatsManager; mqadmin clusterList reads the
totals and the first of three TPS figures (10 s, 1 min, 10 min). Here the counters are
plain ints and dicts bumped on the send and pull paths (one method call per request, no
lock: everything runs in the broker's Trio thread), and `sample()`, called by the
controller every SAMPLE_INTERVAL, copies them into a ring long enough for the 10-minute
figure. The sampler is sans-IO: it only reads the clock it is given.

`stats_data` answers VIEW_BROKER_STATS_DATA (mqadmin statsAll) as BrokerStatsManager's
StatsItems do: sum, TPS and average per call over the last minute, hour and day, from the
10 s ring and two coarser ones (one sample per 10 minutes, one per hour).

Per topic (`topics_in`): [messages, bytes, sends]; per topic and message type (`typed_in`,
RocketMQ 5.x's message_type label): [messages, bytes, size-bucket counts...]; per group and
topic (`groups_out`): [messages, bytes, pulls]; `pulled`: the next offset a group's last pull
of a queue returned (what consumers hold but have not committed = inflight).

Events the metrics count (RocketMQ 5.x's families of the same meaning): messages sent to a
DLQ per (group, topic), transaction commits and rollbacks per topic with the commit latency,
timer messages enqueued and dequeued per topic with their delay.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import Any

from rmq.protocol import properties as P

SAMPLE_INTERVAL = 10.0  # seconds
_WINDOWS = (10, 60, 600)  # seconds, as putTps / getTransferedTps report them
_HOUR_STEP, _DAY_STEP = 600, 3600  # seconds between samples of the hour and day rings
CONSUME_TPS_WINDOW = 60  # seconds: consumeTps is BrokerStatsManager's per-minute figure

# rocketmq_message_size buckets (BrokerMetricsManager): 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB
MESSAGE_SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
_SIZE_SLOTS = len(MESSAGE_SIZE_BUCKETS) + 1  # the last slot counts sizes above 4 MiB
IN_MSGS, IN_BYTES, IN_SENDS = 0, 1, 2  # indexes into a topics_in entry (bytes: size sum)
TYPED_MSGS, TYPED_BYTES, TYPED_BUCKETS = 0, 1, 2  # indexes into a typed_in entry
OUT_MSGS, OUT_BYTES, OUT_PULLS = 0, 1, 2  # indexes into a groups_out entry

# statsName → (per-topic or per-"topic@group" value index, index of its call count);
# BROKER_* are keyed by the cluster name and summed over topics.
_TOPIC_ITEMS = {"TOPIC_PUT_NUMS": (IN_MSGS, IN_SENDS), "TOPIC_PUT_SIZE": (IN_BYTES, IN_SENDS)}
_GROUP_ITEMS = {"GROUP_GET_NUMS": (OUT_MSGS, OUT_PULLS), "GROUP_GET_SIZE": (OUT_BYTES, OUT_PULLS)}
_BROKER_ITEMS = {"BROKER_PUT_NUMS": "TOPIC_PUT_NUMS", "BROKER_GET_NUMS": "GROUP_GET_NUMS"}

# rocketmq_finish_message_latency buckets (seconds): 5 s, 1 min, 10 min, 1 h, 12 h, 24 h
FINISH_LATENCY_BUCKETS = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)
# rocketmq_delay_message_latency buckets (seconds): 1 min, 10 min, 1 h, 12 h, 1 day, 3 days
DELAY_LATENCY_BUCKETS = (60, 600, 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600)

# properties that may make a message other than "normal" (BrokerMetricsManager.getMessageType)
_TYPE_MARKS = (P.TRAN_MSG, P.SHARDING_KEY, P.DELAY, P.START_DELIVER_TIME, "TIMER_")
_DELAY_KEYS = (P.DELAY, *P.TIMER_KEYS)


def message_type(properties: str) -> str:
    """RocketMQ 5.x's message_type of a send's properties string: transaction, fifo, delay
    or normal. Most messages carry none of the marks and are not decoded."""
    if not any(mark in properties for mark in _TYPE_MARKS):
        return "normal"
    props = P.decode_properties(properties)
    if props.get(P.TRAN_MSG, "").lower() == "true":
        return "transaction"
    if P.SHARDING_KEY in props:
        return "fifo"
    if any(key in props for key in _DELAY_KEYS):
        return "delay"
    return "normal"


def _observe(table: dict[Any, list[int]], key: Any, value: int, bounds: tuple[int, ...]) -> None:
    """Add `value` to `key`'s histogram in `table`: [count, sum, bucket counts...]."""
    entry = table.get(key)
    if entry is None:
        entry = table[key] = [0] * (3 + len(bounds))
    entry[0] += 1
    entry[1] += value
    entry[2 + bisect_left(bounds, value)] += 1


class BrokerStats:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.put_total = 0  # messages stored
        self.get_total = 0  # messages handed to consumers
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self.topics_in: dict[str, list[int]] = {}
        self.typed_in: dict[tuple[str, str], list[int]] = {}  # (topic, message type) → see above
        self.dlq: dict[tuple[str, str], int] = {}  # (group, topic) → messages sent to the DLQ
        self.commits: dict[str, int] = {}  # real topic → transactions committed
        self.rollbacks: dict[str, int] = {}  # real topic → transactions rolled back
        self.finish_latency: dict[str, list[int]] = {}  # topic → seconds from prepare to commit
        self.timer_enqueued: dict[str, int] = {}  # real topic → timer messages taken in
        self.timer_dequeued: dict[str, int] = {}  # real topic → timer messages delivered
        self.delay_latency: dict[str, list[int]] = {}  # real topic → seconds from birth to delivery
        self.groups_out: dict[str, dict[str, list[int]]] = {}  # group → topic → [messages, bytes]
        self.pulled: dict[str, dict[tuple[str, int], int]] = {}  # group → (topic, queue) → next offset
        self.store_stats: Any = None  # the store's StoreStats once open (found / miss counts)
        # (time, counters); the first sample is taken when the broker starts
        self._samples: deque[tuple[float, dict[Any, int]]] = deque(maxlen=_WINDOWS[-1] // int(SAMPLE_INTERVAL) + 2)
        # (time, per-item snapshots) for stats_data: every sample, every 10 min, every hour
        self._items_minute: deque[tuple[float, dict[Any, tuple[int, int]]]] = deque(maxlen=8)
        self._items_hour: deque[tuple[float, dict[Any, tuple[int, int]]]] = deque(maxlen=8)
        self._items_day: deque[tuple[float, dict[Any, tuple[int, int]]]] = deque(maxlen=26)

    # -- the hot path -------------------------------------------------------------------

    def count_in(self, topic: str, messages: int, size: int, kind: str = "normal") -> None:
        """A send stored `messages` messages of `size` body bytes in all; `kind` is its
        message_type (see `message_type`)."""
        self.put_total += messages
        entry = self.topics_in.get(topic)
        if entry is None:
            entry = self.topics_in[topic] = [0, 0, 0]
        entry[IN_MSGS] += messages
        entry[IN_BYTES] += size
        entry[IN_SENDS] += 1
        typed = self.typed_in.get((topic, kind))
        if typed is None:
            typed = self.typed_in[topic, kind] = [0] * (TYPED_BUCKETS + _SIZE_SLOTS)
        typed[TYPED_MSGS] += messages
        typed[TYPED_BYTES] += size
        # a batch counts its messages at their average size
        typed[TYPED_BUCKETS + bisect_left(MESSAGE_SIZE_BUCKETS, size // messages if messages > 1 else size)] += messages

    def count_dlq(self, group: str, topic: str) -> None:
        """A message of `group` (consumed from `topic`) went to the group's DLQ."""
        self.dlq[group, topic] = self.dlq.get((group, topic), 0) + 1

    def count_commit(self, topic: str, seconds: int) -> None:
        """A transaction of `topic` was committed `seconds` after its half message was born."""
        self.commits[topic] = self.commits.get(topic, 0) + 1
        _observe(self.finish_latency, topic, max(seconds, 0), FINISH_LATENCY_BUCKETS)

    def count_rollback(self, topic: str) -> None:
        self.rollbacks[topic] = self.rollbacks.get(topic, 0) + 1

    def count_timer_enqueue(self, topic: str, delay_seconds: int) -> None:
        """A timer message for `topic`, due `delay_seconds` after its birth, was taken in."""
        self.timer_enqueued[topic] = self.timer_enqueued.get(topic, 0) + 1
        _observe(self.delay_latency, topic, max(delay_seconds, 0), DELAY_LATENCY_BUCKETS)

    def count_timer_dequeue(self, topic: str) -> None:
        self.timer_dequeued[topic] = self.timer_dequeued.get(topic, 0) + 1

    def count_out(self, group: str, topic: str, queue_id: int, messages: int, size: int, next_offset: int) -> None:
        """A pull handed `messages` messages (`size` bytes) to `group`."""
        self.get_total += messages
        by_topic = self.groups_out.get(group)
        if by_topic is None:
            by_topic = self.groups_out[group] = {}
            self.pulled[group] = {}
        entry = by_topic.get(topic)
        if entry is None:
            entry = by_topic[topic] = [0, 0, 0]
        entry[OUT_MSGS] += messages
        entry[OUT_BYTES] += size
        entry[OUT_PULLS] += 1
        self.pulled[group][topic, queue_id] = next_offset

    # -- sampling -----------------------------------------------------------------------

    def _counters(self) -> dict[Any, int]:
        counters: dict[Any, int] = {"put": self.put_total, "get": self.get_total}
        store = self.store_stats
        if store is not None:
            counters["found"] = store.get_message_times_total_found
            counters["miss"] = store.get_message_times_total_miss
            counters["found+miss"] = counters["found"] + counters["miss"]
        for group, by_topic in self.groups_out.items():
            counters["group", group] = sum(entry[OUT_MSGS] for entry in by_topic.values())
        return counters

    def sample(self) -> None:
        """Record the counters now; the controller calls this every SAMPLE_INTERVAL."""
        now = self._clock()
        self._samples.append((now, self._counters()))
        items = self._items()
        self._items_minute.append((now, items))
        for ring, step in ((self._items_hour, _HOUR_STEP), (self._items_day, _DAY_STEP)):
            if not ring or now - ring[-1][0] >= step:
                ring.append((now, items))

    def new_day(self) -> None:
        """Shift the "morning" totals at local midnight."""
        self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put_total
        self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get_total

    def rate(self, key: Any, window: float, counters: dict[Any, int] | None = None) -> float:
        """Per-second rate of counter `key` over the last `window` seconds: from the
        newest sample at least `window` old (the oldest one while the broker is younger)."""
        if not self._samples:
            return 0.0
        now = self._clock()
        current = (counters if counters is not None else self._counters()).get(key, 0)
        base = self._samples[0]
        for sample in reversed(self._samples):
            if now - sample[0] >= window:
                base = sample
                break
        elapsed = now - base[0]
        return (current - base[1].get(key, 0)) / elapsed if elapsed > 0 else 0.0

    def tps(self, which: int | str) -> str:
        """ "a b c": TPS over 10 s, 1 min and 10 min of a counter: 1 or "put" = messages
        stored, 2 or "get" = messages pulled, "found" / "miss" = store reads."""
        key = {1: "put", 2: "get"}.get(which, which) if isinstance(which, int) else which
        counters = self._counters()
        return " ".join(f"{self.rate(key, window, counters):.2f}" for window in _WINDOWS)

    def consume_tps(self, group: str) -> float:
        """Messages per second pulled by `group` over the last minute (consumeTps)."""
        return self.rate(("group", group), CONSUME_TPS_WINDOW)

    def _items(self) -> dict[Any, tuple[int, int]]:
        """(statsName, key) → (value, calls) for every topic and topic@group seen."""
        out: dict[Any, tuple[int, int]] = {}
        for topic, entry in self.topics_in.items():
            for name, (value, calls) in _TOPIC_ITEMS.items():
                out[name, topic] = (entry[value], entry[calls])
        for group, by_topic in self.groups_out.items():
            for topic, entry in by_topic.items():
                for name, (value, calls) in _GROUP_ITEMS.items():
                    out[name, f"{topic}@{group}"] = (entry[value], entry[calls])
        return out

    def _item(self, items: dict[Any, tuple[int, int]], name: str, key: str, cluster: str) -> tuple[int, int] | None:
        if name in _BROKER_ITEMS:
            if key != cluster:
                return None
            parts = [v for (n, _), v in items.items() if n == _BROKER_ITEMS[name]]
            return sum(v for v, _ in parts), sum(c for _, c in parts)
        return items.get((name, key))

    def stats_data(self, name: str, key: str, cluster: str) -> dict[str, dict[str, float]] | None:
        """BrokerStatsData of one item: {"statsMinute"|"statsHour"|"statsDay": {"sum", "tps",
        "avgpt"}}; None if the broker has no such item (nothing counted under that key)."""
        now = self._clock()
        current = self._item(self._items(), name, key, cluster)
        if current is None:
            return None
        out: dict[str, dict[str, float]] = {}
        rings = (("statsMinute", self._items_minute, 60), ("statsHour", self._items_hour, 3600))
        for label, ring, span in (*rings, ("statsDay", self._items_day, 86400)):
            base_time, base = now, (0, 0)
            for when, items in reversed(ring):  # the newest sample at least `span` old, else the oldest
                base_time, base = when, self._item(items, name, key, cluster) or (0, 0)
                if now - when >= span:
                    break
            total, calls = current[0] - base[0], current[1] - base[1]
            elapsed = now - base_time
            out[label] = {
                "sum": total,
                "tps": round(total / elapsed, 2) if elapsed > 0 else 0.0,
                "avgpt": round(total / calls, 2) if calls > 0 else 0.0,
            }
        return out

    def average_put_size(self) -> float:
        """Mean body size of the messages sent since start (putMessageAverageSize)."""
        messages = sum(entry[IN_MSGS] for entry in self.topics_in.values())
        size = sum(entry[IN_BYTES] for entry in self.topics_in.values())
        return size / messages if messages else 0.0


def processor_queues(broker: Any) -> dict[str, int]:
    """Requests waiting for a slot, per processor, over the broker's servers."""
    out: dict[str, int] = {}
    for server in getattr(broker, "_servers", ()):
        dispatcher = server.dispatcher
        routes = {id(r): r for r in (dispatcher.route(code) for code in dispatcher.codes) if r is not None}
        for route in routes.values():
            name = PROCESSOR_NAMES.get(route.name, route.name)
            out[name] = out.get(name, 0) + route.waiting
    return out


PROCESSOR_NAMES = {
    "SendProcessor": "send",
    "PullProcessor": "pull",
    "AdminProcessor": "admin",
    "EndTransactionProcessor": "transaction",
}
