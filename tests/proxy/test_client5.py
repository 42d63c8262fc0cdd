"""The official 5.x client through the proxy to a real broker (issue 44)."""

from __future__ import annotations

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
