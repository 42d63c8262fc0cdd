"""Pure parts of the client: ids, messages, selectors, routes, fault avoidance, process queues."""

from __future__ import annotations

import datetime
import zlib

import pytest

from rmq.client.config import ConsumerConfig, ProducerConfig, parse_namesrv
from rmq.client.errors import MQBrokerError, MQClientError, is_retriable
from rmq.client.ids import UniqueIdGenerator, client_id
from rmq.client.latency import LatencyFaultTolerance, not_available_duration
from rmq.client.message import (
    LONGEST_UNIQ_KEY,
    Message,
    MessageQueue,
    MQMessageError,
    SendResult,
    SendStatus,
    batch_item_size,
    check_batch,
    check_message,
    compress_body,
    split_batch,
)
from rmq.client.process_queue import ProcessQueue
from rmq.client.producer import Producer
from rmq.client.route import BrokerData, PublishInfo, TopicRoute
from rmq.client.selector import java_hash, select_by_hash
from rmq.client.subscription import Subscription
from rmq.protocol import body as B
from rmq.protocol import properties as P
from rmq.protocol.message import MessageExt, encode_batch_body
from rmq.protocol.properties import encode_properties, java_string_hash

# --- ids -------------------------------------------------------------------------------


def test_uniq_id_layout() -> None:
    now = int(datetime.datetime(2024, 3, 5, 12, 0, 0).timestamp() * 1000)
    month_start = int(datetime.datetime(2024, 3, 1).timestamp() * 1000)
    gen = UniqueIdGenerator("10.1.2.3", pid=70000, loader_hash=-2, clock=lambda: now)
    first, second = gen.next_id(), gen.next_id()
    assert len(first) == 32 and first == first.upper()
    assert first[:8] == "0A010203"  # ip
    assert first[8:12] == f"{(70000 + 2**15) % 2**16 - 2**15 & 0xFFFF:04X}"  # pid as int16
    assert first[12:20] == "FFFFFFFE"  # class-loader hash
    assert int(first[20:28], 16) == now - month_start
    assert first[28:] == "0000" and second[28:] == "0001"


def test_uniq_id_rolls_over_month_and_counter() -> None:
    t = [int(datetime.datetime(2024, 1, 31, 23, 59, 59).timestamp() * 1000)]
    gen = UniqueIdGenerator("127.0.0.1", pid=1, loader_hash=1, clock=lambda: t[0])
    gen._counter = iter(range(65535, 65540))  # type: ignore[assignment]
    a = gen.next_id()
    t[0] = int(datetime.datetime(2024, 2, 1, 0, 0, 1).timestamp() * 1000)
    b = gen.next_id()
    assert a[28:] == "FFFF" and b[28:] == "0000"
    assert int(b[20:28], 16) == 1000


def test_client_id() -> None:
    assert client_id("10.0.0.1", "123#456") == "10.0.0.1@123#456"
    assert client_id("10.0.0.1", "x", "unit") == "10.0.0.1@x@unit"


# --- messages ---------------------------------------------------------------------------


def test_message_properties() -> None:
    m = Message("T", "héllo", tags="TagA", keys=["k1", "k2"], delay_level=3, properties={"u": "v"})
    assert m.body == "héllo".encode()
    assert m.properties == {"u": "v", "TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3"}
    assert m.tags == "TagA" and m.keys == "k1 k2" and m.delay_level == 3 and m.wait_store_msg_ok
    m.delay_level = 0
    assert "DELAY" not in m.properties
    with pytest.raises(MQMessageError):
        m.put_user_property("UNIQ_KEY", "x")
    assert not Message("T", b"x", wait_store_msg_ok=False).wait_store_msg_ok


@pytest.mark.parametrize("topic", ["", "  ", "a" * 128, "bad topic", "SCHEDULE_TOPIC_XXXX", "tópico"])
def test_bad_topics(topic: str) -> None:
    with pytest.raises(MQMessageError):
        check_message(Message(topic, b"x"))


def test_body_checks() -> None:
    with pytest.raises(MQMessageError, match="zero"):
        check_message(Message("T", b""))
    with pytest.raises(MQMessageError, match="over max"):
        check_message(Message("T", b"x" * 11), max_size=10)
    check_message(Message("%RETRY%g", b"x"))


