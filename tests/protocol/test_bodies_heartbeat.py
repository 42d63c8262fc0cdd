"""HeartbeatData against the bytes the C++ client sent and the bytes Java's client writes.

Captured: every HEART_BEAT the C++ client sent (tests/vectors/cpp-client): enums as ordinals,
subVersion as a string, no expressionType or classFilterMode, codeSet as atoi(tag). Read,
they are written back as Java would write the same heartbeat. Java-written: a 4.9.8 push
consumer's heartbeat as fastjson writes HeartbeatData, ConsumerData, ProducerData and
SubscriptionData (rocketmq-common): getters in alphabetical order, enums by name.
"""

from __future__ import annotations

import pytest

from rmq.client.subscription import Subscription
from rmq.protocol import body
from rmq.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmq.protocol.bodies.heartbeat import read_heartbeat
from rmq.protocol.properties import java_string_hash
from tests.protocol.captured import bodies

HEARTBEATS = bodies("HEART_BEAT")


def read_whole(data: bytes) -> HeartbeatData:
    steps = read_heartbeat(data)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


@pytest.mark.parametrize(("name", "data"), HEARTBEATS, ids=[name for name, _ in HEARTBEATS])
def test_captured_heartbeat(name: str, data: bytes) -> None:
    heartbeat = HeartbeatData.from_json(body.loads(data))
    assert heartbeat.client_id.endswith("-127.0.0.1@DEFAULT")
    assert read_whole(data) == heartbeat
    assert HeartbeatData.from_json(heartbeat.to_json()) == heartbeat


def test_the_cpp_tag_heartbeat_in_java_form() -> None:
    data = next(data for name, data in HEARTBEATS if name.startswith("g3_") and b"consumerDataSet" in data)
    heartbeat = HeartbeatData.from_json(body.loads(data))
    codes = b",".join(b"%d" % code for code in sorted(map(java_string_hash, ("TagA", "TagB"))))
    assert body.dumps(heartbeat.to_json()) == (
        b'{"clientID":"18253-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","groupName":"CG_capture","messageModel":"CLUSTERING",'
        b'"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        b'"subVersion":1795315699736,"tagsSet":[],"topic":"%RETRY%CG_capture"},{"classFilterMode":false,'
        b'"codeSet":[' + codes + b'],"expressionType":"TAG","subString":"TagA || TagB","subVersion":1795315699736,'
        b'"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"unitMode":false}],"producerDataSet":[]}'
    )


JAVA_HEARTBEAT = (
    b'{"clientID":"10.0.0.1@123#456","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"BROADCASTING","subscriptionDataSet":['
    b'{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
    b'"subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"},{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%G"}],'
    b'"unitMode":false}],"producerDataSet":[{"groupName":"P"},{"groupName":"CLIENT_INNER_PRODUCER"}]}'
)


def test_java_heartbeat_round_trip() -> None:
    heartbeat = HeartbeatData.from_json(body.loads(JAVA_HEARTBEAT))
    assert heartbeat == HeartbeatData(
        "10.0.0.1@123#456",
        (
            ConsumerData(
                "G",
                "CONSUME_PASSIVELY",
                "BROADCASTING",
                "CONSUME_FROM_FIRST_OFFSET",
                (
                    SubscriptionData.build("T", "TagA", 1700000000000),
                    SubscriptionData.build("%RETRY%G", "*", 1700000000001),
                ),
            ),
        ),
        (ProducerData("P"), ProducerData("CLIENT_INNER_PRODUCER")),
    )
    assert heartbeat.producer_groups == ("P", "CLIENT_INNER_PRODUCER")
    assert body.dumps(heartbeat.to_json()) == JAVA_HEARTBEAT
    assert read_whole(JAVA_HEARTBEAT) == heartbeat


def test_our_client_writes_tags_in_name_order() -> None:
    """The client's own subscriptions: tags sorted, whatever order the expression has."""
    sub = Subscription.parse("T", "TagB || TagA", 3)
    assert body.dumps(sub.to_json()) == (
        b'{"classFilterMode":false,"codeSet":['
        + b",".join(b"%d" % c for c in sorted(map(java_string_hash, ("TagA", "TagB"))))
        + b'],"expressionType":"TAG","subString":"TagB || TagA","subVersion":3,"tagsSet":["TagA","TagB"],"topic":"T"}'
    )
