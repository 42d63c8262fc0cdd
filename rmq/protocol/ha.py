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


# -- controller mode's handshake (rmq's; docs/controller.md "Replication") -------------------
#
# In controller mode a slave must find the last offset its log shares with the master's
# before it copies anything (a slave that was master in an older epoch may hold records the
# new master never had). So the slave speaks first with a handshake instead of an offset
# report, and the master answers with its epochs; then the 4.x stream above follows.
#
#   slave -> master: int64 -1 | int64 brokerId | int64 maxOffset | int32 -1 | int32 lastEpoch
#   master -> slave: int32 masterEpoch | int64 maxOffset | int32 n | n x (int32 epoch | int64 startOffset)
#
# A 4.x master takes the handshake for offset reports, and its first and last 8 bytes (the
# master acts on the last whole report it has) read as negative offsets: it closes the
# connection. A controller-mode master refuses a 4.x slave, whose first 8 bytes are >= 0.

HANDSHAKE = struct.Struct(">qqqii")
HANDSHAKE_MARK = -1
EPOCHS_HEADER = struct.Struct(">iqi")
EPOCH_ENTRY = struct.Struct(">iq")
MAX_EPOCH_ENTRIES = 65536


def encode_handshake(broker_id: int, last_epoch: int, max_offset: int) -> bytes:
    """A controller-mode slave's first bytes."""
    if broker_id < 0 or max_offset < 0:
        raise LocalProtocolError(f"bad HA handshake: brokerId {broker_id}, offset {max_offset}")
    return HANDSHAKE.pack(HANDSHAKE_MARK, broker_id, max_offset, -1, last_epoch)


def decode_handshake(data: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """``(broker_id, last_epoch, max_offset)`` from the first HANDSHAKE.size bytes, or None
    when fewer have arrived. RemoteProtocolError when they are no handshake."""
    if len(data) < HANDSHAKE.size:
        return None
    mark, broker_id, offset, mark2, epoch = HANDSHAKE.unpack_from(data)
    if mark != HANDSHAKE_MARK or mark2 != -1:
        raise RemoteProtocolError(
            "HA peer sent an offset report, not a controller-mode handshake: "
            "a slave that is not in controller mode cannot follow a controller-mode master"
        )
    if broker_id < 0 or offset < 0:
        raise RemoteProtocolError(f"bad HA handshake: brokerId {broker_id}, offset {offset}")
    return broker_id, epoch, offset


def encode_epochs(master_epoch: int, max_offset: int, entries: list[tuple[int, int]]) -> bytes:
    """The master's answer to a handshake: its epoch, its log end and its (epoch, start
    offset) entries, oldest first."""
    if len(entries) > MAX_EPOCH_ENTRIES:
        raise LocalProtocolError(f"{len(entries)} epoch entries (limit {MAX_EPOCH_ENTRIES})")
    out = bytearray(EPOCHS_HEADER.pack(master_epoch, max_offset, len(entries)))
    for epoch, start in entries:
        out += EPOCH_ENTRY.pack(epoch, start)
    return bytes(out)


def decode_epochs(
    data: bytes | bytearray | memoryview,
) -> tuple[tuple[int, int, list[tuple[int, int]]], int] | None:
    """``((master_epoch, max_offset, entries), bytes_used)``, or None when incomplete.
    RemoteProtocolError for a count, offset or order a correct master never sends."""
    if len(data) < EPOCHS_HEADER.size:
        return None
    epoch, max_offset, n = EPOCHS_HEADER.unpack_from(data)
    if not 0 <= n <= MAX_EPOCH_ENTRIES or max_offset < 0:
        raise RemoteProtocolError(f"bad HA epoch answer: {n} entries, max offset {max_offset}")
    used = EPOCHS_HEADER.size + n * EPOCH_ENTRY.size
    if len(data) < used:
        return None
    entries = [EPOCH_ENTRY.unpack_from(data, EPOCHS_HEADER.size + i * EPOCH_ENTRY.size) for i in range(n)]
    for (e0, s0), (e1, s1) in zip(entries, entries[1:], strict=False):
        if e1 <= e0 or s1 < s0:
            raise RemoteProtocolError(f"HA epoch entries out of order: {e0}@{s0} then {e1}@{s1}")
    if any(s < 0 or s > max_offset for _, s in entries):
        raise RemoteProtocolError("HA epoch entry starts outside the master's log")
    return (epoch, max_offset, [(e, s) for e, s in entries]), used
