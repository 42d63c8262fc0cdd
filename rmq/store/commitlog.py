"""The CommitLog: every message of every topic, appended to one run of mapped files.

A record never spans two files: when the next record (plus an 8-byte blank) does not fit,
the rest of the file gets an end-of-file blank ``[int32 remaining][0xCBD43194]`` and the
record goes to the start of a new file. Record layout: ``rmq.protocol.message``.

Recovery walks records from a known-good point (records.py), checking magic, length, the
physical offset field and (optionally) the body CRC, and stops at the first record that fails;
everything from there on is cut off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from rmq.protocol.message import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordMeta,
    decode_record_meta,
    peek_size_and_magic,
)

from .errors import StoreError
from .formats import BLANK, BLANK_MAGIC
from .mapped_file import MappedFile, sync_directory
from .mapped_file_queue import MappedFileQueue
from .records import FileRecords

log = logging.getLogger("rmq.store.commitlog")

_SYSFLAG_POS = 36
_BORN_TS_POS = 40
_STORE_TS_POS_V4 = 56  # store timestamp follows an 8-byte IPv4 born host
_STORE_TS_END_V6 = _STORE_TS_POS_V4 + 12 + 8  # every record is at least this long
_PHY_POS, _PHY_END = 28, 36  # the record's own CommitLog offset
_MIN_RECORD = _PHY_END
_MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


class CommitLog:
    """Mapped files under ``directory``; offsets are byte positions in the whole log."""

    synced_elsewhere = False  # True: the store's flusher does not sync these files
    in_dledger_entries = False  # True: the records sit in DLedger entries (records.py)
    dispatch_limit: int | None = None  # dispatch stops here at open (None: at the end)

    def __init__(
        self, directory: str, file_size: int, *, preallocate: bool = False, pwrite_appends: bool = False
    ) -> None:
        self.files = MappedFileQueue(directory, file_size, preallocate=preallocate, pwrite_appends=pwrite_appends)
        self.file_size = file_size
        self.last_store_timestamp = 0  # store time of the last record appended or recovered

    def load(self) -> None:
        """Open the files on disk (all marked full until ``recover`` runs)."""
        self.files.load()

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        """Where the next record goes: everything below is written (not necessarily synced)."""
        return self.files.max_offset

    # --- writing --------------------------------------------------------------------------

    def reserve(self, size: int) -> tuple[MappedFile, int]:
        """The file and position where ``size`` contiguous bytes can be written now.

        Writes an end-of-file blank and opens a new file when the current one cannot hold
        ``size`` bytes plus a blank. The caller writes the bytes and then sets ``mf.wrote``.
        ``size`` must be at most ``file_size - 8``.

        Raises:
            OSError: a new file cannot be created (disk full, descriptor limit).
        """
        mf = self.files.last()
        if mf is None or mf.wrote >= mf.size:
            mf = self.files.create()
        pos = mf.wrote
        if pos + size + BLANK.size > mf.size:
            mf.write_at(pos, BLANK.pack(mf.size - pos, BLANK_MAGIC))
            mf.wrote = mf.size
            mf = self.files.create()
            pos = 0
        return mf, pos

    # --- replication ----------------------------------------------------------------------

    def transfer_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` written bytes from ``offset``, never past the end of its file
        (what an HA master sends in one chunk). ``b""`` at the write position; None when
        ``offset`` is not stored (before the first file or past the write position)."""
        if offset == self.max_offset:
            return b""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        end = min(mf.wrote, pos + max_bytes)
        if pos >= end:
            return None if pos > mf.wrote else b""
        return mf.mm[pos:end]

    def is_record_start(self, offset: int) -> bool:
        """Whether a record or an end-of-file blank begins at ``offset`` (or it is the write
        position): where an HA slave may ask to be served from."""
        if offset == self.max_offset:
            return True
        mf = self.files.find(offset)
        if mf is None:
            return False
        return self._boundary_step(mf, offset - mf.start, mf.wrote) is not None

    def _boundary_step(self, mf: MappedFile, pos: int, limit: int) -> int | None:
        """Length of the record or blank at ``pos`` judged from its header alone (0 when the
        header is not all below ``limit`` yet); None when the bytes are no record of this log
        (bad magic or size, or a record that says it lives elsewhere)."""
        if pos + BLANK.size > limit:
            return 0
        size, magic = peek_size_and_magic(mf.mm, pos)
        if magic == BLANK_MAGIC:
            return size if size == mf.size - pos else None
        if magic not in _MESSAGE_MAGICS or size < _MIN_RECORD or pos + size > mf.size:
            return None
        if pos + _PHY_END > limit:
            return 0
        phy = int.from_bytes(mf.mm[pos + _PHY_POS : pos + _PHY_END], "big", signed=True)
        return size if phy == mf.start + pos else None

    def append_replica(self, offset: int, data: bytes | memoryview, next_record: int) -> tuple[int, int]:
        """Append an HA master's bytes verbatim at ``offset`` (the slave's side).

        ``offset`` must be the write position, or a file boundary when the log is empty
        (a new slave starts at the master's last file). ``data`` must not cross a file end.
        ``next_record`` is where the next record header is due (the write position after
        recovery); the new bytes are checked record header by record header from there, and
        written only if every complete header is one this log could hold at that place.
        Returns the new ``next_record`` and where the whole records end (a chunk may end inside
        a record, whose header is then known but not its body: dispatch must stop before it).

        Raises:
            StoreError: the bytes do not continue this log (it diverged from the master's),
                and nothing was written.
            OSError: a new file cannot be created.
        """
        if not data:
            raise ValueError("no replica data to append")
        last = self.files.last()
        if last is None:
            if offset % self.file_size:
                raise StoreError(f"replica data for an empty CommitLog must start at a file boundary, not {offset}")
            last = self.files.create(offset)
            next_record = offset
        elif offset != self.max_offset:
            raise StoreError(f"replica data at {offset} does not continue the CommitLog ending at {self.max_offset}")
        elif last.wrote >= last.size:
            last = self.files.create()
        pos = offset - last.start
        end = pos + len(data)
        if end > last.size:
            raise StoreError(f"replica data at {offset} of {len(data)} bytes crosses the end of file {last.path}")
        last.pwrite(pos, data)  # chunks of many records: one write costs less than faults
        cursor = whole = next_record - last.start
        while cursor < end:
            step = self._boundary_step(last, cursor, end)
            if step is None:
                last.pwrite(pos, bytes(end - pos))  # take the bytes back: nothing beyond wrote is valid
                raise StoreError(
                    f"replica data does not continue this CommitLog: no record of it starts at {last.start + cursor}"
                )
            if step == 0:
                break
            cursor += step
            if cursor <= end:
                whole = cursor
        last.wrote = end
        return last.start + cursor, last.start + whole

    # --- reading --------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset``, or None when they are not (or no longer) stored."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        if pos < 0 or size <= 0 or pos + size > mf.wrote:
            return None
        return mf.mm[pos : pos + size]

    def record_at(self, offset: int) -> bytes | None:
        """The whole record starting at ``offset``, or None if there is no message there."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        if pos + BLANK.size > mf.wrote:
            return None
        size, magic = peek_size_and_magic(mf.mm, pos)
        if magic == BLANK_MAGIC or size <= 0 or pos + size > mf.wrote:
            return None
        return mf.mm[pos : pos + size]

    def store_timestamp_at(self, offset: int) -> int | None:
        """Store time of the record at ``offset`` without decoding it (None if absent)."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        if pos + _STORE_TS_END_V6 > mf.wrote:
            return None
        mm = mf.mm
        sys_flag = int.from_bytes(mm[pos + _SYSFLAG_POS : pos + _SYSFLAG_POS + 4], "big")
        p = pos + _STORE_TS_POS_V4 + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
        return int.from_bytes(mm[p : p + 8], "big", signed=True)

    def first_store_timestamp(self, mf: MappedFile) -> int | None:
        """Store time of the first record in ``mf`` (None if it holds none)."""
        if mf.wrote < _STORE_TS_END_V6:
            return None
        size, magic = peek_size_and_magic(mf.mm, 0)
        if magic == BLANK_MAGIC or size <= 0:
            return None
        return self.store_timestamp_at(mf.start)

    def bad_record_step(self, mf: MappedFile, pos: int) -> int | None:
        """Bytes to skip past an undecodable record at ``pos`` when the log knows where the
        damage ends; None: it does not (dispatch then gives up on the rest of the file)."""
        return None

    def non_record_step(self, mf: MappedFile, pos: int) -> int | None:
        """Bytes to skip at ``pos`` where no record starts: an end-of-file blank runs to the
        end of the file; None when the bytes there are nothing this log writes."""
        if pos + BLANK.size > mf.size:
            return mf.size - pos
        return mf.size - pos if peek_size_and_magic(mf.mm, pos)[1] == BLANK_MAGIC else None

    def records(self, start: int) -> Iterator[RecordMeta]:
        """The records from ``start`` (a record start) to the write position, read as recovery
        reads them (records.py); where bytes that are no record end a file's records early,
        the walk goes on at the next file's start."""
        for mf in list(self.files.files):
            if mf.start + mf.wrote > start:
                yield from FileRecords(
                    mf.mm, mf.start, max(start, mf.start), limit=mf.wrote, dledger=self.in_dledger_entries
                )

    def meta_at(self, offset: int) -> RecordMeta | None:
        """Decode the record at ``offset`` without its body; None for a blank or no data.

        Raises:
            ProtocolError: the bytes there are not a valid record.
        """
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        if pos + BLANK.size > mf.wrote:
            return None
        if peek_size_and_magic(mf.mm, pos)[1] == BLANK_MAGIC:
            return None
        return decode_record_meta(mf.mm, pos)

    # --- recovery -------------------------------------------------------------------------

    def recover(self, start: int, check_crc: bool) -> int:
        """Find the end of the valid data, scanning from ``start`` (a file start or record
        boundary known to be good) record by record (records.py: magic, length, offset, CRC
        with ``check_crc``; no hole read), and cut the log there. Returns that end offset."""
        files = self.files.files
        if not files:
            return 0
        start = min(max(start, files[0].start), self.files.max_offset)
        i = min((start - files[0].start) // self.file_size, len(files) - 1)
        checked_from, checked = start, 0
        while True:
            mf = files[i]
            walk = FileRecords(mf.mm, mf.start, start, check_crc=check_crc, has_data=mf.has_data)
            for meta in walk:
                self.last_store_timestamp = meta.store_timestamp
                checked += 1
            if not (walk.ended and i + 1 < len(files)):
                break
            i += 1
            start = files[i].start
        end = walk.offset
        if walk.reason is None or walk.unwritten:
            log.info(
                "CommitLog: %d records checked from offset %d, the log ends at offset %d", checked, checked_from, end
            )
        else:
            log.warning(
                "CommitLog cut at offset %d (%d records checked from %d): %s", end, checked, checked_from, walk.reason
            )
        self.files.truncate(end)
        return end

    def cut(self, offset: int) -> None:
        """Make ``offset`` (a record boundary at or below the write position, checked by the
        caller) the write position for good: the bytes after it in its file read as zero,
        later files are deleted (the file starting at ``offset`` too, unless it is the only
        one), and both are synced, so nothing cut comes back after a crash.

        Raises:
            OSError: a sync failed.
        """
        count = len(self.files.files)
        cut_file = self.files.find(offset)
        self.files.truncate(offset)
        files = self.files.files
        if len(files) > 1 and files[-1].wrote == 0:
            files.pop().destroy()  # begins at ``offset``: nothing of it is left
        if cut_file is not None and not cut_file.closed:
            cut_file.sync_cut()
        if len(self.files.files) < count:
            sync_directory(self.files.directory)

    def file_start_before(self, timestamp: int) -> int:
        """Start of the newest file whose first record is not newer than ``timestamp`` (the
        first file when none is); RocketMQ's rule for where abnormal recovery begins."""
        for mf in reversed(self.files.files):
            ts = self.first_store_timestamp(mf)
            if ts is not None and ts <= timestamp:
                return mf.start
        return self.files.min_offset

    # --- retention ------------------------------------------------------------------------

    def delete_expired(
        self, *, now: int, reserved_ms: int, force: bool, limit_offset: int, max_files: int, why: str = ""
    ) -> tuple[int, int]:
        """Delete old files from the head; returns how many went, and how many of them had
        not expired.

        A file counts as last written when the next file got its first record. It goes when
        that is ``reserved_ms`` ago, or at once with ``force`` (``why`` says why, for the log);
        never the last file, and never one reaching past ``limit_offset`` (data not yet synced
        or dispatched). Each deletion is logged with the offsets and store times it held.
        """
        files = self.files.files
        deleted = forced = 0
        while deleted < max_files and len(files) > 1 and files[0].end <= limit_offset:
            closed_at = self.first_store_timestamp(files[1])
            expired = closed_at is not None and now - closed_at >= reserved_ms
            if not (expired or force):
                break
            mf = files[0]
            held = f"offsets {mf.start}..{mf.end}, stored {_when(self.first_store_timestamp(mf))} .. {_when(closed_at)}"
            if expired:
                log.info("deleting CommitLog file %s (%s): expired", mf.path, held)
            else:
                log.warning("deleting CommitLog file %s (%s) before it expired: %s", mf.path, held, why or "forced")
                forced += 1
            self.files.delete_first()
            deleted += 1
        return deleted, forced

    def close(self) -> None:
        self.files.close()


def _when(ms: int | None) -> str:
    """A store timestamp for the log (local time)."""
    if ms is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"