def test_compression_threshold() -> None:
    assert compress_body(b"a" * 4095) == (b"a" * 4095, 0)
    data, flag = compress_body(b"a" * 4096)
    assert flag == 1 and zlib.decompress(data) == b"a" * 4096 and data[:2] == b"\x78\x5e"


def test_split_batch_fits_with_the_ids_a_send_adds() -> None:
    # A batch cut to the limit must stay under it once the producer has given each message
    # its UNIQ_KEY (IPv4 or IPv6 client), or the broker refuses it as too large.
    for ip in ("10.0.0.1", "fd00::1"):
        ids = UniqueIdGenerator(ip)
        for length in (ids.length, LONGEST_UNIQ_KEY):
            msgs = [Message("T", b"x" * 1000) for _ in range(200)]
            parts = split_batch(msgs, 16 * 1024, length)
            for part in parts:
                for m in part:
                    m.properties[P.UNIQ_KEY] = ids.next_id()
                assert len(encode_batch_body(part)) <= 16 * 1024
            if length == ids.length:  # exact: as many as fit
                assert len(parts[0]) == 16 * 1024 // len(encode_batch_body(parts[0][:1]))


def test_batch_rules_and_split() -> None:
    msgs = [Message("T", b"x" * 100, tags="A") for _ in range(10)]
    assert check_batch(msgs) == "T"
    item = batch_item_size(msgs[0])
    assert item == 20 + 100 + 2 + len("TAGS\x01A") + len("\x02UNIQ_KEY\x01") + 56  # the id a send adds
    ids = UniqueIdGenerator("10.0.0.1")
    for m in msgs:
        m.properties[P.UNIQ_KEY] = ids.next_id()
    assert batch_item_size(msgs[0]) == 20 + 100 + 2 + len(encode_properties(msgs[0].properties))
    parts = split_batch(msgs, max_size=item * 3)
    assert [len(p) for p in parts] == [3, 3, 3, 1]
    with pytest.raises(MQMessageError):
        split_batch([Message("T", b"x" * 100)], max_size=50)
    with pytest.raises(MQMessageError):
        check_batch([Message("T", b"x"), Message("U", b"x")])
    with pytest.raises(MQMessageError):
        check_batch([Message("T", b"x", delay_level=2)])
    with pytest.raises(MQMessageError):
        check_batch([Message("%RETRY%g", b"x")])
    with pytest.raises(MQMessageError):
        check_batch([Message("T", b"x"), Message("T", b"x", wait_store_msg_ok=False)])


def test_send_result_str_is_javas() -> None:
    r = SendResult(SendStatus.SEND_OK, "AB", "CD", MessageQueue("TopicTest", "broker-a", 3), 42)
    assert str(r) == (
        "SendResult [sendStatus=SEND_OK, msgId=AB, offsetMsgId=CD, messageQueue=MessageQueue "
        "[topic=TopicTest, brokerName=broker-a, queueId=3], queueOffset=42]"
    )


# --- selectors ---------------------------------------------------------------------------


def test_java_hash() -> None:
    assert java_hash("hello") == java_string_hash("hello") == 99162322
    assert java_hash(7) == 7 and java_hash(-7) == -7
    assert java_hash(2**32 + 5) == 4  # Long.hashCode: (int)(v ^ v >>> 32)
    assert java_hash(True) == 1231


def test_select_by_hash_uses_java_remainder() -> None:
    queues = [MessageQueue("T", "b", i) for i in range(4)]
    assert select_by_hash(queues, Message("T", b"x"), 7).queue_id == 3
    assert select_by_hash(queues, Message("T", b"x"), -7).queue_id == 3  # |-7 rem 4| = 3
    key = "order-42"
    assert select_by_hash(queues, Message("T", b"x"), key).queue_id == abs(java_string_hash(key)) % 4


# --- routes ------------------------------------------------------------------------------

ROUTE_TEXT = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-b",'
    b'"cluster":"C"},{"brokerAddrs":{"1":"127.0.0.1:10931"},"brokerName":"broker-c","cluster":"C"},'
    b'{"brokerAddrs":{"0":"127.0.0.1:10941"},"brokerName":"broker-a","cluster":"C"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":4,'
    b'"topicSysFlag":0,"writeQueueNums":2},{"brokerName":"broker-c","perm":6,"readQueueNums":2,'
    b'"topicSynFlag":0,"writeQueueNums":2},{"brokerName":"broker-a","perm":4,"readQueueNums":1,'
    b'"topicSysFlag":0,"writeQueueNums":1}]}'
)


