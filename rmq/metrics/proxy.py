"""ProxyCollector: the gRPC proxy's metrics, counted as its calls end and read from its
tables when scraped.

RocketMQ 5.3's proxy exports rocketmq_proxy_up (ProxyMetricsManager) and puts the labels
cluster (proxyClusterName), node_type="proxy", node_id (proxyName) and proxy_mode on every
series. The others take the broker's names where it has one (BrokerMetricsConstant,
RemotingMetricsConstant):

- rocketmq_rpc_latency, milliseconds per call in RocketMQ's buckets, with protocol_type="grpc",
  request_code the gRPC method ("SendMessage"), response_code the rocketmq.v2 `Code` of the
  call's first response that carries a `Status` ("ok", "message_not_found"; "none" when it
  sent none), grpc_status (rmq's label: "ok", "invalid_argument", "cancelled"...),
  is_long_polling "true" for ReceiveMessage and PullMessage, and result as Java's:
  "success", "cancelled" (the client reset the call or its deadline passed) or
  "process_request_failed" (another gRPC status). A path the proxy does not serve is counted
  as request_code "unknown"; Telemetry streams, which last as long as their client, are not
  timed.
- rocketmq_producer_connections and rocketmq_consumer_connections: the 5.x clients with a
  Telemetry stream and settings, protocol_type="grpc", by language and version as the client
  names them (x-mq-language, x-mq-client-version: "python", "v5_1_2"); a consumer's
  consume_mode as Java's proxy registers it: "push" for a PushConsumer, "pull" for a
  SimpleConsumer.
- rocketmq_grpc_connections and rocketmq_grpc_calls (per request_code, Telemetry included):
  HTTP/2 connections held and calls in progress now. rmq's own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rmq.proxy.grpc import CANCELLED, DEADLINE_EXCEEDED, OK, Call
from rmq.proxy.v2 import definition_pb2 as d

from .exporter import MetricsExporter
from .latency import LATENCY_BUCKETS_MS, cumulative

if TYPE_CHECKING:
    from rmq.proxy.server import ProxyServer

GRPC_STATUS = (
    "ok cancelled unknown invalid_argument deadline_exceeded not_found already_exists permission_denied "
    "resource_exhausted failed_precondition aborted out_of_range unimplemented internal unavailable "
    "data_loss unauthenticated"
).split()
LONG_POLLING = frozenset({"ReceiveMessage", "PullMessage"})
UNTIMED = frozenset({"Telemetry"})
_CONSUME_MODES: dict[int, str] = {d.PUSH_CONSUMER: "push", d.SIMPLE_CONSUMER: "pull", d.PULL_CONSUMER: "pull"}


def code_name(code: int | None) -> str:
    """The rocketmq.v2 Code's name in lower case ("ok"), "none" for no Status."""
    if code is None:
        return "none"
    try:
        return str(d.Code.Name(code)).lower()
    except ValueError:
        return str(code)


def grpc_status_name(code: int) -> str:
    return GRPC_STATUS[code] if 0 <= code < len(GRPC_STATUS) else str(code)


def version_label(version: str) -> str:
    """A client's version as Java's MQVersion names releases, lower case: "5.1.2" → "v5_1_2"."""
    parts = version.split(".")
    if version and all(p.isdigit() for p in parts):
        return "v" + "_".join(parts)
    return version.lower() or "unknown"


