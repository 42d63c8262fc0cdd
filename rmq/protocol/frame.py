"""Length-prefixed framing of remoting commands (PROTOCOL.md 1.1), with no I/O.

    int32 length | int32 (serialize type << 24 | header length) | header | body

`length` counts everything after itself. The decoder is fed byte chunks of any size
and yields each complete frame's content (the bytes after the length field); the
command codec (command.py) parses that content.
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge, LocalProtocolError, RemoteProtocolError

# RocketMQ's NettyDecoder limit (com.rocketmq.remoting.frameMaxLength), checked against
# length + 4. It bounds what one peer can make us buffer for one frame.
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

_LENGTH = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")  # length, header-length word

# Compact the buffer once this many consumed bytes sit at its front: deleting a prefix
# is O(n), so do it rarely rather than once per frame.
_COMPACT_AT = 64 * 1024


class FrameDecoder:
    """Incremental frame splitter.

    `feed(data)` appends bytes; iterating yields complete frame contents as `bytes`
    (never views into the internal buffer). A bad length raises RemoteProtocolError
    (FrameTooLarge for an oversized one); after that the decoder refuses further use,
    as the byte stream can no longer be trusted.
    """

    __slots__ = ("max_frame_size", "_buf", "_pos", "_broken")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._pos = 0
        self._broken: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        self._buf += data

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> bytes:
        if self._broken is not None:
            raise self._broken
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            self._compact()
            raise StopIteration
        (length,) = _LENGTH.unpack_from(buf, pos)
        if length < 4:
            self._broken = RemoteProtocolError(f"bad frame length {length}: below the 4-byte header-length word")
            raise self._broken
        if length + 4 > self.max_frame_size:
            self._broken = FrameTooLarge(length + 4, self.max_frame_size)
            raise self._broken
        end = pos + 4 + length
        if len(buf) < end:
            self._compact()
            raise StopIteration
        frame = bytes(buf[pos + 4 : end])
        self._pos = end
        return frame

    def _compact(self) -> None:
        if self._pos >= _COMPACT_AT or (self._pos and self._pos == len(self._buf)):
            del self._buf[: self._pos]
            self._pos = 0


def encode_frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """Build one frame, length prefix included."""
    hlen = len(header)
    if hlen > 0xFFFFFF:
        raise LocalProtocolError(f"header of {hlen} bytes does not fit the 24-bit length field")
    return _PREFIX.pack(4 + hlen + len(body), (serialize_type << 24) | hlen) + header + body
