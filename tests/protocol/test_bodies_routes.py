"""TopicRouteData and ClusterInfo against captured and Java-written bytes.

Captured: every route the C++ client accepted (tests/vectors/cpp-client), written by a fake
name server in the pre-4.9.0 shape (`topicSynFlag`), with broker ids unquoted (fastjson) or
quoted. Java-written: what a 4.9.8 name server's fastjson writes for the same classes
(TopicRouteData, QueueData, BrokerData, ClusterInfo in rocketmq-common): getters in
alphabetical order, null fields left out, Long map keys unquoted unless the client asked
for standard JSON.
"""

from __future__ import annotations

import pytest

from rmq.protocol import body
from rmq.protocol.bodies import BrokerData, ClusterInfo, QueueData, TopicRouteData
from rmq.protocol.errors import BodyError
from tests.protocol.captured import bodies

ROUTES = bodies("resp-GET_ROUTEINFO_BY_TOPIC")


def test_the_routes_are_captured() -> None:
    assert len(ROUTES) >= 30


@pytest.mark.parametrize(("name", "data"), ROUTES, ids=[name for name, _ in ROUTES])
def test_captured_route(name: str, data: bytes) -> None:
    route = TopicRouteData.from_json(body.loads(data))
    assert route.broker_datas[0].master_addr == "127.0.0.1:30911"
    # written back as 4.9.8 names the sys-flag field, in the dialect it came in
    legacy = b"{0:" in data
    assert body.dumps(route.to_json(), legacy=legacy) == data.replace(b'"topicSynFlag"', b'"topicSysFlag"')


JAVA_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"},{"brokerAddrs":{0:"10.0.0.3:10911"},"brokerName":"broker-b",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{"10.0.0.1:10911":["10.0.0.1:30000"]},'
    b'"orderTopicConf":"broker-a:4;broker-b:2","queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},{"brokerName":"broker-b","perm":4,'
    b'"readQueueNums":2,"topicSysFlag":1,"writeQueueNums":2}]}'
)


def test_java_route_round_trip() -> None:
    route = TopicRouteData.from_json(body.loads(JAVA_ROUTE))
    assert route == TopicRouteData(
        (QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 2, 2, 4, 1)),
        (
            BrokerData("broker-a", "DefaultCluster", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            BrokerData("broker-b", "DefaultCluster", {0: "10.0.0.3:10911"}),
        ),
        "broker-a:4;broker-b:2",
        {"10.0.0.1:10911": ["10.0.0.1:30000"]},
    )
    assert body.dumps(route.to_json(), legacy=True) == JAVA_ROUTE
    # a 4.9.4+ client asks for standard JSON: the same with quoted ids
    standard = JAVA_ROUTE.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    assert body.dumps(route.to_json()) == standard
    assert TopicRouteData.from_json(body.loads(standard)) == route


def test_route_dialects() -> None:
    """Numbers as strings, fields left out, no orderTopicConf: read as Java defaults them."""
    obj = {
        "queueDatas": [{"brokerName": "b", "perm": "6", "writeQueueNums": "2"}],
        "brokerDatas": [{"brokerName": "b"}],
    }
    route = TopicRouteData.from_json(obj)
    assert route == TopicRouteData((QueueData("b", 0, 2, 6),), (BrokerData("b", "", {}),))
    assert route.to_json() == {
        "brokerDatas": [{"brokerAddrs": {}, "brokerName": "b", "cluster": ""}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "b", "perm": 6, "readQueueNums": 0, "topicSysFlag": 0, "writeQueueNums": 2}],
    }


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"queueDatas": {}},
        {"queueDatas": [{"perm": 6}]},
        {"brokerDatas": [{"brokerName": "b", "brokerAddrs": {"x": "a"}}]},
    ],
)
def test_bad_routes(obj: object) -> None:
    with pytest.raises(BodyError):
        TopicRouteData.from_json(obj)


JAVA_CLUSTER = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"},"broker-b":{"brokerAddrs":{0:"10.0.0.3:10911"},'
    b'"brokerName":"broker-b","cluster":"C2"}},"clusterAddrTable":{"C2":["broker-b"],"DefaultCluster":["broker-a"]}}'
)


def test_java_cluster_info_round_trip() -> None:
    info = ClusterInfo.from_json(body.loads(JAVA_CLUSTER))
    assert info.brokers["broker-a"].addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert info.clusters == {"C2": ["broker-b"], "DefaultCluster": ["broker-a"]}
    assert body.dumps(info.to_json(), legacy=True) == JAVA_CLUSTER


def test_cluster_info_names_a_broker_by_its_key() -> None:
    info = ClusterInfo.from_json({"brokerAddrTable": {"b": {"brokerAddrs": {"0": "h:1"}}}})
    assert info.brokers == {"b": BrokerData("b", "", {0: "h:1"})} and info.clusters == {}
