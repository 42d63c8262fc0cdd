"""REGISTER_BROKER bodies: plain, compressed, pre-V3_0_11, and malformed ones."""

from __future__ import annotations

import struct
import zlib

import pytest

from rmq.protocol import body as body_json
from rmq.protocol.bodies import DataVersion, TopicConfig
from rmq.protocol.bodies.register import RegisterBrokerBody as RegisterBody
from rmq.protocol.bodies.register import (
    decode_register_body,
    encode_compressed,
    encode_register_body,
    register_body_json,
)
from rmq.protocol.errors import RemoteProtocolError

BODY = RegisterBody(
    DataVersion(timestamp=1700000000000, counter=7),
    {"T": TopicConfig("T", 4, 4, 6), "%RETRY%g": TopicConfig("%RETRY%g", 1, 1, 6)},
    ["10.0.0.9:1"],
)

# What a 4.9.8 Java broker sends, field for field (fastjson, compact).
JAVA_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":2,"timestamp":1700000000123},'
    b'"topicConfigTable":{"TBW102":{"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}}}}'
)


def test_java_body() -> None:
    body = decode_register_body(JAVA_BODY, compressed=False, version=409)
    assert body.data_version == DataVersion(1700000000123, 2)
    assert body.topic_configs == {"TBW102": TopicConfig("TBW102", 8, 8, 7, 0)}
    assert body.filter_servers == []


def test_java_body_round_trip() -> None:
    body = decode_register_body(JAVA_BODY, compressed=False, version=409)
    assert encode_register_body(body) == JAVA_BODY


def test_a_broker_sends_its_table_json_with_the_state_version_last() -> None:
    """register_body_json: the body rmq brokers have always sent; a RocketMQ 5 broker writes
    stateVersion between counter and timestamp, and both read the same."""
    wrapper = {"dataVersion": {"counter": 2, "timestamp": 9}, "topicConfigTable": {}}
    sent = body_json.dumps(register_body_json(wrapper, state_version=7))
    assert sent == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":'
        b'{"dataVersion":{"counter":2,"timestamp":9,"stateVersion":7},"topicConfigTable":{}}}'
    )
    java5 = sent.replace(b'"timestamp":9,"stateVersion":7', b'"stateVersion":7,"timestamp":9')
    for data in (sent, java5):
        assert decode_register_body(data, compressed=False, version=500).data_version == DataVersion(9, 2, 7)


def test_plain_round_trip() -> None:
    assert decode_register_body(encode_register_body(BODY), compressed=False, version=409) == BODY


def test_compressed_round_trip() -> None:
    assert decode_register_body(encode_compressed(BODY), compressed=True, version=409) == BODY


def test_compressed_loses_topic_sys_flag_as_in_rocketmq() -> None:
    flagged = RegisterBody(DataVersion(1, 1), {"T": TopicConfig("T", 1, 1, 6, topic_sys_flag=1)}, [])
    decoded = decode_register_body(encode_compressed(flagged), compressed=True, version=409)
    assert decoded.topic_configs["T"].topic_sys_flag == 0


def test_old_broker_sends_the_bare_wrapper() -> None:
    wrapper = b'{"dataVersion":{"counter":1,"timestamp":5},"topicConfigTable":{"T":{"topicName":"T","perm":6}}}'
    body = decode_register_body(wrapper, compressed=False, version=36)
    assert body.data_version == DataVersion(5, 1)
    assert body.topic_configs == {"T": TopicConfig("T", perm=6)}


def test_empty_body_is_an_empty_config_at_version_zero() -> None:
    assert decode_register_body(b"", compressed=False, version=409) == RegisterBody(DataVersion(0, 0), {}, [])


def test_unquoted_keys_are_accepted() -> None:
    text = b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":2},"topicConfigTable":{}}}'
    assert decode_register_body(text, compressed=False, version=409).data_version == DataVersion(2, 1)


def _chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(
    ("data", "compressed", "match"),
    [
        (b"not json", False, "bad RegisterBrokerBody"),
        (b"[1,2]", False, "not a JSON object"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}', False, "topicConfigTable"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}', False, "T.perm"),
        (b'{"filterServerList":[1]}', False, "filterServerList"),
        (b"[" * 100000, False, "bad RegisterBrokerBody"),
        (b"\xff\xfe", False, "UTF-8"),
        (b"not zlib", True, "cannot inflate"),
        (zlib.compress(b"\x00\x00"), True, "ends before"),
        (zlib.compress(_chunk(b'{"counter":1}') + struct.pack(">i", 1) + struct.pack(">i", 50)), True, "ends inside"),
        (zlib.compress(_chunk(b'{"counter":1}') + struct.pack(">i", -1)), True, "negative"),
        (zlib.compress(_chunk(b'{"counter":1}') + struct.pack(">i", 1) + _chunk(b"T 1 1")), True, "bad topic"),
        (zlib.compress(_chunk(b'{"counter":1}') + struct.pack(">i", 1) + _chunk(b"T a 1 6 X")), True, "bad topic"),
    ],
)
def test_malformed_bodies(data: bytes, compressed: bool, match: str) -> None:
    with pytest.raises(RemoteProtocolError, match=match):
        decode_register_body(data, compressed=compressed, version=409)


def test_zip_bomb_is_refused() -> None:
    bomb = zlib.compress(b"\x00" * (17 * 1024 * 1024))
    with pytest.raises(RemoteProtocolError, match="more than"):
        decode_register_body(bomb, compressed=True, version=409)
