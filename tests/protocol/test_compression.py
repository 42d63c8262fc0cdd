"""zlib, LZ4 and ZSTD bodies (RocketMQ 5.x's compression-type bits of sysFlag)."""

from __future__ import annotations

import subprocess
import sys

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from rmq.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZSTD,
    compress,
    decompress_body,
)


@pytest.mark.parametrize("codec", ["zlib", "lz4", "zstd"])
def test_round_trip(codec: str) -> None:
    body = b"RocketMQ " * 1000
    packed, flags = compress(body, codec)
    assert flags & COMPRESSED_FLAG and len(packed) < len(body)
    assert decompress_body(packed, flags) == body


def test_flags_are_rocketmqs() -> None:
    assert compress(b"x", "zlib")[1] == COMPRESSED_FLAG  # as 4.x clients send it
    assert compress(b"x", "lz4")[1] & COMPRESSION_TYPE_MASK == COMPRESSION_LZ4 == 0x100
    assert compress(b"x", "zstd")[1] & COMPRESSION_TYPE_MASK == COMPRESSION_ZSTD == 0x200
    with pytest.raises(LocalProtocolError):
        compress(b"x", "snappy")


def test_bodies_written_by_the_reference_libraries_are_read() -> None:
    body = b"hello " * 200
    assert decompress_body(lz4.frame.compress(body), COMPRESSED_FLAG | COMPRESSION_LZ4) == body
    assert decompress_body(zstandard.ZstdCompressor().compress(body), COMPRESSED_FLAG | COMPRESSION_ZSTD) == body
    # a streamed zstd frame (no content size in its header), as zstd-jni's ZstdOutputStream writes
    stream = zstandard.ZstdCompressor().compressobj()
    framed = stream.compress(body) + stream.flush()
    assert decompress_body(framed, COMPRESSED_FLAG | COMPRESSION_ZSTD) == body


@pytest.mark.parametrize("codec", ["zlib", "lz4", "zstd"])
def test_output_is_bounded(codec: str) -> None:
    packed, flags = compress(b"\0" * 100_000, codec)
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        decompress_body(packed, flags, max_size=10_000)


@settings(max_examples=200)
@given(st.binary(max_size=300), st.sampled_from([0, 0x100, 0x200, 0x300, 0x400]))
def test_garbage_raises_protocol_errors_only(junk: bytes, ctype: int) -> None:
    try:
        decompress_body(junk, COMPRESSED_FLAG | ctype, max_size=1 << 16)
    except ProtocolError:
        pass


def test_a_missing_codec_package_is_a_clear_error() -> None:
    code = (
        "import sys; sys.modules['lz4'] = None; sys.modules['lz4.frame'] = None\n"
        "from rmq.protocol.message import decompress_body, CompressionUnavailable\n"
        "try:\n    decompress_body(b'x', 0x101)\nexcept CompressionUnavailable as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'rmq[lz4]'" in out
