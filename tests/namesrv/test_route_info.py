"""RouteInfoManager as tables: each case is a list of operations and the expected state."""

from __future__ import annotations

from typing import Any

import pytest

from rmq.namesrv.route_info import RegisterResult, RouteInfoManager
from rmq.protocol.bodies import DataVersion, TopicConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


A0 = "10.0.0.1:10911"
A1 = "10.0.0.2:10911"
B0 = "10.0.0.3:10911"
V1 = DataVersion(timestamp=1, counter=1)
V2 = DataVersion(timestamp=1, counter=2)


def topics(*specs: tuple[str, int, int, int]) -> dict[str, TopicConfig]:
    return {name: TopicConfig(name, read, write, perm) for name, read, write, perm in specs}


def reg(
    routes: RouteInfoManager,
    addr: str,
    name: str = "broker-a",
    broker_id: int = 0,
    version: DataVersion = V1,
    configs: dict[str, TopicConfig] | None = None,
    cluster: str = "DefaultCluster",
    channel: object = None,
) -> RegisterResult:
    return routes.register_broker(
        cluster, addr, name, broker_id, addr.replace("10911", "10912"), version, configs or {}, [], channel
    )


def qd(name: str, read: int, write: int, perm: int = 6, flag: int = 0) -> dict[str, Any]:
    return {"brokerName": name, "perm": perm, "readQueueNums": read, "topicSysFlag": flag, "writeQueueNums": write}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def routes(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(clock)


def test_first_master_registration_fills_every_table(routes: RouteInfoManager) -> None:
    result = reg(routes, A0, configs=topics(("T", 4, 4, 6), ("U", 8, 2, 4)))
    assert result == RegisterResult()
    assert routes.clusters == {"DefaultCluster": {"broker-a"}}
    assert routes.brokers["broker-a"].broker_addrs == {0: A0}
    assert routes.live[A0].data_version == V1
    assert routes.live[A0].ha_server_addr == "10.0.0.1:10912"
    assert routes.pickup_topic_route("T") == {
        "brokerDatas": [{"brokerAddrs": {0: A0}, "brokerName": "broker-a", "cluster": "DefaultCluster"}],
        "filterServerTable": {},
        "queueDatas": [qd("broker-a", 4, 4)],
    }
    assert routes.pickup_topic_route("U")["queueDatas"] == [qd("broker-a", 8, 2, 4)]  # type: ignore[index]


@pytest.mark.parametrize(
    ("second_version", "second_configs", "expected_t"),
    [
        # same data version: the table is not re-read
        (V1, topics(("T", 1, 1, 2)), [qd("broker-a", 4, 4)]),
        # new data version: the queues are replaced
        (V2, topics(("T", 1, 1, 2)), [qd("broker-a", 1, 1, 2)]),
        # topics missing from a later registration stay (RocketMQ keeps them)
        (V2, topics(("Z", 1, 1, 6)), [qd("broker-a", 4, 4)]),
    ],
)
def test_reregistration_and_data_version(
    routes: RouteInfoManager,
    second_version: DataVersion,
    second_configs: dict[str, TopicConfig],
    expected_t: list[dict[str, Any]],
) -> None:
    reg(routes, A0, configs=topics(("T", 4, 4, 6)))
    reg(routes, A0, version=second_version, configs=second_configs)
    assert routes.pickup_topic_route("T")["queueDatas"] == expected_t  # type: ignore[index]


def test_slave_registration_learns_master_and_does_not_touch_queues(routes: RouteInfoManager) -> None:
    reg(routes, A0, configs=topics(("T", 4, 4, 6)))
    result = reg(routes, A1, broker_id=1, version=V2, configs=topics(("T", 1, 1, 2), ("S", 1, 1, 6)))
    assert result == RegisterResult(master_addr=A0, ha_server_addr="10.0.0.1:10912")
    assert routes.brokers["broker-a"].broker_addrs == {0: A0, 1: A1}
    assert routes.all_topics() == ["T"]
    assert routes.pickup_topic_route("T")["queueDatas"] == [qd("broker-a", 4, 4)]  # type: ignore[index]


def test_slave_without_live_master_gets_no_master(routes: RouteInfoManager) -> None:
    assert reg(routes, A1, broker_id=1) == RegisterResult()


def test_promoted_slave_keeps_one_id_per_address(routes: RouteInfoManager) -> None:
    reg(routes, A1, broker_id=1)
    reg(routes, A1, broker_id=0)
    assert routes.brokers["broker-a"].broker_addrs == {0: A1}


def term(n: int | None, counter: int = 1) -> DataVersion:
    """A registration's data version carrying stateVersion `n` (None: a 4.x broker's, without)."""
    return DataVersion(timestamp=1, counter=counter, state_version=n)


# Each step: (address, broker id, stateVersion, refused?) then the group's ids after it.
# A0 led in term 4; A1 was elected in term 5 while A0 was paused.
FAILOVERS = {
    "deposed leader's late registration": [
        (A0, 0, 4, False, {0: A0, 1: A1}),
        (A1, 0, 5, False, {0: A1}),  # A1 takes id 0 (and leaves its slave id)
        (A0, 0, 4, True, {0: A1}),  # A0's registration from before it heard of term 5
        (A0, 1, 5, False, {0: A1, 1: A0}),  # A0 as a slave: id 0 stays A1's
        (A0, 0, 4, True, {0: A1, 1: A0}),  # delayed once more: A0 keeps its slave id too
    ],
    "new leader's registration after the old one's": [
        (A0, 0, 4, False, {0: A0, 1: A1}),
        (A0, 0, 4, False, {0: A0, 1: A1}),  # A0's late one arrives first: nothing new
        (A1, 0, 5, False, {0: A1}),
        (A0, 1, 5, False, {0: A1, 1: A0}),
    ],
    "4.x brokers (no stateVersion): an operator swaps the roles": [
        (A0, 0, None, False, {0: A0, 1: A1}),
        (A1, 0, None, False, {0: A1}),  # the old master is still live: the last one wins
        (A0, 1, None, False, {0: A1, 1: A0}),
    ],
    "equal stateVersions: the last one wins": [
        (A0, 0, 3, False, {0: A0, 1: A1}),
        (A1, 0, 3, False, {0: A1}),
        (A0, 0, 3, False, {0: A0}),
    ],
    "a 4.x broker cannot displace a master with a stateVersion while it lives": [
        (A0, 0, 2, False, {0: A0, 1: A1}),
        (A1, 0, None, True, {0: A0, 1: A1}),
    ],
}


@pytest.mark.parametrize("steps", FAILOVERS.values(), ids=FAILOVERS.keys())
def test_a_stale_registration_never_displaces_a_newer_master(
    routes: RouteInfoManager, clock: FakeClock, steps: list[tuple[str, int, int | None, bool, dict[int, str]]]
) -> None:
    first = steps[0][2]  # A0 the master, A1 its slave
    reg(routes, A0, configs=topics(("T", 4, 4, 6)), version=term(first))
    reg(routes, A1, broker_id=1, version=term(first))
    for i, (addr, broker_id, state, refused, ids) in enumerate(steps):
        clock.now += 1
        before = dict(routes.live)
        result = reg(routes, addr, broker_id=broker_id, version=term(state, counter=2 + i))
        assert (result.refused is not None) is refused, (i, result)
        assert routes.brokers["broker-a"].broker_addrs == ids, i
        route = routes.pickup_topic_route("T")
        assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == dict(sorted(ids.items()))
        if refused:
            assert routes.live == before, "a refused registration changes nothing"
            assert result.refused is not None and f"held by {ids[broker_id]}" in result.refused


def test_a_newer_masters_id_is_free_again_once_it_is_gone(routes: RouteInfoManager) -> None:
    """Only a live holder counts: once the newer master's connection closed (or it expired),
    an older stateVersion may take its id (a group restarted from older stores)."""
    reg(routes, A1, configs=topics(("T", 4, 4, 6)), version=term(9), channel="c1")
    assert reg(routes, A0, version=term(3)).refused is not None
    routes.on_channel_closed("c1")
    assert reg(routes, A0, version=term(3)).refused is None
    assert routes.brokers["broker-a"].broker_addrs == {0: A0}


@pytest.mark.parametrize(
    ("unregister", "brokers", "clusters", "topic_list"),
    [
        # the slave goes: the group and its queues stay
        ((A1, 1), {"broker-a": {0: A0}, "broker-b": {0: B0}}, {"DefaultCluster": {"broker-a", "broker-b"}}, ["T", "U"]),
        # the master goes but the slave stays: queues stay with the group
        ((A0, 0), {"broker-a": {1: A1}, "broker-b": {0: B0}}, {"DefaultCluster": {"broker-a", "broker-b"}}, ["T", "U"]),
    ],
)
def test_unregister_one_of_two(
    routes: RouteInfoManager,
    unregister: tuple[str, int],
    brokers: dict[str, dict[int, str]],
    clusters: dict[str, set[str]],
    topic_list: list[str],
) -> None:
    reg(routes, A0, configs=topics(("T", 4, 4, 6)))
    reg(routes, A1, broker_id=1)
    reg(routes, B0, name="broker-b", configs=topics(("T", 2, 2, 6), ("U", 1, 1, 6)))
    addr, broker_id = unregister
    routes.unregister_broker("DefaultCluster", addr, "broker-a", broker_id)
    assert {n: d.broker_addrs for n, d in routes.brokers.items()} == brokers
    assert routes.clusters == clusters
    assert routes.all_topics() == topic_list
    assert addr not in routes.live


def test_unregister_last_broker_of_a_group_drops_its_queues(routes: RouteInfoManager) -> None:
    reg(routes, A0, configs=topics(("T", 4, 4, 6), ("ONLY_A", 1, 1, 6)))
    reg(routes, B0, name="broker-b", configs=topics(("T", 2, 2, 6)))
    routes.unregister_broker("DefaultCluster", A0, "broker-a", 0)
    assert routes.all_topics() == ["T"]
    assert routes.pickup_topic_route("T")["queueDatas"] == [qd("broker-b", 2, 2)]  # type: ignore[index]
    assert routes.clusters == {"DefaultCluster": {"broker-b"}}
    routes.unregister_broker("DefaultCluster", B0, "broker-b", 0)
    assert (routes.clusters, routes.brokers, routes.topics, routes.live) == ({}, {}, {}, {})


def test_unregister_takes_an_id_only_from_the_address_holding_it(routes: RouteInfoManager) -> None:
    """A deposed master stopping before it learnt of its successor unregisters as id 0: the
    successor keeps id 0, and the group its queues."""
    reg(routes, A0, configs=topics(("T", 4, 4, 6)), version=term(4))
    reg(routes, A1, version=term(5))
    routes.unregister_broker("DefaultCluster", A0, "broker-a", 0)
    assert routes.brokers["broker-a"].broker_addrs == {0: A1}
    assert A0 not in routes.live and routes.all_topics() == ["T"]


def test_unregister_unknown_broker_is_harmless(routes: RouteInfoManager) -> None:
    routes.unregister_broker("C", "1.2.3.4:5", "nobody", 0)
    assert routes.brokers == {}


def test_route_needs_queues_and_a_broker_group(routes: RouteInfoManager) -> None:
    assert routes.pickup_topic_route("T") is None
    reg(routes, A0, configs=topics(("T", 4, 4, 6)))
    # a queue entry whose group is gone (can only happen through direct edits) gives no route
    del routes.brokers["broker-a"]
    assert routes.pickup_topic_route("T") is None


def test_route_lists_groups_sorted_with_slaves(routes: RouteInfoManager) -> None:
    reg(routes, B0, name="broker-b", configs=topics(("T", 2, 2, 6)))
    reg(routes, A0, configs=topics(("T", 4, 4, 6)))
    reg(routes, A1, broker_id=1)
    route = routes.pickup_topic_route("T")
    assert route is not None
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a", "broker-b"]
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: A0, 1: A1}
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]


