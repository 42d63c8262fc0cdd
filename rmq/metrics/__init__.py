"""Prometheus metrics of the broker, the name server and the gRPC proxy, with RocketMQ 5.x's names.

`MetricsExporter` serves a registry over HTTP from the server's Trio process
(exporter.py); `BrokerCollector`, `NamesrvCollector` and `ProxyCollector` read the servers'
own counters when scraped (broker.py, namesrv.py, proxy.py); `RpcLatency` is the
per-request latency histogram the dispatcher feeds (latency.py), `GrpcLatency` the proxy's
per-call one. docs/operations.md and docs/proxy.md list the metrics.

The servers do not import this package: whatever starts them installs the exporters first
(`install()`; mqbroker and mqnamesrv, `rmq dev` and EmbeddedCluster do), and a server whose
config says metricsExporterType=PROM then serves its metrics. prometheus_client is imported
only when a server starts an exporter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController
    from rmq.namesrv.server import NamesrvServer
    from rmq.proxy.server import ProxyServer

    from .exporter import MetricsExporter

__all__ = ["install", "install_broker", "install_namesrv", "install_proxy"]


def install() -> None:
    """Brokers, name servers and proxies of this process serve metrics when configured to."""
    install_broker()
    install_namesrv()
    install_proxy()


def install_broker() -> None:
    from rmq.broker.controller import BrokerController

    BrokerController.exporter_factory = _broker_exporter


def install_namesrv() -> None:
    from rmq.namesrv.server import NamesrvServer

    NamesrvServer.exporter_factory = _namesrv_exporter


def install_proxy() -> None:
    from rmq.proxy.server import ProxyServer

    ProxyServer.exporter_factory = _proxy_exporter


def _broker_exporter(broker: BrokerController) -> MetricsExporter:
    from .broker import broker_exporter

    return broker_exporter(broker)


def _namesrv_exporter(server: NamesrvServer) -> MetricsExporter:
    from .namesrv import namesrv_exporter

    return namesrv_exporter(server)


def _proxy_exporter(server: ProxyServer) -> MetricsExporter:
    from .proxy import proxy_exporter

    return proxy_exporter(server)
