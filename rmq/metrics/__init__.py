"""Prometheus metrics of the broker and the name server, with RocketMQ 5.x's names.

`MetricsExporter` serves a registry over HTTP from the server's Trio process
(exporter.py); `BrokerCollector` and `NamesrvCollector` read the servers' own counters
when scraped (broker.py, namesrv.py); `RpcLatency` is the per-request latency histogram
the dispatcher feeds (latency.py). docs/operations.md lists the metrics.

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

    from .exporter import MetricsExporter

__all__ = ["install", "install_broker", "install_namesrv"]


def install() -> None:
    """Brokers and name servers of this process serve metrics when configured to."""
    install_broker()
    install_namesrv()


def install_broker() -> None:
    from rmq.broker.controller import BrokerController

    BrokerController.exporter_factory = _broker_exporter


def install_namesrv() -> None:
    from rmq.namesrv.server import NamesrvServer

    NamesrvServer.exporter_factory = _namesrv_exporter


def _broker_exporter(broker: BrokerController) -> MetricsExporter:
    from .broker import broker_exporter

    return broker_exporter(broker)


def _namesrv_exporter(server: NamesrvServer) -> MetricsExporter:
    from .namesrv import namesrv_exporter

    return namesrv_exporter(server)
