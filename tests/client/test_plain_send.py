"""The plain send's fast path writes and reads exactly what the general path does."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.client import Message, Producer, SendStatus
from rmq.client.api import ClientAPI
from rmq.client.errors import MQBrokerError, MQClientError
from rmq.client.ids import UniqueIdGenerator
from rmq.client.latency import _STEPS, not_available_duration
from rmq.client.message import MessageQueue, SendResult
from rmq.client.plain_send import SendRequest, SendTemplate, send_result
from rmq.client.route import PublishInfo, TopicRoute
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import headers as H
from rmq.protocol import properties as P
from rmq.remoting import Dispatcher, RequestContext
from rmq.remoting.testing import serve_on_loopback

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
ints = st.integers(-(2**31), 2**31 - 1)
props = st.dictionaries(names, text, max_size=4)


def general(group: str, mq: MessageQueue, default: str, nums: int, born: int, flag: int, p: str, body: bytes):
    header = H.SendMessageRequestHeader(
        producer_group=group,
        topic=mq.topic,
        default_topic=default,
        default_topic_queue_nums=nums,
        queue_id=mq.queue_id,
        sys_flag=0,
        born_timestamp=born,
        flag=flag,
        properties=p,
        reconsume_times=0,
        unit_mode=False,
        max_reconsume_times=None,
        batch=False,
    )
    return H.HeaderCommand.make(RequestCode.SEND_MESSAGE_V2, header, body, writers=H.V2_WRITERS)


@given(
    group=names,
    topic=names,
    broker=names,
    queue_id=ints,
    default=names,
    nums=ints,
    born=st.integers(0, 2**63 - 1),
    flag=ints,
    properties=props,
    body=st.binary(max_size=64),
    opaque=ints,
)
def test_request_bytes_and_fields_match_the_general_codec(
    group: str,
    topic: str,
    broker: str,
    queue_id: int,
    default: str,
    nums: int,
    born: int,
    flag: int,
    properties: dict[str, str],
    body: bytes,
    opaque: int,
) -> None:
    mq = MessageQueue(topic, broker, queue_id)
    p = P.encode_properties(properties)
    fast = SendRequest(SendTemplate(group, mq, default, nums), born, flag, p, body)
    slow = general(group, mq, default, nums, born, flag, p, body)
    fast.opaque = slow.opaque = opaque
    assert fast.encode() == slow.encode()
    assert fast.ext_fields == slow.ext_fields
    # once the dict was asked for (to sign it, say) a change to it is what goes out
    fast.ext_fields["Signature"] = slow.ext_fields["Signature"] = "x"
    assert fast.encode() == slow.encode()
    assert RemotingCommand.decode(fast.encode()[4:]) == slow


def test_a_request_as_the_connection_sends_it() -> None:
    mq = MessageQueue("T", "b", 1)
    fast = SendRequest(SendTemplate("g", mq, "TBW102", 4), 17, 0, "UNIQ_KEY\x01AB", b"hi")
    slow = general("g", mq, "TBW102", 4, 17, 0, "UNIQ_KEY\x01AB", b"hi")
    for cmd in (fast, slow):  # what Connection._request_frame does
        cmd.opaque = 9
        cmd.flag &= ~3
    assert fast.encode() == slow.encode()


def response(code: int, ext: dict[str, str], remark: str | None = None) -> RemotingCommand:
    cmd = RemotingCommand(code, ext, remark=remark, flag=1)
    return RemotingCommand.decode(cmd.encode()[4:])


def general_result(resp: RemotingCommand, mq: MessageQueue, msg_id: str) -> SendResult:
    """ClientAPI.send_message's reading of an answer."""
    from rmq.client.api import _SEND_STATUS

    status = _SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, address="a")
    h = ClientAPI._header(H.SendMessageResponseHeader, resp, "a")
    return SendResult(
        status=status,
        msg_id=msg_id,
        offset_msg_id=h.msg_id,
        message_queue=MessageQueue(mq.topic, mq.broker_name, h.queue_id),
        queue_offset=h.queue_offset,
        transaction_id=h.transaction_id,
        region_id=h.msg_region or "DefaultRegion",
        trace_on=h.trace_on != "false",
    )


def test_send_result_fields_are_the_ones_send_result_sets() -> None:
    names = [f.name for f in dataclasses.fields(SendResult)]
    assert names == [
        "status",
        "msg_id",
        "offset_msg_id",
        "message_queue",
        "queue_offset",
        "transaction_id",
        "region_id",
        "trace_on",
    ]


numbers = st.one_of(st.integers(-(2**64), 2**64).map(str), st.sampled_from(["", "x", " 5", "1_0", "+3"]))


@given(
    code=st.sampled_from([0, 10, 11, 12, 1, 17, 14]),
    msg_id=st.one_of(st.none(), text),
    queue_id=st.one_of(st.none(), numbers),
    offset=st.one_of(st.none(), numbers),
    extra=st.dictionaries(st.sampled_from(["transactionId", "MSG_REGION", "TRACE_ON"]), text),
    own_queue=ints,
)
def test_response_reading_matches_the_general_path(
    code: int,
    msg_id: str | None,
    queue_id: str | None,
    offset: str | None,
    extra: dict[str, str],
    own_queue: int,
) -> None:
    ext = dict(extra)
    for key, value in (("msgId", msg_id), ("queueId", queue_id), ("queueOffset", offset)):
        if value is not None:
            ext[key] = value
    resp = response(code, ext, "why")
    mq = MessageQueue("T", "b", own_queue)
    try:
        want: SendResult | MQClientError = general_result(resp, mq, "ID")
    except MQClientError as exc:
        want = exc
    try:
        got: SendResult | MQClientError = send_result(response(code, ext, "why"), "a", mq, "ID")
    except MQClientError as exc:
        got = exc
    if isinstance(want, MQClientError):
        assert type(got) is type(want) and str(got) == str(want)
    else:
        assert got == want


