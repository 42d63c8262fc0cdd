"""Latency-based fault avoidance for sends (RocketMQ's sendLatencyFaultEnable).

After every send attempt the producer reports the broker's latency; a slow or failing
broker is marked unavailable for a while, longer the slower it was:

    latency (ms)   ≥ 50   ≥ 100   ≥ 550   ≥ 1000   ≥ 2000   ≥ 3000   ≥ 15000
    avoided for       0       0     30 s     60 s    120 s    180 s    600 s

A failed attempt counts as 30 s of latency (so 600 s of avoidance). Queue selection skips
unavailable brokers; when every broker is unavailable it still picks one (the best of the
worse half, rotating), so sends never stop for want of a perfect broker.
Time is whatever `clock` returns, in seconds (the Trio clock in the producer).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

# (latency threshold s, unavailable for s), highest threshold first
_STEPS = (
    (15.0, 600.0),
    (3.0, 180.0),
    (2.0, 120.0),
    (1.0, 60.0),
    (0.55, 30.0),
    (0.1, 0.0),
    (0.05, 0.0),
)
ISOLATION_LATENCY = 30.0


def not_available_duration(latency: float) -> float:
    """How long (s) to avoid a broker that answered in `latency` seconds."""
    if latency < _STEPS[-1][0]:  # the usual answer, without the walk
        return 0.0
    for threshold, duration in _STEPS:
        if latency >= threshold:
            return duration
    return 0.0


@dataclass(slots=True)
class _FaultItem:
    name: str
    latency: float
    available_from: float


class LatencyFaultTolerance:
    """Per-broker availability from observed latencies; see the module docstring."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._items: dict[str, _FaultItem] = {}
        self._worst = itertools.count()
        # no broker is unavailable from then on (may overstate it: a cheap test for the
        # send path, before any per-broker lookup)
        self.unavailable_until = float("-inf")

    def update(self, broker_name: str, latency: float, *, isolation: bool = False, now: float | None = None) -> None:
        """Record a send to `broker_name` that took `latency` s (failed if `isolation`), ending
        `now` (read from the clock when not given)."""
        duration = not_available_duration(ISOLATION_LATENCY if isolation else latency)
        end = self._clock() if now is None else now
        item = self._items.get(broker_name)
        if item is None:
            self._items[broker_name] = _FaultItem(broker_name, latency, end + duration)
        else:  # changed in place: this runs after every send
            item.latency = latency
            item.available_from = end + duration
        if duration and end + duration > self.unavailable_until:
            self.unavailable_until = end + duration

    def is_available(self, broker_name: str, now: float | None = None) -> bool:
        item = self._items.get(broker_name)
        return item is None or (self._clock() if now is None else now) >= item.available_from

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker to use when none is available: one of the better half, rotating."""
        if not self._items:
            return None
        now = self._clock()
        items = list(self._items.values())
        random.shuffle(items)
        items.sort(key=lambda it: (now < it.available_from, it.latency, it.available_from))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[next(self._worst) % half].name
