"""SendAnswer, the send's answer encoded in one piece: the same frames as the general codec
(HeaderCommand.response_to), over generated answers and the captured brokers' answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import RPC_ONEWAY, RPC_TYPE, FrameDecoder, RemotingCommand, SerializeType
from rmq.protocol.headers import HeaderCommand, SendAnswer, SendMessageResponseHeader
from tests.conftest import VECTORS_DIR

JAVA_INT = st.integers(-(2**31), 2**31 - 1)
JAVA_LONG = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)  # quotes, backslashes, control characters, lone surrogates
HEADERS = st.builds(
    SendMessageResponseHeader,
    msg_id=st.one_of(st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=32), TEXT),
    queue_id=st.one_of(JAVA_INT, st.integers()),
    queue_offset=st.one_of(JAVA_LONG, st.integers(0, 10**12)),
    transaction_id=st.one_of(st.none(), TEXT),
    msg_region=st.one_of(st.just("DefaultRegion"), st.none(), TEXT),
    trace_on=st.one_of(st.sampled_from(["true", "false"]), st.none(), TEXT),
)


def _request(opaque: int, serialize_type: int) -> RemotingCommand:
    request = RemotingCommand.request(310, serialize_type=serialize_type)
    request.opaque = opaque
    return request


def _sent(answer: RemotingCommand, request: RemotingCommand) -> bytes | type[BaseException]:
    """What the connection writes for `answer` (rmq.remoting.connection._encode_response), or
    the type of what encoding raised."""
    answer.opaque = request.opaque
    answer.flag = (answer.flag | RPC_TYPE) & ~RPC_ONEWAY
    answer.serialize_type = request.serialize_type
    try:
        return answer.encode()
    except Exception as exc:  # noqa: BLE001 - the general way must raise the same
        return type(exc)


@settings(max_examples=400)
@given(
    header=HEADERS,
    code=st.one_of(st.sampled_from([0, 10, 11, 12, 14]), st.integers(-(2**15), 2**15 - 1)),
    remark=st.one_of(st.none(), TEXT),
    opaque=st.one_of(st.integers(0, 2**31 - 1), st.integers(-(2**31), -1)),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)
def test_an_answer_is_the_general_codecs_frame(
    header: SendMessageResponseHeader, code: int, remark: str | None, opaque: int, serialize_type: int
) -> None:
    request = _request(opaque, serialize_type)
    fast = SendAnswer.to(request, code, header, remark)
    general = HeaderCommand.response_to(request, code, header, remark)
    assert _sent(fast, request) == _sent(general, request)
    assert fast == general  # fields and extFields alike


def _captured_answers() -> list[Path]:
    return sorted(VECTORS_DIR.glob("*/frames/*-s2c-broker-resp-SEND_MESSAGE*.bin"))


def test_the_captured_answers_are_there() -> None:
    assert len(_captured_answers()) >= 8


@pytest.mark.parametrize("path", _captured_answers(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_a_captured_answer_comes_out_as_the_general_codec_writes_it(path: Path) -> None:
    """A broker's answer to a C++ client's send, made again from its fields: byte for byte
    what the general codec writes, and the same command as captured."""
    decoder = FrameDecoder()
    decoder.feed(path.read_bytes())
    (frame,) = list(decoder)
    captured = RemotingCommand.decode(frame)
    header = SendMessageResponseHeader.from_ext(captured.ext_fields)
    request = _request(captured.opaque, captured.serialize_type)
    answers = []
    for make in (SendAnswer.to, HeaderCommand.response_to):
        answer = make(request, captured.code, header, captured.remark)
        answer.language, answer.version = captured.language, captured.version
        answers.append(_sent(answer, request))
    assert answers[0] == answers[1]
    again = RemotingCommand.decode(answers[0][4:])  # type: ignore[index]
    assert again == captured
