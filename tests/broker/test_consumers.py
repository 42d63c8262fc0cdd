"""Consumer coordination over real connections: heartbeats, NOTIFY_CONSUMER_IDS_CHANGED,
consumer lists, offsets, queue locks, unregistering and expiry."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import Dispatcher, RemotingClient
from rmq.remoting.abc import RequestContext

from .cluster import Cluster


def heartbeat(client_id: str, group: str = "G", topics: tuple[str, ...] = ("T",), producer: str | None = None) -> bytes:
    data: dict[str, Any] = {"clientID": client_id}
    if group:
        data["consumerDataSet"] = [
            {
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": group,
                "messageModel": "CLUSTERING",
                "unitMode": False,
                "subscriptionDataSet": [{"subString": "*", "subVersion": 1, "topic": t} for t in topics],
            }
        ]
    if producer:
        data["producerDataSet"] = [{"groupName": producer}]
    return json.dumps(data).encode()


class Notified:
    """A client-side processor recording what the broker sends us."""

    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self.changed = trio.Event()

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(request)
        self.changed.set()
        self.changed = trio.Event()
        return None


async def call(
    client: RemotingClient, addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b""
) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), 5)


async def test_second_consumer_triggers_notify_and_close_drops_it(cluster: Cluster) -> None:
    addr = cluster.broker.address
    seen = Notified()
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, seen)
    async with RemotingClient(dispatcher=dispatcher) as a, RemotingClient() as b:
        assert (await call(a, addr, RequestCode.HEART_BEAT, body=heartbeat("c-a"))).code == 0
        with trio.fail_after(5):
            while not seen.requests:  # the first member is told too (a new channel)
                await seen.changed.wait()
        first = seen.requests[-1]
        assert first.is_oneway and first.ext_fields == {"consumerGroup": "G"}
        assert (await call(a, addr, RequestCode.HEART_BEAT, body=heartbeat("c-a"))).code == 0  # refresh: no news
        await trio.sleep(0.05)
        assert len(seen.requests) == 1

        assert (await call(b, addr, RequestCode.HEART_BEAT, body=heartbeat("c-b"))).code == 0
        with trio.fail_after(5):
            while len(seen.requests) < 2:
                await seen.changed.wait()
        listed = await call(a, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        assert json_body.loads(listed.body) == {"consumerIdList": ["c-a", "c-b"]}

        b.close_connection(addr)
        with trio.fail_after(5):
            while len(seen.requests) < 3:
                await seen.changed.wait()
        listed = await call(a, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        assert json_body.loads(listed.body) == {"consumerIdList": ["c-a"]}

        r = await call(
            a, addr, RequestCode.UNREGISTER_CLIENT, {"clientID": "c-a", "consumerGroup": "G", "producerGroup": ""}
        )
        assert r.code == 0
        listed = await call(a, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        assert listed.code == ResponseCode.SYSTEM_ERROR and listed.remark == "no consumer for this group, G"


async def test_heartbeat_creates_group_and_retry_topic(cluster: Cluster) -> None:
    r = await cluster.call(RequestCode.HEART_BEAT, body=heartbeat("c1", "NewGroup", producer="PG"))
    assert r.code == 0 and not r.body
    broker = cluster.broker
    assert broker.subscriptions.get("NewGroup") is not None
    retry = broker.topics.get("%RETRY%NewGroup")
    assert retry is not None and retry.write_queue_nums == 1 and retry.perm == 6
    assert [ch.client_id for ch in broker.clients.producer_channels("PG")] == ["c1"]
    bad = await cluster.call(RequestCode.HEART_BEAT, body=b"{not json")
    assert bad.code == ResponseCode.SYSTEM_ERROR


async def test_consumer_offsets(cluster: Cluster) -> None:
    q = {"consumerGroup": "G", "topic": "T", "queueId": 0}
    # a young queue (its first message still in memory): start from 0
    r = await cluster.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields) == (0, {"offset": "0"})
    r = await cluster.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 42})
    assert r.code == 0
    r = await cluster.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields == {"offset": "42"}
    # a queue whose head left the page cache: the client decides (22)
    cluster.broker.role.memory_budget = -1
    await cluster.call(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": "P",
            "topic": "Old",
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 1,
            "queueId": 0,
            "sysFlag": 0,
            "bornTimestamp": 0,
            "flag": 0,
        },
        b"x",
    )
    await cluster.broker.store.wait_dispatched()
    r = await cluster.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "topic": "Old"})
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    assert r.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


async def test_locks_expire_after_60_s(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    mqs = [{"brokerName": "broker-a", "queueId": i, "topic": "T"} for i in range(2)]

    async def lock(client_id: str, code: int = RequestCode.LOCK_BATCH_MQ) -> list[Any]:
        body = json.dumps({"clientId": client_id, "consumerGroup": "G", "mqSet": mqs}).encode()
        r = await cluster.call(code, body=body)
        assert r.code == 0
        return json_body.loads(r.body)["lockOKMQSet"] if r.body else []

    assert len(await lock("c1")) == 2
    assert await lock("c2") == []
    await trio.sleep(61)
    assert len(await lock("c2")) == 2
    await lock("c2", RequestCode.UNLOCK_BATCH_MQ)
    assert len(await lock("c1")) == 2


async def test_silent_consumers_expire(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    r = await cluster.call(RequestCode.HEART_BEAT, body=heartbeat("quiet"))
    assert r.code == 0
    assert cluster.broker.clients.consumer_group("G") is not None
    await trio.sleep(135)  # 120 s of silence plus a 10 s scan (the idle connection closes too)
    assert cluster.broker.clients.consumer_group("G") is None


async def test_consumer_connection_list(cluster: Cluster) -> None:
    r = await cluster.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
    await cluster.call(RequestCode.HEART_BEAT, body=heartbeat("c9"))
    r = await cluster.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"})
    body = json_body.loads(r.body)
    assert body["connectionSet"][0]["clientId"] == "c9" and body["connectionSet"][0]["language"] == "PYTHON"
    assert body["messageModel"] == "CLUSTERING" and body["subscriptionTable"]["T"]["subString"] == "*"
    r = await cluster.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
    assert json_body.loads(r.body) == {"groupList": ["G"]}
