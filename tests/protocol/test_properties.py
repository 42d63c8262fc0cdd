"""Properties string codec and Java String.hashCode (PROTOCOL.md 5.3, 5.4, 7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.protocol import properties as P


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("KEYS\x01k1\x02TAGS\x01TagA", {"KEYS": "k1", "TAGS": "TagA"}),
        ("KEYS\x01k1\x02TAGS\x01TagA\x02", {"KEYS": "k1", "TAGS": "TagA"}),  # cpp / old Java
        ("a\x01\x02\x01b\x02ok\x01v", {"ok": "v"}),  # empty value, empty key skipped
        ("ab\x02\x02x\x01y\x02\x02", {"x": "y"}),  # short and empty segments skipped
        ("k\x01v\x01w", {"k": "v\x01w"}),  # the name ends at the first \x01
        ("k\x01a\x02k\x01b", {"k": "b"}),  # a later duplicate wins, as in Java's HashMap
        ("中\x01文", {"中": "文"}),
    ],
)
def test_decode_properties(text: str, expected: dict[str, str]) -> None:
    assert P.decode_properties(text) == expected
    assert P.decode_properties(text.encode("utf-8")) == expected


def test_encode_properties_has_no_trailing_separator_and_skips_none() -> None:
    assert P.encode_properties({"KEYS": "a b", "TAGS": "t", "X": None}) == "KEYS\x01a b\x02TAGS\x01t"
    assert P.encode_properties({}) == ""
    assert P.encode_properties(None) == ""


_name = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1)


@given(st.dictionaries(_name, _name, max_size=8))
def test_round_trip(props: dict[str, str]) -> None:
    text = P.encode_properties(props)
    assert P.decode_properties(text) == props
    assert P.decode_properties(text + "\x02") == props


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),
        ("hello world", 1794106052),
        ("polygenelubricants", -2147483648),  # the classic Integer.MIN_VALUE hash
        ("中文", 646394),
        ("\U0001f600", 1772899),  # one code point, two UTF-16 units
    ],
)
def test_java_string_hash_known_values(s: str, h: int) -> None:
    assert P.java_string_hash(s) == h


def _reference_hash(s: str) -> int:
    raw = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_java_string_hash_matches_reference(s: str) -> None:
    assert P.java_string_hash(s) == _reference_hash(s)


def test_java_string_hash_long_string() -> None:
    s = "x" * 10000
    assert P.java_string_hash(s) == _reference_hash(s)


def test_split_keys() -> None:
    assert P.split_keys("a  b c") == ["a", "b", "c"]
    assert P.split_keys(None) == []
    assert P.split_keys("") == []


_any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))


@given(_any_text, _any_text)
def test_java_string_hash_extend(prefix: str, s: str) -> None:
    assert P.java_string_hash_extend(P.java_string_hash(prefix), s) == P.java_string_hash(prefix + s)


_int32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)


@given(
    st.integers(min_value=1, max_value=70).flatmap(
        lambda n: st.lists(
            st.tuples(_int32, st.text(st.characters(max_codepoint=127), min_size=n, max_size=n)), max_size=40
        )
    )
)
def test_java_string_hashes_of_many_equal_lengths(pairs: list[tuple[int, str]]) -> None:
    """Many ASCII strings of one length are hashed column by column; the result is each one's
    hash, whatever the count, length, prefix hash and characters (0 and 127 included)."""
    assert P.java_string_hashes(pairs) == [P.java_string_hash_extend(h, s) for h, s in pairs]


@given(st.lists(st.tuples(_int32, _any_text), min_size=12, max_size=40))
def test_java_string_hashes_of_mixed_strings(pairs: list[tuple[int, str]]) -> None:
    expected = [
        (h * pow(31, len(s.encode("utf-16-le")) // 2, 1 << 32) + (_reference_hash(s) & 0xFFFFFFFF)) & 0xFFFFFFFF
        for h, s in pairs
    ]
    assert P.java_string_hashes(iter(pairs)) == [v - (1 << 32) if v >= 1 << 31 else v for v in expected]


def test_java_string_hashes_of_uniq_keys() -> None:
    """The index's common case: a batch's 32-character UNIQ_KEYs after one topic's prefix."""
    prefix = P.java_string_hash("TopicTest#")
    keys = [(prefix, f"7F0000010001{i:04X}18B4AAC2{i * 7919:08X}") for i in range(64)]
    assert P.java_string_hashes(keys) == [P.java_string_hash(f"TopicTest#{s}") for _, s in keys]
