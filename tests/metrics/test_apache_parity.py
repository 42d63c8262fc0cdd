"""The broker's Prometheus families carry RocketMQ 5.3's names and label sets, so Apache's
Grafana dashboards and alert rules apply unchanged.

APACHE below is read from apache/rocketmq at rocketmq-all-5.3.3 (each row names the file
its labels are set in); the broker is driven through every path that feeds a family (send,
pull, long poll, retry to DLQ, transaction commit and rollback, delay level, timer), then
scraped over HTTP, and every sample's label names are compared with the table.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from rmq.broker.controller import BrokerController
from rmq.client import ConsumeFromWhere, Message, Producer, PullConsumer
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from rmq.protocol.message import parse_offset_msg_id
from rmq.remoting import RemotingClient
from tests.broker.cluster import start_broker

from .scrape import http_get

BROKER = "org/apache/rocketmq/broker/"
CONST = ("cluster", "node_type", "node_id")  # BrokerMetricsManager.init: LABEL_MAP
STORE = (*CONST, "storage_type", "storage_medium")  # DefaultStoreMetricsManager.newAttributesBuilder
LAG = ("consumer_group", "topic", "is_retry", "is_system")  # BrokerMetricsManager.buildLagAttributes

# family as exported (counters with _total) → label names besides CONST
APACHE: dict[str, tuple[str, ...]] = {
    # broker/.../processor/SendMessageProcessor.java (sendMessage, messagesInTotal / messageSize)
    "rocketmq_messages_in_total": ("topic", "message_type", "is_system"),
    "rocketmq_throughput_in_total": ("topic", "message_type", "is_system"),
    "rocketmq_message_size": ("topic", "message_type", "is_system"),
    # broker/.../processor/DefaultPullMessageResultHandler.java (messagesOutTotal)
    "rocketmq_messages_out_total": ("topic", "consumer_group", "is_system"),
    "rocketmq_throughput_out_total": ("topic", "consumer_group", "is_system"),
    # broker/.../metrics/BrokerMetricsManager.java (initLagAndDlqMetrics)
    "rocketmq_consumer_lag_messages": LAG,
    "rocketmq_consumer_lag_latency": LAG,
    "rocketmq_consumer_inflight_messages": LAG,
    "rocketmq_consumer_queueing_latency": LAG,
    "rocketmq_consumer_ready_messages": LAG,
    # broker/.../processor/AbstractSendMessageProcessor.java (consumerSendMsgBack, sendToDlqMessages)
    "rocketmq_send_to_dlq_messages_total": ("consumer_group", "topic", "is_system"),
    # broker/.../processor/EndTransactionProcessor.java; BrokerMetricsManager.initTransactionMetrics
    "rocketmq_commit_messages_total": ("topic",),
    "rocketmq_rollback_messages_total": ("topic",),
    "rocketmq_finish_message_latency": ("topic",),
    "rocketmq_half_messages": ("topic",),
    # broker/.../metrics/BrokerMetricsManager.java (initConnectionMetrics, initStatsMetrics)
    "rocketmq_producer_connections": ("language", "version", "protocol_type"),
    "rocketmq_consumer_connections": (
        "consumer_group",
        "language",
        "version",
        "consume_mode",
        "protocol_type",
        "is_system",
    ),
    "rocketmq_processor_watermark": ("processor",),
    "rocketmq_broker_permission": (),
    "rocketmq_topic_number": (),
    "rocketmq_consumer_group_number": (),
    # remoting/.../netty/NettyRemotingAbstract.java (writeResponse); RemotingMetricsManager
    "rocketmq_rpc_latency": ("protocol_type", "is_long_polling", "request_code", "response_code", "result"),
}
# store/.../metrics/DefaultStoreMetricsManager.java: label names besides STORE
APACHE_STORE: dict[str, tuple[str, ...]] = {
    "rocketmq_storage_size": (),
    "rocketmq_storage_flush_behind_bytes": (),
    "rocketmq_storage_dispatch_behind_bytes": (),
    "rocketmq_storage_message_reserve_time": (),
    "rocketmq_timer_enqueue_lag": (),
    "rocketmq_timer_enqueue_latency": (),
    "rocketmq_timer_dequeue_lag": (),
    "rocketmq_timer_dequeue_latency": (),
    "rocketmq_timing_messages": ("topic",),
    "rocketmq_timer_enqueue_total": ("topic",),
    "rocketmq_timer_dequeue_total": ("topic",),
    "rocketmq_timer_message_snapshot": ("timer_bound_s",),
    "rocketmq_delay_message_latency": ("topic",),
}

TOPIC = "ParityTopic"
GROUP = "parity-group"
PG = "parity-producer"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController, RemotingClient]]:
    config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
    async with NamesrvServer(config) as namesrv, RemotingClient() as client, trio.open_nursery() as nursery:
        broker = await start_broker(
            nursery, tmp_path / "store", namesrv, metricsExporterType="PROM", metricsPromExporterPort="0"
        )
        yield namesrv, broker, client
        broker.shutdown()
        await broker.wait_stopped()
        nursery.cancel_scope.cancel()


async def _call(
    client: RemotingClient, broker: BrokerController, code: int, ext: dict, body: bytes = b""
) -> RemotingCommand:  # type: ignore[type-arg]
    return await client.invoke(broker.address, RemotingCommand.request(code, ext, body), 5.0)


async def _send_raw(
    client: RemotingClient, broker: BrokerController, props: dict[str, str], sys_flag: int = 0
) -> dict[str, str]:
    header = SendMessageRequestHeader(
        producer_group=PG,
        topic=TOPIC,
        queue_id=0,
        sys_flag=sys_flag,
        born_timestamp=broker.clock_ms(),
        properties=P.encode_properties(props),
    )
    r = await _call(client, broker, RequestCode.SEND_MESSAGE, header.to_ext(), b"raw")
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r.ext_fields


async def _end(client: RemotingClient, broker: BrokerController, sent: dict[str, str], kind: int) -> None:
    header = EndTransactionRequestHeader(
        producer_group=PG,
        tran_state_table_offset=int(sent["queueOffset"]),
        commit_log_offset=parse_offset_msg_id(sent["msgId"])[2],
        commit_or_rollback=kind,
        msg_id=sent["msgId"],
    )
    r = await _call(client, broker, RequestCode.END_TRANSACTION, header.to_ext())
    assert r.code == ResponseCode.SUCCESS, r.remark


def _label_sets(body: bytes) -> dict[str, set[frozenset[str]]]:
    """Exported family (counters with _total) → the label-name sets of its samples."""
    out: dict[str, set[frozenset[str]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        name = family.name + "_total" if family.type == "counter" else family.name
        for sample in family.samples:
            out.setdefault(name, set()).add(frozenset(sample.labels) - {"le"})
    return out


async def test_label_sets_match_rocketmq_5(broker: tuple[NamesrvServer, BrokerController, RemotingClient]) -> None:
    namesrv, controller, client = broker
    async with Producer(PG, namesrv.address) as producer:
        for i in range(4):
            await producer.send(Message(TOPIC, b"m%d" % i))
        await _send_raw(client, controller, {P.SHARDING_KEY: "order-1"})  # fifo
        await _send_raw(client, controller, {P.DELAY: "1"})  # delay level 1 (1 s)
        await _send_raw(client, controller, {"TIMER_DELAY_SEC": "3600"})  # still timing at the scrape
        await _send_raw(client, controller, {"TIMER_DELAY_MS": "1000"})  # delivered by the wheel
        half = {P.TRAN_MSG: "true", P.PGROUP: PG}
        await _end(client, controller, await _send_raw(client, controller, half, sys_flag=4), 8)  # commit
        await _end(client, controller, await _send_raw(client, controller, half, sys_flag=4), 12)  # rollback
        await _send_raw(client, controller, half, sys_flag=4)  # left half
        # a long-polling pull on an empty queue: parked, then answered "not found"
        pull = {
            "consumerGroup": GROUP,
            "topic": "EmptyTopic",
            "queueId": 0,
            "queueOffset": 0,
            "maxMsgNums": 1,
            "sysFlag": 2 | 4,  # suspend, subscription
            "commitOffset": 0,
            "suspendTimeoutMillis": 50,
            "subVersion": 0,
            "subscription": "*",
        }
        controller.topics.create_if_absent("EmptyTopic", 1, 6)
        await _call(client, controller, RequestCode.PULL_MESSAGE, pull)

        consumer = PullConsumer(GROUP, namesrv.address, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe(TOPIC)
        async with consumer:
            await consumer.wait_for_assignment(timeout=10)
            received = []
            with trio.fail_after(20):
                while not received:
                    received += await consumer.poll(timeout=1)
            await consumer.commit()
            # the first message used all its retries: to the DLQ
            r = await _call(
                client,
                controller,
                RequestCode.CONSUMER_SEND_MSG_BACK,
                {"group": GROUP, "offset": received[0].commitlog_offset, "delayLevel": -1, "originTopic": TOPIC},
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            with trio.fail_after(20):  # the 1 s timer is delivered and the consumer registered
                while not (
                    controller.stats.timer_dequeued
                    and controller.clients.consumer_group(GROUP)
                    and controller.offsets.query(GROUP, TOPIC, 0) >= 0
                ):
                    await trio.sleep(0.05)
            status, body = await http_get(controller.metrics.port)
    assert status == 200
    exported = _label_sets(body)

    expected = {name: {frozenset((*CONST, *labels))} for name, labels in APACHE.items()}
    expected |= {name: {frozenset((*STORE, *labels))} for name, labels in APACHE_STORE.items()}
    missing = sorted(set(expected) - set(exported))
    assert not missing, f"families RocketMQ 5.3 has and the broker did not export: {missing}"
    wrong = {name: (exported[name], want) for name, want in expected.items() if exported[name] != want}
    assert not wrong, wrong

    text = body.decode()
    # values as RocketMQ writes them
    for fragment in (
        'message_type="fifo"',
        'message_type="delay"',
        'message_type="transaction"',
        'message_type="normal"',
        'request_code="send_message"',
        'response_code="success"',
        'is_long_polling="true"',
        'request_code="consumer_send_msg_back"',
        'response_code="pull_not_found"',
        'rocketmq_send_to_dlq_messages_total{cluster="TestCluster",'
        f'consumer_group="{GROUP}",is_system="false",node_id="broker-a",node_type="broker",topic="{TOPIC}"}} 1.0',
        'rocketmq_commit_messages_total{cluster="TestCluster",node_id="broker-a",node_type="broker",'
        f'topic="{TOPIC}"}} 1.0',
        'rocketmq_rollback_messages_total{cluster="TestCluster",node_id="broker-a",node_type="broker",'
        f'topic="{TOPIC}"}} 1.0',
        f'rocketmq_half_messages{{cluster="TestCluster",node_id="broker-a",node_type="broker",topic="{TOPIC}"}} 1.0',
        'rocketmq_timing_messages{cluster="TestCluster",node_id="broker-a",node_type="broker",'
        f'storage_medium="disk",storage_type="local",topic="{TOPIC}"}} 1.0',
        'timer_bound_s="3600"',
    ):
        assert fragment in text, fragment
