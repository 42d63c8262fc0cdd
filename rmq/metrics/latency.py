"""rocketmq_rpc_latency: milliseconds from a request's arrival to its answer, per request
code and response code, in RocketMQ's buckets (RemotingMetricsManager).

Labels as RocketMQ 5.x's NettyRemotingAbstract.writeResponse sets them: request_code and
response_code are the codes' lowercase names (RemotingHelper.getRequestCodeDesc:
"send_message_v2", "success"; the number for a code without a name), is_long_polling
says whether the request was parked, result is "oneway" for a oneway request, else
"success". A request answered with nothing is not recorded, as in RocketMQ.

Recording is a few dict lookups and list increments in the server's Trio thread; the
collector turns the counts into a Prometheus histogram when scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily

from rmq.protocol import RPC_ONEWAY, RequestCode, ResponseCode

# milliseconds: 1, 3, 5, 7, 10, 100 ms, 1, 2, 3 s
LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
REQUEST_NAMES = {int(code): code.name.lower() for code in RequestCode}
RESPONSE_NAMES = {int(code): code.name.lower() for code in ResponseCode}


class RpcLatency:
    """Latency counts by (request code, response code).

    Args:
      clock: the clock `received_at` was read from (trio.current_time in the servers).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        # (request code, response code, long polling, oneway) → [count, sum in ms, bucket counts...]
        self.table: dict[tuple[int, int, bool, bool], list[float]] = {}

    def observe(self, request: Any, response: Any, ctx: Any) -> None:
        """The dispatcher's observer: `response` is a RemotingCommand or None (not recorded)."""
        if response is None:
            return
        elapsed_ms = (self._clock() - ctx.received_at) * 1000.0
        self.record(request.code, response.code, elapsed_ms, ctx.suspended, bool(request.flag & RPC_ONEWAY))

    def record(
        self, request_code: int, response_code: int, elapsed_ms: float, long_polling: bool = False, oneway: bool = False
    ) -> None:
        key = (request_code, response_code, long_polling, oneway)
        entry = self.table.get(key)
        if entry is None:
            entry = self.table[key] = [0.0] * (3 + len(LATENCY_BUCKETS_MS))
        entry[0] += 1
        entry[1] += elapsed_ms
        entry[2 + bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1

    def collect(self, const_labels: dict[str, str]) -> Iterator[HistogramMetricFamily]:
        names = ["protocol_type", "is_long_polling", "request_code", "response_code", "result", *const_labels]
        family = HistogramMetricFamily("rocketmq_rpc_latency", "RPC latency in milliseconds", labels=names)
        for (request_code, response_code, long_polling, oneway), entry in sorted(self.table.items()):
            labels = [
                "remoting",
                "true" if long_polling else "false",
                REQUEST_NAMES.get(request_code, str(request_code)),
                RESPONSE_NAMES.get(response_code, str(response_code)),
                "oneway" if oneway else "success",
                *const_labels.values(),
            ]
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
