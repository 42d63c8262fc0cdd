"""Broker statistics for GET_BROKER_RUNTIME_INFO: message counters and TPS.

RocketMQ keeps per-second samples in BrokerStatsManager; mqadmin clusterList reads the
totals and the first of three TPS figures (10 s, 1 min, 10 min). Here two counters are
sampled by the controller every 10 s into a ring long enough for the 10-minute figure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

SAMPLE_INTERVAL = 10.0  # seconds
_WINDOWS = (10, 60, 600)  # seconds, as putTps / getTransferedTps report them


class BrokerStats:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.put_total = 0  # messages stored
        self.get_total = 0  # messages handed to consumers
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        # (time, put_total, get_total); the first sample is taken when the broker starts
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=_WINDOWS[-1] // int(SAMPLE_INTERVAL) + 2)

    def sample(self) -> None:
        """Record the counters now; the controller calls this every SAMPLE_INTERVAL."""
        self._samples.append((self._clock(), self.put_total, self.get_total))

    def new_day(self) -> None:
        """Shift the "morning" totals at local midnight."""
        self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put_total
        self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get_total

    def tps(self, which: int) -> str:
        """ "a b c": TPS over 10 s, 1 min and 10 min; which 1 = puts, 2 = gets."""
        if not self._samples:
            return "0.00 0.00 0.00"
        now = self._clock()
        current = self.put_total if which == 1 else self.get_total
        figures = []
        for window in _WINDOWS:
            base = self._samples[0]
            for sample in reversed(self._samples):
                if now - sample[0] >= window:
                    base = sample
                    break
            elapsed = now - base[0]
            figures.append(f"{(current - base[which]) / elapsed:.2f}" if elapsed > 0 else "0.00")
        return " ".join(figures)
