"""Reading CommitLog records one after another: the one record reader of the store.

Recovery (``CommitLog.recover``), tools and tests (``iter_commitlog``) and Spark's store source
walk records with ``FileRecords``. From a record start, each record must have a message magic,
a length that fits the bytes there, its own CommitLog offset field equal to where it sits, and
(with ``check_crc``) its body's CRC; the walk stops at the first that does not, at the
end-of-file blank, or at the end of the range asked for. It reads nothing it has not checked
the bounds of, and nothing past a hole when told how to see one (``has_data``).

A DLedger member keeps its records in the bodies of DLedger entries (``rmq.protocol.dledger``),
each record's CommitLog offset being its position in the data files. With ``dledger`` the walk
also steps over each entry's 48-byte header, which must name its own position and fit the
file, and over DLedger's blanks (a file's tail, or a rebuilt log's head); a record must end
within its entry. A walk may start at an entry or at a record inside one (a consume queue
entry's offset).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from rmq.protocol.dledger import BODY_OFFSET, blank_size_at, decode_entry_header, entry_size_at
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import (
    MessageExt,
    RecordMeta,
    decode_record,
    decode_record_meta,
    peek_size_and_magic,
)

from .formats import BLANK, BLANK_MAGIC, file_name_to_offset

if TYPE_CHECKING:
    from rmq.protocol.message import Buffer

_PAGE = mmap.PAGESIZE


def _meta(buf: Buffer, pos: int, check_crc: bool) -> tuple[RecordMeta, int, int]:
    meta = decode_record_meta(buf, pos, check_crc=check_crc)
    return meta, meta.size, meta.commitlog_offset


def _message(buf: Buffer, pos: int, check_crc: bool) -> tuple[MessageExt, int, int]:
    msg, size = decode_record(buf, pos, check_crc=check_crc)
    return msg, size, msg.commitlog_offset


class FileRecords:
    """The records of one file, ``buf`` (a mapping of all of it), whose first byte is CommitLog
    offset ``base``: iterate for their ``RecordMeta``, or ``messages()`` for them decoded.

    The walk starts at ``start`` (a record start, an entry start with ``dledger``, or a
    file's start; default ``base``) and yields the records that start before ``end`` (default:
    all), reading no byte at or past ``limit`` (default: the file's end; a file being written
    gives how far it is). ``has_data(pos, n)`` says whether a file's bytes at ``pos`` are not
    a hole: asked before a header that starts a page or crosses into one is read.

    After a walk to its end ``offset`` is where it stopped: the next record's start, or the blank, or the
    bytes that are no record. ``ended`` is true when a blank ran to the file's end (the log goes
    on in the next file); ``reason`` says why the bytes at ``offset`` are no record, when that
    is why the walk stopped. ``unwritten`` is true when those bytes are where writing stopped
    (zeros or a hole): the normal end of a log, not a damaged record.
    """

    __slots__ = (
        "_buf",
        "_dledger",
        "_end",
        "_has_data",
        "_limit",
        "base",
        "check_crc",
        "ended",
        "offset",
        "reason",
        "unwritten",
    )

    def __init__(
        self,
        buf: Buffer,
        base: int,
        start: int | None = None,
        *,
        end: int | None = None,
        limit: int | None = None,
        dledger: bool = False,
        check_crc: bool = False,
        has_data: Callable[[int, int], bool] | None = None,
    ) -> None:
        self._buf = buf
        self.base = base
        self.offset = base if start is None else start
        self._end = end
        self._limit = len(buf) if limit is None else min(limit, len(buf))
        self._dledger = dledger
        self.check_crc = check_crc
        self._has_data = has_data
        self.ended = False
        self.reason: str | None = None
        self.unwritten = False

    def __iter__(self) -> Iterator[RecordMeta]:
        return self._walk(_meta)

    def messages(self) -> Iterator[MessageExt]:
        """The records decoded (the body copied, properties as a dict)."""
        return self._walk(_message)

    def _stop(self, pos: int, reason: str | None) -> None:
        self.offset = self.base + pos
        self.reason = reason

    def _walk(self, decode: Callable[[Buffer, int, bool], tuple[Any, int, int]]) -> Iterator[Any]:
        buf, base, limit, size_of_file = self._buf, self.base, self._limit, len(self._buf)
        stop_at = size_of_file if self._end is None else self._end - base
        has_data, dledger, check_crc = self._has_data, self._dledger, self.check_crc
        pos = self.offset - base
        entry_end = -1  # where the DLedger entry being read ends (-1: not known)
        while pos < stop_at:
            if pos + BLANK.size > limit:
                self._stop(pos, None if limit < size_of_file else "the file ends without a blank")
                return
            if has_data is not None and (pos % _PAGE == 0 or pos % _PAGE > _PAGE - BLANK.size):
                if not has_data(pos, BLANK.size):
                    self.unwritten = True
                    self._stop(pos, "nothing was written there (a hole)")
                    return
            size, magic = peek_size_and_magic(buf, pos)
            if dledger and (pos == entry_end or entry_end < 0 or size <= BODY_OFFSET):
                # no record is as small as an entry header: an entry's header or a blank
                blank = blank_size_at(buf, pos)
                if blank is not None:
                    if pos + blank >= size_of_file:
                        self.ended = True
                        self._stop(pos, None)
                        return
                    pos += blank  # a rebuilt log's head
                    entry_end = -1
                    continue
                if entry_size_at(buf, pos) is not None:
                    try:
                        header = decode_entry_header(buf, pos)
                    except ProtocolError as exc:
                        self._stop(pos, str(exc))
                        return
                    if header.pos != base + pos or pos + header.size > limit:
                        self._stop(pos, f"a DLedger entry that says it is at {header.pos}, {header.size} bytes")
                        return
                    entry_end = pos + header.size
                    pos += BODY_OFFSET
                    continue
                if pos == entry_end:
                    self._stop(pos, "no DLedger entry follows the one before")
                    return
            elif size == 0 and magic == 0 and not dledger:
                self.unwritten = True  # a new file's zeros: no record header is all zero
                self._stop(pos, "nothing was written there (zeros)")
                return
            elif magic == BLANK_MAGIC and not dledger:
                if size != size_of_file - pos:
                    self._stop(pos, f"a blank of {size} bytes where {size_of_file - pos} are left")
                    return
                self.ended = True
                self._stop(pos, None)
                return
            if pos + size > limit:  # the rest is decode's to check
                self._stop(pos, f"a record of {size} bytes runs past the data")
                return
            if 0 <= entry_end < pos + size:
                self._stop(pos, f"a record of {size} bytes runs past its DLedger entry")
                return
            try:
                item, size, phy = decode(buf, pos, check_crc)
            except ProtocolError as exc:
                self._stop(pos, str(exc))
                return
            if phy != base + pos:
                self._stop(pos, f"the record says it is at {phy}")
                return
            yield item
            pos += size
        self._stop(pos, None)


def iter_commitlog(
    directory: str | os.PathLike[str],
    start: int = 0,
    end: int | None = None,
    *,
    dledger: bool = False,
    check_crc: bool = False,
) -> Iterator[tuple[int, bytes]]:
    """Read-only walk over the files of a CommitLog directory (with ``dledger``, a DLedger
    member's ``data`` directory): yields (offset, raw record) for the records starting in
    ``[start, end)``, stopping at the first that is not valid (the unwritten tail).

    ``start`` must be a record boundary, e.g. a file's start offset. Read-only mappings and
    no lock, for tools, tests and Spark executors reading a store that another process may be
    writing.
    """
    names = sorted(n for n in os.listdir(directory) if file_name_to_offset(n) is not None)
    for name in names:
        base = int(name)
        if end is not None and base >= end:
            return
        with open(os.path.join(directory, name), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if base + size <= start:
                continue
            if size == 0:
                return
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            walk = FileRecords(data, base, max(start, base), end=end, dledger=dledger, check_crc=check_crc)
            for meta in walk:
                at = meta.commitlog_offset - base
                yield meta.commitlog_offset, data[at : at + meta.size]
            if not walk.ended:
                return
        finally:
            data.close()


def has_dledger_framing(buf: Buffer) -> bool:
    """Whether a data file starts as a DLedger member's do (an entry header or a blank), not
    as a CommitLog file (a record, or nothing yet)."""
    return entry_size_at(buf, 0) is not None or blank_size_at(buf, 0) is not None


__all__ = ["FileRecords", "has_dledger_framing", "iter_commitlog"]
