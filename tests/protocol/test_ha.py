"""The HA stream codec, with bytes alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from rmq.protocol.ha import (
    ChunkDecoder,
    ReportDecoder,
    encode_chunk,
    encode_chunk_header,
    encode_report,
)


def test_report_is_eight_big_endian_bytes() -> None:
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    with pytest.raises(LocalProtocolError):
        encode_report(-1)


def test_chunk_layout() -> None:
    assert encode_chunk(1024, b"abc") == bytes.fromhex("0000000000000400") + bytes.fromhex("00000003") + b"abc"
    assert encode_chunk(7) == bytes.fromhex("0000000000000007") + bytes(4)  # a heartbeat
    with pytest.raises(LocalProtocolError):
        encode_chunk_header(-1, 0)


def test_report_decoder_keeps_only_the_newest_whole_report() -> None:
    d = ReportDecoder()
    stream = encode_report(10) + encode_report(20) + encode_report(30)[:5]
    assert d.feed(stream) == 20
    assert d.feed(b"") is None
    assert d.feed(encode_report(30)[5:]) == 30
    assert d.last == 30


def test_report_decoder_refuses_negative_and_backwards_offsets() -> None:
    with pytest.raises(RemoteProtocolError):
        ReportDecoder().feed(b"\xff" * 8)
    d = ReportDecoder()
    d.feed(encode_report(100))
    with pytest.raises(RemoteProtocolError, match="went back"):
        d.feed(encode_report(99))


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20), st.integers(0, 2**40), st.data())
def test_chunks_survive_any_split(bodies: list[bytes], start: int, data: st.DataObject) -> None:
    stream = b""
    offset = start
    for body in bodies:
        stream += encode_chunk(offset, body)
        offset += len(body)
    d = ChunkDecoder()
    got = []
    i = 0
    while i < len(stream):
        n = data.draw(st.integers(1, 64))
        d.feed(stream[i : i + n])
        i += n
        got.extend(d)
    assert [b for _, b in got] == bodies
    assert got[0][0] == start
    assert d.expected == offset
    assert d.buffered == 0


def test_chunk_decoder_refuses_gaps_sizes_and_negative_offsets() -> None:
    d = ChunkDecoder()
    d.feed(encode_chunk(0, b"x" * 10) + encode_chunk(11, b"y"))
    assert next(d) == (0, b"x" * 10)
    with pytest.raises(RemoteProtocolError, match="where 10 was due"):
        next(d)
    with pytest.raises(RemoteProtocolError):  # broken for good
        d.feed(b"")
    small = ChunkDecoder(max_chunk_size=4)
    small.feed(encode_chunk_header(0, 5))
    with pytest.raises(RemoteProtocolError, match="limit 4"):
        list(small)
    neg = ChunkDecoder()
    neg.feed(b"\x80" + bytes(7) + bytes(4))
    with pytest.raises(RemoteProtocolError):
        list(neg)
    huge = ChunkDecoder()
    huge.feed(bytes(8) + b"\xff\xff\xff\xff")
    with pytest.raises(RemoteProtocolError):
        list(huge)


@given(st.binary(max_size=200))
def test_garbage_raises_only_protocol_errors(junk: bytes) -> None:
    for decoder in (ChunkDecoder(max_chunk_size=64),):
        try:
            decoder.feed(junk)
            list(decoder)
        except ProtocolError:
            pass
    try:
        ReportDecoder().feed(junk)
    except ProtocolError:
        pass


# -- controller mode's handshake -------------------------------------------------------------


def test_handshake_layout_and_round_trip() -> None:
    from rmq.protocol.ha import decode_handshake, encode_handshake

    raw = encode_handshake(2, 5, 4096)
    assert raw == bytes.fromhex("ffffffffffffffff00000000000000020000000000001000ffffffff00000005")
    assert decode_handshake(raw[:-1]) is None
    assert decode_handshake(raw) == (2, 5, 4096)


def test_a_4x_report_is_no_handshake() -> None:
    from rmq.protocol.ha import decode_handshake

    with pytest.raises(RemoteProtocolError, match="not in controller mode"):
        decode_handshake(encode_report(0) + bytes(24))


def test_a_4x_master_refuses_the_handshake() -> None:
    """A 4.x master takes the handshake's first 8 bytes for a report of a negative offset."""
    from rmq.protocol.ha import encode_handshake

    with pytest.raises(RemoteProtocolError):
        ReportDecoder().feed(encode_handshake(1, 0, 0))


def test_epochs_round_trip_and_partial() -> None:
    from rmq.protocol.ha import decode_epochs, encode_epochs

    raw = encode_epochs(3, 900, [(1, 0), (2, 300), (3, 700)]) + b"rest"
    for cut in range(len(raw) - 4):
        assert decode_epochs(raw[:cut]) is None
    assert decode_epochs(raw) == ((3, 900, [(1, 0), (2, 300), (3, 700)]), len(raw) - 4)
    assert decode_epochs(encode_epochs(0, 0, [])) == ((0, 0, []), 16)


@pytest.mark.parametrize(
    "entries",
    [[(2, 0), (1, 10)], [(1, 10), (2, 5)], [(1, 1000)]],
)
def test_epochs_a_master_never_sends(entries: list[tuple[int, int]]) -> None:
    from rmq.protocol.ha import decode_epochs, encode_epochs

    with pytest.raises(RemoteProtocolError):
        decode_epochs(encode_epochs(2, 900, entries))


@given(st.binary(max_size=64))
def test_epoch_decoder_never_crashes(data: bytes) -> None:
    from rmq.protocol.ha import decode_epochs

    try:
        decode_epochs(data)
    except RemoteProtocolError:
        pass
