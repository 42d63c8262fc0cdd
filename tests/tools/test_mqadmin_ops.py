"""mqadmin's maintenance commands (rmq/tools/admin/) against an in-process name
server and broker on 127.0.0.1: config, write permission, KV, topics, queue inspection,
broker cleanups and send probes. The fixture and helpers are test_admin.py's."""

from __future__ import annotations

import json
import re

import pytest

from rmq.client import ConsumeFromWhere, Message, MessageExt, MQClientError, Producer, PushConsumer
from rmq.client.admin import MQAdmin

from .test_admin import CLUSTER, FAST, Servers, admin, create_topic, one_line_error, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest


async def test_broker_config(servers: Servers) -> None:
    s = servers
    r = await admin(s, "getBrokerConfig", "-b", s.addr)
    assert r.code == 0, r.err
    assert r.lines[0] == f"============{s.addr}============"
    assert re.search(r"^brokerName\s+=  broker-a$", r.out, re.M)
    r = await admin(s, "updateBrokerConfig", "-b", s.addr, "-k", "defaultQueryMaxNum", "-v", "7")
    assert r.code == 0 and r.lines == [f"update broker config success, {s.addr}"], r.err
    assert s.broker.config.default_query_max_num == 7
    r = await admin(s, "getBrokerConfig", "-c", CLUSTER)
    assert r.lines[0] == f"============Master: {s.addr}============"
    assert re.search(r"^defaultQueryMaxNum\s+=  7$", r.out, re.M)
    one_line_error(await admin(s, "updateBrokerConfig", "-b", s.addr, "-k", "noSuchKey", "-v", "1"), "noSuchKey")
    one_line_error(
        await admin(s, "updateBrokerConfig", "-b", s.addr, "-k", "defaultQueryMaxNum", "-v", "lots"),
        "defaultQueryMaxNum",
    )
    assert s.broker.config.default_query_max_num == 7


