"""The proxy's Prometheus endpoint (metricsExporterType PROM, rmq.metrics.proxy), scraped after
the official 5.x client's traffic: calls by gRPC method and status, latency per method, the
clients it serves by language and version."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from rmq.proxy import ProxyConfig, ProxyServer
from tests.client.conftest import Cluster
from tests.metrics.scrape import scrape, value

from .conftest import CHILD, CLIENT5, FAST, run_client
from .test_relay import child

TOPIC, GROUP = "ProxyMetricsTopic", "ProxyMetricsGroup"
NODE = {"node_type": "proxy", "node_id": "metrics-proxy", "cluster": "DefaultCluster", "proxy_mode": "cluster"}


@asynccontextmanager
async def metered_proxy(cluster: Cluster) -> AsyncIterator[ProxyServer]:
    values = {
        "namesrvAddr": cluster.namesrv_addr,
        "grpcServerPort": 0,
        "proxyName": "metrics-proxy",
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": 0,
        **FAST,
    }
    async with ProxyServer(ProxyConfig.from_mapping(values), host="127.0.0.1") as proxy:
        yield proxy


async def test_calls_latency_and_clients_after_client_traffic(cluster: Cluster) -> None:
    await cluster.create_topic(TOPIC, queues=2)
    async with metered_proxy(cluster) as proxy:
        endpoint = f"127.0.0.1:{proxy.port}"
        assert proxy.metrics is not None
        port = proxy.metrics.port
        await run_client(endpoint, "send", TOPIC, GROUP, "3")
        got = await run_client(endpoint, "receive", TOPIC, GROUP, "3")
        assert got[-1] == {"received": 3}
        (unknown,) = await run_client(endpoint, "unknown_method", TOPIC, GROUP)
        assert unknown["code"] == "UNIMPLEMENTED"
        await run_client(endpoint, "query_route", "NoSuchTopicForMetrics", GROUP)

        m = await scrape(port)
        assert value(m, "rocketmq_proxy_up", **NODE) == 1
        grpc = {"protocol_type": "grpc", **NODE}
        sends = value(m, "rocketmq_rpc_latency_count", request_code="SendMessage", response_code="ok", **grpc)
        assert sends == 3
        assert value(m, "rocketmq_rpc_latency_count", request_code="AckMessage", result="success", **grpc) == 3
        receives = {"request_code": "ReceiveMessage", "is_long_polling": "true", **grpc}
        assert value(m, "rocketmq_rpc_latency_count", response_code="ok", **receives) >= 1
        assert value(m, "rocketmq_rpc_latency_count", request_code="QueryRoute", response_code="ok", **grpc) >= 2
        missing = {"request_code": "QueryRoute", "response_code": "topic_not_found", "grpc_status": "ok"}
        assert value(m, "rocketmq_rpc_latency_count", **missing, **grpc) == 1
        unknown_call = {"request_code": "unknown", "response_code": "none", "grpc_status": "unimplemented"}
        assert value(m, "rocketmq_rpc_latency_count", **unknown_call, result="process_request_failed", **grpc) == 1
        # latency per method: every send within the histogram's +Inf bucket, its sum in milliseconds
        assert value(m, "rocketmq_rpc_latency_bucket", request_code="SendMessage", le="+Inf", **grpc) == 3
        assert 0 < value(m, "rocketmq_rpc_latency_sum", request_code="SendMessage", **grpc) < 3 * 10_000
        assert not any(lab.get("request_code") == "Telemetry" for lab, _ in m["rocketmq_rpc_latency_count"])
        assert value(m, "rocketmq_grpc_calls", request_code="SendMessage", **NODE) == 0  # none left open

        # a consumer that stays: one client by language and version, then none after it left
        async with child([str(CHILD), endpoint, "hold", TOPIC, GROUP], CLIENT5) as client:
            await client.wait_for("started")
            with trio.fail_after(10):  # its settings may come just after its start returned
                while not (m := await scrape(port)).get("rocketmq_consumer_connections"):
                    await trio.sleep(0.05)
            consumer = {"consumer_group": GROUP, "language": "python", "version": "v5_1_2", "consume_mode": "pull"}
            assert value(m, "rocketmq_consumer_connections", protocol_type="grpc", **consumer, **NODE) == 1
            assert value(m, "rocketmq_grpc_calls", request_code="Telemetry", **NODE) == 1
            assert value(m, "rocketmq_grpc_connections", **NODE) >= 1
        with trio.fail_after(10):
            while (await scrape(port)).get("rocketmq_consumer_connections"):
                await trio.sleep(0.05)
        m = await scrape(port)
        assert value(m, "rocketmq_grpc_calls", request_code="Telemetry", **NODE) == 0


async def test_prom_without_an_exporter_is_refused(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProxyServer, "exporter_factory", None)
    config = ProxyConfig.from_mapping({"namesrvAddr": cluster.namesrv_addr, "metricsExporterType": "PROM"})
    with pytest.raises(ValueError, match="rmq.metrics.install"):
        async with ProxyServer(config, host="127.0.0.1"):
            pass
    with pytest.raises(ValueError, match="metricsExporterType"):
        ProxyConfig.from_mapping({"metricsExporterType": "OTLP_GRPC"})
    assert ProxyConfig.from_mapping({"metricsExporterType": 2}).metrics_exporter_type == "PROM"
