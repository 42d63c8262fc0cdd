"""Send (V1, V2, batch, every refusal) and pull (every status) over real sockets."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.protocol.message import (
    Message,
    encode_batch_body,
    iter_records,
    parse_offset_msg_id,
)

from .cluster import Cluster


def send_ext(
    topic: str = "TopicTest", queue_id: int = 0, props: dict[str, str] | None = None, **fields: Any
) -> dict[str, Any]:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        queue_id=queue_id,
        born_timestamp=1700000000000,
        properties=P.encode_properties(props if props is not None else {"TAGS": "TagA", "KEYS": "k1", "WAIT": "true"}),
        **fields,
    )
    return header.to_ext()


def pull_ext(
    topic: str = "TopicTest",
    queue_id: int = 0,
    offset: int = 0,
    *,
    sys_flag: int = 4,
    subscription: str = "*",
    suspend: int = 0,
    **more: Any,
) -> dict[str, Any]:
    return {
        "consumerGroup": "CG",
        "topic": topic,
        "queueId": queue_id,
        "queueOffset": offset,
        "maxMsgNums": 32,
        "sysFlag": sys_flag,
        "commitOffset": 0,
        "suspendTimeoutMillis": suspend,
        "subVersion": 0,
        "subscription": subscription,
        **more,
    }


async def send(cluster: Cluster, body: bytes = b"hello", **kw: Any) -> Any:
    return await cluster.call(RequestCode.SEND_MESSAGE, send_ext(**kw), body)


async def test_send_v1_then_pull_found(cluster: Cluster) -> None:
    first = await send(cluster, b"one")
    assert first.code == ResponseCode.SUCCESS, first.remark
    ext = first.ext_fields
    assert (ext["queueId"], ext["queueOffset"], ext["MSG_REGION"], ext["TRACE_ON"]) == (
        "0",
        "0",
        "DefaultRegion",
        "true",
    )
    ip, port, phy = parse_offset_msg_id(ext["msgId"])
    assert (ip, port, phy) == ("127.0.0.1", cluster.broker.port, 0)
    second = await send(cluster, b"two")
    assert second.ext_fields["queueOffset"] == "1"
    await cluster.broker.store.wait_dispatched()

    pulled = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext())
    assert pulled.code == ResponseCode.SUCCESS
    assert pulled.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "2",
        "minOffset": "0",
        "maxOffset": "2",
    }
    messages = list(iter_records(pulled.body))
    assert [m.body for m in messages] == [b"one", b"two"]
    m = messages[0]
    assert m.topic == "TopicTest" and m.store_host == ("127.0.0.1", cluster.broker.port)
    assert m.born_host[0] == "127.0.0.1" and m.born_timestamp == 1700000000000
    assert m.properties["CLUSTER"] == "TestCluster" and m.properties["TAGS"] == "TagA"
    assert "WAIT" not in m.properties  # obeyed, not stored


async def test_send_v2_short_keys_and_random_queue(cluster: Cluster) -> None:
    header = SendMessageRequestHeader(producer_group="PG", topic="TopicV2", queue_id=-1, properties="")
    response = await cluster.call(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), b"v2")
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert 0 <= int(response.ext_fields["queueId"]) < 4  # auto-created with min(4, 8) queues
    tc = cluster.broker.topics.get("TopicV2")
    assert tc is not None and tc.write_queue_nums == 4 and tc.perm == 6


@pytest.mark.parametrize(
    "code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]
)
async def test_batch_is_decided_by_the_flag(cluster: Cluster, code: int) -> None:
    messages = [Message("TopicB", f"m{i}".encode(), 0, {"TAGS": "T", "UNIQ_KEY": f"U{i}"}) for i in range(3)]
    header = SendMessageRequestHeader(
        producer_group="PG", topic="TopicB", queue_id=1, batch=True, properties=P.encode_properties({"WAIT": "true"})
    )
    ext = header.to_ext() if code == RequestCode.SEND_MESSAGE else header.to_v2_ext()
    if code == RequestCode.SEND_MESSAGE:
        ext["batch"] = "1"  # as the C++ client writes it
    response = await cluster.call(code, ext, encode_batch_body(messages))
    assert response.code == ResponseCode.SUCCESS, response.remark
    ids = response.ext_fields["msgId"].split(",")
    assert len(ids) == 3 and response.ext_fields["queueOffset"] == "0"
    await cluster.broker.store.wait_dispatched()
    pulled = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("TopicB", 1))
    stored = list(iter_records(pulled.body))
    assert [m.body for m in stored] == [b"m0", b"m1", b"m2"]
    assert [m.properties["UNIQ_KEY"] for m in stored] == ["U0", "U1", "U2"]
    assert all(m.properties["CLUSTER"] == "TestCluster" for m in stored)
    assert [m.offset_msg_id for m in stored] == ids


async def test_send_refusals(cluster: Cluster) -> None:
    async def code_of(**kw: Any) -> tuple[int, str]:
        body = kw.pop("body", b"x")
        r = await send(cluster, body, **kw)
        return r.code, r.remark or ""

    assert (await code_of(topic="bad topic"))[0] == ResponseCode.SYSTEM_ERROR
    assert (await code_of(topic="t" * 128))[0] == ResponseCode.SYSTEM_ERROR
    for system in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"):
        assert (await code_of(topic=system))[0] == ResponseCode.NO_PERMISSION
    code, remark = await code_of(topic="NoTemplate", default_topic="SELF_TEST_TOPIC")
    assert code == ResponseCode.TOPIC_NOT_EXIST and "not exist" in remark
    code, remark = await code_of(queue_id=99)
    assert code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in remark
    code, remark = await code_of(body=b"x" * (256 * 1024 + 1))
    assert code == ResponseCode.MESSAGE_ILLEGAL and "262144" in remark
    code, _ = await code_of(props={"x" * 40000: "y"})
    assert code == ResponseCode.MESSAGE_ILLEGAL
    missing = await cluster.call(RequestCode.SEND_MESSAGE, {"topic": "T"}, b"x")
    assert missing.code == ResponseCode.SYSTEM_ERROR and "producerGroup" in (missing.remark or "")


async def test_no_write_permission(cluster: Cluster) -> None:
    from rmq.protocol.bodies import TopicConfig

    cluster.broker.topics.update(TopicConfig("ReadOnly", 1, 1, 4))
    r = await send(cluster, topic="ReadOnly")
    assert r.code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("broker_props", [{"autoCreateTopicEnable": "false"}])
async def test_no_auto_create(cluster: Cluster) -> None:
    r = await send(cluster, topic="Fresh")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_pull_statuses(cluster: Cluster) -> None:
    def head(r: Any) -> tuple[int, int, int, int]:
        e = r.ext_fields
        return r.code, int(e["nextBeginOffset"]), int(e["minOffset"]), int(e["maxOffset"])

    # unknown queue: offset 0 → 19, other offsets → 21 with next 0
    await send(cluster, topic="P", queue_id=0)
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 1, 0))
    assert head(r) == (ResponseCode.PULL_NOT_FOUND, 0, 0, 0) and r.remark == "No new message"
    assert set(r.ext_fields) == {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 1, 5))
    assert head(r) == (ResponseCode.PULL_OFFSET_MOVED, 0, 0, 0)
    await cluster.broker.store.wait_dispatched()
    # caught up → 19 at once (no SUSPEND flag)
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 0, 1))
    assert head(r) == (ResponseCode.PULL_NOT_FOUND, 1, 0, 1)
    # beyond the end → 21 with next = max
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 0, 7))
    assert head(r) == (ResponseCode.PULL_OFFSET_MOVED, 1, 0, 1)
    # filter that matches nothing → 20 with next past the scanned entries
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 0, 0, subscription="Other"))
    assert head(r) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 1, 0, 1)
    # errors
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("NoSuchTopic", offset=3))
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0", "maxOffset": "0"}
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 9))
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[9] is illegal" in (r.remark or "")
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 0, sys_flag=0))
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("P", 0, expressionType="SQL92", subscription="a>1"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in (r.remark or "")


async def test_pull_offset_too_small(cluster: Cluster) -> None:
    await send(cluster, topic="Small")
    await cluster.broker.store.wait_dispatched()
    cluster.broker.message_store.queues.get("Small", 0).correct_min_offset(10**9)  # type: ignore[union-attr]
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("Small", 0, 0))
    assert r.code == ResponseCode.PULL_OFFSET_MOVED
    assert r.ext_fields["nextBeginOffset"] == r.ext_fields["minOffset"]


async def test_tag_filtering(cluster: Cluster) -> None:
    for tag in ("TagA", "TagB", "TagC", "TagA"):
        await send(cluster, tag.encode(), topic="Tags", props={"TAGS": tag})
    await send(cluster, b"untagged", topic="Tags", props={})
    await cluster.broker.store.wait_dispatched()
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("Tags", subscription="TagA || TagC"))
    assert [m.body for m in iter_records(r.body)] == [b"TagA", b"TagC", b"TagA"]
    assert r.ext_fields["nextBeginOffset"] in ("4", "5")


async def test_commit_offset_piggyback(cluster: Cluster) -> None:
    await send(cluster, topic="C")
    await cluster.broker.store.wait_dispatched()
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("C", 0, 1, sys_flag=5, commitOffset=1))
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert cluster.broker.offsets.query("CG", "C", 0) == 1


async def test_long_polling_wakes_on_arrival(cluster: Cluster) -> None:
    await send(cluster, topic="LP")  # creates the topic
    await cluster.broker.store.wait_dispatched()
    results: list[Any] = []

    async def parked_pull() -> None:
        results.append(
            await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("LP", 0, 1, sys_flag=6, suspend=15000), timeout=30)
        )
        results.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked_pull)
        for _ in range(200):  # bounded: wait until the pull is parked
            if len(cluster.broker.waiters):
                break
            await trio.sleep(0.005)
        assert len(cluster.broker.waiters) == 1
        sent_at = trio.current_time()
        await send(cluster, b"wake", topic="LP")
    response, answered_at = results
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(response.body)] == [b"wake"]
    assert answered_at - sent_at < 0.25  # real clock: delivered right after arrival


async def test_long_polling_times_out_with_19(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send(cluster, topic="LP2")
    await cluster.broker.store.wait_dispatched()
    start = trio.current_time()
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("LP2", 0, 1, sys_flag=6, suspend=15000), timeout=30)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert 15 <= trio.current_time() - start < 16


@pytest.mark.parametrize("broker_props", [{"longPollingEnable": "false", "shortPollingTimeMills": "700"}])
async def test_short_polling(cluster: Cluster, autojump_clock: trio.testing.MockClock) -> None:
    await send(cluster, topic="SP")
    await cluster.broker.store.wait_dispatched()
    start = trio.current_time()
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("SP", 0, 1, sys_flag=6, suspend=15000), timeout=30)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert 0.7 <= trio.current_time() - start < 1.0


async def test_vip_port_serves_all_but_pull(cluster: Cluster) -> None:
    vip = f"127.0.0.1:{cluster.broker.vip_port}"
    r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Vip"), b"x", addr=vip)
    assert r.code == ResponseCode.SUCCESS
    r = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("Vip"), addr=vip)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert r.remark == " request type 11 not supported"


async def test_unknown_code(cluster: Cluster) -> None:
    r = await cluster.call(999)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_prepared_message_becomes_a_half_message(cluster: Cluster) -> None:
    r = await send(cluster, b"tx", topic="TxTopic", sys_flag=4, props={"TRAN_MSG": "true", "PGROUP": "PG"})
    assert r.code == ResponseCode.SUCCESS
    assert r.ext_fields["queueId"] == "0"
    await cluster.broker.store.wait_dispatched()
    assert cluster.broker.message_store.get_max_offset_in_queue("TxTopic", 0) == 0  # not visible yet
    (half,) = iter_records(cluster.broker.message_store.get_message("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0).body)
    assert half.properties["REAL_TOPIC"] == "TxTopic" and half.properties["REAL_QID"] == "0"
    assert half.sys_flag & 0xC == 0


@pytest.mark.parametrize("broker_props", [{"rejectTransactionMessage": "true"}])
async def test_transactions_can_be_refused(cluster: Cluster) -> None:
    r = await send(cluster, b"tx", sys_flag=4, props={"TRAN_MSG": "true"})
    assert r.code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("broker_props", [{"flushDiskType": "SYNC_FLUSH"}])
async def test_sync_flush_send(cluster: Cluster) -> None:
    r = await send(cluster, b"durable")
    assert r.code == ResponseCode.SUCCESS
    assert cluster.broker.store.flushed_offset >= cluster.broker.message_store.max_phy_offset


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("PUT_OK", 0),
        ("FLUSH_DISK_TIMEOUT", 10),
        ("FLUSH_SLAVE_TIMEOUT", 12),
        ("SLAVE_NOT_AVAILABLE", 11),
        ("CREATE_MAPPED_FILE_FAILED", 1),
        ("MESSAGE_ILLEGAL", 13),
        ("PROPERTIES_SIZE_EXCEEDED", 13),
        ("SERVICE_NOT_AVAILABLE", 14),
        ("OS_PAGECACHE_BUSY", 1),
        ("UNKNOWN_ERROR", 1),
    ],
)
def test_put_status_to_response_code(tmp_path: Any, status: str, code: int) -> None:
    from rmq.broker.processors.send import SendProcessor
    from rmq.protocol import RemotingCommand
    from rmq.store.results import PutMessageResult, PutMessageStatus

    from .parts import broker_parts

    with broker_parts(tmp_path) as parts:
        processor = SendProcessor(parts)  # a processor from parts, no controller
    stored = PutMessageStatus[status].stored
    result = PutMessageResult(
        PutMessageStatus[status],
        "why",
        0,
        100,
        "7F00000100002A9F0000000000000000" if stored else "",
        3,
        msg_num=1 if stored else 0,
    )
    response = processor._respond(RemotingCommand.request(RequestCode.SEND_MESSAGE), result, "T", 2)
    assert response.code == code
    if stored:  # stored, so the client gets the full header even when the flush or slave wait failed
        assert response.ext_fields == {
            "msgId": "7F00000100002A9F0000000000000000",
            "queueId": "2",
            "queueOffset": "3",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
    else:
        assert response.remark and "why" in response.remark