@given(st.integers(-(2**40), 2**40), st.integers(0, 2**20))
def test_uniq_id_suffix_is_the_packed_one(diff: int, counter: int) -> None:
    month = int(datetime.datetime(2024, 3, 1).timestamp() * 1000)
    gen = UniqueIdGenerator("10.1.2.3", pid=7, loader_hash=5, clock=lambda: month + diff)
    gen._start, gen._next_start = month, month + 2**62  # no month rollover in play
    gen._counter = iter([counter])  # type: ignore[assignment]
    d = 0 if -1_000_000 < diff < 0 else diff
    packed = struct.pack(">iH", ((d + 2**31) % 2**32) - 2**31, counter % 2**16).hex().upper()
    assert gen.next_id() == gen._fixed + packed


@given(st.floats(0, 100))
def test_latency_shortcut_matches_the_steps(latency: float) -> None:
    want = next((d for t, d in _STEPS if latency >= t), 0.0)
    assert not_available_duration(latency) == want


@pytest.mark.parametrize("code", [ResponseCode.SYSTEM_BUSY, ResponseCode.TOPIC_NOT_EXIST])
def test_a_refusal_is_a_broker_error(code: int) -> None:
    with pytest.raises(MQBrokerError) as info:
        send_result(response(code, {}, "busy"), "a", MessageQueue("T", "b", 0), "ID")
    assert info.value.response_code == code


# --- through a Producer, against fake brokers -------------------------------------------


def two_broker_route(first: str, second: str) -> TopicRoute:
    return TopicRoute.from_json(
        {
            "brokerDatas": [
                {"brokerAddrs": {"0": first}, "brokerName": "a", "cluster": "C"},
                {"brokerAddrs": {"0": second}, "brokerName": "b", "cluster": "C"},
            ],
            "queueDatas": [
                {"brokerName": name, "perm": 6, "readQueueNums": 2, "writeQueueNums": 2} for name in ("a", "b")
            ],
        }
    )


def answering(code: int, seen: list[dict[str, str]]) -> Dispatcher:
    async def send(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        seen.append(dict(request.ext_fields))
        ext = {"msgId": "OFFSETID", "queueId": request.ext_fields["e"], "queueOffset": "7"}
        return request.make_response(code, "as told", ext)

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE_V2, send)
    return dispatcher


@pytest.mark.parametrize(
    ("code", "not_ok_elsewhere", "status"),
    [
        (ResponseCode.SYSTEM_ERROR, False, SendStatus.SEND_OK),  # retriable: tried on b
        (ResponseCode.FLUSH_DISK_TIMEOUT, True, SendStatus.SEND_OK),  # stored, not flushed: b
        (ResponseCode.FLUSH_DISK_TIMEOUT, False, SendStatus.FLUSH_DISK_TIMEOUT),  # as a's answer
    ],
)
async def test_a_failed_first_attempt_is_retried_as_before(
    code: int, not_ok_elsewhere: bool, status: SendStatus
) -> None:
    """A plain send's first attempt fails on broker a: the general path's retry takes it to
    b (or returns a's answer), and fault avoidance marks a; a's request is the general
    path's, field for field."""
    seen_a: list[dict[str, str]] = []
    seen_b: list[dict[str, str]] = []
    async with (
        serve_on_loopback(answering(code, seen_a)) as a,
        serve_on_loopback(answering(ResponseCode.SUCCESS, seen_b)) as b,
    ):
        route = two_broker_route(a.address, b.address)
        options: dict[str, Any] = {"retry_another_broker_when_not_store_ok": not_ok_elsewhere}
        async with Producer("pg_plain", "127.0.0.1:1", send_latency_fault_enable=True, **options) as producer:
            producer.instance.store_route("Plain", route)
            info = producer._publish["Plain"] = PublishInfo("Plain", route)
            info._index = itertools.count(0)  # the first send goes to a's queue 0
            result = await producer.send(Message("Plain", b"x", tags="t"))
            assert result.status is status
            assert result.message_queue.broker_name == ("a" if status is not SendStatus.SEND_OK else "b")
            assert result.offset_msg_id == "OFFSETID" and result.queue_offset == 7
            assert len(seen_a) == 1 and len(seen_b) == (0 if result.message_queue.broker_name == "a" else 1)
            if code == ResponseCode.SYSTEM_ERROR:
                assert producer._faults is not None and not producer._faults.is_available("a")
            # the same message through the general path (a queue given): the same fields
            with contextlib.suppress(MQClientError):
                await producer.send(Message("Plain", b"x", tags="t"), queue=MessageQueue("Plain", "a", 0))
    plain, general = seen_a[0], seen_a[-1]
    assert plain.keys() == general.keys()
    assert {k: v for k, v in plain.items() if k not in "gi"} == {k: v for k, v in general.items() if k not in "gi"}
    assert P.decode_properties(plain["i"]).keys() == P.decode_properties(general["i"]).keys()