def test_filter_servers_appear_in_routes(routes: RouteInfoManager) -> None:
    routes.register_broker("C", A0, "broker-a", 0, "", V1, topics(("T", 1, 1, 6)), ["10.0.0.9:1"])
    assert routes.pickup_topic_route("T")["filterServerTable"] == {A0: ["10.0.0.9:1"]}  # type: ignore[index]
    routes.register_broker("C", A0, "broker-a", 0, "", V1, topics(("T", 1, 1, 6)), [])
    assert routes.pickup_topic_route("T")["filterServerTable"] == {}  # type: ignore[index]


def test_cluster_info(routes: RouteInfoManager) -> None:
    reg(routes, B0, name="broker-b", cluster="C2")
    reg(routes, A0)
    reg(routes, A1, broker_id=1)
    assert routes.cluster_info() == {
        "brokerAddrTable": {
            "broker-a": {"brokerAddrs": {0: A0, 1: A1}, "brokerName": "broker-a", "cluster": "DefaultCluster"},
            "broker-b": {"brokerAddrs": {0: B0}, "brokerName": "broker-b", "cluster": "C2"},
        },
        "clusterAddrTable": {"C2": ["broker-b"], "DefaultCluster": ["broker-a"]},
    }


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [("C1", ["A_ONLY", "SHARED"]), ("C2", ["B_ONLY", "SHARED"]), ("nope", [])],
)
def test_topics_by_cluster(routes: RouteInfoManager, cluster: str, expected: list[str]) -> None:
    reg(routes, A0, cluster="C1", configs=topics(("A_ONLY", 1, 1, 6), ("SHARED", 1, 1, 6)))
    reg(routes, B0, name="broker-b", cluster="C2", configs=topics(("B_ONLY", 1, 1, 6), ("SHARED", 1, 1, 6)))
    assert routes.topics_by_cluster(cluster) == expected


