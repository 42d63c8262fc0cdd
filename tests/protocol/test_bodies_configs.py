"""Topic and subscription-group configs, their tables and DataVersion against the bytes Java
writes.

No captured frame carries these bodies, so the bytes are what a 4.9.8 broker's fastjson
writes for the classes in rocketmq-common (TopicConfig, SubscriptionGroupConfig,
TopicConfigSerializeWrapper, SubscriptionGroupWrapper, DataVersion): getters in
alphabetical order, `isX()` booleans as `x`, enums by name, compact for a request body and
pretty (tabs) in the broker's config files. RocketMQ 5 adds fields we read past.
"""

from __future__ import annotations

from typing import Any

import pytest

from rmq.protocol import body
from rmq.protocol.bodies import (
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rmq.protocol.errors import BodyError

# GET_ALL_TOPIC_CONFIG from a 4.9.8 broker (two of its topics)
JAVA_TOPICS = (
    b'{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{'
    b'"TBW102":{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102",'
    b'"topicSysFlag":0,"writeQueueNums":8},'
    b'"Orders":{"order":true,"perm":6,"readQueueNums":2,"topicFilterType":"MULTI_TAG","topicName":"Orders",'
    b'"topicSysFlag":1,"writeQueueNums":4}}}'
)

# its topics.json: the same object pretty-printed (ConfigManager.persist writes encode(true))
JAVA_TOPICS_FILE = b"""{
\t"dataVersion":{
\t\t"counter":3,
\t\t"timestamp":1700000000000
\t},
\t"topicConfigTable":{
\t\t"TBW102":{
\t\t\t"order":false,
\t\t\t"perm":7,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TBW102",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t},
\t\t"Orders":{
\t\t\t"order":true,
\t\t\t"perm":6,
\t\t\t"readQueueNums":2,
\t\t\t"topicFilterType":"MULTI_TAG",
\t\t\t"topicName":"Orders",
\t\t\t"topicSysFlag":1,
\t\t\t"writeQueueNums":4
\t\t}
\t}
}"""

TOPICS = TopicConfigSerializeWrapper(
    {
        "TBW102": TopicConfig("TBW102", 8, 8, 7),
        "Orders": TopicConfig("Orders", 2, 4, 6, topic_sys_flag=1, topic_filter_type="MULTI_TAG", order=True),
    },
    DataVersion(1700000000000, 3),
)


@pytest.mark.parametrize("data", [JAVA_TOPICS, JAVA_TOPICS_FILE], ids=["body", "file"])
def test_java_topic_table(data: bytes) -> None:
    wrapper = TopicConfigSerializeWrapper.from_json(body.loads(data))
    assert wrapper == TOPICS
    assert body.dumps(wrapper.to_json()) == JAVA_TOPICS
    assert b"".join(wrapper.pieces()) == JAVA_TOPICS


# GET_ALL_SUBSCRIPTIONGROUP_CONFIG from a 4.9.8 broker
JAVA_GROUPS = (
    b'{"dataVersion":{"counter":1,"timestamp":1700000000001},"subscriptionGroupTable":{'
    b'"CG":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
    b'"groupName":"CG","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
    b'"whichBrokerWhenConsumeSlowly":1},'
    b'"TOOLS_CONSUMER":{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,'
    b'"consumeFromMinEnable":true,"groupName":"TOOLS_CONSUMER","notifyConsumerIdsChangedEnable":true,'
    b'"retryMaxTimes":3,"retryQueueNums":2,"whichBrokerWhenConsumeSlowly":1}}}'
)


def test_java_group_table() -> None:
    wrapper = SubscriptionGroupWrapper.from_json(body.loads(JAVA_GROUPS))
    assert wrapper == SubscriptionGroupWrapper(
        {
            "CG": SubscriptionGroupConfig("CG"),
            "TOOLS_CONSUMER": SubscriptionGroupConfig(
                "TOOLS_CONSUMER", consume_broadcast_enable=False, retry_queue_nums=2, retry_max_times=3
            ),
        },
        DataVersion(1700000000001, 1),
    )
    assert body.dumps(wrapper.to_json()) == JAVA_GROUPS
    assert b"".join(wrapper.pieces()) == JAVA_GROUPS


def test_rocketmq5_fields_are_read_past() -> None:
    """A 5.x broker's config objects carry more fields; the ones 4.9.8 has are what we keep."""
    group = {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": "G5",
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "subscriptionDataSet": [],
        "whichBrokerWhenConsumeSlowly": 1,
    }
    assert SubscriptionGroupConfig.from_json(group) == SubscriptionGroupConfig("G5")
    orderly = SubscriptionGroupConfig.from_json({**group, "consumeMessageOrderly": True})
    assert orderly == SubscriptionGroupConfig("G5", consume_message_orderly=True)
    assert body.dumps(orderly.to_json()).count(b'"consumeFromMinEnable":true,"consumeMessageOrderly":true,') == 1
    topic = {"attributes": {}, "order": False, "perm": 6, "readQueueNums": 8, "topicName": "T5", "writeQueueNums": 8}
    assert TopicConfig.from_json(topic) == TopicConfig("T5", 8, 8)
    version = {"counter": 2, "stateVersion": 7, "timestamp": 5}
    assert DataVersion.from_json(version) == DataVersion(5, 2, 7)
    assert body.dumps(DataVersion(5, 2, 7).to_json()) == b'{"counter":2,"stateVersion":7,"timestamp":5}'


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"topicName": "T", "topicSynFlag": 2}, TopicConfig("T", topic_sys_flag=2)),  # before 4.9.0
        ({"readQueueNums": "2", "perm": "6", "order": "true"}, TopicConfig("K", 2, 16, 6, order=True)),
        ({"topicName": "T", "topicFilterType": None}, TopicConfig("T")),
    ],
)
def test_topic_config_dialects(obj: dict[str, Any], expected: TopicConfig) -> None:
    assert TopicConfig.from_json(obj, "K") == expected


