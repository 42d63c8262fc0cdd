"""FrameDecoder: every split of the byte stream gives the same frames (h11's tr() style)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.protocol import (
    FrameDecoder,
    FrameTooLarge,
    LocalProtocolError,
    RemoteProtocolError,
    encode_frame,
)

# The smallest legal frame: length 4, header-length word 0 (JSON, empty header), no body.
EMPTY = b"\x00\x00\x00\x04\x00\x00\x00\x00"
HELLO = encode_frame(0, b'{"code":0}', b"hello")
BINARY = encode_frame(1, bytes(21), b"")


def feed_whole(data: bytes, dec: FrameDecoder) -> list[bytes]:
    dec.feed(data)
    return list(dec)


def feed_bytewise(data: bytes, dec: FrameDecoder) -> list[bytes]:
    out = []
    for i in range(len(data)):
        dec.feed(data[i : i + 1])
        out += list(dec)
    return out


def tr(data: bytes, expected: list[bytes], *, max_frame_size: int = 1 << 24) -> None:
    """Feed `data` whole, byte by byte, and with trailing bytes; all must agree."""
    for feed in (feed_whole, feed_bytewise):
        dec = FrameDecoder(max_frame_size)
        assert feed(data, dec) == expected
        assert dec.buffered == 0

        # trailing bytes: an incomplete next frame stays buffered, nothing more comes out
        dec = FrameDecoder(max_frame_size)
        assert feed(data + b"\x00\x00\x00\x10trailing", dec) == expected
        assert dec.buffered == 12


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (EMPTY, [b"\x00\x00\x00\x00"]),
        (HELLO, [HELLO[4:]]),
        (BINARY, [BINARY[4:]]),
        (EMPTY + HELLO + BINARY, [b"\x00\x00\x00\x00", HELLO[4:], BINARY[4:]]),
        (b"", []),
    ],
)
def test_splits(data: bytes, expected: list[bytes]) -> None:
    tr(data, expected)


def test_frames_are_bytes_copies() -> None:
    dec = FrameDecoder()
    dec.feed(HELLO * 3)
    frames = list(dec)
    assert all(type(f) is bytes for f in frames)
    dec.feed(HELLO)  # growing the buffer must not disturb frames already handed out
    assert frames == [HELLO[4:]] * 3


def test_many_frames_compaction() -> None:
    # enough frames to cross the compaction threshold several times
    frame = encode_frame(0, b"{}", b"x" * 1000)
    dec = FrameDecoder()
    got = 0
    for _ in range(300):
        dec.feed(frame[:500])
        got += len(list(dec))
        dec.feed(frame[500:])
        got += len(list(dec))
    assert got == 300
    assert dec.buffered == 0


def test_oversized_frame_rejected_at_its_prefix() -> None:
    dec = FrameDecoder(max_frame_size=64)
    dec.feed(struct.pack(">i", 61))  # 61 + 4 > 64: known as soon as the prefix arrives
    with pytest.raises(FrameTooLarge) as info:
        list(dec)
    assert info.value.length == 65
    assert info.value.limit == 64
    # a broken decoder refuses further use
    with pytest.raises(FrameTooLarge):
        dec.feed(b"more")
    with pytest.raises(FrameTooLarge):
        list(dec)


def test_limit_counts_the_prefix() -> None:
    dec = FrameDecoder(max_frame_size=12)
    dec.feed(encode_frame(0, b"", b"1234"))  # 4 + 4 + 4 = 12 bytes: allowed
    assert len(list(dec)) == 1
    dec.feed(encode_frame(0, b"", b"12345"))  # 13 bytes
    with pytest.raises(FrameTooLarge):
        list(dec)


@pytest.mark.parametrize("length", [-1, 0, 3, -(2**31)])
def test_bad_length(length: int) -> None:
    dec = FrameDecoder()
    dec.feed(struct.pack(">i", length) + b"\x00" * 8)
    with pytest.raises(RemoteProtocolError):
        list(dec)


def test_encode_frame_layout() -> None:
    frame = encode_frame(1, b"HDR", b"body")
    assert frame == struct.pack(">ii", 4 + 3 + 4, (1 << 24) | 3) + b"HDR" + b"body"


def test_encode_frame_header_too_long() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(0, b"x" * (1 << 24))


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_any_split_gives_the_same_frames(bodies: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(0, b"{}", body) for body in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    dec = FrameDecoder()
    frames: list[bytes] = []
    last = 0
    for cut in [*cuts, len(stream)]:
        dec.feed(stream[last:cut])
        frames += list(dec)
        last = cut
    assert frames == [encode_frame(0, b"{}", body)[4:] for body in bodies]
    assert dec.buffered == 0


@given(st.binary(max_size=512))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    dec = FrameDecoder(max_frame_size=4096)
    try:
        dec.feed(data)
        for _ in dec:
            pass
    except RemoteProtocolError:
        pass
    assert dec.buffered <= len(data)