class GrpcLatency:
    """Latency counts by (method, response code, gRPC status), as the calls end."""

    def __init__(self) -> None:
        # key → [count, sum in ms, bucket counts...]
        self.table: dict[tuple[str, int | None, int], list[float]] = {}

    def observe(self, call: Call, grpc_code: int, status: int | None) -> None:
        """The gRPC server's observer (GrpcServer.observe_with)."""
        if call.method in UNTIMED:
            return
        elapsed_ms = (trio.current_time() - call.received_at) * 1000.0
        key = (call.method, status, grpc_code)
        entry = self.table.get(key)
        if entry is None:
            entry = self.table[key] = [0.0] * (3 + len(LATENCY_BUCKETS_MS))
        entry[0] += 1
        entry[1] += elapsed_ms
        entry[2 + bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1

    def collect(self, const: dict[str, str]) -> Iterator[HistogramMetricFamily]:
        names = ["protocol_type", "is_long_polling", "request_code", "response_code", "grpc_status", "result", *const]
        family = HistogramMetricFamily("rocketmq_rpc_latency", "RPC latency in milliseconds", labels=names)
        for (method, status, grpc_code), entry in sorted(self.table.items(), key=lambda kv: str(kv[0])):
            if grpc_code == OK:
                result = "success"
            elif grpc_code in (CANCELLED, DEADLINE_EXCEEDED):
                result = "cancelled"
            else:
                result = "process_request_failed"
            labels = [
                "grpc",
                "true" if method in LONG_POLLING else "false",
                method,
                code_name(status),
                grpc_status_name(grpc_code),
                result,
                *const.values(),
            ]
            family.add_metric(labels, cumulative(LATENCY_BUCKETS_MS, entry[2:]), entry[1])
        yield family


class ProxyCollector(Collector):
    def __init__(self, server: ProxyServer, latency: GrpcLatency) -> None:
        self.server = server
        self.latency = latency

    def _labels(self) -> dict[str, str]:
        c = self.server.config
        return {
            "cluster": c.proxy_cluster_name,
            "node_type": "proxy",
            "node_id": c.proxy_name,
            "proxy_mode": c.proxy_mode.lower(),
        }

    def collect(self) -> Iterator[Metric]:
        const = self._labels()
        names, values = [*const], [*const.values()]
        up = GaugeMetricFamily("rocketmq_proxy_up", "proxy status", labels=names)
        up.add_metric(values, 1)
        yield up
        yield from self.latency.collect(const)
        yield from self._clients(names, values)
        grpc = self.server.grpc
        held = GaugeMetricFamily("rocketmq_grpc_connections", "HTTP/2 connections held on the gRPC port", labels=names)
        held.add_metric(values, grpc.connections)
        yield held
        calls = GaugeMetricFamily("rocketmq_grpc_calls", "gRPC calls in progress", labels=["request_code", *names])
        for method, count in sorted(grpc.calls.items()):
            calls.add_metric([method, *values], count)
        yield calls

    def _clients(self, names: list[str], values: list[str]) -> Iterator[Metric]:
        producers: dict[tuple[str, str], int] = {}
        consumers: dict[tuple[str, str, str, str], int] = {}
        for channel in self.server.service.channels.clients.values():
            settings = channel.settings
            if settings is None:
                continue
            language, version = channel.language.lower() or "unknown", version_label(channel.version)
            if settings.HasField("publishing"):
                producers[language, version] = producers.get((language, version), 0) + 1
            elif channel.group:
                row = (channel.group, language, version, _CONSUME_MODES.get(channel.client_type, "pull"))
                consumers[row] = consumers.get(row, 0) + 1
        labels = ["language", "version", "protocol_type", *names]
        family = GaugeMetricFamily("rocketmq_producer_connections", "Producer connections", labels=labels)
        for (language, version), count in sorted(producers.items()):
            family.add_metric([language, version, "grpc", *values], count)
        yield family
        family = GaugeMetricFamily(
            "rocketmq_consumer_connections",
            "Consumer connections",
            labels=["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system", *names],
        )
        for row, count in sorted(consumers.items()):
            system = "true" if row[0].lower().startswith("cid_rmq_sys_") else "false"
            family.add_metric([*row, "grpc", system, *values], count)
        yield family


def proxy_exporter(server: ProxyServer) -> MetricsExporter:
    """The exporter of a proxy: observes its gRPC calls and binds metricsPromExporterHost
    (default every address, as Java's proxy) and metricsPromExporterPort."""
    latency = GrpcLatency()
    server.grpc.observe_with(latency.observe)
    registry = CollectorRegistry()
    registry.register(ProxyCollector(server, latency))
    config = server.config
    return MetricsExporter(registry, config.metrics_prom_exporter_host, config.metrics_prom_exporter_port)