@pytest.mark.parametrize(
    "obj",
    [{}, {"topicName": "T", "perm": True}, {"topicName": "T", "readQueueNums": 1.5}, {"topicName": "T", "order": 1}],
)
def test_bad_topic_configs(obj: dict[str, Any]) -> None:
    with pytest.raises(BodyError):
        TopicConfig.from_json(obj)


def test_group_config_dialects() -> None:
    obj = {"groupName": "g", "consumeEnable": "false", "retryMaxTimes": "3", "brokerId": 1}
    assert SubscriptionGroupConfig.from_json(obj) == SubscriptionGroupConfig(
        "g", consume_enable=False, retry_max_times=3, broker_id=1
    )
    with pytest.raises(BodyError, match="groupName"):
        SubscriptionGroupConfig.from_json({"retryMaxTimes": 3})
    with pytest.raises(BodyError, match="consumeEnable"):
        SubscriptionGroupConfig.from_json({"groupName": "g", "consumeEnable": "yes"})


def test_missing_table_and_version() -> None:
    assert TopicConfigSerializeWrapper.from_json({"topicConfigTable": None}) == TopicConfigSerializeWrapper()
    assert SubscriptionGroupWrapper.from_json({}) == SubscriptionGroupWrapper()


def test_data_version_next() -> None:
    assert DataVersion(5, 2, 7).next(9) == DataVersion(9, 3, 7)
    assert DataVersion(5, 2).state == 0 and DataVersion(5, 2, 7).state == 7


def test_java_to_string() -> None:
    assert str(TopicConfig("Orders", 4, 4)) == (
        "TopicConfig [topicName=Orders, readQueueNums=4, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
    )
    assert str(SubscriptionGroupConfig("CG")) == (
        "SubscriptionGroupConfig [groupName=CG, consumeEnable=true, consumeFromMinEnable=true, "
        "consumeBroadcastEnable=true, retryQueueNums=1, retryMaxTimes=16, brokerId=0, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]"
    )
