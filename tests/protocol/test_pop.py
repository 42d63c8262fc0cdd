"""POP's sans-IO vocabulary against the forms RocketMQ 5.3.3 writes (ExtraInfoUtil, KeyBuilder,
fastjson with the @JSONField names of PopCheckPoint, AckMsg, BatchAckMsg and BatchAck)."""

from __future__ import annotations

import pytest

from rmq.protocol import RequestCode, ResponseCode, body
from rmq.protocol.bodies.pop import (
    AckMsg,
    BatchAck,
    BatchAckMessageRequestBody,
    ConsumerOrderInfoWrapper,
    OrderInfo,
    PopCheckPoint,
)
from rmq.protocol.errors import BodyError, HeaderError
from rmq.protocol.message import MessageExt
from rmq.protocol.pop import (
    ExtraInfo,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    offset_info,
    order_count_info,
    order_counts,
    parse_offset_info,
    parse_order_count_info,
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


# fastjson's form of a ConsumerOrderInfoManager: unquoted queue ids and offsets, the OrderInfo's
# @JSONField names sorted, offsetList as the first offset then differences from it
ORDER_INFO_FILE = (
    b'{"table":{"T@G":{0:{"a":"x","cm":1,"i":60000,"l":1700000000100,"o":[5,1,3],"oc":{6:1},'
    b'"ot":{6:1700000090000},"popTime":1700000000000}}}}'
)


def test_order_info_json_is_fastjsons() -> None:
    wrapper = ConsumerOrderInfoWrapper.from_json(body.loads(ORDER_INFO_FILE))
    info = wrapper.table["T@G"][0]
    assert info == OrderInfo(1700000000000, (5, 6, 8), 60000, {6: 1700000090000}, {6: 1}, 1700000000100, 1, "x")
    assert body.dumps(wrapper.to_json(), legacy=True) == ORDER_INFO_FILE
    assert b"".join(wrapper.pieces()) == ORDER_INFO_FILE
    one = OrderInfo(7, (3,), 1000)
    assert body.dumps(one.to_json()) == b'{"cm":0,"i":1000,"l":0,"o":[3],"popTime":7}'
    with pytest.raises(BodyError):
        OrderInfo.from_json({"o": ["x"]})


def test_order_info_blocks_until_acked_or_visible() -> None:
    info = OrderInfo(1000, (5, 6, 8), 60_000)
    assert info.need_block(None, 30_000, 2000) and info.lock_free_time(2000) == 61_000
    assert not info.need_block(None, 30_000, 61_000) and info.lock_free_time(61_000) == 61_000
    assert info.next_offset() == 5
    acked = info.with_commit(5)
    assert acked is not None and acked.next_offset() == 6 and info.with_commit(7) is None
    later = acked.with_commit(8)
    assert later is not None and later.next_offset() == 6  # 6 is still unacked
    done = later.with_commit(6)
    assert done is not None and done.next_offset() == 9 and not done.need_block(None, 1, 2000)
    # a change of invisible time of message 6 keeps the queue blocked until then
    changed = info.with_next_visible(6, 90_000)
    assert changed.need_block(None, 1, 70_000) and changed.lock_free_time(70_000) == 90_000
    assert not OrderInfo(1000, (5,), 60_000, attempt_id="a").need_block("a", 1, 2000)  # the same attempt


def test_order_info_counts_what_is_popped_again() -> None:
    first = OrderInfo(1000, (5, 6), 60_000, attempt_id="a")
    second = OrderInfo(70_000, (6, 7), 60_000, attempt_id="b").counted_after(first)
    assert second.consumed == {6: 1}
    third = OrderInfo(140_000, (6, 7), 60_000, attempt_id="c").counted_after(second)
    assert third.consumed == {6: 2, 7: 1}
    same = OrderInfo(140_001, (6, 7), 60_000, attempt_id="c").counted_after(third)
    assert same.consumed == {6: 2, 7: 1}  # a repeated attempt is not counted again


def test_order_count_info_as_extra_info_util_builds_it() -> None:
    text = order_count_info("T", 2, {6: 2, 5: 1}, 1) + ";" + order_count_info("T", 3, {}, 0)
    assert text == "0 qo2%5 1;0 qo2%6 2;0 2 1;0 3 0"
    assert parse_order_count_info(text) == {"0@qo2%5": 1, "0@qo2%6": 2, "0@2": 1, "0@3": 0}
    with pytest.raises(HeaderError):
        parse_order_count_info("0 2")
    with pytest.raises(HeaderError):
        parse_order_count_info("0 2 1;0 2 1")
    header = PopMessageResponseHeader(1000, 30000, 999, 0, "0 2 5;0 3 0", "0 2 5,6;0 3 0", text)
    messages = [
        MessageExt("T", b"a", queue_id=2, queue_offset=5),
        MessageExt("T", b"b", queue_id=2, queue_offset=6),
        MessageExt("T", b"c", queue_id=3, queue_offset=0),
    ]
    order_counts(header, messages)
    assert [m.reconsume_times for m in messages] == [1, 2, 0]


def test_peek_notification_and_polling_info_headers() -> None:
    peek = {"topic": "T", "queueId": "-1", "maxMsgNums": "4", "consumerGroup": "G"}
    assert PeekMessageRequestHeader.from_ext(peek).to_ext() == peek
    note = {"consumerGroup": "G", "topic": "T", "queueId": "0", "pollTime": "20000", "bornTime": "1700000000000"}
    header = NotificationRequestHeader.from_ext({**note, "order": "true", "attemptId": "a"})
    assert header.born_time == 1700000000000 and header.order is True and header.attempt_id == "a"
    assert NotificationResponseHeader(True).to_ext() == {"hasMsg": "true", "pollingFull": "false"}
    info = {"consumerGroup": "G", "topic": "T", "queueId": "-1"}
    assert PollingInfoRequestHeader.from_ext(info).queue_id == -1
    assert PollingInfoResponseHeader.from_ext({"pollingNum": "3"}).polling_num == 3
    with pytest.raises(HeaderError, match="pollTime"):
        NotificationRequestHeader.from_ext({k: v for k, v in note.items() if k != "pollTime"})
