"""PUSH_REPLY_MESSAGE_TO_CLIENT's ReplyMessageRequestHeader, with bytes only: the frame a
RocketMQ 4.x broker pushes to a requester (JSON header, extFields all strings), and ours."""

from __future__ import annotations

import json

import pytest

from rmq.protocol import (
    FrameDecoder,
    HeaderError,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_frame,
)
from rmq.protocol.constants import reply_topic
from rmq.protocol.headers import ReplyMessageRequestHeader

PROPS = "CORRELATION_ID\x01c-1\x02REPLY_TO_CLIENT\x01127.0.0.1@42\x02MSG_TYPE\x01reply\x02"

# ReplyMessageRequestHeader's fields as the Java broker writes them (every value a string)
JAVA_EXT = {
    "producerGroup": "pg",
    "topic": "DefaultCluster_REPLY_TOPIC",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "0",
    "sysFlag": "0",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "properties": PROPS,
    "reconsumeTimes": "0",
    "unitMode": "false",
    "bornHost": "127.0.0.1:50000",
    "storeHost": "127.0.0.1:10911",
    "storeTimestamp": "1700000000123",
}

HEADER = ReplyMessageRequestHeader(
    producer_group="pg",
    topic="DefaultCluster_REPLY_TOPIC",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=0,
    sys_flag=0,
    born_timestamp=1700000000000,
    flag=0,
    born_host="127.0.0.1:50000",
    store_host="127.0.0.1:10911",
    store_timestamp=1700000000123,
    properties=PROPS,
    reconsume_times=0,
    unit_mode=False,
)


def java_frame(ext: dict[str, str], body: bytes) -> bytes:
    header = {
        "code": RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
        "language": "JAVA",
        "version": 395,
        "opaque": 7,
        "flag": 0,
        "extFields": ext,
        "serializeTypeCurrentRPC": "JSON",
    }
    return encode_frame(SerializeType.JSON, json.dumps(header).encode(), body)


def one_command(frame: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.feed(frame)
    (content,) = list(decoder)
    return RemotingCommand.decode(content)


def test_a_java_brokers_push_decodes() -> None:
    cmd = one_command(java_frame(JAVA_EXT, b"PONG"))
    assert cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and cmd.body == b"PONG"
    assert ReplyMessageRequestHeader.from_ext(cmd.ext_fields) == HEADER


def test_ours_encodes_javas_field_names_and_round_trips() -> None:
    assert HEADER.to_ext() == JAVA_EXT
    ours = RemotingCommand(
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, HEADER.to_ext(), b"PONG", language=LanguageCode.JAVA
    ).encode()
    cmd = one_command(ours)
    assert json.loads(ours[8 : 8 + int.from_bytes(ours[5:8], "big")])["extFields"] == JAVA_EXT
    assert ReplyMessageRequestHeader.from_ext(cmd.ext_fields) == HEADER and cmd.body == b"PONG"


def test_nullable_fields_may_be_absent_and_required_ones_may_not() -> None:
    ext = {k: v for k, v in JAVA_EXT.items() if k not in ("properties", "reconsumeTimes", "unitMode")}
    header = ReplyMessageRequestHeader.from_ext(ext)
    assert (header.properties, header.reconsume_times, header.unit_mode) == (None, None, False)
    assert ReplyMessageRequestHeader.from_ext({**JAVA_EXT, "unitMode": "1"}).unit_mode is True  # the C++ spelling
    for required in ("bornHost", "storeHost", "storeTimestamp", "producerGroup"):
        with pytest.raises(HeaderError, match=required):
            ReplyMessageRequestHeader.from_ext({k: v for k, v in JAVA_EXT.items() if k != required})


def test_reply_topic_is_the_clusters() -> None:
    assert reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"  # MixAll.getReplyTopic
