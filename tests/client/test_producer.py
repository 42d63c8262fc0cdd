"""Every send mode against our name server and broker on 127.0.0.1."""

from __future__ import annotations

import os

import pytest
import trio
import trio.lowlevel

from rmq.client import (
    Message,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQNoRouteError,
    MQTimeoutError,
    Producer,
    PullConsumer,
    SendResult,
    SendStatus,
    open_producer,
)
from rmq.client.route import PublishInfo, TopicRoute
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol.message import MessageExt, parse_offset_msg_id
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import serve_on_loopback

from .conftest import FAST, Cluster


async def read_all(cluster: Cluster, topic: str, expected: int, queues: int = 4) -> list[MessageExt]:
    """Pull every message of `topic` (from offset 0 of each queue) until `expected` arrived."""
    out: list[MessageExt] = []
    consumer = PullConsumer(f"reader_{topic}", cluster.namesrv_addr, auto_commit=False, **FAST)
    async with consumer:
        mqs = await consumer.fetch_message_queues(topic)
        assert len(mqs) == queues
        consumer.assign(mqs)
        with trio.fail_after(20):
            while len(out) < expected:
                out.extend(await consumer.poll(timeout=1.0))
    return out


async def test_send_sync_result_and_properties(cluster: Cluster) -> None:
    await cluster.create_topic("SyncTopic")
    async with Producer("pg_sync", cluster.namesrv_addr) as producer:
        msg = Message("SyncTopic", b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "blue"})
        results = [await producer.send(msg)]
        results += [await producer.send(Message("SyncTopic", f"m{i}")) for i in range(7)]
    first = results[0]
    assert first.status is SendStatus.SEND_OK
    assert first.msg_id == msg.uniq_key and len(first.msg_id) == 32
    ip, port, _ = parse_offset_msg_id(first.offset_msg_id)
    assert f"{ip}:{port}" == cluster.broker_addr
    assert first.message_queue.topic == "SyncTopic" and first.message_queue.broker_name == cluster.broker_name
    assert len({r.message_queue for r in results}) == 4  # round robin over the 4 queues
    assert len({r.msg_id for r in results}) == 8
    assert str(first).startswith("SendResult [sendStatus=SEND_OK, msgId=")

    got = {m.msg_id: m for m in await read_all(cluster, "SyncTopic", 8)}
    stored = got[first.msg_id]
    assert stored.body == b"hello" and stored.tags == "TagA" and stored.keys == "k1 k2"
    assert stored.properties["color"] == "blue"
    assert stored.offset_msg_id == first.offset_msg_id
    assert stored.queue_offset == first.queue_offset and stored.queue_id == first.message_queue.queue_id


async def test_large_body_is_compressed(cluster: Cluster) -> None:
    await cluster.create_topic("BigTopic")
    body = os.urandom(2000) * 5  # 10 KB, compressible
    async with open_producer("pg_big", cluster.namesrv_addr) as producer:
        result = await producer.send(Message("BigTopic", body))
    [stored] = await read_all(cluster, "BigTopic", 1)
    assert stored.msg_id == result.msg_id
    assert stored.sys_flag & 0x1 and stored.body == body


async def test_send_async_and_oneway(cluster: Cluster) -> None:
    await cluster.create_topic("AsyncTopic")
    outcomes: list[SendResult | MQClientError] = []

    async def callback(outcome: SendResult | MQClientError) -> None:
        await trio.lowlevel.checkpoint()
        outcomes.append(outcome)

    async with Producer("pg_async", cluster.namesrv_addr) as producer:
        for i in range(50):
            await producer.send_async(Message("AsyncTopic", f"async {i}"), callback)
        for i in range(10):
            await producer.send_oneway(Message("AsyncTopic", f"oneway {i}"))
    # leaving `async with` waited for every async send
    assert len(outcomes) == 50 and all(isinstance(o, SendResult) for o in outcomes)
    bodies = sorted(m.body.decode() for m in await read_all(cluster, "AsyncTopic", 60))
    assert bodies == sorted([f"async {i}" for i in range(50)] + [f"oneway {i}" for i in range(10)])


async def test_send_batch_split_to_max_size(cluster: Cluster) -> None:
    await cluster.create_topic("BatchTopic")
    msgs = [Message("BatchTopic", f"batch {i:03d}".encode() * 10, tags="B") for i in range(100)]
    async with Producer("pg_batch", cluster.namesrv_addr, max_message_size=4000) as producer:
        results = await producer.send_batch(msgs)
    assert len(results) > 1  # 100 x ~110 B does not fit 4000 B
    ids = [i for r in results for i in r.msg_id.split(",")]
    assert ids == [m.uniq_key for m in msgs]
    for r in results:
        offsets = r.offset_msg_id.split(",")
        assert len(offsets) == len(r.msg_id.split(","))
    stored = await read_all(cluster, "BatchTopic", 100)
    assert sorted(m.msg_id for m in stored) == sorted(ids)
    by_queue: dict[int, list[MessageExt]] = {}
    for m in stored:
        by_queue.setdefault(m.queue_id, []).append(m)
    for queue_msgs in by_queue.values():  # a batch lands in one queue, in order
        bodies = [m.body for m in sorted(queue_msgs, key=lambda m: m.queue_offset)]
        assert bodies == sorted(bodies)