@pytest.mark.parametrize(
    ("cluster", "remaining", "shared_groups"),
    [
        (None, ["A_ONLY", "B_ONLY"], None),
        ("", ["A_ONLY", "B_ONLY"], None),
        ("C1", ["A_ONLY", "B_ONLY", "SHARED"], ["broker-b"]),
        ("nope", ["A_ONLY", "B_ONLY", "SHARED"], ["broker-a", "broker-b"]),
    ],
)
def test_delete_topic(
    routes: RouteInfoManager, cluster: str | None, remaining: list[str], shared_groups: list[str] | None
) -> None:
    reg(routes, A0, cluster="C1", configs=topics(("A_ONLY", 1, 1, 6), ("SHARED", 1, 1, 6)))
    reg(routes, B0, name="broker-b", cluster="C2", configs=topics(("B_ONLY", 1, 1, 6), ("SHARED", 1, 1, 6)))
    routes.delete_topic("SHARED", cluster)
    assert routes.all_topics() == remaining
    route = routes.pickup_topic_route("SHARED")
    if shared_groups is None:
        assert route is None
    else:
        assert route is not None
        assert [q["brokerName"] for q in route["queueDatas"]] == shared_groups


def test_delete_topic_on_its_only_cluster_removes_it(routes: RouteInfoManager) -> None:
    reg(routes, A0, cluster="C1", configs=topics(("T", 1, 1, 6)))
    routes.delete_topic("T", "C1")
    assert routes.all_topics() == []


