"""RemotingCommand: round trips in both serializations, golden bytes, extFields typing."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.protocol import (
    RPC_ONEWAY,
    RPC_TYPE,
    FrameDecoder,
    LanguageCode,
    ProtocolError,
    RemoteProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
)
from rmq.protocol.header_codec import decode_json
from rmq.protocol.headers import (
    V2_WRITERS,
    HeaderCommand,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def commands(draw: st.DrawFn, serialize_type: int) -> RemotingCommand:
    return RemotingCommand(
        draw(INT16),
        draw(st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6)),
        draw(st.binary(max_size=256)),
        remark=draw(st.none() | st.text(max_size=40)),
        opaque=draw(INT32),
        flag=draw(st.sampled_from([0, RPC_TYPE, RPC_ONEWAY]) | INT32),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(INT16),
        serialize_type=serialize_type,
    )


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    wire = cmd.encode()
    dec = FrameDecoder()
    dec.feed(wire)
    (frame,) = list(dec)
    assert dec.buffered == 0
    return RemotingCommand.decode(frame)


@given(commands(SerializeType.JSON))
def test_json_roundtrip(cmd: RemotingCommand) -> None:
    back = roundtrip(cmd)
    assert back == cmd
    assert back.serialize_type == SerializeType.JSON


@given(commands(SerializeType.ROCKETMQ))
def test_binary_roundtrip(cmd: RemotingCommand) -> None:
    back = roundtrip(cmd)
    assert back == cmd
    assert back.serialize_type == SerializeType.ROCKETMQ


def test_empty_binary_header_is_21_bytes() -> None:
    cmd = RemotingCommand(0, serialize_type=SerializeType.ROCKETMQ, language=LanguageCode.JAVA, version=0)
    wire = cmd.encode()
    length, word = struct.unpack_from(">ii", wire)
    assert word >> 24 == SerializeType.ROCKETMQ
    assert word & 0xFFFFFF == 21
    assert length == 4 + 21
    assert wire[8:] == bytes(21)


def test_json_header_shape() -> None:
    cmd = RemotingCommand(0, {"queueOffset": 41}, opaque=7, flag=RPC_TYPE, version=409, language=LanguageCode.JAVA)
    wire = cmd.encode()
    header = wire[8 : 8 + (struct.unpack_from(">i", wire, 4)[0] & 0xFFFFFF)]
    assert header == (
        b'{"code":0,"extFields":{"queueOffset":"41"},"flag":1,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )


def json_frame(header: dict[str, object] | str, body: bytes = b"") -> bytes:
    text = header if isinstance(header, str) else json.dumps(header)
    return encode_frame(0, text.encode(), body)[4:]


def test_incoming_ext_numbers_and_bools_read_as_strings() -> None:
    frame = json_frame(
        {
            "code": 10,
            "language": "CPP",
            "version": 63,
            "opaque": 3,
            "flag": 0,
            "remark": "",
            "extFields": {"queueId": 3, "sysFlag": 0, "unitMode": False, "batch": True, "ratio": 1.5, "gone": None},
        }
    )
    cmd = RemotingCommand.decode(frame)
    assert cmd.ext_fields == {
        "queueId": "3",
        "sysFlag": "0",
        "unitMode": "false",
        "batch": "true",
        "ratio": "1.5",
    }
    assert cmd.language == LanguageCode.CPP
    assert cmd.code == RequestCode.SEND_MESSAGE


def test_outgoing_ext_values_are_always_strings() -> None:
    cmd = RemotingCommand(0, {"queueId": 3, "ok": True, "no": False, "offset": 2**40, "skip": None})
    back = roundtrip(cmd)
    assert back.ext_fields == {"queueId": "3", "ok": "true", "no": "false", "offset": str(2**40)}
    header = json.loads(cmd.encode()[8:].decode())
    assert all(isinstance(v, str) for v in header["extFields"].values())
    binary = RemotingCommand(0, {"queueId": 3}, serialize_type=SerializeType.ROCKETMQ)
    assert roundtrip(binary).ext_fields == {"queueId": "3"}


def test_make_response_keeps_opaque_and_serialization() -> None:
    req = RemotingCommand.request(RequestCode.HEART_BEAT, serialize_type=SerializeType.ROCKETMQ)
    req.opaque = 99
    resp = req.make_response(ResponseCode.SYSTEM_BUSY, "busy", {"a": 1}, b"b")
    assert (resp.opaque, resp.serialize_type, resp.code, resp.remark) == (99, SerializeType.ROCKETMQ, 2, "busy")
    assert resp.is_response and not resp.is_oneway
    assert resp.ext_fields == {"a": "1"}
    oneway = RemotingCommand.request(RequestCode.END_TRANSACTION, oneway=True)
    assert oneway.is_oneway and not oneway.is_response


def test_unknown_language_name_decodes_as_other() -> None:
    cmd = RemotingCommand.decode(json_frame({"code": 1, "language": "COBOL"}))
    assert cmd.language == LanguageCode.OTHER


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x00",  # no header-length word
        struct.pack(">i", 100) + b"{}",  # header length beyond the frame
        struct.pack(">i", (7 << 24) | 2) + b"{}",  # unknown serialize type
        json_frame("{not json"),
        json_frame("[1, 2]"),
        json_frame('{"code": "ten"}'),
        json_frame('{"code": 1, "language": []}'),
        json_frame('{"code": 1, "extFields": [1]}'),
        json_frame('{"code": 1, "opaque": true}'),
        struct.pack(">i", (1 << 24) | 5) + bytes(5),  # binary header below 21 bytes
        encode_frame(1, bytes(13) + struct.pack(">i", 99) + bytes(4))[4:],  # remark length beyond header
        encode_frame(1, bytes(13) + struct.pack(">ii", 0, 5) + b"x")[4:],  # ext block length mismatch
        encode_frame(0, b"\xff\xfe")[4:],  # not UTF-8
    ],
)
def test_bad_headers_raise_remote_protocol_error(frame: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        RemotingCommand.decode(frame)


def test_bad_binary_ext_block_raises_when_read() -> None:
    header = bytes(13) + struct.pack(">i", 0) + struct.pack(">i", 3) + b"\x00\x09k"  # key length 9 > block
    cmd = RemotingCommand.decode(encode_frame(1, header)[4:])
    with pytest.raises(RemoteProtocolError):
        _ = cmd.ext_fields


@given(st.binary(max_size=300))
def test_random_frames_raise_only_protocol_errors(data: bytes) -> None:
    try:
        cmd = RemotingCommand.decode(data)
        _ = cmd.ext_fields
        cmd.encode()
    except ProtocolError:
        pass


# -- HeaderCommand: a send's answer, written from its header ---------------------------------


def _generic_send_response(request: RemotingCommand, code: int, fields: tuple[str, int, int, str, bool]) -> bytes:
    msg_id, queue_id, queue_offset, region, trace_on = fields
    ext = {
        "msgId": msg_id,
        "queueId": queue_id,
        "queueOffset": queue_offset,
        "MSG_REGION": region,
        "TRACE_ON": "true" if trace_on else "false",
    }
    return request.make_response(code, None, ext).encode()


def _answer(
    request: RemotingCommand, code: int, fields: tuple[str, int, int, str, bool], remark: str | None = None
) -> HeaderCommand:
    msg_id, queue_id, queue_offset, region, trace_on = fields
    header = SendMessageResponseHeader(
        msg_id, queue_id, queue_offset, msg_region=region, trace_on="true" if trace_on else "false"
    )
    return HeaderCommand.response_to(request, code, header, remark)


_send_fields = st.tuples(
    st.text(max_size=40),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=20),
    st.booleans(),
)


@given(
    fields=_send_fields,
    code=st.sampled_from([ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, 0, 12]),
    opaque=st.integers(0, 2**31 - 1),
    binary=st.booleans(),
)
def test_send_response_is_the_generic_encoding(
    fields: tuple[str, int, int, str, bool], code: int, opaque: int, binary: bool
) -> None:
    stype = SerializeType.ROCKETMQ if binary else SerializeType.JSON
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"x", serialize_type=stype)
    request.opaque = opaque
    fast = _answer(request, code, fields)
    assert fast.encode() == _generic_send_response(request, code, fields)
    # decodes as any response, with the header's fields as extFields
    frame = fast.encode()
    decoded = RemotingCommand.decode(frame[4:])
    assert decoded.is_response and decoded.opaque == opaque and decoded.code == code
    assert decoded.ext_fields["queueOffset"] == str(fields[2])
    assert decoded.ext_fields["msgId"] == fields[0]


def test_send_response_with_a_remark_or_changed_fields_is_encoded_generically() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"x")
    request.opaque = 9
    fields = ("7F000001000029C40000000000001234", 1, 2, "DefaultRegion", False)
    with_remark = _answer(request, ResponseCode.SUCCESS, fields, remark="slow disk")
    expected = request.make_response(
        ResponseCode.SUCCESS,
        "slow disk",
        {"msgId": fields[0], "queueId": "1", "queueOffset": "2", "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"},
    )
    assert with_remark.encode() == expected.encode()
    changed = _answer(request, ResponseCode.SUCCESS, fields)
    changed.ext_fields["extra"] = "yes"  # e.g. a hook adding a field: it must not be lost
    assert json.loads(changed.encode()[8:])["extFields"]["extra"] == "yes"
    # the connection sets the request's opaque again before it writes the answer
    fresh = _answer(request, ResponseCode.SUCCESS, fields)
    fresh.opaque = 41
    expected.remark = None
    expected.opaque = 41
    assert fresh.encode() == expected.encode()


# -- HeaderCommand: a producer's send request, written from its header -----------------------

_opt_int = st.none() | st.integers(-(2**31), 2**31 - 1)
_opt_bool = st.none() | st.booleans()


@st.composite
def _send_headers(draw: st.DrawFn) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group=draw(st.text(max_size=20)),
        topic=draw(st.text(max_size=20)),
        default_topic=draw(st.text(max_size=10)),
        default_topic_queue_nums=draw(INT32),
        queue_id=draw(INT32),
        sys_flag=draw(INT32),
        born_timestamp=draw(st.integers(0, 2**63 - 1)),
        flag=draw(INT32),
        properties=draw(st.none() | st.text(max_size=60)),
        reconsume_times=draw(_opt_int),
        unit_mode=draw(_opt_bool),
        max_reconsume_times=draw(_opt_int),
        batch=draw(_opt_bool),
        bname=draw(st.none() | st.text(max_size=8)),
    )


@given(header=_send_headers(), opaque=st.integers(0, 2**31 - 1), oneway=st.booleans(), body=st.binary(max_size=64))
def test_send_request_is_the_generic_encoding(
    header: SendMessageRequestHeader, opaque: int, oneway: bool, body: bytes
) -> None:
    fast = HeaderCommand.make(RequestCode.SEND_MESSAGE_V2, header, body, writers=V2_WRITERS)
    generic = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), body)
    for cmd in (fast, generic):  # what the connection sets before it writes a request
        cmd.opaque = opaque
        cmd.flag = RPC_ONEWAY if oneway else 0
    assert fast.encode() == generic.encode()
    decoded = RemotingCommand.decode(fast.encode()[4:])
    assert SendMessageRequestHeader.from_v2_ext(decoded.ext_fields) == header
    assert decoded.body == body


def test_a_signed_send_request_keeps_its_signature() -> None:
    header = SendMessageRequestHeader(producer_group="g", topic="T", queue_id=1, properties="a\x01b\x02")
    fast = HeaderCommand.make(RequestCode.SEND_MESSAGE_V2, header, b"body", writers=V2_WRITERS)
    fast.ext_fields["AccessKey"] = "ak"  # as acl.sign adds its fields
    assert RemotingCommand.decode(fast.encode()[4:]).ext_fields["AccessKey"] == "ak"
    fast.ext_fields = {"b": "T2"}
    assert fast.ext_fields == {"b": "T2"}


@given(
    group=st.text(max_size=10),
    offset=st.integers(-(2**63), 2**63 - 1),
    subscription=st.none() | st.text(max_size=20),
    max_bytes=st.none() | INT32,
)
def test_any_header_command_is_the_generic_encoding(
    group: str, offset: int, subscription: str | None, max_bytes: int | None
) -> None:
    header = PullMessageRequestHeader(group, "T", 3, offset, subscription=subscription, max_msg_bytes=max_bytes)
    fast = HeaderCommand.make(RequestCode.PULL_MESSAGE, header)
    generic = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    assert fast.encode() == generic.encode()
    assert fast.ext_fields == header.to_ext()


def test_json_header_integers_given_as_strings_are_coerced_and_bad_ones_named() -> None:
    """The four integer fields take the inline path only when all are JSON ints; strings are
    coerced, anything else is refused naming the field."""
    got = decode_json(b'{"code":"12","extFields":{},"flag":0,"language":"JAVA","opaque":"7","version":"399"}')
    assert got[0] == 12 and got[2:5] == (399, 7, 0)
    assert decode_json(b'{"code":3}')[:5] == (3, LanguageCode.JAVA, 0, 0, 0)
    for field, value in (("code", "true"), ("version", '"v1"'), ("opaque", "1.5"), ("flag", "null")):
        fields = {"code": "1", "version": "1", "opaque": "1", "flag": "1", field: value}
        text = "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"
        with pytest.raises(RemoteProtocolError, match=repr(field)):
            decode_json(text.encode())
