"""`rmq admin` (mqadmin) against an in-process name server and broker on 127.0.0.1.

Each command runs through `rmq.tools.admin.run` inside the test's Trio loop, so its
output and exit code are checked as a user would see them; one test runs the real
`python -m rmq admin` in a subprocess. Every wait is bounded by LIMIT.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.client import ConsumeFromWhere, Message, MessageExt, MessageQueue, Producer, PushConsumer
from rmq.client.admin import MQAdmin, version_desc
from rmq.client.errors import MQNoRouteError
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.tools.admin import human_ms, parse_timestamp, run

LIMIT = 30  # seconds: every wait in these tests ends by then
CLUSTER = "TestCluster"
FAST: dict[str, Any] = {
    "poll_name_server_interval": 1.0,
    "rebalance_interval": 1.0,
    "persist_consumer_offset_interval": 0.2,
}


@dataclass
class Servers:
    namesrv: NamesrvServer
    broker: BrokerController

    @property
    def ns(self) -> str:
        return self.namesrv.address

    @property
    def addr(self) -> str:
        return self.broker.address


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Servers]:
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            broker_cluster_name=CLUSTER,
            namesrv_addr=(ns.address,),
            broker_ip1="127.0.0.1",
            listen_port=0,
            bind_address="127.0.0.1",
            vip_channel_enable=False,
            store_path_root_dir=tmp_path / "store",
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=30_000 * 20,
        )
        async with BrokerController(config) as broker:
            with trio.fail_after(LIMIT):
                while not ns.routes.live:
                    await trio.sleep(0.02)
            yield Servers(ns, broker)


async def admin(s: Servers, *argv: str) -> Result:
    """Run `mqadmin argv... -n <our name server>`."""
    out, err = io.StringIO(), io.StringIO()
    with trio.fail_after(LIMIT):
        code = await run([*argv, "-n", s.ns], out, err)
    return Result(code, out.getvalue(), err.getvalue())


async def wait_for(check: Callable[[], Awaitable[bool]]) -> None:
    with trio.fail_after(LIMIT):
        while not await check():
            await trio.sleep(0.05)


async def wait_route(s: Servers, topic: str) -> None:
    async def routed() -> bool:
        return (await admin(s, "topicRoute", "-t", topic)).code == 0

    await wait_for(routed)


async def create_topic(s: Servers, topic: str, queues: int = 4) -> None:
    r = await admin(s, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", str(queues), "-w", str(queues))
    assert r.code == 0, r.err
    await wait_route(s, topic)


def one_line_error(r: Result, *parts: str) -> None:
    assert r.code == 1
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    for part in parts:
        assert part in lines[0], (part, lines[0])


# -- topics ---------------------------------------------------------------------------------


async def test_topic_lifecycle(servers: Servers) -> None:
    s = servers
    r = await admin(s, "updateTopic", "-c", CLUSTER, "-t", "Orders", "-r", "4", "-w", "4")
    assert r.code == 0, r.err
    assert r.lines == [
        f"create topic to {s.addr} success.",
        (
            "TopicConfig [topicName=Orders, readQueueNums=4, writeQueueNums=4, perm=RW-, "
            "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
        ),
    ]
    await wait_route(s, "Orders")

    assert "Orders" in (await admin(s, "topicList")).lines
    listed = await admin(s, "topicList", "-c")
    assert listed.lines[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert any(line.split() == [CLUSTER, "Orders"] for line in listed.lines[1:])

    route = json.loads((await admin(s, "topicRoute", "-t", "Orders")).out)
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": s.addr}, "brokerName": "broker-a", "cluster": CLUSTER}]
    (qd,) = route["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)
    table = await admin(s, "topicRoute", "-t", "Orders", "-l")
    assert table.lines[1].split()[:2] == [CLUSTER, "broker-a"] and table.lines[-1].split() == ["Total:", "1", "4", "4"]

    # the broker's table changes; the name server follows on the broker's next registration
    r = await admin(s, "updateTopic", "-b", s.addr, "-t", "Orders", "-r", "2", "-w", "2", "-p", "4")
    assert r.code == 0 and r.lines[0] == f"create topic to {s.addr} success." and "perm=R--" in r.lines[1]

    async def updated() -> bool:
        out = await admin(s, "topicRoute", "-t", "Orders")
        return out.code == 0 and json.loads(out.out)["queueDatas"][0]["perm"] == 4

    await wait_for(updated)

    r = await admin(s, "deleteTopic", "-t", "Orders", "-c", CLUSTER)
    assert r.lines == [
        f"delete topic [Orders] from cluster [{CLUSTER}] success.",
        "delete topic [Orders] from NameServer success.",
    ]
    assert "Orders" not in (await admin(s, "topicList")).lines
    assert s.broker.topics.get("Orders") is None
    one_line_error(await admin(s, "topicRoute", "-t", "Orders"), "no route info of topic 'Orders'")


async def test_order_topic_sets_the_order_conf(servers: Servers) -> None:
    s = servers
    r = await admin(s, "updateTopic", "-c", CLUSTER, "-t", "Ordered", "-w", "2", "-r", "2", "-o", "true")
    assert r.code == 0, r.err
    assert "set cluster orderConf. isOrder=true, orderConf=[broker-a:2]" in r.lines
    async with MQAdmin(s.ns) as a:
        assert await a.get_kv_config("ORDER_TOPIC_CONFIG", "Ordered") == "broker-a:2"


async def test_topic_status_and_send_message(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Status", queues=2)
    for i in range(3):
        r = await admin(s, "sendMessage", "-t", "Status", "-p", f"m{i}", "-b", "broker-a", "-i", "1")
        assert r.code == 0, r.err
        assert r.lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
        name, qid, status, msg_id = r.lines[1].split()
        assert (name, qid, status) == ("broker-a", "1", "SEND_OK") and re.fullmatch("[0-9A-F]{32}", msg_id)
    await s.broker.store.wait_dispatched()
    r = await admin(s, "topicStatus", "-t", "Status")
    assert r.code == 0, r.err
    header, q0, q1 = r.lines
    assert header.split() == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]
    assert q0.split() == ["broker-a", "0", "0", "0"]
    assert q1.split()[:4] == ["broker-a", "1", "0", "3"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}$", q1)


# -- brokers --------------------------------------------------------------------------------


async def test_cluster_list_and_broker_status(servers: Servers) -> None:
    s = servers
    r = await admin(s, "clusterList")
    assert r.code == 0, r.err
    assert r.lines[0].split()[:5] == ["#Cluster", "Name", "#Broker", "Name", "#BID"]
    row = r.lines[1].split()
    assert row[:5] == [CLUSTER, "broker-a", "0", s.addr, "V4_9_8"]
    more = await admin(s, "clusterList", "-m")
    assert more.code == 0 and more.lines[1].split()[:2] == [CLUSTER, "broker-a"]

    status = await admin(s, "brokerStatus", "-b", s.addr)
    assert status.code == 0, status.err
    table = dict(line.split(":", 1) for line in status.lines)
    assert table["brokerVersionDesc".ljust(32)].strip() == "V4_9_8"
    assert [line.split(":")[0].strip() for line in status.lines] == sorted(k.strip() for k in table)
    by_cluster = await admin(s, "brokerStatus", "-c", CLUSTER)
    assert by_cluster.lines and all(line.startswith(s.addr) for line in by_cluster.lines)


# -- messages -------------------------------------------------------------------------------


async def test_query_by_key_unique_key_and_id(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Query")
    async with Producer("pg_query", s.ns) as producer:
        sent = await producer.send(Message("Query", "find me", tags="TagA", keys=["order-1", "order-10"]))
        await producer.send(Message("Query", "other", keys="order-100"))
    await s.broker.store.wait_dispatched()

    r = await admin(s, "queryMsgByKey", "-t", "Query", "-k", "order-1")
    assert r.code == 0, r.err
    assert r.lines[0].split() == ["#Message", "ID", "#QID", "#Offset"]
    assert [line.split() for line in r.lines[1:]] == [
        [sent.msg_id, str(sent.message_queue.queue_id), str(sent.queue_offset)]
    ]
    # the index matches hashes; only exact keys come back
    one_line_error(await admin(s, "queryMsgByKey", "-t", "Query", "-k", "order"), "no message with key 'order'")

    r = await admin(s, "queryMsgByUniqueKey", "-t", "Query", "-i", sent.msg_id)
    assert r.code == 0, r.err
    fields = {line[:20].strip(): line[21:] for line in r.lines}
    assert fields["Topic:"] == "Query" and fields["Tags:"] == "[TagA]" and fields["Keys:"] == "[order-1 order-10]"
    assert fields["Message ID:"] == sent.msg_id and fields["OffsetID:"] == sent.offset_msg_id
    assert fields["Message Body:"] == "find me" and fields["Store Host:"] == s.addr
    assert "UNIQ_KEY=" + sent.msg_id in fields["Properties:"]

    r = await admin(s, "queryMsgById", "-i", sent.offset_msg_id)
    assert r.code == 0, r.err
    message, _, tracks = r.out.partition("\n\n\n")
    by_id = {line[:20].strip(): line[21:] for line in message.splitlines()}
    assert by_id == fields
    assert tracks == "WARN: No Consumer\n"  # no group consumes Query (tests/tools/test_mqadmin_tracks.py)
    assert by_id["Queue Offset:"] == str(sent.queue_offset)

    one_line_error(await admin(s, "queryMsgById", "-i", "XYZ"), "is not an offset message id")
    missing = sent.offset_msg_id[:16] + "00000000FFFFFFFF"
    one_line_error(await admin(s, "queryMsgById", "-i", missing), "VIEW_MESSAGE_BY_ID(33)", "SYSTEM_ERROR(1)")


# -- groups, consumers, offsets ---------------------------------------------------------------


async def test_sub_group_update_and_delete(servers: Servers) -> None:
    s = servers
    r = await admin(s, "updateSubGroup", "-c", CLUSTER, "-g", "SG", "-r", "3", "-d", "false", "-o", "true")
    assert r.code == 0, r.err
    assert r.lines[0] == f"create subscription group to {s.addr} success."
    assert "retryMaxTimes=3" in r.lines[1] and "consumeBroadcastEnable=false" in r.lines[1]
    group = s.broker.subscriptions.get("SG")
    assert group is not None and group.retry_max_times == 3 and not group.consume_broadcast_enable
    assert group.consume_message_orderly  # -o: RocketMQ 5's orderly (FIFO) group
    r = await admin(s, "deleteSubGroup", "-b", s.addr, "-g", "SG")
    assert r.lines == [f"delete subscription group [SG] from broker [{s.addr}] success."]
    assert s.broker.subscriptions.get("SG") is None


async def test_consumer_progress_connection_and_reset(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Progress", queues=2)
    async with Producer("pg_progress", s.ns) as producer:
        for i in range(6):
            await producer.send(Message("Progress", f"p{i}"))
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer(
        "cg_progress", s.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("Progress", "*")
    async with consumer:

        async def caught_up() -> bool:
            r = await admin(s, "consumerProgress", "-g", "cg_progress")
            return len(got) >= 6 and r.code == 0 and "Diff Total: 0" in r.lines

        await wait_for(caught_up)
        r = await admin(s, "consumerProgress", "-g", "cg_progress")
        rows = [line.split() for line in r.lines[1:] if line.startswith("Progress")]
        assert len(rows) == 2 and sum(int(row[3]) for row in rows) == 6
        assert all(row[3] == row[4] and row[5] == "0" for row in rows)

        r = await admin(s, "consumerConnection", "-g", "cg_progress")
        assert r.code == 0, r.err
        assert r.lines[0].startswith("001  ") and consumer.instance.client_id in r.lines[0]
        assert "PYTHON" in r.lines[0] and version_desc(409) in r.lines[0]
        subs = [line.split()[1:] for line in r.lines if "Topic:" in line]
        assert subs == [
            ["Topic:", "%RETRY%cg_progress", "SubExpression:", "*"],
            ["Topic:", "Progress", "SubExpression:", "*"],
        ]
        assert "ConsumeType: CONSUME_PASSIVELY" in r.lines and "MessageModel: CLUSTERING" in r.lines

        groups = await admin(s, "consumerProgress")
        row = next(line.split() for line in groups.lines if line.startswith("cg_progress "))
        assert row[:5] == ["cg_progress", "1", "V4_9_8", "PUSH", "CLUSTERING"] and row[6] == "0"

        # resetOffsetByTime asks the broker to reset and tell the consumers (code 222)
        async with MQAdmin(s.ns) as a:
            table = await a.reset_offset_on(s.addr, "Progress", "cg_progress", 0)
        assert table == {MessageQueue("Progress", "broker-a", 0): 0, MessageQueue("Progress", "broker-a", 1): 0}
        r = await admin(s, "resetOffsetByTime", "-g", "cg_progress", "-t", "Progress", "-s", "0")
        assert r.code == 0, r.err
        assert r.lines[0].startswith("rollback consumer offset by specified group[cg_progress], topic[Progress]")
        assert [line.split() for line in r.lines[2:]] == [["broker-a", "0", "0"], ["broker-a", "1", "0"]]

    offline = await admin(s, "consumerConnection", "-g", "cg_progress")
    one_line_error(offline, "CONSUMER_NOT_ONLINE(206)")

    # with the group offline, reset the offsets in the broker: back to the start
    r = await admin(s, "resetOffsetByTimeOld", "-g", "cg_progress", "-t", "Progress", "-s", "1970-01-01#00:00:00:000")
    assert r.code == 0, r.err
    assert r.lines[0].startswith("rollback consumer offset by specified consumerGroup[cg_progress], topic[Progress]")
    rows = [line.split() for line in r.lines[2:]]
    assert [row[0:2] for row in rows] == [["broker-a", "0"], ["broker-a", "1"]]
    assert all(row[2] == "3" and row[4] == "0" and row[5] == "0" for row in rows)
    r = await admin(s, "consumerProgress", "-g", "cg_progress")
    assert "Diff Total: 6" in r.lines


# -- dead letters ---------------------------------------------------------------------------


async def test_dlq_list_and_resend(servers: Servers) -> None:
    s = servers
    await create_topic(s, "Work", queues=1)
    async with Producer("pg_work", s.ns) as producer:
        sent = await producer.send(Message("Work", "poison", tags="T1", keys="bad-1", properties={"app": "x"}))
    await s.broker.store.wait_dispatched()
    async with MQAdmin(s.ns) as a:
        stored = await a.view_message(sent.offset_msg_id)
        # a consumer gives up at once: past its (zero) retries the broker moves it to %DLQ%
        await a.api.consumer_send_back(s.addr, stored, "cg_dead", delay_level=0, max_reconsume_times=0)
    await wait_route(s, "%DLQ%cg_dead")
    await s.broker.store.wait_dispatched()

    r = await admin(s, "dlqList", "-g", "cg_dead")
    assert r.code == 0, r.err
    assert r.lines[0].split()[:4] == ["#Message", "ID", "#Origin", "Topic"]
    row = r.lines[1].split()
    assert row[:5] == [sent.msg_id, "Work", "0", "0", "1"] and row[-1] == "poison"
    assert r.lines[-1] == "Total: 1"

    one_line_error(await admin(s, "dlqResend", "-g", "cg_dead", "-i", "NOPE"), "NOPE is not among the 1 messages")
    r = await admin(s, "dlqResend", "-g", "cg_dead", "-i", sent.msg_id)
    assert r.code == 0, r.err
    _, resent_to, status, new_id = r.lines[1].split()
    assert (resent_to, status) == ("Work", "SEND_OK") and new_id != sent.msg_id
    assert r.lines[-1] == "Resent: 1 of 1"
    await s.broker.store.wait_dispatched()
    async with MQAdmin(s.ns) as a:
        (copy,) = await a.query_message("Work", new_id, unique=True)
        assert copy.body == b"poison" and copy.reconsume_times == 0
        assert copy.tags == "T1" and copy.keys == "bad-1" and copy.properties["app"] == "x"
        assert "RETRY_TOPIC" not in copy.properties and "ORIGIN_MESSAGE_ID" not in copy.properties


# -- errors and the command line --------------------------------------------------------------


async def test_errors_are_one_line(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    s = servers
    out, err = io.StringIO(), io.StringIO()
    assert await run(["topicList", "-n", "127.0.0.1:1"], out, err) == 1
    assert err.getvalue().startswith("error: topicList: connection to 127.0.0.1:1 failed")
    assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()

    one_line_error(await admin(s, "topicStatus", "-t", "Nope"), "no route info of topic 'Nope'")
    one_line_error(await admin(s, "brokerStatus", "-b", "127.0.0.1:1"), "connection to 127.0.0.1:1 failed")
    one_line_error(await admin(s, "updateTopic", "-c", "NoCluster", "-t", "X"), "cluster 'NoCluster' is not known")
    one_line_error(
        await admin(s, "updateTopic", "-b", s.addr, "-t", "TBW102"), "UPDATE_AND_CREATE_TOPIC(17)", "SYSTEM_ERROR(1)"
    )
    one_line_error(await admin(s, "resetOffsetByTimeOld", "-g", "g", "-t", "T", "-s", "yesterday"), "bad timestamp")
    one_line_error(await admin(s, "consumerProgress", "-g", "nobody"), "no consume stats for group 'nobody'")

    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    err = io.StringIO()
    assert await run(["topicList"], io.StringIO(), err) == 1
    assert "no name server address" in err.getvalue()
    assert await run(["updateTopic", "-t", "X"], io.StringIO(), io.StringIO()) == 2  # -b or -c required
    assert await run([], io.StringIO(), io.StringIO()) == 2
    help_out = io.StringIO()
    assert await run(["help"], help_out, io.StringIO()) == 0 and "queryMsgByUniqueKey" in help_out.getvalue()


def test_parse_timestamp_and_version() -> None:
    assert parse_timestamp("now", 123) == 123
    assert parse_timestamp("1700000000000", 0) == 1700000000000
    assert parse_timestamp("-1", 0) == -1
    local = parse_timestamp("2024-03-05#06:07:08:009", 0)
    assert human_ms(local) == "2024-03-05 06:07:08,009"
    assert [version_desc(v) for v in (0, 37, 121, 401, 409, 100_000)] == [
        "V3_0_0_SNAPSHOT",
        "V3_0_11",
        "V3_4_9",
        "V4_9_4",
        "V4_9_8",
        "HigherVersion",
    ]


async def test_python_m_rmq_admin_topic_list(servers: Servers) -> None:
    s = servers
    await create_topic(s, "ViaSubprocess")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with trio.fail_after(LIMIT * 2):
        done = await trio.run_process(
            [sys.executable, "-m", "rmq", "admin", "topicList", "-n", s.ns],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    topics = done.stdout.decode().splitlines()
    assert "ViaSubprocess" in topics and "TBW102" in topics


async def test_admin_api_no_route(servers: Servers) -> None:
    async with MQAdmin(servers.ns) as a:
        with pytest.raises(MQNoRouteError):
            await a.topic_route("Absent")
        info = await a.cluster_info()
        assert info.masters(CLUSTER) == [("broker-a", servers.addr)]
        assert info.broker_name_of(servers.addr) == "broker-a"