async def test_namesrv_config_kv_and_write_perm(servers: Servers) -> None:
    s = servers
    r = await admin(s, "getNamesrvConfig")
    assert r.code == 0 and r.lines[0] == f"============{s.ns}============", r.err
    assert re.search(r"^orderMessageEnable\s+=  false$", r.out, re.M)
    r = await admin(s, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert r.code == 0 and r.lines == [f"update name server config success![{s.ns}]", "orderMessageEnable : true"]
    assert s.namesrv.state.config.order_message_enable
    one_line_error(await admin(s, "updateNamesrvConfig", "-k", "listenPort", "-v", "1"), "startup")
    one_line_error(await admin(s, "updateNamesrvConfig", "-k", "noSuchKey", "-v", "1"), "noSuchKey")

    r = await admin(s, "updateKvConfig", "-s", "NS1", "-k", "k1", "-v", "v1")
    assert r.lines == ["create or update kv config to namespace success."]
    async with MQAdmin(s.ns) as a:
        assert await a.get_kv_config("NS1", "k1") == "v1"
        r = await admin(s, "deleteKvConfig", "-s", "NS1", "-k", "k1")
        assert r.lines == ["delete kv config from namespace success."]
        assert await a.get_kv_config("NS1", "k1") is None

    r = await admin(s, "updateOrderConf", "-t", "Ord", "-m", "put", "-v", "broker-a:4")
    assert r.out == "update orderConf success. topic=[Ord], orderConf=[broker-a:4]\n"
    r = await admin(s, "updateOrderConf", "-t", "Ord", "-m", "get")
    assert r.out.startswith("get orderConf success. topic=[Ord], orderConf=[broker-a:4]")
    assert (await admin(s, "updateOrderConf", "-t", "Ord", "-m", "delete")).code == 0
    one_line_error(await admin(s, "updateOrderConf", "-t", "Ord", "-m", "shuffle"), "bad method")

    await create_topic(s, "Perm", queues=2)
    r = await admin(s, "wipeWritePerm", "-b", "broker-a")
    assert r.code == 0, r.err
    match = re.fullmatch(rf"wipe write perm of broker\[broker-a\] in name server\[{s.ns}\] OK, (\d+)", r.lines[0])
    assert match and int(match[1]) >= 1
    route = json.loads((await admin(s, "topicRoute", "-t", "Perm")).out)
    assert route["queueDatas"][0]["perm"] & 2 == 0
    r = await admin(s, "addWritePerm", "-b", "broker-a")
    assert re.fullmatch(rf"add write perm of broker\[broker-a\] in name server\[{s.ns}\] OK, \d+", r.lines[0])
    route = json.loads((await admin(s, "topicRoute", "-t", "Perm")).out)
    assert route["queueDatas"][0]["perm"] & 2 == 2


async def test_topic_cluster_list_and_allocate_mq(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Alloc", queues=4)
    assert (await admin(s, "topicClusterList", "-t", "Alloc")).lines == [CLUSTER]
    r = await admin(s, "allocateMQ", "-t", "Alloc", "-i", "10.0.0.1,10.0.0.2,10.0.0.3")
    assert r.code == 0, r.err
    result = json.loads(r.out)["result"]
    assert [len(result[ip]) for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3")] == [2, 1, 1]
    assert sorted(q["queueId"] for qs in result.values() for q in qs) == [0, 1, 2, 3]
    one_line_error(await admin(s, "topicClusterList", "-t", "NoSuchTopic"), "NoSuchTopic")


async def test_message_and_queue_inspection(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Inspect", queues=1)
    async with Producer("pg_inspect", s.ns) as producer:
        sent = [await producer.send(Message("Inspect", f"body-{i}", tags="A" if i % 2 else "B")) for i in range(4)]
    await s.broker.store.wait_dispatched()

    r = await admin(s, "queryMsgByOffset", "-t", "Inspect", "-b", "broker-a", "-i", "0", "-o", "2")
    assert r.code == 0, r.err
    assert re.search(rf"^Message ID:\s+{sent[2].msg_id}$", r.out, re.M) and "body-2" in r.out
    one_line_error(
        await admin(s, "queryMsgByOffset", "-t", "Inspect", "-b", "broker-a", "-i", "0", "-o", "99"), "offset 99"
    )

    r = await admin(s, "printMsg", "-t", "Inspect", "-s", "A")
    assert r.code == 0, r.err
    assert r.lines[0].startswith("minOffset=0, maxOffset=4, ")
    bodies = [line.rsplit("BODY: ", 1)[1] for line in r.lines if line.startswith("MSGID: ")]
    assert bodies == ["body-1", "body-3"]

    r = await admin(s, "printMsgByQueue", "-t", "Inspect", "-a", "broker-a", "-i", "0", "-f", "true", "-p", "true")
    assert r.code == 0, r.err
    assert sum(line.startswith("MSGID: ") for line in r.lines) == 4
    assert [line.split() for line in r.lines if line.startswith("Tag:")] == [
        ["Tag:", "A", "Count:", "2"],
        ["Tag:", "B", "Count:", "2"],
    ]

    r = await admin(s, "queryCq", "-t", "Inspect", "-q", "0", "-i", "1", "-c", "2")
    assert r.code == 0, r.err
    assert "Queue data: " in r.lines and "max: 4, min: 0" in r.lines
    assert [line for line in r.lines if line.startswith("idx: ")] == ["idx: 1", "idx: 2"]
    offsets = [int(m) for m in re.findall(r"physicOffset=(\d+)", r.out)]
    assert len(offsets) == 2 and offsets[0] < offsets[1]
    one_line_error(await admin(s, "queryCq", "-t", "Inspect", "-q", "5", "-i", "0", "-c", "2"), "Inspect:5")
    one_line_error(await admin(s, "queryCq", "-t", "Inspect", "-q", "0", "-i", "0", "-c", "0"), "count")


async def test_broker_cleanups(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Gone", queues=1)
    async with Producer("pg_gone", s.ns) as producer:
        await producer.send(Message("Gone", "x"))
    await s.broker.store.wait_dispatched()
    assert "Gone" in s.broker.message_store.topics()
    s.broker.topics.delete("Gone")  # the topic config goes; its queue stays until cleaned
    for command in ("cleanUnusedTopic", "cleanExpiredCQ", "deleteExpiredCommitLog"):
        r = await admin(s, command, "-b", s.addr)
        assert (r.code, r.out) == (0, "success\n"), (command, r.err)
    assert "Gone" not in s.broker.message_store.topics()
    assert (await admin(s, "cleanUnusedTopic", "-c", CLUSTER)).out == "success\n"


async def test_send_probes(servers: Servers) -> None:
    s = servers
    r = await admin(s, "sendMsgStatus", "-b", "broker-a", "-c", "2", "-s", "16")
    assert r.code == 0, r.err
    assert len(r.lines) == 2 and all(
        re.match(r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK", x) for x in r.lines
    )

    await create_topic(s, "Probe", queues=2)
    r = await admin(s, "checkMsgSendRT", "-t", "Probe", "-a", "3", "-s", "8")
    assert r.code == 0, r.err
    assert r.lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"]
    assert [line.split()[2] for line in r.lines[1:4]] == ["true"] * 3
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", r.lines[4])

    r = await admin(s, "clusterRT", "-a", "2", "-s", "8")
    assert r.code == 0, r.err
    assert r.lines[1].split()[:2] == [CLUSTER, "broker-a"] and r.lines[1].split()[3:] == ["2", "0"]
    one_line_error(await admin(s, "checkMsgSendRT", "-t", "Probe", "-a", "0"), "amount")


async def test_stats_all(servers: Servers) -> None:
    """statsAll: a consumed topic shows its backlog, TPS and 24-hour counts per group; a
    topic nobody consumes shows NO_CONSUMER; -a hides topics with no traffic."""
    s = servers
    await create_topic(s, "Busy", queues=2)
    await create_topic(s, "Lonely", queues=1)
    await create_topic(s, "Idle", queues=1)
    async with Producer("pg_stats", s.ns) as producer:
        for i in range(8):
            await producer.send(Message("Busy", f"b{i}"))
        for i in range(3):
            await producer.send(Message("Lonely", f"l{i}"))
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer("cg_stats", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    consumer.subscribe("Busy", "*")
    async with consumer:

        async def consumed() -> bool:
            return len(got) >= 8

        await wait_for(consumed)
        r = await admin(s, "statsAll")
        assert r.code == 0, r.err
        assert r.lines[0].split() == [
            "#Topic", "#Consumer", "Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"
        ]  # fmt: skip
        rows = {line.split()[0]: line.split() for line in r.lines[1:]}
        busy = rows["Busy"]
        assert busy[1] == "cg_stats" and busy[5] == "8" and busy[6] == "8", r.out
        assert float(busy[3]) > 0 and float(busy[4]) > 0  # the broker is younger than a minute
        assert rows["Lonely"][-1] == "NO_CONSUMER" and rows["Lonely"][-2] == "3"
        assert rows["Idle"][-1] == "NO_CONSUMER" and rows["Idle"][-2] == "0"
        assert not any(name.startswith(("%RETRY%", "%DLQ%")) for name in rows)

        active = await admin(s, "statsAll", "-a")
        names = {line.split()[0] for line in active.lines[1:]}
        assert {"Busy", "Lonely"} <= names and "Idle" not in names
        only = await admin(s, "statsAll", "-t", "Lonely")
        assert [line.split()[0] for line in only.lines[1:]] == ["Lonely"]

    # the broker refuses an item it never counted, with RocketMQ's remark
    async with MQAdmin(s.ns) as a:
        data = await a.view_broker_stats_data(s.addr, "TOPIC_PUT_NUMS", "Busy")
        assert data["statsMinute"]["sum"] == 8
        with pytest.raises(MQClientError, match="The stats <TOPIC_PUT_NUMS> <Nobody> not exist"):
            await a.view_broker_stats_data(s.addr, "TOPIC_PUT_NUMS", "Nobody")
