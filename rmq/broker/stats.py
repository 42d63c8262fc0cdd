"""Broker statistics: message counters, TPS figures and the counters the metrics read.

RocketMQ keeps per-second samples in BrokerStatsManager; mqadmin clusterList reads the
totals and the first of three TPS figures (10 s, 1 min, 10 min). Here the counters are
plain ints and dicts bumped on the send and pull paths (one method call per request, no
lock: everything runs in the broker's Trio thread), and `sample()`, called by the
controller every SAMPLE_INTERVAL, copies them into a ring long enough for the 10-minute
figure. The sampler is sans-IO: it only reads the clock it is given.

Per topic (`topics_in`): [messages, bytes, size-bucket counts...]; per group and topic
(`groups_out`): [messages, bytes]; `pulled`: the next offset a group's last pull of a queue
returned (what consumers hold but have not committed = inflight).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import Any

SAMPLE_INTERVAL = 10.0  # seconds
_WINDOWS = (10, 60, 600)  # seconds, as putTps / getTransferedTps report them
CONSUME_TPS_WINDOW = 60  # seconds: consumeTps is BrokerStatsManager's per-minute figure

# rocketmq_message_size buckets (BrokerMetricsManager): 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB
MESSAGE_SIZE_BUCKETS = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
_SIZE_SLOTS = len(MESSAGE_SIZE_BUCKETS) + 1  # the last slot counts sizes above 4 MiB
IN_MSGS, IN_BYTES, IN_BUCKETS = 0, 1, 2  # indexes into a topics_in entry (bytes: the size sum)


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
        self.groups_out: dict[str, dict[str, list[int]]] = {}  # group → topic → [messages, bytes]
        self.pulled: dict[str, dict[tuple[str, int], int]] = {}  # group → (topic, queue) → next offset
        self.store_stats: Any = None  # the store's StoreStats once open (found / miss counts)
        # (time, counters); the first sample is taken when the broker starts
        self._samples: deque[tuple[float, dict[Any, int]]] = deque(maxlen=_WINDOWS[-1] // int(SAMPLE_INTERVAL) + 2)

    # -- the hot path -------------------------------------------------------------------

    def count_in(self, topic: str, messages: int, size: int) -> None:
        """A send stored `messages` messages of `size` body bytes in all."""
        self.put_total += messages
        entry = self.topics_in.get(topic)
        if entry is None:
            entry = self.topics_in[topic] = [0] * (IN_BUCKETS + _SIZE_SLOTS)
        entry[IN_MSGS] += messages
        entry[IN_BYTES] += size
        # a batch counts its messages at their average size
        entry[IN_BUCKETS + bisect_left(MESSAGE_SIZE_BUCKETS, size // messages if messages > 1 else size)] += messages

    def count_out(self, group: str, topic: str, queue_id: int, messages: int, size: int, next_offset: int) -> None:
        """A pull handed `messages` messages (`size` bytes) to `group`."""
        self.get_total += messages
        by_topic = self.groups_out.get(group)
        if by_topic is None:
            by_topic = self.groups_out[group] = {}
            self.pulled[group] = {}
        entry = by_topic.get(topic)
        if entry is None:
            entry = by_topic[topic] = [0, 0]
        entry[0] += messages
        entry[1] += size
        self.pulled[group][topic, queue_id] = next_offset

    # -- sampling -----------------------------------------------------------------------

    def _counters(self) -> dict[Any, int]:
        counters: dict[Any, int] = {"put": self.put_total, "get": self.get_total}
        store = self.store_stats
        if store is not None:
            counters["found"] = store.get_message_times_total_found
            counters["miss"] = store.get_message_times_total_miss
        for group, by_topic in self.groups_out.items():
            counters["group", group] = sum(entry[0] for entry in by_topic.values())
        return counters

    def sample(self) -> None:
        """Record the counters now; the controller calls this every SAMPLE_INTERVAL."""
        self._samples.append((self._clock(), self._counters()))

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


PROCESSOR_NAMES = {"SendProcessor": "send", "PullProcessor": "pull", "AdminProcessor": "admin"}
