"""The bodies of client and admin requests against captured and Java-written bytes.

Captured (tests/vectors/cpp-client): the C++ client's LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
bodies (jsoncpp, keys sorted, ending in a newline) and the answers it accepted to them and to
GET_CONSUMER_LIST_BY_GROUP. Java-written: what a 4.9.8 broker or name server's fastjson
writes for TopicStatsTable, TopicOffset, ConsumeStats, OffsetWrapper, ConsumeStatsList,
ConsumerConnection, ProducerConnection, Connection, ProducerTableInfo, ProducerInfo, GroupList, TopicList, KVTable,
ConsumerOffsetSerializeWrapper, ResetOffsetBody and CheckClientRequestBody (rocketmq-common): getters in
alphabetical order, enums by name, MessageQueue map keys as objects, Integer keys unquoted.
"""

from __future__ import annotations

import pytest

from rmq.protocol import body
from rmq.protocol.bodies import (
    CheckClientRequestBody,
    Connection,
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeStatsList,
    GetConsumerListByGroupResponseBody,
    GroupList,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    OffsetSerializeWrapper,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    ResetOffsetBody,
    SubscriptionData,
    TopicList,
    TopicOffset,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from rmq.protocol.body import MessageQueue
from rmq.protocol.errors import BodyError
from tests.protocol.captured import bodies

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
Q0_KEY = b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
Q1_KEY = b'{"brokerName":"broker-a","queueId":1,"topic":"T"}'

CAPTURED = [
    *[(name, data, LockBatchRequestBody) for name, data in bodies("LOCK_BATCH_MQ")],
    *[(name, data, UnlockBatchRequestBody) for name, data in bodies("UNLOCK_BATCH_MQ")],
    *[(name, data, LockBatchResponseBody) for name, data in bodies("resp-LOCK_BATCH_MQ")],
    *[(name, data, GetConsumerListByGroupResponseBody) for name, data in bodies("resp-GET_CONSUMER_LIST_BY_GROUP")],
]


def test_the_bodies_are_captured() -> None:
    kinds = {kind for _, _, kind in CAPTURED}
    assert len(kinds) == 4 and len(CAPTURED) > 20


@pytest.mark.parametrize(("name", "data", "kind"), CAPTURED, ids=[name for name, _, _ in CAPTURED])
def test_captured_round_trip(name: str, data: bytes, kind: type[LockBatchRequestBody]) -> None:
    value = kind.from_json(body.loads(data))
    assert body.dumps(value.to_json()) == data.rstrip(b"\n")


def test_captured_lock_request() -> None:
    data = next(data for name, data in bodies("UNLOCK_BATCH_MQ"))
    unlock = UnlockBatchRequestBody.from_json(body.loads(data))
    queues = (MessageQueue("TopicTest", "broker-a", 0), MessageQueue("TopicTest", "broker-a", 1))
    assert unlock == UnlockBatchRequestBody("CG_capture", "20604-127.0.0.1@DEFAULT", queues)


JAVA = {
    "topic stats": b'{"offsetTable":{'
    + Q0_KEY
    + b':{"lastUpdateTimestamp":1700000000000,"maxOffset":10,"minOffset":0},'
    + Q1_KEY
    + b':{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}',
    "consume stats": b'{"consumeTps":1.5,"offsetTable":{'
    + Q0_KEY
    + b':{"brokerOffset":10,"consumerOffset":8,"lastTimestamp":1700000000000}}}',
    "consume stats list": b'{"brokerAddr":"10.0.0.1:10911","consumeStatsList":[{"CG":[{"consumeTps":0.0,'
    b'"offsetTable":{' + Q0_KEY + b':{"brokerOffset":10,"consumerOffset":8,"lastTimestamp":5}}}]}],"totalDiff":2}',
    "consumer connection": b'{"connectionSet":[{"clientAddr":"10.0.0.2:50000","clientId":"10.0.0.2@1#2",'
    b'"language":"JAVA","version":409}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":{'
    b'"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":7,"tagsSet":[],'
    b'"topic":"T"}}}',
    "producer connection": b'{"connectionSet":[{"clientAddr":"10.0.0.3:50001","clientId":"10.0.0.3@9",'
    b'"language":"CPP","version":63}]}',
    "producer table": b'{"data":{"PG":[{"clientId":"10.0.0.3@9","language":"JAVA","lastUpdateTimestamp":1700000000000,'
    b'"remoteIP":"/10.0.0.3:50001","version":409}],"PG2":[]}}',
    "group list": b'{"groupList":["CG","CG2"]}',
    "topic list": b'{"brokerAddr":"10.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}',
    "kv table": b'{"table":{"brokerVersion":"409","commitLogMaxOffset":"1024"}}',
    "consumer offsets": b'{"offsetTable":{"T@CG":{0:5,1:7},"%RETRY%CG@CG":{0:0}}}',
    "reset offsets": b'{"offsetTable":{' + Q0_KEY + b":5," + Q1_KEY + b":-1}}",
    "check client": b'{"clientId":"10.0.0.2@1","group":"CG","subscriptionData":{"classFilterMode":false,'
    b'"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":3,"tagsSet":[],"topic":"T"}}',
}

VALUES = {
    "topic stats": TopicStatsTable({Q0: TopicOffset(0, 10, 1700000000000), Q1: TopicOffset(0, 0, 0)}),
    "consume stats": ConsumeStats({Q0: OffsetWrapper(10, 8, 1700000000000)}, 1.5),
    "consume stats list": ConsumeStatsList(
        "10.0.0.1:10911", [{"CG": [ConsumeStats({Q0: OffsetWrapper(10, 8, 5)})]}], 2
    ),
    "consumer connection": ConsumerConnection(
        (Connection("10.0.0.2@1#2", "10.0.0.2:50000", "JAVA", 409),),
        {"T": SubscriptionData.build("T", "*", 7)},
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    ),
    "producer connection": ProducerConnection((Connection("10.0.0.3@9", "10.0.0.3:50001", "CPP", 63),)),
    "producer table": ProducerTableInfo(
        {"PG": (ProducerInfo("10.0.0.3@9", "/10.0.0.3:50001", "JAVA", 409, 1700000000000),), "PG2": ()}
    ),
    "group list": GroupList(("CG", "CG2")),
    "topic list": TopicList(("DefaultCluster", "broker-a"), "10.0.0.1:10911"),
    "kv table": KVTable({"brokerVersion": "409", "commitLogMaxOffset": "1024"}),
    "consumer offsets": ConsumerOffsetSerializeWrapper({"T@CG": {0: 5, 1: 7}, "%RETRY%CG@CG": {0: 0}}),
    "reset offsets": ResetOffsetBody({Q0: 5, Q1: -1}),
    "check client": CheckClientRequestBody("10.0.0.2@1", "CG", SubscriptionData.build("T", "a > 1", 3, "SQL92")),
}
LEGACY = {"consumer offsets"}  # Integer keys, as the broker's file and answer have them


@pytest.mark.parametrize("case", sorted(JAVA))
def test_java_round_trip(case: str) -> None:
    data, value = JAVA[case], VALUES[case]
    assert type(value).from_json(body.loads(data)) == value  # type: ignore[attr-defined]
    assert body.dumps(value.to_json(), legacy=case in LEGACY) == data


def test_consumer_offsets_in_pieces() -> None:
    value = VALUES["consumer offsets"]
    assert isinstance(value, ConsumerOffsetSerializeWrapper)
    assert b"".join(value.pieces()) == JAVA["consumer offsets"]


def test_reset_offsets_for_cpp_clients() -> None:
    """The C++ client (1.2.3, ResetOffsetBody::Decode) reads offsetTable as an array of queues
    with an offset each; it is read back the same."""
    value = ResetOffsetBody({Q0: 5})
    cpp = body.dumps(value.to_cpp_json())
    assert cpp == b'{"offsetTable":[{"brokerName":"broker-a","queueId":0,"topic":"T","offset":5}]}'
    assert ResetOffsetBody.from_json(body.loads(cpp)) == value


def test_a_broadcasting_consumers_offsets_file() -> None:
    value = OffsetSerializeWrapper({Q0: 5, Q1: 9})
    data = body.dumps(value.to_json())
    assert data == b'{"offsetTable":{' + Q0_KEY + b":5," + Q1_KEY + b":9}}"
    assert OffsetSerializeWrapper.from_json(body.loads(data)) == value


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        (LockBatchRequestBody, {"clientId": "c", "mqSet": []}),
        (LockBatchRequestBody, {"clientId": "c", "consumerGroup": "g", "mqSet": [1]}),
        (ConsumeStats, {"offsetTable": {"x": {}}}),
        (ConsumerOffsetSerializeWrapper, {"offsetTable": {"T@G": {"a": 1}}}),
        (ResetOffsetBody, {"offsetTable": [{"topic": "T", "brokerName": "b", "queueId": 0}]}),
        (TopicList, {"topicList": [1]}),
    ],
)
def test_bad_bodies(kind: type[LockBatchRequestBody], obj: object) -> None:
    with pytest.raises(BodyError):
        kind.from_json(obj)