def test_route_queues() -> None:
    route = TopicRoute.from_json(B.loads(ROUTE_TEXT))
    assert route.broker("broker-b").master_addr == "127.0.0.1:10911"  # type: ignore[union-attr]
    assert route.broker("broker-c").any_addr() == "127.0.0.1:10931"  # type: ignore[union-attr]
    # broker-a is read-only, broker-c has no master: only broker-b's two write queues
    assert route.publish_queues("T") == [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1)]
    assert len(route.subscribe_queues("T")) == 4 + 2 + 1
    capped = route.with_queue_limit(1)
    assert capped.publish_queues("T") == [MessageQueue("T", "broker-b", 0)]


def test_order_topic_conf() -> None:
    route = TopicRoute.from_json({"queueDatas": [], "brokerDatas": [], "orderTopicConf": "b1:2;b2:1"})
    assert route.publish_queues("T") == [
        MessageQueue("T", "b1", 0),
        MessageQueue("T", "b1", 1),
        MessageQueue("T", "b2", 0),
    ]


def _two_broker_info() -> PublishInfo:
    route = TopicRoute.from_json(
        {
            "brokerDatas": [
                {"brokerAddrs": {"0": "h:1"}, "brokerName": "a", "cluster": "C"},
                {"brokerAddrs": {"0": "h:2"}, "brokerName": "b", "cluster": "C"},
            ],
            "queueDatas": [
                {"brokerName": "a", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
                {"brokerName": "b", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
            ],
        }
    )
    return PublishInfo("T", route)


def test_round_robin_and_skip_last_broker() -> None:
    info = _two_broker_info()
    picks = [info.select() for _ in range(8)]
    assert {q for q in picks} == set(info.queues)
    for _ in range(8):
        assert info.select(last_broker="a").broker_name == "b"


def test_fault_avoidance() -> None:
    now = [100.0]
    faults = LatencyFaultTolerance(lambda: now[0])
    info = _two_broker_info()
    faults.update("a", 0.02)
    assert faults.is_available("a")
    faults.update("a", 0.6)  # slow: avoided 30 s
    assert not faults.is_available("a")
    assert all(info.select(faults=faults).broker_name == "b" for _ in range(10))
    faults.update("b", 1.0, isolation=True)  # failed: avoided 600 s
    assert info.select(faults=faults).broker_name in {"a", "b"}  # still picks one
    now[0] += 31
    assert faults.is_available("a") and not faults.is_available("b")
    assert not_available_duration(0.049) == 0 and not_available_duration(15) == 600


def test_fault_avoidance_with_the_callers_clock_reading() -> None:
    """A send reads the clock once and hands the reading on: it must mean what the clock says."""
    faults = LatencyFaultTolerance(lambda: pytest.fail("the caller gave the time"))
    info = _two_broker_info()
    faults.update("a", 0.6, now=100.0)  # slow: avoided 30 s from its end
    assert not faults.is_available("a", 129.0) and faults.is_available("a", 130.0)
    assert all(info.select(faults=faults, now=129.0).broker_name == "b" for _ in range(10))
    assert {info.select(faults=faults, now=130.0).broker_name for _ in range(10)} == {"a", "b"}


def test_a_failure_is_visible_to_the_send_paths_cheap_test() -> None:
    """`unavailable_until` lets the send path skip the per-broker lookup while every broker is
    fine; it never says "all fine" while one is avoided."""
    faults = LatencyFaultTolerance(lambda: pytest.fail("the caller gave the time"))
    faults.update("a", 0.02, now=100.0)  # fast: avoided for no time
    assert faults.unavailable_until < 100.0
    faults.update("a", 0.6, now=100.0)  # slow: avoided 30 s
    faults.update("b", 0.02, now=110.0)
    assert faults.unavailable_until == 130.0 and not faults.is_available("a", 129.0)


def test_a_group_whose_master_moved_is_judged_afresh() -> None:
    """A route naming a new master for a group (a DLedger election) clears the group's
    failures, which were its old master's; other groups keep theirs."""
    producer = Producer("pg_moved", "127.0.0.1:1")
    assert producer._faults is not None
    info = _two_broker_info()
    producer._publish["T"] = info
    producer._faults.update("a", 3.0, isolation=True, now=100.0)
    producer._faults.update("b", 3.0, isolation=True, now=100.0)
    moved = TopicRoute(
        info.route.queue_datas,
        (BrokerData("a", "C", {0: "h:9"}), *[bd for bd in info.route.broker_datas if bd.broker_name == "b"]),
    )
    producer.on_route("T", moved)
    assert producer._faults.is_available("a", 101.0) and not producer._faults.is_available("b", 101.0)
    assert producer._publish["T"].route == moved


# --- subscriptions, process queue, errors, config -----------------------------------------


def test_subscription() -> None:
    sub = Subscription.parse("T", " TagA || TagB ||", 5)
    assert sub.tags == {"TagA", "TagB"} and sub.codes == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert sub.matches("TagA") and not sub.matches("TagC") and not sub.matches(None)
    assert sub.to_json()["subString"] == "TagA || TagB ||" and sub.to_json()["subVersion"] == 5
    everything = Subscription.parse("T", "*")
    assert everything.is_all and everything.matches(None) and everything.to_json()["tagsSet"] == []


def _ext(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"x" * size, queue_offset=offset)


def test_process_queue_concurrent() -> None:
    pq = ProcessQueue()
    assert pq.commit_offset() == -1
    assert pq.put([_ext(5), _ext(6), _ext(7)]) == 3
    assert pq.put([_ext(7)]) == 0
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (3, 30, 2)
    assert pq.remove([_ext(6)]) == 5
    assert pq.remove([_ext(5)]) == 7
    assert pq.remove([_ext(7), _ext(7)]) == 8
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_process_queue_orderly() -> None:
    pq = ProcessQueue()
    pq.put([_ext(i) for i in range(5)])
    first = pq.take(2)
    assert [m.queue_offset for m in first] == [0, 1]
    pq.give_back(first)
    again = pq.take(3)
    assert [m.queue_offset for m in again] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 2
    pq.take(5)
    assert pq.commit() == 5 and pq.msg_count == 0


def test_errors() -> None:
    err = MQBrokerError(17, "no topic", address="h:1")
    assert err.retriable and is_retriable(err) and "TOPIC_NOT_EXIST(17)" in str(err)
    assert not MQBrokerError(2, "busy").retriable
    assert not is_retriable(MQClientError("x"))


def test_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_namesrv("a:1; b:2") == ("a:1", "b:2")
    monkeypatch.setenv("NAMESRV_ADDR", "c:3")
    assert parse_namesrv(None) == ("c:3",)
    with pytest.raises(MQClientError):
        parse_namesrv("nohost")
    assert ProducerConfig.build("a:1", {"retry_times": 5}).retry_times == 5
    with pytest.raises(TypeError, match="unexpected keyword argument 'retries'"):
        ProducerConfig.build("a:1", {"retries": 5})
    with pytest.raises(MQClientError):
        ConsumerConfig.build("a:1", {"pull_batch_size": 0})
    assert ConsumerConfig.build("a:1", {}).max_reconsume_times == -1


# --- exceptions through `async with` --------------------------------------------------------


async def test_body_exception_is_not_wrapped_in_a_group() -> None:
    from rmq.client import PushConsumer

    with pytest.raises(KeyError):
        async with Producer("pg_wrap", "127.0.0.1:1"):
            raise KeyError("mine")
    consumer = PushConsumer("cg_wrap", "127.0.0.1:1")
    with pytest.raises(ZeroDivisionError):
        async with consumer:
            1 / 0  # noqa: B018
    assert not consumer.running


def test_public_api_names() -> None:
    import rmq.client

    public = {n for n in dir(rmq.client) if not n.startswith("_")}
    assert {
        "Producer", "open_producer", "PushConsumer", "open_push_consumer", "PullConsumer", "open_pull_consumer",
        "Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus", "ConsumeStatus",
        "MessageModel", "ConsumeFromWhere", "ProducerConfig", "ConsumerConfig", "ClientInstance",
        "MQClientError", "MQBrokerError", "MQTimeoutError", "MQConnectError", "MQNoRouteError",
        "MQClientStateError", "MQMessageError",
        "allocate_averagely", "allocate_averagely_by_circle", "AllocateByConfig", "select_by_hash", "select_by_random",
    } <= public  # fmt: skip
