"""Prometheus metrics of the broker and the name server, with RocketMQ 5.x's names.

`MetricsExporter` serves a registry over HTTP from the server's Trio process
(exporter.py); `BrokerCollector` and `NamesrvCollector` read the servers' own counters
when scraped (broker.py, namesrv.py); `RpcLatency` is the per-request latency histogram
the dispatcher feeds (latency.py). docs/operations.md lists the metrics.
"""

from .exporter import METRICS_TYPES, MetricsExporter
from .latency import RpcLatency

__all__ = ["METRICS_TYPES", "MetricsExporter", "RpcLatency"]
