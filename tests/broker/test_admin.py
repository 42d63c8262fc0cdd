"""Admin and query requests, and CONSUMER_SEND_MSG_BACK (retry and DLQ)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies import SubscriptionGroupConfig
from rmq.protocol.body import MQKey
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.protocol.message import iter_records, parse_offset_msg_id

from .cluster import Cluster
from .test_send_pull import pull_ext, send_ext


async def put(cluster: Cluster, body: bytes, **kw: Any) -> dict[str, str]:
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(**kw), body)
    assert r.code == 0, r.remark
    await cluster.broker.store.wait_dispatched()
    return r.ext_fields


async def test_queue_offsets_and_times(cluster: Cluster) -> None:
    for i in range(3):
        await put(cluster, f"m{i}".encode(), topic="Q")
    q = {"topic": "Q", "queueId": 0}
    assert (await cluster.call(RequestCode.GET_MAX_OFFSET, q)).ext_fields == {"offset": "3"}
    assert (await cluster.call(RequestCode.GET_MIN_OFFSET, q)).ext_fields == {"offset": "0"}
    earliest = await cluster.call(RequestCode.GET_EARLIEST_MSG_STORETIME, q)
    ts = int(earliest.ext_fields["timestamp"])
    assert ts > 0
    found = await cluster.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": ts})
    assert found.ext_fields == {"offset": "0"}
    unknown = await cluster.call(RequestCode.GET_MAX_OFFSET, {"topic": "Nope", "queueId": 0})
    assert unknown.ext_fields == {"offset": "0"}


async def test_view_and_query_message(cluster: Cluster) -> None:
    ext = await put(cluster, b"findme", topic="QM", props={"KEYS": "order-1 order-2", "UNIQ_KEY": "ABCDEF0123"})
    _, _, phy = parse_offset_msg_id(ext["msgId"])
    viewed = await cluster.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
    assert [m.body for m in iter_records(viewed.body)] == [b"findme"]
    missing = await cluster.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 10**9})
    assert missing.code == ResponseCode.SYSTEM_ERROR

    query = {"topic": "QM", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}
    r = await cluster.call(RequestCode.QUERY_MESSAGE, {**query, "key": "order-2"})
    assert r.code == 0 and [m.body for m in iter_records(r.body)] == [b"findme"]
    assert {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"} <= set(r.ext_fields)
    r = await cluster.call(RequestCode.QUERY_MESSAGE, {**query, "key": "ABCDEF0123", "_UNIQUE_KEY_QUERY": "true"})
    assert r.code == 0 and len(list(iter_records(r.body))) == 1
    r = await cluster.call(RequestCode.QUERY_MESSAGE, {**query, "key": "nothing"})
    assert r.code == ResponseCode.QUERY_NOT_FOUND
    assert r.remark == "can not find message, maybe time range not correct"


@pytest.mark.parametrize("broker_props", [{"messageIndexEnable": "false"}])
async def test_without_the_index_keys_find_nothing_but_ids_still_do(cluster: Cluster) -> None:
    ext = await put(cluster, b"unindexed", topic="QM", props={"KEYS": "order-1", "UNIQ_KEY": "ABCDEF0124"})
    assert cluster.broker.message_store.index is None
    assert not (cluster.store / "index").exists()
    query = {"topic": "QM", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62, "key": "order-1"}
    assert (await cluster.call(RequestCode.QUERY_MESSAGE, query)).code == ResponseCode.QUERY_NOT_FOUND
    _, _, phy = parse_offset_msg_id(ext["msgId"])
    viewed = await cluster.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy})
    assert [m.body for m in iter_records(viewed.body)] == [b"unindexed"]


async def test_topic_admin(cluster: Cluster) -> None:
    create = CreateTopicRequestHeader(topic="Admin", read_queue_nums=2, write_queue_nums=2, perm=6)
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext())).code == 0
    for bad in ("TBW102", "TestCluster", "broker-a", "bad name"):
        r = await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create.to_ext(), "topic": bad})
        assert r.code == ResponseCode.SYSTEM_ERROR, bad
    table = json_body.loads((await cluster.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
    assert table["topicConfigTable"]["Admin"]["readQueueNums"] == 2 and table["dataVersion"]["counter"] > 0

    await put(cluster, b"x", topic="Admin", queue_id=1)
    stats = json_body.loads((await cluster.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})).body)
    q1 = stats["offsetTable"][MQKey("Admin", "broker-a", 1)]
    assert q1["maxOffset"] == 1 and q1["minOffset"] == 0 and q1["lastUpdateTimestamp"] > 0
    r = await cluster.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Gone"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST

    await cluster.call(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "AG", "topic": "Admin", "queueId": 1, "commitOffset": 1}
    )
    consume = json_body.loads((await cluster.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "AG"})).body)
    assert consume["offsetTable"][MQKey("Admin", "broker-a", 1)]["consumerOffset"] == 1
    assert consume["offsetTable"][MQKey("Admin", "broker-a", 1)]["brokerOffset"] == 1
    offsets = await cluster.call(RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert b"Admin@AG" in offsets.body and b"{1:1}" in offsets.body

    assert (await cluster.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})).code == 0
    assert cluster.broker.topics.get("Admin") is None
    assert cluster.broker.offsets.query("AG", "Admin", 1) == -1
    r = await cluster.call(RequestCode.GET_MAX_OFFSET, {"topic": "Admin", "queueId": 1})
    assert r.ext_fields == {"offset": "0"}


async def test_subscription_group_admin(cluster: Cluster) -> None:
    body = b'{"groupName":"SG","retryQueueNums":2,"consumeBroadcastEnable":false}'
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == 0
    table = json_body.loads((await cluster.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert table["subscriptionGroupTable"]["SG"]["retryQueueNums"] == 2
    assert (await cluster.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "SG"})).code == 0
    assert cluster.broker.subscriptions.get("SG") is None
    r = await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryQueueNums":2}')
    assert r.code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("broker_props", [{"autoCreateSubscriptionGroup": "false"}])
async def test_one_subscription_group_config(cluster: Cluster) -> None:
    """GET_SUBSCRIPTIONGROUP_CONFIG (5.x): what the gRPC proxy reads a group's FIFO setting from."""
    body = b'{"groupName":"OG","consumeMessageOrderly":true,"retryMaxTimes":3}'
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == 0
    r = await cluster.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "OG"})
    assert r.code == ResponseCode.SUCCESS
    config = json_body.loads(r.body)
    assert config["consumeMessageOrderly"] is True and config["retryMaxTimes"] == 3
    r = await cluster.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "Nobody"})
    assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and r.remark == "No group in this broker"
    r = await cluster.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {})
    assert r.code == ResponseCode.SYSTEM_ERROR and "group" in (r.remark or "")


