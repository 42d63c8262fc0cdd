"""FIFO consumption through the proxy with the official 5.x Python client: an orderly group
(consumeMessageOrderly, made with rmq's admin) gets fifo=true in its settings, and its
SimpleConsumer receives each message group in send order, also when a batch's invisible
time passes unacked (docs/proxy.md)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rmq.client import MQAdmin
from rmq.protocol.bodies.configs import SubscriptionGroupConfig
from rmq.protocol.message import decode_record
from rmq.proxy import ProxyServer
from tests.client.conftest import Cluster

from .conftest import run_client

TOPIC = "FifoTopic"
GROUP = "FifoGroup"


async def orderly_group(cluster: Cluster, group: str, retry_max_times: int = 16) -> None:
    config = SubscriptionGroupConfig(group, consume_message_orderly=True, retry_max_times=retry_max_times)
    async with MQAdmin(namesrv=(cluster.namesrv_addr,)) as admin:
        await admin.create_subscription_group(cluster.broker_addr, config)


async def test_an_orderly_group_is_told_fifo(cluster: Cluster, proxy: ProxyServer) -> None:
    await cluster.create_topic(TOPIC)
    await orderly_group(cluster, GROUP, retry_max_times=3)
    endpoint = f"127.0.0.1:{proxy.port}"
    [orderly] = await run_client(endpoint, "consumer_settings", TOPIC, GROUP)
    assert orderly == {"code": 20000, "fifo": True, "attempts": 4}  # retryMaxTimes + 1
    [plain] = await run_client(endpoint, "consumer_settings", TOPIC, "PlainGroup")
    assert plain == {"code": 20000, "fifo": False, "attempts": 17}


async def test_message_groups_are_received_in_send_order(cluster: Cluster, proxy: ProxyServer) -> None:
    await cluster.create_topic(TOPIC)
    await orderly_group(cluster, GROUP)
    endpoint = f"127.0.0.1:{proxy.port}"
    n = 24
    sent = await run_client(endpoint, "send_fifo", TOPIC, GROUP, str(n))
    assert len(sent) == n
    lines = await run_client(endpoint, "receive_fifo", TOPIC, GROUP, str(n), "60")
    deliveries, summary = lines[:-1], lines[-1]
    assert summary == {"received": n}
    assert any(not d["acked"] for d in deliveries)
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in deliveries:
        by_group[d["group"]].append(d)
    assert sorted(by_group) == ["g0", "g1", "g2"]
    for group, seen in by_group.items():
        expected = [f"{group}-{k}" for k in range(n // 3)]
        held = [d["body"] for d in seen if not d["acked"]]
        acked = [d for d in seen if d["acked"]]
        assert held == expected[: len(held)], (group, held)  # the batch left to expire, in order
        assert [d["body"] for d in acked] == expected, (group, acked)  # then all, in order, once
        # what was left unacked came back first with its second attempt, the rest with their first
        assert [d["attempt"] for d in acked] == [2] * len(held) + [1] * (len(expected) - len(held))


async def test_a_message_out_of_attempts_goes_to_the_dlq(cluster: Cluster, proxy: ProxyServer) -> None:
    """Delivered retryMaxTimes + 1 times unacked, a FIFO message is forwarded to the group's
    DLQ by the proxy (as PopMessageResultFilterImpl's TO_DLQ), and its queue moves on."""
    await cluster.create_topic(TOPIC, queues=1)
    await orderly_group(cluster, GROUP, retry_max_times=1)
    endpoint = f"127.0.0.1:{proxy.port}"
    await run_client(endpoint, "send_fifo", TOPIC, GROUP, "3")  # g0-0, g1-0, g2-0 on the one queue
    lines = await run_client(endpoint, "fifo_poison", TOPIC, GROUP, "2", "30")
    assert lines == [
        {"body": "g0-0", "attempt": 1},
        {"body": "g0-0", "attempt": 2},
        {"body": "g1-0", "attempt": 1},
        {"body": "g2-0", "attempt": 1},
        {"received": 2},
    ]
    store = cluster.broker.message_store
    dlq = f"%DLQ%{GROUP}"
    assert store.get_max_offset_in_queue(dlq, 0) == 1
    [record] = store.get_message(dlq, 0, 0).records
    assert decode_record(record)[0].body == b"g0-0"
    assert cluster.broker.offsets.query(GROUP, TOPIC, 0) == 3


async def test_a_push_consumer_consumes_in_order_and_discards_what_fails(cluster: Cluster, proxy: ProxyServer) -> None:
    """The client's PushConsumer, FIFO by its settings: each message group in order, one
    message failing every local attempt (retryMaxTimes + 1) forwarded to the DLQ, and its
    group going on after it."""
    await cluster.create_topic(TOPIC)
    await orderly_group(cluster, GROUP, retry_max_times=1)
    endpoint = f"127.0.0.1:{proxy.port}"
    n = 9
    await run_client(endpoint, "send_fifo", TOPIC, GROUP, str(n))
    summary, *consumed = await run_client(endpoint, "push_fifo", TOPIC, GROUP, str(n), "40")
    assert summary == {"fifo": True, "all_consumed": True}
    by_group: dict[str, list[str]] = defaultdict(list)
    for c in consumed:
        by_group[c["group"]].append(c["body"])
    assert by_group == {
        "g0": ["g0-0", "g0-1", "g0-2"],
        "g1": ["g1-0", "g1-1", "g1-1", "g1-2"],  # two attempts, then the DLQ, then on
        "g2": ["g2-0", "g2-1", "g2-2"],
    }
    store = cluster.broker.message_store
    [record] = store.get_message(f"%DLQ%{GROUP}", 0, 0).records
    assert decode_record(record)[0].body == b"g1-1"


async def test_group_configs_are_cached_and_survive_a_broker_without_them(cluster: Cluster, proxy: ProxyServer) -> None:
    """The proxy's cache of group configs: read once per refresh; a server that cannot
    answer GET_SUBSCRIPTIONGROUP_CONFIG (here the name server, as a 4.x broker would) leaves
    the defaults, or what was read before, in use."""
    groups = proxy.service.groups
    await orderly_group(cluster, GROUP, retry_max_times=5)
    config = await groups.get(GROUP, cluster.broker_addr)
    assert config is not None and config.consume_message_orderly and config.retry_max_times == 5
    await orderly_group(cluster, GROUP, retry_max_times=7)
    assert await groups.get(GROUP, cluster.broker_addr) == config  # cached until the refresh
    groups.refresh_seconds = 0
    assert await groups.get(GROUP, cluster.namesrv_addr) == config  # unanswered: the last one read
    assert await groups.get("Other", cluster.namesrv_addr) is None
    fresh = await groups.get(GROUP, cluster.broker_addr)
    assert fresh is not None and fresh.retry_max_times == 7
