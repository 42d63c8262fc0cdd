"""NamesrvCollector: the name server's metrics, read from its route tables when scraped.

RocketMQ 5.x's name server exports rocketmq_rpc_latency; the route-table gauges
(rocketmq_topic_number, rocketmq_broker_number, rocketmq_cluster_number) and the
connection series (remoting.py) are ours. Every
series carries node_type="nameserver" and node_id (the listen address).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .exporter import MetricsExporter
from .latency import RpcLatency
from .remoting import connection_metrics

if TYPE_CHECKING:
    from rmq.namesrv.server import NamesrvServer


class NamesrvCollector(Collector):
    def __init__(self, server: NamesrvServer, latency: RpcLatency) -> None:
        self.server = server
        self.latency = latency

    def collect(self) -> Iterator[Metric]:
        const = {"node_type": "nameserver", "node_id": self.server.listen_address}
        yield from self.latency.collect(const)
        yield from connection_metrics([self.server.remoting], const)
        routes = self.server.routes
        for name, doc, value in (
            ("rocketmq_topic_number", "Topics in the route table", len(routes.topics)),
            ("rocketmq_broker_number", "Live brokers (registered and not expired)", len(routes.live)),
            ("rocketmq_cluster_number", "Clusters in the route table", len(routes.clusters)),
        ):
            family = GaugeMetricFamily(name, doc, labels=[*const])
            family.add_metric([*const.values()], value)
            yield family


def namesrv_exporter(server: NamesrvServer) -> MetricsExporter:
    """The exporter of a name server: hooks the latency histogram into its dispatcher and
    binds metricsPromExporterHost (default bindAddress) and metricsPromExporterPort."""
    latency = RpcLatency(trio.current_time)
    server.remoting.dispatcher.observe_with(latency.observe)
    registry = CollectorRegistry()
    registry.register(NamesrvCollector(server, latency))
    config = server.config
    return MetricsExporter(
        registry, config.metrics_prom_exporter_host or config.listen_host, config.metrics_prom_exporter_port
    )
