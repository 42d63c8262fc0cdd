"""DLedger's on-disk and on-wire entry layout (openmessaging/dledger DLedgerEntry, DLedgerEntryCoder,
DLedgerMmapFileStore), with no I/O.

A DLedger group's log lives in two runs of files under ``<storePathRootDir>/dledger-<selfId>/``:

* ``data/``: entries back to back, each ``magic int32 | size int32 | index int64 | term int64 |
  pos int64 | channel int32 | chainCrc int32 | bodyCrc int32 | bodyLength int32 | body``
  (48 bytes before the body; ``size`` counts them all). ``pos`` is the entry's own offset in
  the data files. An entry never spans two files: the rest of a file too small for the next
  entry holds a blank ``-1 int32 | remaining int32``.
* ``index/``: 32 bytes per entry, at ``index * 32``: ``magic int32 | pos int64 | size int32 |
  index int64 | term int64``.

In a RocketMQ broker group the body of each entry is one 4.x message record (message.py), and
the record's own CommitLog offset field says ``pos + 48``: ConsumeQueue entries point there,
into the data files, as RocketMQ's DLedgerCommitLog does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import LocalProtocolError, RemoteProtocolError

if TYPE_CHECKING:
    from .message import Buffer

MAGIC = 1  # DLedgerMmapFileStore.CURRENT_MAGIC
BLANK_MAGIC = -1  # MmapFileList.BLANK_MAGIC_CODE
MIN_BLANK = 8

ENTRY_HEADER = struct.Struct(">iiqqqiiii")
BODY_OFFSET = ENTRY_HEADER.size  # 48: where the body starts in an entry
POS_OFFSET = 24  # where ``pos`` sits in an entry
INDEX_UNIT = struct.Struct(">iqiqq")
INDEX_UNIT_SIZE = INDEX_UNIT.size  # 32
_BLANK = struct.Struct(">ii")
_RECORD_PHY_AT = 28  # the 4.x record's own CommitLog offset (int64) within the body


@dataclass(frozen=True, slots=True)
class EntryHeader:
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int


def encode_entry(index: int, term: int, pos: int, body: bytes | bytearray | memoryview, *, magic: int = MAGIC) -> bytes:
    """One data-file entry, header and body."""
    if index < 0 or term < 0 or pos < 0:
        raise LocalProtocolError(f"bad DLedger entry: index {index}, term {term}, pos {pos}")
    size = BODY_OFFSET + len(body)
    return ENTRY_HEADER.pack(magic, size, index, term, pos, 0, 0, 0, len(body)) + bytes(body)


def decode_entry_header(buf: Buffer, offset: int = 0) -> EntryHeader:
    """The header of the entry at ``buf[offset:]``.

    Raises:
        RemoteProtocolError: too short, a blank, an unknown magic or inconsistent sizes.
    """
    if offset < 0 or len(buf) - offset < BODY_OFFSET:
        raise RemoteProtocolError("DLedger entry header truncated")
    h = EntryHeader(*ENTRY_HEADER.unpack_from(buf, offset))
    if h.magic != MAGIC:
        raise RemoteProtocolError(f"DLedger entry with magic {h.magic}")
    if h.body_length < 0 or h.size != BODY_OFFSET + h.body_length:
        raise RemoteProtocolError(f"DLedger entry size {h.size} does not fit body length {h.body_length}")
    if h.index < 0 or h.term < 0 or h.pos < 0:
        raise RemoteProtocolError(f"DLedger entry with index {h.index}, term {h.term}, pos {h.pos}")
    return h


def peek_magic_size(buf: Buffer, offset: int) -> tuple[int, int]:
    """(magic, size) at ``offset``: an entry's or a blank's."""
    magic, size = _BLANK.unpack_from(buf, offset)
    return magic, size


def entry_size_at(buf: Buffer, offset: int) -> int | None:
    """The size of the entry whose header starts at ``offset`` (magic 1 and a size of at least
    48), or None: a blank, zeros, too few bytes, or a 4.x record (whose first field, its total
    size, is never 1) is no entry header."""
    if offset < 0 or len(buf) - offset < BODY_OFFSET:
        return None
    magic, size = _BLANK.unpack_from(buf, offset)
    return size if magic == MAGIC and size >= BODY_OFFSET else None


def blank_size_at(buf: Buffer, offset: int) -> int | None:
    """The size of the blank at ``offset``, or None. A blank covers the bytes it says:
    usually the rest of a data file, or, in the first file of a log rebuilt at a leader's
    position (``DLedgerLog.rebuild``), the bytes before its first entry. Readers skip it."""
    if offset < 0 or len(buf) - offset < MIN_BLANK:
        return None
    magic, size = _BLANK.unpack_from(buf, offset)
    return size if magic == BLANK_MAGIC and MIN_BLANK <= size <= len(buf) - offset else None


def first_record_at(buf: Buffer, limit: int) -> int | None:
    """Where the first 4.x record of a data file starts, stepping over entries that hold none
    (a leader's no-op); None when the entries wholly below ``limit`` hold no record."""
    pos = 0
    while pos < limit:
        size = entry_size_at(buf, pos)
        if size is None:
            size = blank_size_at(buf, pos)  # holds no record either
            if size is None:
                return None
        elif size > BODY_OFFSET:
            return pos + BODY_OFFSET if pos + size <= limit else None
        pos += size
    return None


def encode_blank(remaining: int) -> bytes:
    """A blank of ``remaining`` bytes (at least 8): the rest of a data file, or what comes
    before the first entry of a rebuilt log (``blank_size_at``)."""
    if remaining < MIN_BLANK:
        raise LocalProtocolError(f"a blank needs {MIN_BLANK} bytes, not {remaining}")
    return _BLANK.pack(BLANK_MAGIC, remaining)


def encode_index(pos: int, size: int, index: int, term: int, *, magic: int = MAGIC) -> bytes:
    return INDEX_UNIT.pack(magic, pos, size, index, term)


def decode_index(buf: Buffer, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(magic, pos, size, index, term) of the index unit at ``offset``."""
    if offset < 0 or len(buf) - offset < INDEX_UNIT_SIZE:
        raise RemoteProtocolError("DLedger index unit truncated")
    magic, pos, size, index, term = INDEX_UNIT.unpack_from(buf, offset)
    return magic, pos, size, index, term


def patch_record_offset(entry: bytearray | memoryview, entry_offset: int = 0) -> None:
    """Write ``pos + 48`` into the 4.x record held by the entry at ``entry[entry_offset:]``
    (its CommitLog offset field), as DLedgerCommitLog's append hook does."""
    (pos,) = struct.unpack_from(">q", entry, entry_offset + POS_OFFSET)
    struct.pack_into(">q", entry, entry_offset + BODY_OFFSET + _RECORD_PHY_AT, pos + BODY_OFFSET)