async def test_ordered_send_by_key_and_callable(cluster: Cluster) -> None:
    await cluster.create_topic("OrderTopic", queues=8)
    async with Producer("pg_order", cluster.namesrv_addr) as producer:
        by_key = {
            key: {
                (await producer.send_orderly(Message("OrderTopic", f"{key}-{i}"), key)).message_queue for i in range(5)
            }
            for key in ("a", "b", 42)
        }
        assert all(len(used) == 1 for used in by_key.values())
        queues = await producer.fetch_publish_queues("OrderTopic")
        last = queues[-1]
        result = await producer.send(
            Message("OrderTopic", b"x"), selector=lambda mqs, msg, arg: mqs[arg], arg=len(queues) - 1
        )
        assert result.message_queue == last
        result = await producer.send(Message("OrderTopic", b"y"), queue=queues[2])
        assert result.message_queue == queues[2]


async def test_auto_create_through_tbw102(cluster: Cluster) -> None:
    async with Producer("pg_auto", cluster.namesrv_addr) as producer:
        results = [await producer.send(Message("AutoCreated", f"{i}")) for i in range(8)]
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert {r.message_queue.queue_id for r in results} <= {0, 1, 2, 3}  # min(4, TBW102's 8)
    assert len(await read_all(cluster, "AutoCreated", 8)) == 8


async def test_no_route_names_topic_and_name_servers(cluster: Cluster) -> None:
    async with Producer("pg_none", cluster.namesrv_addr, create_topic_key="NoSuchDefault") as producer:
        with pytest.raises(MQNoRouteError) as info:
            await producer.send(Message("NoSuchTopic", b"x"))
    assert info.value.topic == "NoSuchTopic"
    assert info.value.namesrv_addrs == (cluster.namesrv_addr,)
    assert "NoSuchTopic" in str(info.value) and cluster.namesrv_addr in str(info.value)


async def test_dead_name_server_is_skipped(cluster: Cluster) -> None:
    await cluster.create_topic("RotateTopic")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens there now: connections are refused
    namesrv = [f"127.0.0.1:{port}", cluster.namesrv_addr]
    for _ in range(3):  # whichever one the producer starts with
        async with Producer("pg_rotate", namesrv) as producer:
            assert (await producer.send(Message("RotateTopic", b"x"))).status is SendStatus.SEND_OK


async def test_broker_error_has_code_and_remark(cluster: Cluster) -> None:
    await cluster.create_topic("TooBig")
    body = os.urandom(5 * 1024 * 1024)  # incompressible, above the broker's 4 MiB
    async with Producer("pg_big", cluster.namesrv_addr, max_message_size=8 * 1024 * 1024, send_timeout=10) as producer:
        with pytest.raises(MQBrokerError) as info:
            await producer.send(Message("TooBig", body))
    assert info.value.response_code == 13 and not info.value.retriable
    assert info.value.remark and info.value.address == cluster.broker_addr


async def test_invalid_message_is_refused_locally(cluster: Cluster) -> None:
    async with Producer("pg_bad", cluster.namesrv_addr) as producer:
        with pytest.raises(MQClientError, match="body length is zero"):
            await producer.send(Message("T", b""))
        with pytest.raises(MQClientError, match="illegal"):
            await producer.send(Message("bad topic", b"x"))


async def test_timeout_names_broker_and_elapsed() -> None:
    """A broker that never answers: the send fails after send_timeout, naming the broker."""

    async def silent(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await trio.sleep_forever()

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE_V2, silent)
    async with serve_on_loopback(dispatcher) as broker:
        route = TopicRoute.from_json(
            {
                "brokerDatas": [{"brokerAddrs": {"0": broker.address}, "brokerName": "mute", "cluster": "C"}],
                "queueDatas": [{"brokerName": "mute", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2}],
            }
        )
        async with Producer("pg_mute", "127.0.0.1:1", send_timeout=0.5) as producer:
            producer.instance.store_route("Mute", route)
            producer._publish["Mute"] = PublishInfo("Mute", route)
            start = trio.current_time()
            with pytest.raises(MQTimeoutError) as info:
                await producer.send(Message("Mute", b"x"))
            assert trio.current_time() - start < 2.0
    assert info.value.address == broker.address
    assert 0.4 < info.value.elapsed < 2.0
    assert broker.address in str(info.value) and "ms" in str(info.value)


async def test_not_running() -> None:
    producer = Producer("pg_idle", "127.0.0.1:1")
    with pytest.raises(MQClientError, match="not running"):
        await producer.send(Message("T", b"x"))
    assert MessageQueue("T", "b", 0) < MessageQueue("T", "b", 1)


async def test_unreachable_broker_is_a_connect_error_after_retries() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    addr = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    await listeners[0].aclose()
    route = TopicRoute.from_json(
        {
            "brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName": "gone", "cluster": "C"}],
            "queueDatas": [{"brokerName": "gone", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1}],
        }
    )
    async with Producer("pg_gone", "127.0.0.1:1") as producer:
        producer.instance.store_route("Gone", route)
        producer._publish["Gone"] = PublishInfo("Gone", route)
        with pytest.raises(MQConnectError) as info:
            await producer.send(Message("Gone", b"x"))
    assert info.value.address == addr and addr in str(info.value)
    assert not isinstance(info.value, OSError)
