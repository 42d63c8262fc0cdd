"""A JSON header reads the same through orjson as through the standard library's scanner.

`decode_json` takes orjson's parse where it is plain and hands everything else to the
scanner (`_decode_scanned`); these tests hold the two to the same answer, or the same
refusal, for headers a peer may send: any scalar in extFields, integers past 64 bits, lone
surrogate escapes, NaN, nesting, whitespace around the object.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import RemoteProtocolError
from rmq.protocol.codes import LanguageCode
from rmq.protocol.header_codec import _decode_scanned, coerce_ext, decode_json


def outcome(parse: Any, header: bytes) -> Any:
    try:
        code, lang, version, opaque, flag, remark, raw = parse(header)
        ext = coerce_ext(raw)
    except RemoteProtocolError:
        return "refused"
    # types as well as values: an int read as a float would print differently
    return (code, lang, version, opaque, flag, remark, [(k, type(v), v) for k, v in ext.items()])


def assert_same(header: bytes) -> None:
    assert outcome(decode_json, header) == outcome(_decode_scanned, header)


SCALARS = (
    st.text(max_size=12)
    | st.integers()  # past 64 bits too: orjson reads those as floats
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.none()
)
VALUES = SCALARS | st.lists(SCALARS, max_size=3) | st.dictionaries(st.text(max_size=4), SCALARS, max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    ext=st.dictionaries(st.text(max_size=6), VALUES, max_size=6),
    code=st.integers() | st.text(max_size=3),
    opaque=st.integers(),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON", "GO", "NOPE"]) | st.integers(0, 20) | st.none(),
    remark=st.none() | st.text(max_size=8) | st.integers(),
    ascii_only=st.booleans(),
)
def test_any_header_reads_alike(
    ext: dict[str, Any], code: Any, opaque: int, language: Any, remark: Any, ascii_only: bool
) -> None:
    obj: dict[str, Any] = {"code": code, "extFields": ext, "flag": 0, "opaque": opaque, "version": 453}
    if language is not None:
        obj["language"] = language
    if remark is not None:
        obj["remark"] = remark
    assert_same(json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":10,"extFields":{"a":123456789012345678901234567890}}',  # a Java BigInteger
        b'{"code":10,"extFields":{"a":-9223372036854775809}}',
        b'{"code":10,"extFields":{"a":18446744073709551615}}',
        b'{"code":10,"opaque":123456789012345678901234567890}',
        b'{"code":10,"extFields":{"a":"x\\ud800y"}}',  # a lone surrogate: scrubbed to "?"
        b'{"code":10,"remark":"\\udc00"}',
        b'{"code":10,"extFields":{"a":"\\ud83d\\ude00"}}',  # a pair: one character
        b'{"code":10,"extFields":{"a":NaN}}',
        b'{"code":10,"extFields":{"a":1e400}}',
        b'{"code":10,"extFields":{"a":1.5,"b":[1,{"c":2}]}}',
        b'{"code":10,"extFields":{"a":"1","b":"x","a":"2"}}',  # a repeated key: the last one, first place
        b' \n{"code":10}\n',  # whitespace around the object
        b'{"code":10} x',
        b'{"code":10,"extFields":{"a":"\xff"}}',  # not UTF-8
        b'{"code":10,"extFields":{"a":"a\x01b"}}',  # a raw control character
        b"[1,2]",
        b"",
    ],
)
def test_edge_headers_read_alike(header: bytes) -> None:
    assert_same(header)


def test_the_plain_parse_is_the_scanners() -> None:
    header = (
        b'{"code":310,"extFields":{"a":"G","b":"T","i":"UNIQ_KEY\\u0001AB\\u0002TAGS\\u0001x"},'
        b'"flag":0,"language":"PYTHON","opaque":7,"serializeTypeCurrentRPC":"JSON","version":453}'
    )
    got = decode_json(header)
    assert got == _decode_scanned(header)
    assert got[:5] == (310, LanguageCode.PYTHON, 453, 7, 0)
    assert got[6]["i"] == "UNIQ_KEY\x01AB\x02TAGS\x01x"
    # a big integer keeps its digits, as Java's BigInteger would print them
    assert coerce_ext(decode_json(b'{"code":1,"extFields":{"a":123456789012345678901234567890}}')[6]) == {
        "a": "123456789012345678901234567890"
    }
