"""The official 5.x client through the proxy to a real broker (issue 44)."""

from __future__ import annotations

from rmq.protocol import properties as P
from rmq.protocol.message import decode_record
from rmq.proxy import ProxyServer
from tests.client.conftest import Cluster

from .conftest import run_client

TOPIC = "ProxyTopic"
GROUP = "ProxyGroup"


async def test_send_then_receive_and_ack(cluster: Cluster, proxy: ProxyServer) -> None:
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    n = 6
    sent = await run_client(endpoint, "send", TOPIC, GROUP, str(n))
    ids = [line["sent"] for line in sent]
    assert len(set(ids)) == n
    got = await run_client(endpoint, "receive", TOPIC, GROUP, str(n))
    messages, summary = got[:-1], got[-1]
    assert summary == {"received": n}
    assert sorted(m["id"] for m in messages) == sorted(ids)
    by_body = {m["body"]: m for m in messages}
    assert set(by_body) == {f"body-{i}" for i in range(n)}
    one = by_body["body-1"]
    assert one["tag"] == "TagA" and one["keys"] == ["key-1"] and one["props"] == {"index": "1"}
    assert one["group"] == "group-1" and by_body["body-0"]["group"] is None
    assert all(m["attempt"] == 1 and not m["corrupted"] for m in messages)


async def test_unacked_message_comes_back(cluster: Cluster, proxy: ProxyServer) -> None:
    """Not acked within its invisible time (2 s), a message is received again, its
    delivery attempt counted; acked, it stays gone."""
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    [sent] = await run_client(endpoint, "send", TOPIC, GROUP, "1")
    first = await run_client(endpoint, "receive_no_ack", TOPIC, GROUP, "1")
    assert first[0]["id"] == sent["sent"] and first[0]["attempt"] == 1
    again = await run_client(endpoint, "receive", TOPIC, GROUP, "1")
    assert again[-1] == {"received": 1}
    assert again[0]["id"] == sent["sent"] and again[0]["body"] == "body-0" and again[0]["attempt"] == 2


async def test_change_invisible_duration_then_ack(cluster: Cluster, proxy: ProxyServer) -> None:
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    await run_client(endpoint, "send", TOPIC, GROUP, "1")
    lines = await run_client(endpoint, "extend_then_ack", TOPIC, GROUP)
    assert lines == [{"body": "body-0", "changed": True}, {"acked": True}]


async def test_unknown_topic_is_topic_not_found(cluster: Cluster, proxy: ProxyServer) -> None:
    """As Java's proxy: the route query answers TOPIC_NOT_FOUND (40402) in its Status (the
    call itself is OK), and the producer's send fails on the missing route."""
    endpoint = f"127.0.0.1:{proxy.port}"
    [route] = await run_client(endpoint, "query_route", "NoSuchTopic", GROUP)
    assert route["code"] == 40402 and route["queues"] == 0
    assert route["message"] == "No topic route info in name server for the topic: NoSuchTopic"
    [send] = await run_client(endpoint, "send_error", "NoSuchTopic", GROUP)
    assert send["error"] is not None and "NoSuchTopic" in send["text"], send
    await cluster.create_topic(TOPIC)
    [known] = await run_client(endpoint, "query_route", TOPIC, GROUP)
    assert known == {"code": 20000, "message": "OK", "queues": 4}


async def test_unknown_method_is_unimplemented(proxy: ProxyServer) -> None:
    [line] = await run_client(f"127.0.0.1:{proxy.port}", "unknown_method", TOPIC, GROUP)
    assert line["code"] == "UNIMPLEMENTED" and "NoSuchMethod" in line["details"]


async def test_forward_to_dead_letter_queue(cluster: Cluster, proxy: ProxyServer) -> None:
    """ForwardMessageToDeadLetterQueue stores a copy in %DLQ%<group> and acks the original."""
    await cluster.create_topic(TOPIC)
    endpoint = f"127.0.0.1:{proxy.port}"
    [sent] = await run_client(endpoint, "send", TOPIC, GROUP, "1")
    forwarded, again = await run_client(endpoint, "forward_dlq", TOPIC, GROUP)
    assert forwarded == {"id": sent["sent"], "code": 20000} and again == {"again": 0}
    store = cluster.broker.message_store
    dlq = f"%DLQ%{GROUP}"
    assert store.get_max_offset_in_queue(dlq, 0) == 1
    [record] = store.get_message(dlq, 0, 0).records
    msg, _ = decode_record(record)
    assert msg.body == b"body-0" and msg.properties[P.UNIQ_KEY] == sent["sent"]
    assert msg.properties[P.RETRY_TOPIC] == TOPIC


async def test_pull_and_offsets(cluster: Cluster, proxy: ProxyServer) -> None:
    """PullMessage, UpdateOffset, GetOffset and QueryOffset, with the client's stub."""
    await cluster.create_topic("PullTopic", queues=1)
    endpoint = f"127.0.0.1:{proxy.port}"
    await run_client(endpoint, "send", "PullTopic", GROUP, "3")
    lines = await run_client(endpoint, "pull", "PullTopic", GROUP, "3")
    bodies = ["body-0", "body-1", "body-2"]
    assert lines == [
        {"query": "BEGINNING", "offset": 0},
        {"query": "END", "offset": 3},
        {"query": "TIMESTAMP", "offset": 0},
        # the broker's answer for a group without an offset on a queue that starts at 0
        {"get": 20000, "offset": 0},
        {"pull": 0, "tag": "*", "codes": [20000], "bodies": bodies, "next": 3},
        {"pull": 0, "tag": "TagB", "codes": [40401], "bodies": [], "next": 3},  # MESSAGE_NOT_FOUND
        {"update": 20000},
        {"get": 20000, "offset": 3},
        {"pull": 3, "tag": "*", "codes": [40401], "bodies": [], "next": 3},  # after a 1 s long poll
        {"pull": 103, "tag": "*", "codes": [40019], "bodies": [], "next": 3},  # ILLEGAL_OFFSET
    ]
