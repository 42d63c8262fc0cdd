"""POP's sans-IO vocabulary against the forms RocketMQ 5.3.3 writes (ExtraInfoUtil, KeyBuilder,
fastjson with the @JSONField names of PopCheckPoint, AckMsg, BatchAckMsg and BatchAck)."""

from __future__ import annotations

import pytest

from rmq.protocol import RequestCode, ResponseCode, body
from rmq.protocol.bodies.pop import AckMsg, BatchAck, BatchAckMessageRequestBody, PopCheckPoint
from rmq.protocol.errors import BodyError, HeaderError
from rmq.protocol.message import MessageExt
from rmq.protocol.pop import (
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    offset_info,
    parse_offset_info,
    pop_retry_topic,
    real_topic,
    receipt_handles,
    retry_flag,
    revive_topic,
)


def test_codes_are_rocketmq_5s() -> None:
    assert (RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.PEEK_MESSAGE) == (200050, 200051, 200052)
    assert (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.BATCH_ACK_MESSAGE) == (200053, 200151)
    assert (ResponseCode.POLLING_FULL, ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE) == (209, 210, 208)
    assert ResponseCode.INVALID_PARAMETER == 29


def test_names() -> None:
    assert revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert [retry_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert real_topic("T", "G", "1") == "%RETRY%G_T"
    with pytest.raises(HeaderError):
        real_topic("T", "G", "x")


def test_extra_info_is_space_separated_as_java_builds_it() -> None:
    info = ExtraInfo(10, 1700000000000, 60000, 3, "0", "broker-a", 2, 12)
    assert info.encode() == "10 1700000000000 60000 3 0 broker-a 2 12"
    assert ExtraInfo.parse(info.encode()) == info
    seven = ExtraInfo.parse("10 1700000000000 60000 3 1 broker-a 2")  # buildExtraInfo without the offset
    assert seven.queue_offset == -1 and seven.encode() == "10 1700000000000 60000 3 1 broker-a 2"
    assert seven.revive_time == 1700000060000 and not seven.is_order
    # the 5.x proxy's ReceiptHandle adds the CommitLog offset
    nine = ExtraInfo.parse("10 1700000000000 60000 3 0 broker-a 2 12 4096")
    assert nine == ExtraInfo(10, 1700000000000, 60000, 3, "0", "broker-a", 2, 12, 4096)
    assert nine.encode() == "10 1700000000000 60000 3 0 broker-a 2 12 4096"
    with pytest.raises(HeaderError, match="fields"):
        ExtraInfo.parse("10 20 30")
    with pytest.raises(HeaderError, match="not a number"):
        ExtraInfo.parse("10 x 30 1 0 b 0")


def test_offset_infos_and_receipt_handles() -> None:
    start, msgs = offset_info([("T", 1, [5, 7]), ("%RETRY%G_T", 0, [0])])
    assert start == "0 1 5;1 0 0"
    assert msgs == "0 1 5,7;1 0 0"
    assert parse_offset_info(msgs) == {"0@1": [5, 7], "1@0": [0]}
    with pytest.raises(HeaderError):
        parse_offset_info("0 1 5;0 1 6")
    header = PopMessageResponseHeader(1000, 30000, 2, 0, start, msgs)
    m = MessageExt("T", b"x", queue_id=1, queue_offset=7)
    retried = MessageExt("T", b"y", properties={"POP_CK": "0 1000 30000 2 1 b 0 0"})
    handles = receipt_handles(header, [m, retried], "b", "G")
    assert handles[0].encode() == "5 1000 30000 2 0 b 1 7"
    assert handles[1].encode() == "0 1000 30000 2 1 b 0 0"


def test_headers_carry_java_longs() -> None:
    ext = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "-1",
        "maxMsgNums": "32",
        "invisibleTime": "60000",
        "pollTime": "20000",
        "bornTime": "1700000000000",
        "initMode": "0",
        "expType": "TAG",
        "exp": "*",
        "order": "false",
    }
    header = PopMessageRequestHeader.from_ext(ext)
    assert header.born_time == 1700000000000 and header.queue_id == -1 and header.order is False
    assert header.to_ext() == ext
    with pytest.raises(HeaderError, match="consumerGroup"):
        PopMessageRequestHeader.from_ext({k: v for k, v in ext.items() if k != "consumerGroup"})


def test_checkpoint_json_is_fastjsons() -> None:
    ck = PopCheckPoint(5, 1000, 3000, 2, 1, "T", "G", queue_offset_diff=(0, 2), broker_name="b")
    assert body.dumps(ck.to_json()) == (
        b'{"bm":0,"bn":"b","c":"G","d":[0,2],"it":3000,"n":2,"pt":1000,"q":1,"ro":0,"so":5,"t":"T"}'
    )
    assert PopCheckPoint.from_json(body.loads(body.dumps(ck.to_json()))) == ck
    assert [ck.offset_at(0), ck.offset_at(1)] == [5, 7]
    assert [ck.index_of(5), ck.index_of(6), ck.index_of(7)] == [0, -1, 1]
    assert ck.with_acked(0).with_acked(1).all_acked and not ck.with_acked(1).all_acked
    old = PopCheckPoint.from_json({"so": 5, "pt": 1, "it": 2, "n": 3, "q": 0, "t": "T", "cId": "G", "reviveTime": 3})
    assert old.cid == "G" and old.index_of(7) == 2 and old.index_of(8) == -1  # no diffs: consecutive
    with pytest.raises(BodyError, match="'so'"):
        PopCheckPoint.from_json({"pt": 1})


def test_acks_json() -> None:
    ack = AckMsg(7, 5, "G", "T", 1, 1000, "b")
    assert body.dumps(ack.to_json()) == b'{"ao":7,"bn":"b","c":"G","pt":1000,"q":1,"so":5,"t":"T"}'
    assert AckMsg.from_json({"ackOffset": 7, "startOffset": 5, "consumerGroup": "G", "topic": "T", "queueId": 1,
                             "popTime": 1000, "brokerName": "b"}) == ack  # fmt: skip
    assert ack.key() == PopCheckPoint(5, 1000, 1, 1, 1, "T", "G", broker_name="b").key()
    batch = AckMsg.from_json({"aol": [5, 7], "so": 5, "c": "G", "t": "T", "q": 1, "pt": 1000})
    assert batch.is_batch and batch.offsets == (5, 7) and batch.ack_offset == -1


def test_batch_ack_bits_are_a_java_bitset_in_base64() -> None:
    ack = BatchAck("G", "T", "0", 10, 0, 3, 1, 2, frozenset({0, 9}))
    assert ack.to_json()["b"] == "AQI="  # BitSet{0, 9}.toByteArray() == [0x01, 0x02]
    req = BatchAckMessageRequestBody("b", (ack,))
    assert BatchAckMessageRequestBody.from_json(body.loads(body.dumps(req.to_json()))) == req
    with pytest.raises(BodyError, match="base64"):
        BatchAck.from_json({**ack.to_json(), "b": "!!"})
