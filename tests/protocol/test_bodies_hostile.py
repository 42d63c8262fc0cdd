"""Every body's from_json, given whatever a peer might send, returns a value or raises
BodyError: nothing else escapes to the server that reads it."""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import bodies
from rmq.protocol.body import MessageQueue
from rmq.protocol.errors import BodyError

READERS = sorted(
    (cls for _, cls in inspect.getmembers(bodies, inspect.isclass) if hasattr(cls, "from_json")),
    key=lambda cls: cls.__name__,
)

KEYS = st.sampled_from(
    [
        "topicName", "perm", "readQueueNums", "brokerName", "brokerAddrs", "queueDatas", "brokerDatas", "cluster",
        "offsetTable", "consumeTps", "connectionSet", "subscriptionTable", "clientID", "consumerDataSet",
        "producerDataSet", "groupName", "subscriptionDataSet", "topic", "subString", "subVersion", "mqSet",
        "consumerGroup", "clientId", "lockOKMQSet", "topicList", "groupList", "table", "dataVersion", "counter",
        "timestamp", "topicConfigTable", "subscriptionGroupTable", "brokerAddrTable", "clusterAddrTable",
        "topicConfigSerializeWrapper", "filterServerList", "consumeStatsList", "consumerIdList", "order", "queueId",
    ]
)  # fmt: skip
SCALARS = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text(max_size=8)
QUEUES = st.builds(MessageQueue, st.text(max_size=4), st.text(max_size=4), st.integers(-2, 2))
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(KEYS | st.text(max_size=4) | st.integers(-2, 2) | QUEUES, inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_from_json_raises_only_body_error(obj: Any) -> None:
    for cls in READERS:
        try:
            cls.from_json(obj)
        except BodyError:
            pass
