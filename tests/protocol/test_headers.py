"""The generated header readers (Header.from_ext, SendMessageRequestHeader.from_v2_ext): the
same headers and the same errors as a plain loop over the field table."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import headers as H
from rmq.protocol.errors import HeaderError

HEADER_CLASSES = sorted(
    (c for c in vars(H).values() if isinstance(c, type) and issubclass(c, H.Header) and dataclasses.is_dataclass(c)),
    key=lambda c: c.__name__,
)


def _reference(cls: type[H.Header], ext: dict[str, str], rename: dict[str, str]) -> H.Header:
    """What a reader must do: each field from its wire name, parsed as its kind says."""
    kw: dict[str, Any] = {}
    for attr, wire, kind, required in cls._fields():
        raw = ext.get(rename.get(wire, wire))
        if raw is None:
            if required:
                raise HeaderError(f"the header field {wire!r} is missing in {cls.__name__}")
            continue
        if kind in ("int", "long"):
            kw[attr] = H._int_value(raw, wire, kind)
        elif kind == "bool":
            kw[attr] = H.parse_bool(raw)
        else:
            kw[attr] = raw
    return cls(**kw)


def _outcome(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except HeaderError as exc:
        return (HeaderError, str(exc))


VALUES = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["0", "-1", " 7 ", "2147483648", "-2147483649", "9223372036854775808", "1_0", "0x10", "1.5"]),
    st.sampled_from(["true", "false", " TRUE ", "1", "yes", ""]),
    st.text(max_size=8),
)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[type[H.Header], dict[str, str], dict[str, str]]:
    cls = draw(st.sampled_from(HEADER_CLASSES))
    v2 = cls is H.SendMessageRequestHeader and draw(st.booleans())
    rename = H.V1_TO_V2 if v2 else {}
    names = [rename.get(wire, wire) for _, wire, _, _ in cls._fields()]
    ext = draw(st.dictionaries(st.sampled_from(names), VALUES, max_size=len(names)))
    if draw(st.booleans()):  # usually a complete header
        for name in names:
            ext.setdefault(name, draw(st.integers(-5, 5).map(str)))
    return cls, ext, rename


@settings(max_examples=600)
@given(_cases())
def test_a_generated_reader_reads_as_the_field_table_says(
    case: tuple[type[H.Header], dict[str, str], dict[str, str]],
) -> None:
    cls, ext, rename = case
    read = H.SendMessageRequestHeader.from_v2_ext if rename else cls.from_ext
    assert _outcome(read, ext) == _outcome(_reference, cls, ext, rename)


def test_every_header_class_is_covered() -> None:
    assert H.SendMessageRequestHeader in HEADER_CLASSES and len(HEADER_CLASSES) > 20
