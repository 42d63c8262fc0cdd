"""DLedgerLog: a DLedger group member's replicated log, in DLedger's mmap file store layout.

Files under ``<root>/dledger-<selfId>/`` (see rmq.protocol.dledger for the byte layout):

* ``data/<20-digit offset>``: entries; ``index/<20-digit offset>``: 32 bytes per entry;
* ``currterm``: ``currTerm`` and ``voteLeader`` (Java properties), written before a vote or a
  new term counts;
* ``checkpoint``: ``endIndex`` and ``committedIndex`` (Java properties).

The Raft core decides what to append and truncate; this class only keeps the files right:
entries at consecutive indexes, each at the data offset its header names, the index unit of
every entry pointing at it, and a torn tail cut at open. Synchronous and single-threaded, like
MessageStore; ``sync`` may run in a worker thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from rmq.protocol import javaprops
from rmq.protocol.dledger import (
    BODY_OFFSET,
    ENTRY_HEADER,
    INDEX_UNIT_SIZE,
    MAGIC,
    MIN_BLANK,
    blank_size_at,
    decode_entry_header,
    decode_index,
    encode_blank,
    encode_entry,
    encode_index,
    patch_record_offset,
)
from rmq.protocol.errors import ProtocolError

from .errors import StoreError
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue

log = logging.getLogger("rmq.store.dledger")

DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryIndex
ALLOCATE_AHEAD = 4 * 1024 * 1024  # bytes a file written through its mapping allocates at a time


@dataclass(frozen=True, slots=True)
class LogEntry:
    index: int
    term: int
    pos: int  # offset of the entry in the data files
    body: bytes

    @property
    def record_offset(self) -> int:
        """Where the entry's body (a 4.x message record) starts: its CommitLog offset."""
        return self.pos + BODY_OFFSET


@dataclass(frozen=True)
class SyncPlan:
    """Files to sync (with how far) for every entry appended when it was made."""

    files: list[tuple[MappedFile, int]]
    ends: tuple[int, int]  # data and index queue ends it covers
    cuts: int


