"""mqadmin commands of Apache 4.9.8 that rmq lacked: updateTopicPerm, producer,
consumeMessage, startMonitoring, exportMetadata, exportConfigs, exportMetrics, against an
in-process broker."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import trio

from rmq.admin import export, monitoring
from rmq.client import ConsumeFromWhere, Message, MessageExt, MessageQueue, Producer, PushConsumer
from rmq.client.admin import MQAdmin
from rmq.tools.admin import run

from .test_admin import CLUSTER, FAST, LIMIT, Result, Servers, admin, create_topic, one_line_error, servers, wait_for

__all__ = ["servers"]  # the fixture, imported for pytest


async def test_update_topic_perm(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Perm", queues=2)
    r = await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "4")
    assert r.code == 0, r.err
    assert r.lines[0] == f"update topic perm from 6 to 4 in {s.addr} success."
    assert r.lines[1].startswith("TopicConfig [topicName=Perm, readQueueNums=2, writeQueueNums=2, perm=R--")
    tc = s.broker.topics.get("Perm")
    assert tc is not None and (tc.perm, tc.read_queue_nums, tc.write_queue_nums) == (4, 2, 2)

    async def registered() -> bool:  # the broker registers the change with the name server
        async with MQAdmin(s.ns) as mq_admin:
            return (await mq_admin.topic_route("Perm")).queue_datas[0].perm == 4

    await wait_for(registered)
    r = await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "4")
    assert r.lines == ["new perm equals to the old one!"], r.out

    r = await admin(s, "updateTopicPerm", "-c", CLUSTER, "-t", "Perm", "-p", "6")
    assert r.code == 0, r.err
    assert r.lines == [f"update topic perm from 4 to 6 in {s.addr} success."]
    assert s.broker.topics.get("Perm").perm == 6  # type: ignore[union-attr]

    one_line_error(await admin(s, "updateTopicPerm", "-b", "10.0.0.1:1", "-t", "Perm", "-p", "6"), "not master")
    assert (await admin(s, "updateTopicPerm", "-b", s.addr, "-t", "Perm", "-p", "5")).code != 0  # 2, 4 or 6


async def test_producer(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Made", queues=2)
    async with Producer("pg_more", s.ns) as producer:
        await producer.send(Message("Made", b"x"))
        client_id = producer.instance.client_id

        async def listed() -> bool:
            return any("(pg_more)" in line for line in (await admin(s, "producer", "-b", s.addr)).lines)

        await wait_for(listed)
        r = await admin(s, "producer", "--broker", s.addr)
        assert r.code == 0, r.err
        (line,) = [x for x in r.lines if "(pg_more)" in x]
        match = re.fullmatch(
            rf"producer group \(pg_more\) instance : clientId={re.escape(client_id)},remoteIP=/127\.0\.0\.1:\d+, "
            r"language=PYTHON, version=(\d+), lastUpdateTimestamp=(\d+)",
            line,
        )
        assert match, line
        assert abs(int(match[2]) - time.time() * 1000) < LIMIT * 1000
    one_line_error(await admin(s, "producer", "-b", "127.0.0.1:1"), "127.0.0.1:1")


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


async def test_export_metadata(servers: Servers, tmp_path: Path) -> None:
    s, folder = servers, tmp_path / "export"
    await create_topic(s, "Meta", queues=3)
    await create_topic(s, "%RETRY%cg_meta", queues=1)
    r = await admin(s, "updateSubGroup", "-c", CLUSTER, "-g", "cg_meta", "-r", "5")
    assert r.code == 0, r.err

    before = int(time.time() * 1000)
    r = await admin(s, "exportMetadata", "-c", CLUSTER, "-f", str(folder))
    assert r.code == 0, r.err
    assert r.lines == [f"export {folder / 'metadata.json'} success"]
    doc = _read(folder / "metadata.json")
    assert set(doc) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}
    assert before <= doc["exportTime"] <= time.time() * 1000
    topics = doc["topicConfigTable"]
    assert topics["Meta"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 3,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "Meta",
        "topicSysFlag": 0,
        "writeQueueNums": 3,
    }
    # no system topic (TBW102, the cluster's and the broker's own), no retry topic without -s
    assert not {"TBW102", CLUSTER, "broker-a", "SCHEDULE_TOPIC_XXXX", "%RETRY%cg_meta"} & set(topics)
    groups = doc["subscriptionGroupTable"]
    assert groups["cg_meta"]["groupName"] == "cg_meta" and groups["cg_meta"]["retryMaxTimes"] == 5
    assert "TOOLS_CONSUMER" not in groups and "SELF_TEST_C_GROUP" not in groups

    r = await admin(s, "exportMetadata", "-c", CLUSTER, "-f", str(folder), "-t", "-s")
    assert r.lines == [f"export {folder / 'topic.json'} success"], r.err
    doc = _read(folder / "topic.json")
    assert set(doc) == {"topicConfigTable", "exportTime"} and "%RETRY%cg_meta" in doc["topicConfigTable"]

    r = await admin(s, "exportMetadata", "-b", s.addr, "-f", str(folder), "--subscriptionGroup")
    assert r.lines == [f"export {folder / 'subscriptionGroup.json'} success"], r.err
    doc = _read(folder / "subscriptionGroup.json")  # the broker's wrapper, data version included
    assert set(doc) == {"dataVersion", "subscriptionGroupTable"} and "cg_meta" in doc["subscriptionGroupTable"]
    assert doc["dataVersion"]["counter"] >= 1

    r = await admin(s, "exportMetadata", "-b", s.addr, "-f", str(folder), "-t")
    assert set(_read(folder / "topic.json")) == {"dataVersion", "topicConfigTable"}, r.err

    one_line_error(await admin(s, "exportMetadata", "-f", str(folder)), "-b", "-c")
    one_line_error(await admin(s, "exportMetadata", "-c", "NoSuchCluster", "-f", str(folder)), "NoSuchCluster")


async def test_export_configs(servers: Servers, tmp_path: Path) -> None:
    s, folder = servers, tmp_path / "export"
    r = await admin(s, "exportConfigs", "-c", CLUSTER, "-f", str(folder))
    assert r.code == 0, r.err
    assert r.lines == [f"export {folder / 'configs.json'} success"]
    doc = _read(folder / "configs.json")
    assert doc["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    config = doc["brokerConfigs"]["broker-a"]
    assert config["brokerClusterName"] == CLUSTER and config["brokerId"] == "0"
    assert config["brokerRole"] == "ASYNC_MASTER" and config["flushDiskType"] == "ASYNC_FLUSH"
    assert config["messageDelayLevel"].startswith("1s 5s 10s")
    assert set(config) <= set(export.EXPORTED_BROKER_KEYS) and len(config) >= 12
    assert (await admin(s, "exportConfigs", "-f", str(folder))).code == 2  # -c is required


async def test_export_metrics(servers: Servers, tmp_path: Path) -> None:
    s, folder = servers, tmp_path / "export"
    await create_topic(s, "Counted", queues=2)
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer(
        "cg_counted", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("Counted", "*")
    async with Producer("pg_counted", s.ns) as producer, consumer:
        for i in range(5):
            await producer.send(Message("Counted", f"m{i}".encode()))
        with trio.fail_after(LIMIT):
            while len(got) < 5:
                await trio.sleep(0.05)
        r = await admin(s, "exportMetrics", "--clusterName", CLUSTER, "--filePath", str(folder))
        assert r.code == 0, r.err
        assert r.lines == [f"export {folder / 'metrics.json'} success"]
    doc = _read(folder / "metrics.json")
    report = doc["evaluateReport"]["broker-a"]
    quota = report["runtimeQuota"]
    assert set(quota["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert set(quota["oneDayNum"]) == {
        "normalOneDayInNum",
        "normalOneDayOutNum",
        "transOneDayInNum",
        "scheduleOneDayInNum",
    }
    assert quota["topicSize"] >= 1 and quota["groupSize"] >= 1  # Counted; cg_counted (auto-created)
    assert float(quota["diskRatio"]["commitLogDiskRatio"]) >= 0 and float(quota["messageAverageSize"]) > 0
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    assert report["runtimeVersion"]["clientInfo"] == ["PYTHON%V4_9_8"]
    totals = doc["totalData"]
    assert totals["totalTps"]["totalNormalInTps"] == quota["tps"]["normalInTps"]
    assert totals["totalOneDayNum"]["normalOneDayInNum"] == quota["oneDayNum"]["normalOneDayInNum"]


async def test_consume_message(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Eat", queues=2)
    q0 = MessageQueue("Eat", "broker-a", 0)
    async with Producer("pg_eat", s.ns) as producer:
        for i in range(5):
            await producer.send(Message("Eat", f"m{i}".encode(), tags="T"), queue=q0)
            await trio.sleep(0.005)  # a store time of its own for each
        await producer.send(Message("Eat", b"other"), queue=MessageQueue("Eat", "broker-a", 1))
    async with MQAdmin(s.ns) as a:
        stored = await a.pull_queue(q0, 0, 5)
    finished = (
        "MessageQueue [topic=Eat, brokerName=broker-a, queueId={}] print msg finished. status=NO_NEW_MSG, offset={}"
    )

    def bodies(r: Result) -> list[str]:
        return [line.rsplit(" BODY: ", 1)[1] for line in r.lines if line.startswith("MSGID: ")]

    r = await admin(s, "consumeMessage", "-t", "Eat")
    assert r.code == 0, r.err
    assert r.lines[0] == "Consume ok" and bodies(r) == ["m0", "m1", "m2", "m3", "m4", "other"]
    assert r.lines[6] == finished.format(0, 5) and r.lines[-1] == finished.format(1, 1)
    first = r.lines[1]
    assert first.startswith(f"MSGID: {stored[0].msg_id} MessageExt [brokerName=broker-a, queueId=0, storeSize=")
    assert f", queueOffset=0, sysFlag=0, bornTimestamp={stored[0].born_timestamp}, bornHost=/127.0.0.1:" in first
    assert f", storeTimestamp={stored[0].store_timestamp}, storeHost=/127.0.0.1:" in first
    assert re.search(r"toString\(\)=Message\{topic='Eat', flag=0, properties=\{.*TAGS=T.*\}, body=\[109, 48\]", first)

    r = await admin(s, "consumeMessage", "-t", "Eat", "-c", "3")
    assert r.lines[0] == "The older 3 message of the 0 queue will be provided", r.out
    assert bodies(r) == ["m0", "m1", "m2"] and not any("finished" in line for line in r.lines)

    r = await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-i", "0", "-o", "3", "-g", "cg_eat")
    assert bodies(r) == ["m3", "m4"] and r.lines[-1] == finished.format(0, 5), r.out
    r = await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-i", "0", "-c", "2")
    assert r.lines[0] == "The oldler 2 message will be provided" and bodies(r) == ["m0", "m1"], r.out
    r = await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-i", "0", "-o", "9")
    assert r.lines == ["MessageQueue [topic=Eat, brokerName=broker-a, queueId=0] no matched msg, offset=9"]

    begin, end = str(stored[3].store_timestamp), str(stored[1].store_timestamp)
    r = await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-i", "0", "-s", begin)
    assert bodies(r) == ["m3", "m4"], r.out
    r = await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-i", "0", "-e", end)
    assert bodies(r)[:2] == ["m0", "m1"] and "m3" not in bodies(r), r.out

    one_line_error(
        await admin(s, "consumeMessage", "-t", "Eat", "-i", "0"), "Please set the brokerName before queueId!"
    )
    one_line_error(await admin(s, "consumeMessage", "-t", "Eat", "-b", "broker-a", "-o", "1"), "queueId before offset")
    one_line_error(await admin(s, "consumeMessage", "-t", "Eat", "-c", "0"), "positive messageNumber")
    later = str(int(time.time() * 1000) + 3_600_000)
    one_line_error(await admin(s, "consumeMessage", "-t", "Eat", "-s", later), "beginTimestamp before now")
    one_line_error(await admin(s, "consumeMessage", "-t", "Eat", "-s", begin, "-e", end), "less than or equal")


async def test_start_monitoring(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Watch", queues=1)
    release, got = trio.Event(), []

    async def handler(msg: MessageExt) -> None:
        if msg.body.startswith(b"held"):
            await release.wait()  # the group falls behind while it is online
        got.append(msg)

    consumer = PushConsumer("cg_mon", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST)
    consumer.subscribe("Watch", "*")
    async with Producer("pg_mon", s.ns) as producer, consumer:
        for body in (b"m0", b"m1"):
            await producer.send(Message("Watch", body))

        async def caught_up() -> bool:
            async with MQAdmin(s.ns) as a:
                stats = await a.consume_stats("cg_mon", "Watch")
            return len(got) == 2 and stats.diff_total == 0

        await wait_for(caught_up)
        for i in range(3):
            await producer.send(Message("Watch", f"held{i}".encode()))
        try:
            r = await admin(s, "startMonitoring", "--rounds", "2", "--interval", "1")
        finally:
            release.set()
    assert r.code == 0, r.err
    rule = "[MONITOR] ========================================="
    assert r.lines.count(rule + "beginRound") == 2 and r.lines.count(rule + "endRound") == 2, r.out
    assert r.lines[0] == rule + "beginRound"
    pattern = (
        r"\[MONITOR\] reportUndoneMsgs: UndoneMsgs \[consumerGroup=cg_mon, topic=Watch, undoneMsgsTotal=3, "
        r"undoneMsgsSingleMQ=3, undoneMsgsDelayTimeMills=(\d+)\]"
    )
    assert len([x for x in r.lines if re.fullmatch(pattern, x)]) == 2, r.out
    assert sum(x.startswith("Execute one round monitor work, spent timemills: ") for x in r.lines) == 2
    assert "[NOTIFY]" not in r.out  # one client, not blocked for a minute
    assert (await admin(s, "startMonitoring", "--interval", "0")).code == 2


def test_monitor_notices() -> None:
    """DefaultMonitorListener's notices from running infos as rmq's and Java's clients answer them."""
    now = 10_000_000
    mq = MessageQueue("Watch", "broker-a", 0)

    def info(orderly: bool, sub: str, **pq: Any) -> dict[str, Any]:
        props = {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMEORDERLY": str(orderly).lower()}
        props["PROP_CONSUMER_START_TIMESTAMP"] = str(now - 300_000)
        return {"properties": props, "mqTable": {mq: pq}, "subscriptionSet": [{"topic": "Watch", "subString": sub}]}

    blocked = info(False, "*", cachedMsgCount=2, lastConsumeTimestamp=now - 61_000)
    assert monitoring.queue_notes("c1", blocked, now) == (
        "c1 MessageQueue [topic=Watch, brokerName=broker-a, queueId=0] "
        "can't consume for a while, maybe blocked, 61000ms\n"
    )
    assert monitoring.queue_notes("c1", info(False, "*", cachedMsgCount=0, lastConsumeTimestamp=0), now) == ""
    unlocked = info(True, "*", locked=False, lastLockTimestamp=now - 5)
    assert monitoring.queue_notes("c2", unlocked, now).endswith("queueId=0] can't lock for a while, 5ms\n")
    assert monitoring.subscription_differs({"c1": blocked, "c2": info(False, "TagA")}, now)
    assert not monitoring.subscription_differs({"c1": blocked, "c2": info(False, "*")}, now)


async def test_help_lists_them() -> None:
    out = io.StringIO()
    assert await run(["help"], out, io.StringIO()) == 0
    names = {line.split()[0] for line in out.getvalue().splitlines() if line.startswith("  ")}
    new = {"producer", "consumeMessage", "startMonitoring", "exportMetadata", "exportConfigs", "exportMetrics"}
    assert new <= names
    help_out = io.StringIO()
    with contextlib.redirect_stdout(help_out):
        assert await run(["help", "exportMetadata"], io.StringIO(), io.StringIO()) == 0
    for option in ("--clusterName", "--brokerAddr", "--filePath", "--topic", "--subscriptionGroup", "--specialTopic"):
        assert option in help_out.getvalue()
