"""Request handlers without sockets: request command in, response command out."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import pytest

from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.kvconfig import KVConfigManager
from rmq.namesrv.processors import NamesrvState, handle
from rmq.namesrv.route_info import RouteInfoManager
from rmq.protocol import body as json_body
from rmq.protocol import javaprops as properties
from rmq.protocol.bodies import DataVersion, TopicConfig
from rmq.protocol.bodies.register import RegisterBrokerBody as RegisterBody
from rmq.protocol.bodies.register import encode_compressed, encode_register_body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pathlib import Path

ADDR = "127.0.0.1:30911"


@pytest.fixture
def state(tmp_path: Path) -> NamesrvState:
    return NamesrvState(NamesrvConfig(), RouteInfoManager(), KVConfigManager(tmp_path / "kvConfig.json"))


def request(code: int, ext: dict[str, Any] | None = None, body: bytes = b"", version: int = 409) -> RemotingCommand:
    return RemotingCommand(code, ext, body, version=version, opaque=7)


def register_ext(broker_id: int = 0, addr: str = ADDR, **extra: Any) -> dict[str, Any]:
    return {
        "brokerName": "broker-a",
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr.replace("30911", "30912"),
        "brokerId": broker_id,
        **extra,
    }


BODY = RegisterBody(DataVersion(5, 1), {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}, [])


def register(state: NamesrvState, body: bytes | None = None, **extra: Any) -> RemotingCommand:
    data = encode_register_body(BODY) if body is None else body
    return handle(state, request(RequestCode.REGISTER_BROKER, register_ext(**extra), data), channel="conn")


def test_register_master_then_slave(state: NamesrvState) -> None:
    response = register(state)
    assert (response.code, response.opaque, response.is_response) == (0, 7, True)
    assert response.ext_fields == {}
    assert response.body == b""  # no ORDER_TOPIC_CONFIG namespace yet
    slave = handle(
        state,
        request(RequestCode.REGISTER_BROKER, register_ext(1, "127.0.0.1:40911"), encode_register_body(BODY)),
    )
    assert slave.ext_fields == {"masterAddr": ADDR, "haServerAddr": "127.0.0.1:30912"}


def test_register_answers_the_order_topic_namespace(state: NamesrvState) -> None:
    state.kv.put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4")
    assert json_body.loads(register(state).body) == {"table": {"TopicTest": "broker-a:4"}}


def test_register_compressed(state: NamesrvState) -> None:
    assert register(state, encode_compressed(BODY), compressed="true").code == 0
    assert state.routes.all_topics() == ["TopicTest"]


def test_register_crc(state: NamesrvState) -> None:
    data = encode_register_body(BODY)
    good = zlib.crc32(data) & 0x7FFFFFFF
    bad = register(state, data, bodyCrc32=good ^ 1)
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert state.routes.brokers == {}
    assert register(state, data, bodyCrc32=good).code == 0


def test_register_bad_body_and_bad_header(state: NamesrvState) -> None:
    garbage = register(state, b"{{{")
    assert garbage.code == ResponseCode.SYSTEM_ERROR
    assert "bad RegisterBrokerBody" in (garbage.remark or "")
    bad_zlib = register(state, b"nope", compressed="true")
    assert "cannot inflate" in (bad_zlib.remark or "")
    ext = register_ext()
    del ext["brokerAddr"]
    missing = handle(state, request(RequestCode.REGISTER_BROKER, ext))
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert "brokerAddr" in (missing.remark or "")
    ext = register_ext(brokerId="x")
    assert "brokerId" in (handle(state, request(RequestCode.REGISTER_BROKER, ext)).remark or "")


def test_route_dialects(state: NamesrvState) -> None:
    register(state)
    ext = {"topic": "TopicTest"}
    legacy = handle(state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=63)).body
    standard = handle(state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, version=409)).body
    forced = handle(
        state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {**ext, "acceptStandardJsonOnly": "true"}, version=63)
    ).body
    assert b'{0:"127.0.0.1:30911"}' in legacy
    assert b'{"0":"127.0.0.1:30911"}' in standard
    assert forced == standard
    assert legacy == standard.replace(b'"0":', b"0:")


def test_route_missing_topic(state: NamesrvState) -> None:
    response = handle(state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}))
    assert response.code == 17  # ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == "No topic route info in name server for the topic: Nope"


@pytest.mark.parametrize("enabled", [True, False])
def test_route_order_topic_conf(state: NamesrvState, enabled: bool) -> None:
    state.config = NamesrvConfig(order_message_enable=enabled)
    register(state)
    state.kv.put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4")
    body = handle(state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})).body
    route = json_body.loads(body)
    assert route.get("orderTopicConf") == ("broker-a:4" if enabled else None)
    assert list(route) == sorted(route)


def test_unregister(state: NamesrvState) -> None:
    register(state)
    ext = {"brokerName": "broker-a", "brokerAddr": ADDR, "clusterName": "DefaultCluster", "brokerId": "0"}
    assert handle(state, request(RequestCode.UNREGISTER_BROKER, ext)).code == 0
    assert handle(state, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})).code == 17


def test_cluster_info_is_always_legacy(state: NamesrvState) -> None:
    register(state)
    body = handle(state, request(RequestCode.GET_BROKER_CLUSTER_INFO, version=409)).body
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:30911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )


def test_topic_lists(state: NamesrvState) -> None:
    register(state)
    all_topics = handle(state, request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body
    assert all_topics == b'{"topicList":["TopicTest"]}'
    by_cluster = handle(state, request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})).body
    assert by_cluster == b'{"topicList":["TopicTest"]}'
    system = handle(state, request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body
    assert system == b'{"brokerAddr":"127.0.0.1:30911","topicList":["DefaultCluster","broker-a"]}'


def test_unit_topic_lists(state: NamesrvState) -> None:
    body = RegisterBody(DataVersion(1, 1), {"U": TopicConfig("U", 1, 1, 6, topic_sys_flag=3)}, [])
    register(state, encode_register_body(body))
    for code, expected in [
        (RequestCode.GET_UNIT_TOPIC_LIST, b'{"topicList":["U"]}'),
        (RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, b'{"topicList":["U"]}'),
        (RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, b'{"topicList":[]}'),
    ]:
        assert handle(state, request(code)).body == expected


def test_delete_topic(state: NamesrvState) -> None:
    register(state)
    ext = {"topic": "TopicTest", "clusterName": "Other"}
    assert handle(state, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)).code == 0
    assert state.routes.all_topics() == ["TopicTest"]
    assert handle(state, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicTest"})).code == 0
    assert state.routes.all_topics() == []


def test_write_perm(state: NamesrvState) -> None:
    register(state)
    wipe = handle(state, request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
    assert wipe.ext_fields == {"wipeTopicCount": "1"}
    assert state.routes.topics["TopicTest"]["broker-a"].perm == 4
    add = handle(state, request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
    assert add.ext_fields == {"addTopicCount": "1"}
    assert state.routes.topics["TopicTest"]["broker-a"].perm == 6


def test_query_data_version(state: NamesrvState) -> None:
    ext = {"brokerName": "broker-a", "brokerAddr": ADDR, "clusterName": "DefaultCluster", "brokerId": "0"}
    unknown = handle(state, request(RequestCode.QUERY_DATA_VERSION, ext, b'{"counter":1,"timestamp":5}'))
    assert (unknown.code, unknown.ext_fields, unknown.body) == (0, {"changed": "true"}, b"")
    register(state)
    same = handle(state, request(RequestCode.QUERY_DATA_VERSION, ext, b'{"counter":1,"timestamp":5}'))
    assert same.ext_fields == {"changed": "false"}
    assert json_body.loads(same.body) == {"counter": 1, "timestamp": 5}
    newer = handle(state, request(RequestCode.QUERY_DATA_VERSION, ext, b'{"counter":2,"timestamp":5}'))
    assert newer.ext_fields == {"changed": "true"}
    bad = handle(state, request(RequestCode.QUERY_DATA_VERSION, ext, b"[]"))
    assert bad.code == ResponseCode.SYSTEM_ERROR
    assert "DataVersion" in (bad.remark or "")


def test_kv_config(state: NamesrvState) -> None:
    ns_key = {"namespace": "ns", "key": "k"}
    missing = handle(state, request(RequestCode.GET_KV_CONFIG, ns_key))
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: k")
    assert handle(state, request(RequestCode.PUT_KV_CONFIG, {**ns_key, "value": "v"})).code == 0
    assert handle(state, request(RequestCode.GET_KV_CONFIG, ns_key)).ext_fields == {"value": "v"}
    listing = handle(state, request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}))
    assert listing.body == b'{"table":{"k":"v"}}'
    none = handle(state, request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "other"}))
    assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: other")
    assert handle(state, request(RequestCode.DELETE_KV_CONFIG, ns_key)).code == 0
    assert handle(state, request(RequestCode.GET_KV_CONFIG, ns_key)).code == ResponseCode.QUERY_NOT_FOUND
    no_value = handle(state, request(RequestCode.PUT_KV_CONFIG, ns_key))
    assert no_value.code == ResponseCode.SYSTEM_ERROR
    assert "'value'" in (no_value.remark or "")


def test_kv_write_failure_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    state = NamesrvState(NamesrvConfig(), RouteInfoManager(), KVConfigManager(blocker / "kvConfig.json"))
    response = handle(state, request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "not persisted" in (response.remark or "")


def test_namesrv_config(state: NamesrvState) -> None:
    text = handle(state, request(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
    assert properties.parse(text)["listenPort"] == "9876"
    update = handle(state, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"))
    assert update.code == 0
    assert state.config.order_message_enable
    for body, words in [
        (b"listenPort=1", "listenPort: can only be set at startup"),
        (b"kvConfigPath=/etc/passwd", "kvConfigPath: can only be set at startup"),
        (b"orderMessageEnable=maybe", "orderMessageEnable"),
        (b"bogus=1", "unknown keys bogus"),
        (b"\xff", "not UTF-8"),
    ]:
        refused = handle(state, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert words in (refused.remark or "")
    assert state.config == NamesrvConfig(order_message_enable=True)
    assert handle(state, request(RequestCode.UPDATE_NAMESRV_CONFIG)).code == 0


def test_unknown_code(state: NamesrvState) -> None:
    response = handle(state, request(9999))
    assert (response.code, response.remark) == (3, " request type 9999 not supported")