class DLedgerLog:
    """The files of one member. Opening recovers them: entries are checked from the first
    file on (magic, size, index continuity, own position); the first bad one and everything
    after it is cut off, data and index alike."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        self_id: str,
        *,
        data_file_size: int = 1024 * 1024 * 1024,
        index_file_size: int = DEFAULT_INDEX_FILE_SIZE,
        pwrite_appends: bool = False,
    ) -> None:
        if index_file_size % INDEX_UNIT_SIZE:
            raise StoreError(f"index file size must be a multiple of {INDEX_UNIT_SIZE}")
        self.path = os.path.join(os.fspath(root), f"dledger-{self_id}")
        # pwrite_appends: for a log whose every append is synced before it counts (sync_flush);
        # see MappedFile.expect_appends. A log written through its mappings gets its files'
        # blocks ALLOCATE_AHEAD at a time before it writes into them: no SIGBUS on a full disk.
        ahead = 0 if pwrite_appends else ALLOCATE_AHEAD
        self.data = MappedFileQueue(
            os.path.join(self.path, "data"), data_file_size, pwrite_appends=pwrite_appends, allocate_ahead=ahead
        )
        self.index = MappedFileQueue(
            os.path.join(self.path, "index"), index_file_size, pwrite_appends=pwrite_appends, allocate_ahead=ahead
        )
        self.data_file_size = data_file_size
        self.begin_index = 0  # first index held (entries before it were deleted or never copied)
        self.end_index = -1  # last index held; -1 = empty
        self.end_term = -1
        self.committed_index = -1
        self.term = 0
        self.voted_for: str | None = None
        self._pending: int | None = None  # data offset of the leader's entry being filled
        self._cuts = 0  # truncations and rebuilds so far: a sync planned before one vouches for less
        os.makedirs(self.path, exist_ok=True)
        self._load_term()
        self._recover()

    # -- term and vote ---------------------------------------------------------------------

    @property
    def _term_path(self) -> str:
        return os.path.join(self.path, "currterm")

    @property
    def _checkpoint_path(self) -> str:
        return os.path.join(self.path, "checkpoint")

    def _load_term(self) -> None:
        props = _read_props(self._term_path)
        self.term = int(props.get("currTerm", "0") or 0)
        self.voted_for = props.get("voteLeader") or None

    def save_term(self, term: int, voted_for: str | None) -> None:
        """Make ``term`` and the vote durable (the file is synced before this returns)."""
        write_text_atomic(self._term_path, f"currTerm={term}\nvoteLeader={voted_for or ''}\n")
        self.term, self.voted_for = term, voted_for

    def save_checkpoint(self) -> None:
        write_text_atomic(self._checkpoint_path, f"endIndex={self.end_index}\ncommittedIndex={self.committed_index}\n")

    # -- recovery ----------------------------------------------------------------------------

    def _recover(self) -> None:
        self.data.load()
        self.index.load()
        files = self.data.files
        props = _read_props(self._checkpoint_path)
        if not files:
            for mf in self.index.files:
                mf.destroy()
            self.index.files.clear()
            return
        first = self._first_entry_index()
        self.begin_index = first if first is not None else 0
        expected = self.begin_index
        end_pos = files[0].start
        last_term = -1
        i, pos = 0, 0
        while i < len(files):
            mf = files[i]
            if pos + MIN_BLANK > mf.size:
                i, pos = i + 1, 0
                continue
            blank = blank_size_at(mf.mm, pos)  # a file's tail, or a rebuilt log's head
            if blank is not None:
                pos += blank
                end_pos = mf.start + pos
                continue
            try:
                h = decode_entry_header(mf.mm, pos)
            except ProtocolError:
                break
            if h.index != expected or h.pos != mf.start + pos or pos + h.size > mf.size or h.term < last_term:
                break
            # The index is derived from the data: rewrite a unit that a crash left torn.
            if self._read_index(h.index) != (MAGIC, h.pos, h.size, h.index, h.term):
                self._write_index(h.index, h.pos, h.size, h.term)
            pos += h.size
            end_pos = mf.start + pos
            last_term = h.term
            expected += 1
        self.end_index = expected - 1
        self.end_term = last_term
        if end_pos != self.data.max_offset:
            log.info("DLedger log %s recovered to index %d (data offset %d)", self.path, self.end_index, end_pos)
        self.data.truncate(end_pos)
        self.index.truncate((self.end_index + 1) * INDEX_UNIT_SIZE)
        self.committed_index = min(int(props.get("committedIndex", "-1") or -1), self.end_index)

    def _first_entry_index(self) -> int | None:
        mf = self.data.files[0]
        try:
            return decode_entry_header(mf.mm, blank_size_at(mf.mm, 0) or 0).index
        except ProtocolError:
            return None

    # -- index units ------------------------------------------------------------------------

    def _read_index(self, index: int) -> tuple[int, int, int, int, int] | None:
        offset = index * INDEX_UNIT_SIZE
        mf = self.index.find(offset)
        if mf is None or offset - mf.start + INDEX_UNIT_SIZE > mf.wrote:
            return None
        return decode_index(mf.mm, offset - mf.start)

    def _write_index(self, index: int, pos: int, size: int, term: int) -> None:
        offset = index * INDEX_UNIT_SIZE
        q = self.index
        if not q.files:
            mf = q.create(offset - offset % q.file_size)
            mf.wrote = offset - mf.start
        else:
            found = q.find(offset)
            if found is None:
                if offset != q.max_offset:
                    raise StoreError(f"DLedger index unit {index} would leave a gap at {q.max_offset}")
                found = q.create()
            mf = found
        rel = offset - mf.start
        mf.write_at(rel, encode_index(pos, size, index, term))
        mf.wrote = max(mf.wrote, rel + INDEX_UNIT_SIZE)

    # -- reading ---------------------------------------------------------------------------

    def term_at(self, index: int) -> int | None:
        if index < self.begin_index or index > self.end_index:
            return None
        unit = self._read_index(index)
        return None if unit is None else unit[4]

    def entry(self, index: int) -> LogEntry:
        """The entry at ``index``.

        Raises:
            StoreError: ``index`` is not held, or the files disagree with each other.
        """
        unit = self._read_index(index) if self.begin_index <= index <= self.end_index else None
        if unit is None:
            raise StoreError(f"DLedger index {index} not held (begin {self.begin_index}, end {self.end_index})")
        _, pos, size, _, term = unit
        mf = self.data.find(pos)
        if mf is None:
            raise StoreError(f"DLedger index {index} points at data offset {pos}, which is not stored")
        rel = pos - mf.start
        h = decode_entry_header(mf.mm, rel)
        if h.index != index or h.term != term or h.size != size:
            raise StoreError(f"DLedger data and index disagree at index {index}")
        return LogEntry(index, term, pos, bytes(mf.mm[rel + BODY_OFFSET : rel + size]))

    def entries(self, start: int, max_count: int = 1 << 30) -> Iterator[LogEntry]:
        for i in range(start, min(self.end_index, start + max_count - 1) + 1):
            yield self.entry(i)

    @property
    def data_end(self) -> int:
        """The data offset where the next entry would go (blanks aside)."""
        return self.data.max_offset

    # -- writing ---------------------------------------------------------------------------

    def _place(self, size: int, pos: int | None = None) -> MappedFile:
        """The data file where an entry of ``size`` bytes goes next: the last one, or a new
        one after an end-of-file blank (an entry never spans two files)."""
        if size + MIN_BLANK > self.data_file_size:
            raise StoreError(f"DLedger entry of {size} bytes does not fit a data file")
        mf = self.data.last()
        if mf is None:
            start = 0 if pos is None else pos - pos % self.data_file_size
            mf = self.data.create(start)
            mf.wrote = 0 if pos is None else pos - start
        elif mf.wrote >= mf.size:
            mf = self.data.create()
        if mf.wrote + size + MIN_BLANK > mf.size:
            mf.write_at(mf.wrote, encode_blank(mf.size - mf.wrote))
            mf.wrote = mf.size
            mf = self.data.create()
        return mf

    def append(self, index: int, term: int, body: bytes | bytearray | memoryview, *, pos: int | None = None,
               patch_record: bool = False) -> LogEntry:  # fmt: skip
        """Append the entry for ``index`` (which must be ``end_index + 1``).

        ``pos`` is where a leader put it (a follower must put it at the same offset); None
        lets this log choose (a leader). With ``patch_record`` the body's 4.x record gets its
        CommitLog offset (``pos + 48``) written in, as DLedgerCommitLog's append hook does.
        An entry being filled (``reserve_record``) is dropped first.

        Raises:
            StoreError: out-of-order index, a term going back, a position that differs from
                this log's, or an entry larger than a data file.
        """
        self.abort_pending()
        self._check_next(index, term)
        size = BODY_OFFSET + len(body)
        mf = self._place(size, pos)
        where = mf.start + mf.wrote
        if pos is not None and pos != where:
            raise StoreError(f"DLedger entry {index} belongs at data offset {pos}, this log is at {where}")
        raw = bytearray(encode_entry(index, term, where, body))
        if patch_record:
            patch_record_offset(raw)
        mf.write_at(mf.wrote, bytes(raw))
        mf.wrote += size
        self._added(index, term, where, size)
        return LogEntry(index, term, where, bytes(raw[BODY_OFFSET:]))

    def _check_next(self, index: int, term: int) -> None:
        if index != self.end_index + 1 and not (self.end_index < 0 and self.data.max_offset == 0):
            raise StoreError(f"DLedger append of index {index} after end {self.end_index}")
        if term < self.end_term:
            raise StoreError(f"DLedger append of term {term} after term {self.end_term}")

    def _added(self, index: int, term: int, where: int, size: int) -> None:
        if self.end_index < 0:
            self.begin_index = index
        self._write_index(index, where, size, term)
        self.end_index, self.end_term = index, term

    # -- the leader's entry, filled in place ------------------------------------------------------

    def reserve_record(self, size: int, max_body: int | None) -> tuple[MappedFile, int] | None:
        """Where the leader writes its next 4.x record of ``size`` bytes: inside the entry being
        filled, which is opened at the write position when there is none (its 48-byte header
        is written by ``seal_pending``). The caller writes the record there and then sets the
        file's ``wrote`` past it. None when the entry being filled cannot take the record (it
        would pass ``max_body`` bytes, or the end of its file): propose and seal it first.

        Raises:
            StoreError: an entry with this record alone would not fit a data file.
        """
        pending = self._pending
        if pending is not None:
            mf = self.data.last()
            assert mf is not None
            body = mf.start + mf.wrote - pending - BODY_OFFSET
            if (max_body is not None and body + size > max_body) or mf.wrote + size + MIN_BLANK > mf.size:
                return None
            return mf, mf.wrote
        mf = self._place(BODY_OFFSET + size)
        self._pending = mf.start + mf.wrote
        mf.wrote += BODY_OFFSET
        return mf, mf.wrote

    @property
    def filling(self) -> bool:
        """Whether the leader has an entry being filled (records not proposed yet)."""
        return self._pending is not None

    def pending_body(self) -> bytes:
        """The records written into the entry being filled (b"" when there is none)."""
        if self._pending is None:
            return b""
        mf = self.data.last()
        assert mf is not None
        return bytes(mf.mm[self._pending - mf.start + BODY_OFFSET : mf.wrote])

    def seal_pending(self, index: int, term: int, body_length: int) -> LogEntry:
        """Make the entry being filled the entry ``index`` of ``term``: write its header and
        index unit (its body is already in place).

        Raises:
            StoreError: no entry is being filled, or it is not that long.
        """
        where = self._pending
        mf = self.data.last()
        if where is None or mf is None or mf.start + mf.wrote - where - BODY_OFFSET != body_length:
            raise StoreError(f"DLedger entry {index} is not the entry being filled")
        self._check_next(index, term)
        size = BODY_OFFSET + body_length
        mf.write_at(where - mf.start, ENTRY_HEADER.pack(MAGIC, size, index, term, where, 0, 0, 0, body_length))
        self._pending = None
        self._added(index, term, where, size)
        return LogEntry(index, term, where, b"")

    def abort_pending(self) -> None:
        """Drop the entry being filled, records and all (a leader that stopped leading)."""
        if self._pending is not None:
            where, self._pending = self._pending, None
            self.data.truncate(where)

    def entry_span_at(self, offset: int) -> tuple[int, int] | None:
        """(start, end) data offsets of the held entry whose bytes hold ``offset``, or None.
        Entries lie in index order in the data files, so this is a binary search of the index."""
        low, high = self.begin_index, self.end_index
        found: tuple[int, int] | None = None
        while low <= high:
            mid = (low + high) // 2
            unit = self._read_index(mid)
            if unit is None:
                return None
            if unit[1] <= offset:
                found, low = (unit[1], unit[1] + unit[2]), mid + 1
            else:
                high = mid - 1
        return found if found is not None and offset < found[1] else None

    def entry_end(self, index: int) -> int:
        """The data offset where entry ``index`` ends (the start of the data before
        ``begin_index``)."""
        if index < self.begin_index:
            first = self._read_index(self.begin_index) if self.end_index >= self.begin_index else None
            return self.data.max_offset if first is None else first[1]  # none held: a blank at most
        unit = self._read_index(index)
        if unit is None:
            raise StoreError(f"DLedger index {index} not held (begin {self.begin_index}, end {self.end_index})")
        return unit[1] + unit[2]

    def truncate_after(self, index: int) -> None:
        """Drop every entry after ``index`` (never a committed one).

        Raises:
            StoreError: ``index`` is below the commit index.
        """
        if index < self.committed_index:
            raise StoreError(f"refusing to truncate after {index}: entries up to {self.committed_index} are committed")
        self.abort_pending()
        if index >= self.end_index:
            return
        if index < self.begin_index:  # everything: the first entry's place stays where it was
            cut = self.entry(self.begin_index).pos
            self.end_term = -1
        else:
            cut_entry = self.entry(index + 1)
            cut = cut_entry.pos
            self.end_term = self.entry(index).term
        self._cuts += 1
        self.data.truncate(cut)
        self.index.truncate((index + 1) * INDEX_UNIT_SIZE)
        self.end_index = index

    def rebuild(self, index: int, term: int, body: bytes, pos: int) -> LogEntry:
        """Start the log over with the leader's entry ``index`` at data offset ``pos``: every
        data and index file is deleted first (what they held before ``index`` is committed,
        the rest was never committed). Used when the leader no longer holds the entries this
        log lacks (retention, and no snapshots, as in DLedger). Bytes of the first data file
        before ``pos`` hold a blank, so that readers find the first entry.

        Raises:
            StoreError: ``index`` is not past the commit index, or ``pos`` is unknown.
        """
        if index <= self.committed_index or pos < 0:
            raise StoreError(
                f"refusing to rebuild at index {index}, data offset {pos}: committed {self.committed_index}"
            )
        self.abort_pending()
        self._cuts += 1
        for queue in (self.data, self.index):
            while queue.files:
                queue.delete_first()
            queue.flushed_where = 0
        self.begin_index, self.end_index, self.end_term = index, index - 1, -1
        self.committed_index = index - 1
        mf = self._place(BODY_OFFSET + len(body), pos)
        if mf.wrote:
            mf.write_at(0, encode_blank(mf.wrote))
        entry = self.append(index, term, body, pos=pos)
        self.save_checkpoint()
        return entry

    def forget_head(self) -> None:
        """Data files were deleted from the head (retention): entries before the first one
        left are gone, and so are index files wholly before it."""
        first = self._first_entry_index() if self.data.files else None
        if first is None:
            return
        self.begin_index = max(self.begin_index, first)
        keep_from = self.begin_index * INDEX_UNIT_SIZE
        while len(self.index.files) > 1 and self.index.files[0].end <= keep_from:
            self.index.delete_first()

    def commit(self, index: int) -> None:
        self.committed_index = max(self.committed_index, min(index, self.end_index))

    def sync(self) -> None:
        """Make every appended entry (and its index unit) durable; safe in a worker thread."""
        plan = self.sync_plan()
        for mf, upto in plan.files:
            mf.sync(upto)
        self.synced(plan)

    def sync_plan(self) -> SyncPlan:
        """What makes every entry appended so far durable (for a caller that syncs the files
        itself, e.g. through rmq.store.kernel_sync); report it done with ``synced``."""
        ends = (self.data.max_offset, self.index.max_offset)
        files = [*self.data.sync_plan(ends[0]), *self.index.sync_plan(ends[1])]
        return SyncPlan(files, ends, self._cuts)

    def synced(self, plan: SyncPlan) -> None:
        """``plan``'s files are synced: the queues are durable up to where it was made, unless
        the log was cut since (then the files' own marks say what is)."""
        if plan.cuts == self._cuts:
            for queue, end in zip((self.data, self.index), plan.ends, strict=True):
                queue.flushed_where = max(queue.flushed_where, end)

    def close(self) -> None:
        self.save_checkpoint()
        self.data.close()
        self.index.close()


def write_text_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text``: a synced temporary file renamed over it, then the
    directory synced, so a crash leaves the old or the new content, never a torn one."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_props(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return dict(javaprops.parse(f.read()))
    except FileNotFoundError:
        return {}