def test_system_topics(routes: RouteInfoManager) -> None:
    assert routes.system_topics() == ([], None)
    reg(routes, A1, broker_id=1)
    reg(routes, A0)
    reg(routes, B0, name="broker-b", cluster="C2")
    assert routes.system_topics() == (["C2", "broker-b", "DefaultCluster", "broker-a"], A0)


@pytest.mark.parametrize(
    ("start_perm", "op", "expected_perm", "count"),
    [
        (6, "wipe_write_perm", 4, 2),
        (7, "wipe_write_perm", 5, 2),
        (4, "wipe_write_perm", 4, 2),
        (4, "add_write_perm", 6, 2),
        (6, "add_write_perm", 6, 2),
    ],
)
def test_write_perm(routes: RouteInfoManager, start_perm: int, op: str, expected_perm: int, count: int) -> None:
    reg(routes, A0, configs=topics(("T", 1, 1, start_perm), ("U", 1, 1, start_perm)))
    reg(routes, B0, name="broker-b", configs=topics(("T", 1, 1, start_perm)))
    assert getattr(routes, op)("broker-a") == count
    assert routes.topics["T"]["broker-a"].perm == expected_perm
    assert routes.topics["U"]["broker-a"].perm == expected_perm
    assert routes.topics["T"]["broker-b"].perm == start_perm
    assert getattr(routes, op)("nobody") == 0


def test_expiry_after_silence(routes: RouteInfoManager, clock: FakeClock) -> None:
    reg(routes, A0, configs=topics(("T", 1, 1, 6)), channel="conn-a")
    clock.now += 60
    reg(routes, B0, name="broker-b", configs=topics(("T", 1, 1, 6)), channel="conn-b")
    clock.now += 60
    assert routes.scan_not_active(120.0) == []  # exactly 120 s is not yet expired
    clock.now += 1
    assert routes.scan_not_active(120.0) == [(A0, "conn-a")]
    assert list(routes.brokers) == ["broker-b"]
    clock.now += 60
    assert routes.scan_not_active(120.0) == [(B0, "conn-b")]
    assert (routes.clusters, routes.brokers, routes.topics, routes.live) == ({}, {}, {}, {})


