"""The sans-IO decoders on hostile bytes: ProtocolError is the only exception allowed.

A short hypothesis run per decoder of rmq/fuzzing/targets.py (random bytes, and the
well-formed seeds with bytes flipped, cut, repeated and spliced), plus the inputs that found
the bugs fixed so far. The long coverage-guided run is `python bench/fuzz_decoders.py`.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.fuzzing.targets import SEEDS, TARGETS, run
from rmq.protocol import RemotingCommand, encode_frame
from rmq.protocol import body as json_body
from rmq.protocol.errors import HeaderError, RemoteProtocolError
from rmq.protocol.headers import CreateTopicRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader
from rmq.protocol.properties import java_string_hash

NAMES = sorted(TARGETS)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A seed with a few edits: flipped bytes, interesting integers, cuts, repeats, splices."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.integers(0, 5))
        at = draw(st.integers(0, len(data)))
        if op == 0 and data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        elif op == 1 and len(data) >= 4:
            value = draw(st.sampled_from([0, 1, 0x7F, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
            at = min(at, len(data) - 4)
            data[at : at + 4] = struct.pack(">I", value)
        elif op == 2:
            del data[at : at + draw(st.integers(1, 64))]
        elif op == 3:
            data[at:at] = data[at : at + draw(st.integers(1, 16))] * draw(st.integers(2, 50))
        elif op == 4:
            data[at:at] = draw(st.sampled_from([b"{", b"[", b'"', b"\\u", b"\\ud800", b"\x01", b"\x02", b"9" * 40]))
        else:
            data[at:] = draw(st.sampled_from(seeds))[draw(st.integers(0, 64)) :]
    return bytes(data)


def inputs(name: str) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), mutated(SEEDS[name]))


@pytest.mark.parametrize("name", NAMES)
def test_seeds_decode(name: str) -> None:
    for seed in SEEDS[name]:
        assert run(name, seed) is None


@pytest.mark.parametrize("name", NAMES)
def test_decoder_raises_only_protocol_errors(name: str) -> None:
    @FUZZ
    @given(inputs(name))
    def check(data: bytes) -> None:
        exc = run(name, data)
        assert exc is None, f"{name} raised {exc!r} on {data[:200]!r}"

    check()


# -- the bugs the fuzzers found, fixed in rmq/protocol --------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("name", "data"),
    [
        # RecursionError from the JSON scanner on a deeply nested header (was not a ProtocolError)
        ("command_json", b'{"code":1,"extFields":{"a":' + DEEP + b"}}"),
        # ... and from json.loads on a deeply nested body
        ("body_json", DEEP),
        # ValueError from int() in the lenient body parser: more digits than Python converts
        ("body_json", b"{1:" + b"9" * 5000 + b"}"),
        ("body_json", b"[" + b"9" * 5000 + b"]"),
    ],
)
def test_regressions(name: str, data: bytes) -> None:
    assert run(name, data) is None
    with pytest.raises(RemoteProtocolError):
        TARGETS[name](data)


def test_lone_surrogates_become_question_marks() -> None:
    """A \\ud800 escape decodes to a lone surrogate, which no answer can encode; a peer that
    registered a topic or KV entry with one made later answers fail. Read as Java writes it."""
    header = b'{"code":1,"remark":"r\\ud800","extFields":{"k\\udc00":"a\\ud800b","ok":"\\ud83d\\ude00"}}'
    cmd = RemotingCommand.decode(encode_frame(0, header)[4:])
    assert cmd.remark == "r?"
    assert cmd.ext_fields == {"k?": "a?b", "ok": "\U0001f600"}
    cmd.encode()
    body = json_body.loads(b'{{"topic":"t\\ud800","brokerName":"b","queueId":1}:["\\udfff"]}')
    assert body == {json_body.MQKey("t?", "b", 1): ["?"]}
    json_body.dumps(body)
    assert java_string_hash("\ud800") == 0xD800  # Java hashes the lone UTF-16 unit


@pytest.mark.parametrize(
    ("cls", "ext"),
    [
        (SendMessageRequestHeader, {"producerGroup": "g", "topic": "t", "flag": str(2**31)}),
        (SendMessageRequestHeader, {"producerGroup": "g", "topic": "t", "queueId": str(-(2**31) - 1)}),
        (SendMessageRequestHeader, {"producerGroup": "g", "topic": "t", "bornTimestamp": str(2**63)}),
        (CreateTopicRequestHeader, {"topic": "t", "writeQueueNums": str(2**64)}),
        (PullMessageRequestHeader, {"consumerGroup": "g", "topic": "t", "queueId": "0", "queueOffset": "9" * 30}),
    ],
)
def test_numbers_must_fit_the_java_type(cls: type, ext: dict[str, str]) -> None:
    """A flag beyond int32 used to reach the store's struct.pack and fail mid-record."""
    with pytest.raises(HeaderError, match="does not fit a Java"):
        cls.from_ext(ext)


def test_numbers_at_the_java_limits_are_read() -> None:
    h = SendMessageRequestHeader.from_ext(
        {"producerGroup": "g", "topic": "t", "flag": str(2**31 - 1), "bornTimestamp": str(-(2**63))}
    )
    assert (h.flag, h.born_timestamp) == (2**31 - 1, -(2**63))
