"""The Prometheus endpoints of a live name server and broker, scraped after real traffic."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from rmq.broker.controller import BrokerController
from rmq.client import ConsumeFromWhere, Message, Producer, PullConsumer, PushConsumer
from rmq.client.ids import local_ip
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient
from tests.broker.cluster import start_broker

from .scrape import http_get, scrape, value

TOPIC = "MetricsTopic"
GROUP = "metrics-group"
PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}


@dataclass
class Live:
    namesrv: NamesrvServer
    broker: BrokerController
    client: RemotingClient

    async def call(self, code: int, ext: dict[str, str]) -> RemotingCommand:
        request = RemotingCommand.request(code, ext)
        response = await self.client.invoke(self.broker.address, request, 5.0)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return response


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        metrics_exporter_type="PROM",
        metrics_prom_exporter_port=0,
    )
    async with NamesrvServer(config) as namesrv, RemotingClient() as client, trio.open_nursery() as nursery:
        broker = await start_broker(nursery, tmp_path / "store", namesrv, **PROM)
        yield Live(namesrv, broker, client)
        broker.shutdown()
        await broker.wait_stopped()
        nursery.cancel_scope.cancel()


async def _send(live: Live, count: int, size: int = 100) -> None:
    async with Producer("metrics-producer", live.namesrv.address) as producer:
        for i in range(count):
            await producer.send(Message(TOPIC, bytes([65 + i % 26]) * size))


async def _consume_and_commit(live: Live, count: int) -> None:
    consumer = PullConsumer(
        GROUP, live.namesrv.address, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        await consumer.wait_for_assignment(timeout=10)
        received = []
        with trio.fail_after(20):
            while len(received) < count:
                received += await consumer.poll(timeout=1)
        await consumer.commit()
    assert len(received) == count


async def test_broker_metrics_after_traffic(live: Live) -> None:
    await _send(live, 20)
    await _consume_and_commit(live, 20)
    await _send(live, 5, size=2000)  # left for the group: lag 5

    samples = await scrape(live.broker.metrics.port)
    const = {"cluster": "TestCluster", "node_type": "broker", "node_id": "broker-a"}
    assert value(samples, "rocketmq_messages_in_total", topic=TOPIC, **const) == 25
    assert value(samples, "rocketmq_throughput_in_total", topic=TOPIC) == 20 * 100 + 5 * 2000
    assert value(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 20
    assert value(samples, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) > 20 * 100
    # message sizes: 20 under 1 KiB, 5 between 1 and 4 KiB
    assert value(samples, "rocketmq_message_size_bucket", topic=TOPIC, le="1024.0") == 20
    assert value(samples, "rocketmq_message_size_bucket", topic=TOPIC, le="4096.0") == 25
    assert value(samples, "rocketmq_message_size_count", topic=TOPIC) == 25
    # latency: every send answered SUCCESS, pulls answered
    send = "send_message_v2"
    assert value(samples, "rocketmq_rpc_latency_count", request_code=send, response_code="success") == 25
    assert value(samples, "rocketmq_rpc_latency_bucket", request_code=send, le="+Inf") == 25
    assert value(samples, "rocketmq_rpc_latency_count", request_code="pull_message") >= 1
    assert value(samples, "rocketmq_rpc_latency_sum", request_code=send) > 0
    # the group committed 20 of 25 messages
    assert value(samples, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 5
    assert value(samples, "rocketmq_consumer_lag_latency", topic=TOPIC, consumer_group=GROUP) >= 0
    assert value(samples, "rocketmq_consumer_inflight_messages", topic=TOPIC, consumer_group=GROUP) == 0
    assert value(samples, "rocketmq_consumer_ready_messages", topic=TOPIC, consumer_group=GROUP) == 5
    # the store's own accounting of its files, not a walk of the directory per scrape
    assert value(samples, "rocketmq_storage_size") == live.broker.message_store.storage_bytes() > 0
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes") >= 0
    assert value(samples, "rocketmq_storage_flush_behind_bytes") >= 0
    assert value(samples, "rocketmq_topic_number") >= 1
    assert value(samples, "rocketmq_consumer_group_number") >= 1
    assert value(samples, "rocketmq_long_polling_parked") >= 0
    assert value(samples, "rocketmq_processor_watermark", processor="send") == 0


async def test_connections_by_role(live: Live) -> None:
    async with Producer("metrics-producer", live.namesrv.address) as producer:
        await producer.send(Message(TOPIC, b"x"))
        consumer = PullConsumer(GROUP, live.namesrv.address, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe(TOPIC)
        async with consumer:
            await consumer.wait_for_assignment(timeout=10)
            with trio.fail_after(10):
                while not (samples := await scrape(live.broker.metrics.port)).get("rocketmq_consumer_connections"):
                    await trio.sleep(0.05)
            assert value(samples, "rocketmq_producer_connections", language="python", version="v4_9_8") == 1
            assert value(samples, "rocketmq_consumer_connections", consumer_group=GROUP, consume_mode="pull") == 1
            # a push consumer (heartbeat consumeType CONSUME_PASSIVELY) is labelled push
            pusher = PushConsumer("metrics-push-group", live.namesrv.address, handler=lambda m: None)
            pusher.subscribe(TOPIC)
            async with pusher:
                await pusher.wait_for_assignment(timeout=10)
                samples = await scrape(live.broker.metrics.port)
                push = {"consumer_group": "metrics-push-group", "consume_mode": "push"}
                assert value(samples, "rocketmq_consumer_connections", **push) == 1


async def test_consume_tps_and_runtime_info(live: Live) -> None:
    await _send(live, 30)
    await _consume_and_commit(live, 30)
    stats = json_body.loads((await live.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})).body)
    assert stats["consumeTps"] > 0
    info = json_body.loads((await live.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})).body)["table"]
    put_tps = [float(x) for x in info["putTps"].split()]
    assert len(put_tps) == 3 and put_tps[0] > 0
    assert float(info["getTransferedTps"].split()[0]) > 0
    assert float(info["getFoundTps"].split()[0]) > 0
    assert len(info["getMissTps"].split()) == 3
    assert int(info["msgPutTotalTodayNow"]) == 30
    assert int(info["msgGetTotalTodayNow"]) == 30
    assert float(info["putMessageAverageSize"]) == 100.0
    assert int(info["commitLogMaxOffset"]) > int(info["commitLogMinOffset"]) >= 0
    assert 0 <= float(info["commitLogDiskRatio"]) <= 1
    assert int(info["sendThreadPoolQueueSize"]) == 0 and int(info["pullThreadPoolQueueSize"]) == 0
    assert int(info["startAcceptSendRequestTimeStamp"]) > 0
    assert int(info["earliestMessageTimeStamp"]) > 0
    assert int(info["remainHowManyDataToFlush"]) >= 0
    assert int(info["dispatchBehindBytes"]) >= 0
    # the keys Java's StoreStatsService and AdminBrokerProcessor add, as mqadmin brokerStatus prints them
    distribution = dict(part.split(":") for part in info["putMessageDistributeTime"].split())
    assert list(distribution) == [
        "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
        "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
    ]  # fmt: skip
    puts = int(info["putMessageTimesTotal"])
    assert sum(int(n) for n in distribution.values()) == puts >= 30  # every append, timed
    assert int(info["putMessageSizeTotal"]) > 30 * 100
    assert int(info["putMessageFailedTimes"]) == 0
    assert int(info["putMessageEntireTimeMax"]) >= 0
    assert 0 <= float(info["putLatency99"]) <= float(info["putLatency999"])
    assert len(info["getTotalTps"].split()) == 3 and float(info["getTotalTps"].split()[0]) > 0
    assert int(info["EndTransactionQueueSize"]) == 0
    assert re.fullmatch(r"Total : [\d.]+ [KMGTPE]?i?B, Free : [\d.]+ [KMGTPE]?i?B\.", info["commitLogDirCapacity"])
    assert 0 <= float(info["consumeQueueDiskRatio"]) <= 1
    assert not [key for key in info if key.startswith("scheduleMessageOffset_")]  # nothing delayed yet
    async with Producer("metrics-producer", live.namesrv.address) as producer:
        await producer.send(Message(TOPIC, b"later", delay_level=2))
    info = json_body.loads((await live.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})).body)["table"]
    assert info["scheduleMessageOffset_2"] in ("0,1", "1,1")  # delivered offset, queue end


async def test_namesrv_metrics(live: Live) -> None:
    await _send(live, 1)
    samples = await scrape(live.namesrv.metrics.port)
    route = "get_routeinfo_by_topic"
    assert value(samples, "rocketmq_rpc_latency_count", request_code=route, node_type="nameserver") >= 1
    assert value(samples, "rocketmq_broker_number", cluster="TestCluster") == 1
    assert {labels["node_id"] for rows in samples.values() for labels, _ in rows} == {live.namesrv.address}
    assert value(samples, "rocketmq_topic_number") >= 1


async def test_bad_requests_get_http_errors(live: Live) -> None:
    port = live.broker.metrics.port
    assert (await http_get(port, b"GET /nothing HTTP/1.1\r\n\r\n"))[0] == 404
    assert (await http_get(port, b"POST /metrics HTTP/1.1\r\n\r\n"))[0] == 405
    assert (await http_get(port, b"\x00\xff garbage\r\n\r\n"))[0] == 400
    assert (await http_get(port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 2000))[0] == 431
    status, body = await http_get(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert status == 200 and body == b""
    # a peer that connects and says nothing does not stop others from scraping
    async with await trio.open_tcp_stream("127.0.0.1", port):
        assert (await scrape(port))["rocketmq_topic_number"]


DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "rmq-dashboard.json"


async def test_grafana_dashboard_queries_only_exported_metrics(live: Live) -> None:
    await _send(live, 3)
    await _consume_and_commit(live, 3)
    exported: set[str] = set()
    for port in (live.broker.metrics.port, live.namesrv.metrics.port):
        status, body = await http_get(port)
        assert status == 200
        for family in text_string_to_metric_families(body.decode()):
            exported.add(family.name)
            exported.add(family.name + "_total" if family.type == "counter" else family.name)
            exported.update(sample.name for sample in family.samples)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    queried = {name for expr in exprs for name in re.findall(r"\brocketmq_[a-z_]+", expr)}
    assert len(queried) >= 20
    assert queried - exported == set()
    # every panel shows something and uses the dashboard's data source variable
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"


async def test_metrics_port_in_use_stops_the_start(live: Live, tmp_path: Path) -> None:
    taken = str(live.broker.metrics.port)
    async with trio.open_nursery() as nursery:
        with pytest.raises(OSError):
            await start_broker(
                nursery,
                tmp_path / "other",
                live.namesrv,
                brokerName="broker-b",
                **{**PROM, "metricsPromExporterPort": taken},
            )
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=None,
        metrics_exporter_type="PROM",
        metrics_prom_exporter_port=live.namesrv.metrics.port,
    )
    with pytest.raises(OSError):
        async with NamesrvServer(config):
            pass


async def test_connection_metrics(live: Live) -> None:
    await live.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})  # our client's connection
    samples = await scrape(live.broker.metrics.port)
    assert value(samples, "rocketmq_remoting_connections", port=str(live.broker.port), node_type="broker") >= 1
    assert value(samples, "rocketmq_remoting_connections_refused_total", node_type="broker") == 0
    samples = await scrape(live.namesrv.metrics.port)
    assert value(samples, "rocketmq_remoting_connections", node_type="nameserver") >= 1  # the broker's
    assert value(samples, "rocketmq_remoting_connections_refused_total", reason="server_limit") == 0


async def test_namesrv_listening_on_all_addresses_names_itself_by_the_hosts() -> None:
    config = NamesrvConfig(
        listen_host="0.0.0.0",
        listen_port=0,
        kv_config_path=None,
        metrics_exporter_type="PROM",
        metrics_prom_exporter_host="127.0.0.1",
        metrics_prom_exporter_port=0,
    )
    async with NamesrvServer(config) as namesrv:
        samples = await scrape(namesrv.metrics.port)
        node_ids = {labels["node_id"] for rows in samples.values() for labels, _ in rows}
        assert node_ids == {f"{local_ip()}:{namesrv.remoting.port}"}
        assert not any(node.startswith("0.0.0.0") for node in node_ids)