async def test_broker_info(cluster: Cluster) -> None:
    await put(cluster, b"x", topic="Info")
    info = json_body.loads((await cluster.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    for key in (
        "brokerVersionDesc",
        "putTps",
        "getTransferedTps",
        "msgPutTotalTodayNow",
        "msgGetTotalTodayNow",
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "pageCacheLockTimeMills",
        "earliestMessageTimeStamp",
        "commitLogDiskRatio",
    ):
        assert isinstance(info[key], str), key
    assert info["msgPutTotalTodayNow"] == "1"
    assert len(info["putTps"].split()) == 3 and float(info["putTps"].split()[0]) >= 0
    config = await cluster.call(RequestCode.GET_BROKER_CONFIG)
    assert b"brokerName=broker-a\n" in config.body and config.ext_fields["version"].startswith("{")


async def test_send_back_goes_to_retry_then_dlq(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    ext = await put(cluster, b"fails", topic="SB", props={"TAGS": "T", "UNIQ_KEY": "U1"})
    _, _, phy = parse_offset_msg_id(ext["msgId"])
    r = await cluster.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG", "offset": phy, "delayLevel": 0})
    assert r.code == 0, r.remark
    await cluster.broker.store.wait_dispatched()
    # retries wait at delay level 3 + reconsumeTimes (10 s) in SCHEDULE_TOPIC_XXXX first
    assert cluster.broker.message_store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
    assert cluster.broker.message_store.get_max_offset_in_queue("%RETRY%CG", 0) == 0
    await trio.sleep(10.5)
    pulled = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("%RETRY%CG", 0, 0))
    (retry,) = iter_records(pulled.body)
    assert retry.body == b"fails" and retry.reconsume_times == 1
    assert retry.properties["RETRY_TOPIC"] == "SB" and retry.properties["UNIQ_KEY"] == "U1"
    assert retry.properties["ORIGIN_MESSAGE_ID"] == ext["msgId"]

    # a retried message that has used its 16 retries goes to the DLQ
    cluster.broker.subscriptions.update(SubscriptionGroupConfig("CG", retry_max_times=1))
    r = await cluster.call(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG", "offset": retry.commitlog_offset, "delayLevel": 0}
    )
    assert r.code == 0, r.remark
    await cluster.broker.store.wait_dispatched()
    assert cluster.broker.message_store.get_max_offset_in_queue("%DLQ%CG", 0) == 1
    dlq = cluster.broker.topics.get("%DLQ%CG")
    assert dlq is not None and dlq.write_queue_nums == 1

    r = await cluster.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "CG", "offset": 10**9, "delayLevel": 0})
    assert r.code == ResponseCode.SYSTEM_ERROR


async def test_retry_topic_send_reroutes_to_dlq(cluster: Cluster) -> None:
    await cluster.call(RequestCode.HEART_BEAT, body=b'{"clientID":"c","consumerDataSet":[{"groupName":"RG"}]}')
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="%RETRY%RG", reconsume_times=16), b"x")
    assert r.code == 0
    await cluster.broker.store.wait_dispatched()
    assert cluster.broker.message_store.get_max_offset_in_queue("%DLQ%RG", 0) == 1


async def test_hostile_admin_and_heartbeat_requests_get_clear_errors(cluster: Cluster) -> None:
    """Found by `rmq fuzz --unsafe`: each used to raise inside the broker (or freeze it)."""
    huge = {"topic": "Huge", "readQueueNums": 2**31 - 1, "writeQueueNums": 2**31 - 1, "perm": 6}
    r = await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, huge)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queue counts 0-1024" in r.remark
    for bad in ("a\x00b", "../x"):
        r = await cluster.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": bad})
        assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in r.remark.lower()
    for body in (b'{"clientID":"c","consumerDataSet":5}', b'{"clientID":"c","producerDataSet":1.5}',
                 b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":3}]}'):  # fmt: skip
        r = await cluster.call(RequestCode.HEART_BEAT, {}, body)
        assert r.code != ResponseCode.SUCCESS and "expected a JSON array" in r.remark
    await put(cluster, b"m", topic="Q")
    pull = pull_ext(topic="Q", offset=1, sys_flag=6, suspend=-5)  # suspend + subscription
    with trio.fail_after(5):
        r = await cluster.call(RequestCode.PULL_MESSAGE, pull)
    assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.PULL_OFFSET_MOVED)
