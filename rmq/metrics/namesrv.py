"""NamesrvCollector: the name server's metrics, read from its route tables when scraped.

RocketMQ 5.x's name server exports rocketmq_rpc_latency; the route-table gauges
(rocketmq_topic_number, rocketmq_broker_number, rocketmq_cluster_number) and the
connection series (remoting.py) are ours. Every series carries node_type="nameserver" and
node_id: the name server's own address (with the host's address when it listens on all,
so that two name servers on the default port are told apart); rocketmq_broker_number is
per `cluster`, the label the broker series carry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rmq.client.ids import local_ip

from .exporter import MetricsExporter
from .latency import RpcLatency
from .remoting import connection_metrics

if TYPE_CHECKING:
    from rmq.namesrv.server import NamesrvServer


class NamesrvCollector(Collector):
    def __init__(self, server: NamesrvServer, latency: RpcLatency) -> None:
        self.server = server
        self.latency = latency
        self.node_id = ""  # found at the first scrape, once the server is bound

    def collect(self) -> Iterator[Metric]:
        if not self.node_id:
            self.node_id = node_id(self.server)
        const = {"node_type": "nameserver", "node_id": self.node_id}
        yield from self.latency.collect(const)
        yield from connection_metrics([self.server.remoting], const)
        routes = self.server.routes
        for name, doc, value in (
            ("rocketmq_topic_number", "Topics in the route table", len(routes.topics)),
            ("rocketmq_cluster_number", "Clusters in the route table", len(routes.clusters)),
        ):
            family = GaugeMetricFamily(name, doc, labels=[*const])
            family.add_metric([*const.values()], value)
            yield family
        live: dict[str, int] = {cluster: 0 for cluster in routes.clusters}
        for group in routes.brokers.values():
            live[group.cluster] = live.get(group.cluster, 0) + sum(
                1 for addr in group.broker_addrs.values() if addr in routes.live
            )
        brokers = GaugeMetricFamily(
            "rocketmq_broker_number", "Live brokers (registered and not expired)", labels=["cluster", *const]
        )
        for cluster, count in sorted(live.items()):
            brokers.add_metric([cluster, *const.values()], count)
        yield brokers


def node_id(server: NamesrvServer) -> str:
    """host:port of the name server: its listen address, or the host's address when it
    listens on all of them."""
    host, port = server.remoting.config.host, server.remoting.port
    if host in ("", "0.0.0.0", "::"):
        host = local_ip()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