def test_touch_refreshes_liveness(routes: RouteInfoManager, clock: FakeClock) -> None:
    reg(routes, A0)
    clock.now += 100
    routes.touch(A0)
    routes.touch("unknown:1")
    clock.now += 100
    assert routes.scan_not_active(120.0) == []


def test_channel_close_drops_only_that_channels_brokers(routes: RouteInfoManager) -> None:
    reg(routes, A0, configs=topics(("T", 1, 1, 6)), channel="c1")
    reg(routes, A1, broker_id=1, channel="c2")
    reg(routes, B0, name="broker-b", configs=topics(("U", 1, 1, 6)), channel="c1")
    assert routes.on_channel_closed("c1") == [A0, B0]
    assert {n: d.broker_addrs for n, d in routes.brokers.items()} == {"broker-a": {1: A1}}
    assert routes.all_topics() == ["T"]
    assert routes.on_channel_closed("c1") == []


def test_reregistration_on_a_new_channel_outlives_the_old_one(routes: RouteInfoManager) -> None:
    reg(routes, A0, channel="old")
    reg(routes, A0, channel="new")
    assert routes.on_channel_closed("old") == []
    assert A0 in routes.live


@pytest.mark.parametrize(
    ("stored", "asked", "changed"),
    [(V1, V1, False), (V1, V2, True), (None, V1, True), (V1, DataVersion(1, 1, 0), True)],
)
def test_data_version_changed(
    routes: RouteInfoManager, stored: DataVersion | None, asked: DataVersion, changed: bool
) -> None:
    if stored is not None:
        reg(routes, A0, version=stored)
    assert routes.is_topic_config_changed(A0, asked) is changed
    assert routes.data_version_of(A0) == stored


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"counter": 3, "timestamp": 99}, DataVersion(99, 3)),
        ({"counter": "3", "timestamp": "99"}, DataVersion(99, 3)),
        ({"counter": 1, "stateVersion": 2, "timestamp": 5}, DataVersion(5, 1, 2)),
        ({}, DataVersion(0, 0)),
    ],
)
def test_data_version_json(obj: dict[str, Any], expected: DataVersion) -> None:
    assert DataVersion.from_json(obj) == expected
    assert DataVersion.from_json(expected.to_json()) == expected


@pytest.mark.parametrize("obj", [[], {"counter": "x"}, {"counter": True}, {"timestamp": 1.5}])
def test_data_version_json_rejects(obj: Any) -> None:
    with pytest.raises(ValueError, match="dataVersion"):
        DataVersion.from_json(obj)


@pytest.mark.parametrize(
    ("obj", "key", "expected"),
    [
        (
            {"topicName": "T", "readQueueNums": 2, "writeQueueNums": 3, "perm": 7, "topicSysFlag": 1},
            "T",
            TopicConfig("T", 2, 3, 7, 1),
        ),
        ({"readQueueNums": 2}, "K", TopicConfig("K", 2, 16, 6, 0)),
        ({"topicName": "T", "topicSynFlag": 2}, "T", TopicConfig("T", topic_sys_flag=2)),
    ],
)
def test_topic_config_json(obj: dict[str, Any], key: str, expected: TopicConfig) -> None:
    assert TopicConfig.from_json(obj, key) == expected


@pytest.mark.parametrize(
    ("flag", "without", "expected"),
    [(1, 0, ["UNIT", "UNIT_AND_SUB"]), (2, 0, ["SUB", "UNIT_AND_SUB"]), (2, 1, ["SUB"]), (0, 3, ["PLAIN"])],
)
def test_unit_topic_lists(routes: RouteInfoManager, flag: int, without: int, expected: list[str]) -> None:
    configs = {
        name: TopicConfig(name, 1, 1, 6, sys_flag)
        for name, sys_flag in [("PLAIN", 0), ("UNIT", 1), ("SUB", 2), ("UNIT_AND_SUB", 3)]
    }
    reg(routes, A0, configs=configs)
    assert routes.topics_by_sys_flag(flag, without=without) == expected
