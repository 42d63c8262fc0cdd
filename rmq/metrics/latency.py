"""rocketmq_rpc_latency: milliseconds from a request's arrival to its answer, per request
code and response code, in RocketMQ's buckets (RemotingMetricsManager).

Recording is a few dict lookups and list increments in the server's Trio thread; the
collector turns the counts into a Prometheus histogram when scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily

# milliseconds: 1, 3, 5, 7, 10, 100 ms, 1, 2, 3 s
LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
ONEWAY = -1  # the response_code label of requests answered with nothing ("oneway")


class RpcLatency:
    """Latency counts by (request code, response code).

    Args:
      clock: the clock `received_at` was read from (trio.current_time in the servers).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        # request code → response code → [count, sum in ms, bucket counts...]
        self.table: dict[int, dict[int, list[float]]] = {}

    def observe(self, request_code: int, response: Any, received_at: float) -> None:
        """The dispatcher's observer: `response` is a RemotingCommand or None."""
        elapsed_ms = (self._clock() - received_at) * 1000.0
        self.record(request_code, ONEWAY if response is None else response.code, elapsed_ms)

    def record(self, request_code: int, response_code: int, elapsed_ms: float) -> None:
        by_response = self.table.get(request_code)
        if by_response is None:
            by_response = self.table[request_code] = {}
        entry = by_response.get(response_code)
        if entry is None:
            entry = by_response[response_code] = [0.0] * (3 + len(LATENCY_BUCKETS_MS))
        entry[0] += 1
        entry[1] += elapsed_ms
        entry[2 + bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1

    def collect(self, const_labels: dict[str, str]) -> Iterator[HistogramMetricFamily]:
        names = ["protocol_type", "request_code", "response_code", *const_labels]
        family = HistogramMetricFamily("rocketmq_rpc_latency", "RPC latency in milliseconds", labels=names)
        for request_code, by_response in sorted(self.table.items()):
            for response_code, entry in sorted(by_response.items()):
                response_label = "oneway" if response_code == ONEWAY else str(response_code)
                labels = ["remoting", str(request_code), response_label, *const_labels.values()]
                family.add_metric(labels, cumulative(LATENCY_BUCKETS_MS, entry[2:]), entry[1])
        yield family


def cumulative(bounds: tuple[float, ...], counts: list[float] | list[int]) -> list[tuple[str, float]]:
    """Per-bucket counts (one more than `bounds`: the overflow) → Prometheus's cumulative
    (le, count) pairs ending with +Inf."""
    out = []
    total = 0.0
    for bound, count in zip(bounds, counts, strict=False):
        total += count
        out.append((_le(bound), total))
    total += counts[len(bounds)]
    out.append(("+Inf", total))
    return out


def _le(bound: float) -> str:
    return str(int(bound)) + ".0" if float(bound).is_integer() else repr(float(bound))
