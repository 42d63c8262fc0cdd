"""The HA replication stream of RocketMQ 4.x (PROTOCOL.md 9), with no I/O.

The HA port carries no RemotingCommand frames, only two raw streams:

* slave -> master: reports, each an 8-byte big-endian int64, the slave's max CommitLog
  offset. The first is where the slave wants data from; every one is an ack.
* master -> slave: chunks ``int64 masterPhyOffset | int32 bodySize | bodySize bytes``, the
  master's CommitLog bytes at that offset, verbatim. A chunk with bodySize 0 is a heartbeat.

A Java 4.x master or slave speaks exactly this, so either side of ours can face one of theirs.
Both decoders raise RemoteProtocolError on bytes a correct peer never sends; the stream
cannot be trusted after that and the connection must close.
"""

from __future__ import annotations

import struct

from .errors import LocalProtocolError, RemoteProtocolError

REPORT = struct.Struct(">q")
CHUNK_HEADER = struct.Struct(">qi")
REPORT_SIZE = REPORT.size  # 8
CHUNK_HEADER_SIZE = CHUNK_HEADER.size  # 12

# RocketMQ's default haTransferBatchSize: the most a master puts in one chunk.
DEFAULT_TRANSFER_BATCH_SIZE = 32 * 1024
# What a slave accepts in one chunk whatever the master's batch size: bounds its buffer.
DEFAULT_MAX_CHUNK_SIZE = 16 * 1024 * 1024

_COMPACT_AT = 64 * 1024


def encode_report(offset: int) -> bytes:
    """A slave's report of its max CommitLog offset."""
    if offset < 0:
        raise LocalProtocolError(f"negative HA offset {offset}")
    return REPORT.pack(offset)


def encode_chunk_header(offset: int, size: int) -> bytes:
    """The 12 bytes before ``size`` bytes of CommitLog data starting at ``offset``."""
    if offset < 0 or not 0 <= size <= 0x7FFFFFFF:
        raise LocalProtocolError(f"bad HA chunk header: offset {offset}, size {size}")
    return CHUNK_HEADER.pack(offset, size)


def encode_chunk(offset: int, data: bytes | bytearray | memoryview = b"") -> bytes:
    """A whole chunk (a heartbeat when ``data`` is empty)."""
    return encode_chunk_header(offset, len(data)) + bytes(data)


class ReportDecoder:
    """The master's side: the slave's offset reports.

    ``feed`` returns the newest complete report, or None when no new one is complete. As
    RocketMQ's master does, only the last whole report in the bytes received counts (older
    ones are superseded acks). Reports within one connection never go back: a slave that
    truncated its log reconnects.
    """

    __slots__ = ("_rest", "last")

    def __init__(self) -> None:
        self._rest = b""
        self.last: int | None = None  # newest report so far

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        buf = self._rest + bytes(data)
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._rest = buf[whole:]
        if not whole:
            return None
        offset: int = REPORT.unpack_from(buf, whole - REPORT_SIZE)[0]
        if offset < 0:
            raise RemoteProtocolError(f"HA report of negative offset {offset}")
        if self.last is not None and offset < self.last:
            raise RemoteProtocolError(f"HA report went back from {self.last} to {offset}")
        self.last = offset
        return offset


class ChunkDecoder:
    """The slave's side: chunks from the master.

    Iterating after ``feed`` yields ``(offset, data)`` for each complete chunk, ``data`` being
    ``bytes`` (empty for a heartbeat). Chunks must follow each other: each starts where the
    previous one ended (a heartbeat repeats that offset).
    """

    __slots__ = ("_buf", "_pos", "_broken", "max_chunk_size", "expected")

    def __init__(self, max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE) -> None:
        self.max_chunk_size = max_chunk_size
        self._buf = bytearray()
        self._pos = 0
        self._broken: RemoteProtocolError | None = None
        self.expected: int | None = None  # offset the next chunk must start at

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        self._buf += data

    def __iter__(self) -> ChunkDecoder:
        return self

    def _fail(self, why: str) -> RemoteProtocolError:
        self._broken = RemoteProtocolError(why)
        return self._broken

    def __next__(self) -> tuple[int, bytes]:
        if self._broken is not None:
            raise self._broken
        buf, pos = self._buf, self._pos
        if len(buf) - pos < CHUNK_HEADER_SIZE:
            self._compact()
            raise StopIteration
        offset, size = CHUNK_HEADER.unpack_from(buf, pos)
        if offset < 0:
            raise self._fail(f"HA chunk at negative offset {offset}")
        if size < 0 or size > self.max_chunk_size:
            raise self._fail(f"HA chunk of {size} bytes (limit {self.max_chunk_size})")
        if self.expected is not None and offset != self.expected:
            raise self._fail(f"HA chunk at {offset} where {self.expected} was due")
        end = pos + CHUNK_HEADER_SIZE + size
        if len(buf) < end:
            self._compact()
            raise StopIteration
        data = bytes(buf[pos + CHUNK_HEADER_SIZE : end])
        self._pos = end
        self.expected = offset + size
        return offset, data

    def _compact(self) -> None:
        if self._pos >= _COMPACT_AT or (self._pos and self._pos == len(self._buf)):
            del self._buf[: self._pos]
            self._pos = 0
