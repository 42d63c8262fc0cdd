"""Heartbeat parsing (all client dialects), the client table and orderly-consumer locks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmq.broker.client_manager import ClientManager
from rmq.broker.rebalance_lock import RebalanceLockManager
from rmq.protocol import RemoteProtocolError
from rmq.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData, read_heartbeat
from rmq.protocol.body import MQKey
from rmq.protocol.properties import java_string_hash

CPP_TAG_HEARTBEAT = (
    '{"clientID":"18253-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
    '"groupName":"CG_capture","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":'
    '"1795315699736","topic":"%RETRY%CG_capture"},{"codeSet":[0,0],"subString":"TagA || TagB","subVersion":'
    '"1795315699736","tagsSet":["TagA","TagB"],"topic":"TopicTest"}]}]}\n'
)

JAVA_HEARTBEAT = {
    "clientID": "10.0.0.1@123#456",
    "consumerDataSet": [
        {
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "consumeType": "CONSUME_ACTIVELY",
            "groupName": "G",
            "messageModel": "BROADCASTING",
            "unitMode": False,
            "subscriptionDataSet": [
                {
                    "classFilterMode": False,
                    "codeSet": [2598919],
                    "expressionType": "TAG",
                    "subString": "TagA",
                    "subVersion": 7,
                    "tagsSet": ["TagA"],
                    "topic": "T",
                }
            ],
        }
    ],
    "producerDataSet": [{"groupName": "P"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
}


def test_cpp_heartbeat_codes_are_recomputed() -> None:
    hb = HeartbeatData.from_json(json.loads(CPP_TAG_HEARTBEAT))
    assert hb.client_id == "18253-127.0.0.1@DEFAULT"
    (consumer,) = hb.consumers
    assert (consumer.consume_type, consumer.message_model, consumer.consume_from_where) == (
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    )
    retry, topic = consumer.subscriptions
    assert retry.matches_all and retry.sub_version == 1795315699736
    assert topic.tags_set == ("TagA", "TagB")
    assert topic.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert topic.matches_tags_code(java_string_hash("TagB"))
    assert not topic.matches_tags_code(java_string_hash("TagC"))
    assert not topic.matches_tags_code(0)


def test_java_heartbeat() -> None:
    hb = HeartbeatData.from_json(JAVA_HEARTBEAT)
    (consumer,) = hb.consumers
    assert consumer.message_model == "BROADCASTING" and consumer.consume_type == "CONSUME_ACTIVELY"
    assert consumer.subscriptions[0].code_set == {2598919}
    assert hb.producer_groups == ("P", "CLIENT_INNER_PRODUCER")


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"consumerDataSet": []},
        {"clientID": "c", "consumerDataSet": [{"groupName": "g", "consumeType": 9}]},
        {"clientID": "c", "consumerDataSet": [{"groupName": "g", "subscriptionDataSet": [{"subString": "*"}]}]},
        {"clientID": "c", "producerDataSet": [{}]},
    ],
)
def test_bad_heartbeats(body: object) -> None:
    with pytest.raises(RemoteProtocolError):
        HeartbeatData.from_json(body)


def read_in_steps(data: bytes) -> tuple[HeartbeatData, int]:
    steps = read_heartbeat(data)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, pauses
        pauses += 1


def test_a_heartbeat_is_read_in_steps() -> None:
    java = json.dumps(JAVA_HEARTBEAT).encode()
    assert read_in_steps(java) == (HeartbeatData.from_json(JAVA_HEARTBEAT), 3)  # one consumer, two producers
    assert read_in_steps(CPP_TAG_HEARTBEAT.encode()) == (HeartbeatData.from_json(json.loads(CPP_TAG_HEARTBEAT)), 1)
    # fastjson's dialect (an unquoted integer key) is read whole, then in the same steps
    legacy = b'{"clientID":"c","x":{1:2},"consumerDataSet":[{"groupName":"a"},{"groupName":"b"}]}'
    hb, pauses = read_in_steps(legacy)
    assert [c.group_name for c in hb.consumers] == ["a", "b"] and pauses == 2
    # a lone surrogate reads as "?", as body.loads reads it
    hb, _ = read_in_steps(b'{"clientID":"c\\ud800","consumerDataSet":[{"groupName":"g\\udc00"}]}')
    assert (hb.client_id, hb.consumers[0].group_name) == ("c?", "g?")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"{not json",
        b'{"clientID":"c"} trailing',
        b'{"consumerDataSet":[]}',
        b'{"clientID":"c","consumerDataSet":5}',
        b'{"clientID":"c","consumerDataSet":[{"groupName":1}]}',
        b'{"clientID":"c","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_bad_heartbeat_bodies(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        read_in_steps(data)


def test_tags_code_compares_the_low_32_bits() -> None:
    sub = SubscriptionData.build("T", "Tag")
    code = java_string_hash("Tag")
    assert sub.matches_tags_code(code & 0xFFFFFFFF)  # however the int64 got sign-extended
    assert SubscriptionData.build("T", "").matches_all
    assert SubscriptionData.build("T", "a > 1", expression_type="sql92").expression_type == "SQL92"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def consumer(group: str = "G", *topics: str) -> ConsumerData:
    return ConsumerData(group, subscriptions=tuple(SubscriptionData.build(t, "*") for t in topics or ("T",)))


def test_consumer_membership() -> None:
    clock = Clock()
    clients = ClientManager(clock)
    assert clients.register_consumer(consumer(), "conn1", "c1", "JAVA", 409, "1.1.1.1:1")
    assert not clients.register_consumer(consumer(), "conn1", "c1", "JAVA", 409, "1.1.1.1:1")  # refresh only
    assert clients.register_consumer(consumer(), "conn2", "c2", "CPP", 63, "1.1.1.2:1")
    assert clients.consumer_group("G").client_ids() == ["c1", "c2"]  # type: ignore[union-attr]
    assert clients.register_consumer(consumer("G", "T", "U"), "conn2", "c2", "CPP", 63, "x")  # topic added
    assert clients.find_subscription("G", "U") is not None
    assert clients.groups_subscribing("U") == {"G"}
    assert clients.connection_closed("conn2") == ["G"]
    assert clients.consumer_group("G").client_ids() == ["c1"]  # type: ignore[union-attr]
    assert clients.unregister_consumer("G", "conn1")
    assert clients.consumer_group("G") is None
    assert not clients.unregister_consumer("G", "conn1")


def test_newer_sub_version_wins() -> None:
    clients = ClientManager(Clock())
    new = ConsumerData("G", subscriptions=(SubscriptionData.build("T", "A", 2),))
    old = ConsumerData("G", subscriptions=(SubscriptionData.build("T", "B", 1),))
    clients.register_consumer(new, "c", "id", "JAVA", 1, "a")
    clients.register_consumer(old, "c", "id", "JAVA", 1, "a")
    assert clients.find_subscription("G", "T").sub_string == "A"  # type: ignore[union-attr]


def test_silent_clients_expire_after_120_s() -> None:
    clock = Clock()
    clients = ClientManager(clock)
    clients.register_consumer(consumer(), "c1", "id1", "JAVA", 1, "a")
    clients.register_producer("P", "c1", "id1", "JAVA", 1, "a")
    clock.now += 60
    clients.register_consumer(consumer(), "c2", "id2", "JAVA", 1, "a")
    clock.now += 61
    assert clients.scan_expired() == ["G"]
    assert clients.consumer_group("G").client_ids() == ["id2"]  # type: ignore[union-attr]
    assert clients.producer_channels("P") == []


def test_locks_expire_after_60_s() -> None:
    clock = Clock()
    locks = RebalanceLockManager(clock)
    q0, q1 = MQKey("T", "b", 0), MQKey("T", "b", 1)
    assert locks.try_lock_batch("G", [q0, q1], "c1") == {q0, q1}
    assert locks.try_lock_batch("G", [q0, q1], "c2") == set()
    assert locks.try_lock_batch("OTHER", [q0], "c2") == {q0}  # per group
    clock.now += 30
    assert locks.try_lock_batch("G", [q0], "c1") == {q0}  # renewal
    clock.now += 31
    assert locks.try_lock_batch("G", [q0, q1], "c2") == {q1}  # q1 lapsed, q0 renewed 31 s ago
    locks.unlock_batch("G", [q0], "c2")  # not c2's: no effect
    assert locks.is_locked("G", q0, "c1")
    locks.unlock_batch("G", [q0], "c1")
    assert locks.try_lock_batch("G", [q0], "c2") == {q0}


def test_replays_every_captured_heartbeat(vectors_dir: Path) -> None:
    seen = 0
    for index in vectors_dir.glob("*/index.jsonl"):
        for line in index.read_text().splitlines():
            entry = json.loads(line)
            if entry["dir"] == "c2s" and (entry["header"] or {}).get("code") == 34:
                hb = HeartbeatData.from_json(json.loads(entry["body_decoded"]["text"]))
                assert hb.client_id
                seen += 1
    assert seen > 10
