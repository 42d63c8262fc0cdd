"""Consume queues: per (topic, queue id), the 20-byte entries that index the CommitLog.

Entry N (the message with queue offset N) lives at byte N*20 of the logical queue, split into
files of ``file_size`` bytes named by their start byte (PROTOCOL.md 6.1).

New entries first go to an in-memory tail (``pending``) and reach the files on the next flush
round (written with pwrite; a new file is not mapped just to append to it). Readers of the
store see both. A process crash loses only the tail, which recovery rebuilds from the
CommitLog; and a store with tens of thousands of queues touches each file once per round
instead of once per message (files are mapped for reading through a bounded pool).

A write the disk refuses (full, I/O error) leaves the entries in the tail, where readers find
them, and the queue in ``failures`` until a later drain writes them; the flush rounds never
count them as synced, so the checkpoint stays before them.
"""

from __future__ import annotations

import contextlib
import logging
import os

from .formats import CQ_BLANK_ENTRY, CQ_ENTRY, CQ_ENTRY_SIZE
from .mapped_file import MappedFile, MapPool
from .mapped_file_queue import MappedFileQueue

log = logging.getLogger("rmq.store.consume_queue")

_U = CQ_ENTRY_SIZE
_BLANK_SIZE = 0x7FFFFFFF  # size field of a padding entry


class ConsumeQueue:
    """One queue. Offsets here are logical (entry numbers), not bytes."""

    def __init__(
        self,
        topic: str,
        queue_id: int,
        directory: str,
        file_size: int,
        pool: MapPool,
        *,
        failures: dict[ConsumeQueue, str] | None = None,
        preallocate: bool = False,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        # Not preallocated, a file is written with pwrite only (MappedFile: no SIGBUS)
        self.files = MappedFileQueue(directory, file_size, pool=pool, preallocate=preallocate)
        self.file_size = file_size
        self.min_offset = 0  # first entry still pointing at stored data
        self.max_offset = 0  # next entry to be written
        self.file_end = 0  # entries below this are in the files, the rest in ``pending``
        self.pending = bytearray()
        self.synced_offset = 0  # entries below this are durable
        self.first_unsynced_phy = -1  # CommitLog offset of entry ``synced_offset``, if any
        self.max_phy_end = 0  # CommitLog offset just past the last entry's record
        # Queues whose last write failed, and why (shared by a table's queues)
        self.failures: dict[ConsumeQueue, str] = {} if failures is None else failures

    # --- loading and recovery -------------------------------------------------------------

    def load(self) -> None:
        """Open the files and find the write position: entries are written in order, so the
        last file holds a run of entries followed by zeros (binary search for the end).

        A write the disk cut short (a full disk) ends at a page, maybe inside an entry, and
        leaves a hole after it: the end is taken no further than the first hole (no real run
        of entries is a whole page of zeros), and nothing past it is read through the mapping
        (on a full tmpfs that is a SIGBUS). The entries lost that way were never synced;
        recovery's replay writes them again.
        """
        self.files.load()
        last = self.files.last()
        if last is None:
            return
        lo, hi = 0, last.size // _U
        fd = os.open(last.path, os.O_RDONLY)  # a few preads: cheaper than mapping the file
        try:
            with contextlib.suppress(OSError):  # no SEEK_HOLE here: no hole is seen
                hi = min(hi, os.lseek(fd, 0, os.SEEK_HOLE) // _U)
            while lo < hi:  # first entry of the last file whose size field is 0
                mid = (lo + hi) // 2
                if CQ_ENTRY.unpack(os.pread(fd, _U, mid * _U))[1] != 0:
                    lo = mid + 1
                else:
                    hi = mid
            end = CQ_ENTRY.unpack(os.pread(fd, _U, (lo - 1) * _U)) if lo else None
        finally:
            os.close(fd)
        last.wrote = last.flushed = lo * _U
        self.files.flushed_where = last.start + last.wrote
        self.max_offset = self.file_end = self.synced_offset = (last.start + last.wrote) // _U
        self.min_offset = self.files.min_offset // _U
        if self.max_offset > self.min_offset:
            phy, size, _ = end or self.entry(self.max_offset - 1) or (0, 0, 0)
            if size != _BLANK_SIZE:
                self.max_phy_end = phy + size

    def truncate_dirty(self, phy_end: int) -> None:
        """Drop entries whose record does not end below ``phy_end`` (the CommitLog's recovered
        end): they point at data that is gone."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:  # first entry reaching past phy_end; entries are in CommitLog order
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is None or e[1] == _BLANK_SIZE or e[0] + e[1] <= phy_end:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.max_offset:
            log.info("truncating %s:%d from offset %d", self.topic, self.queue_id, lo)
            self.truncate(lo)

    def truncate(self, offset: int) -> None:
        """Make ``offset`` the next entry to write."""
        if offset >= self.file_end:
            del self.pending[(offset - self.file_end) * _U :]
        else:
            self.pending.clear()
            self.files.truncate(offset * _U)
            self.file_end = offset
        self.max_offset = offset
        if self.synced_offset >= offset:
            self.synced_offset = offset
            self.first_unsynced_phy = -1
        self.min_offset = min(self.min_offset, offset)
        self.max_phy_end = 0
        if offset > self.min_offset:
            e = self.entry(offset - 1)
            if e is not None and e[1] != _BLANK_SIZE:
                self.max_phy_end = e[0] + e[1]

    def correct_min_offset(self, min_phy: int) -> None:
        """Move ``min_offset`` to the first entry whose record is still in the CommitLog."""
        lo, hi = max(self.min_offset, self.files.min_offset // _U), self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is None or e[1] == _BLANK_SIZE or e[0] < min_phy:
                lo = mid + 1
            else:
                hi = mid
        self.min_offset = lo

    # --- writing --------------------------------------------------------------------------

    def put(self, offset: int, phy: int, size: int, tags_code: int) -> None:
        """Record entry ``offset`` -> (``phy``, ``size``, ``tags_code``).

        The usual case appends the next entry. During recovery replay an entry may already be
        there (kept when equal, rewritten otherwise) or the queue may be behind (the gap is
        padded, or for an empty queue the queue simply starts at ``offset``).
        """
        if offset == self.max_offset:
            if offset == self.synced_offset:
                self.first_unsynced_phy = phy
            self.pending += CQ_ENTRY.pack(phy, size, tags_code)
            self.max_offset = offset + 1
            self.max_phy_end = phy + size
        elif offset < self.max_offset:
            self._rewrite(offset, phy, size, tags_code)
        else:
            if self.max_offset == self.min_offset and not self.files.files and not self.pending:
                self.min_offset = self.max_offset = self.file_end = self.synced_offset = offset
            else:
                log.warning("%s:%d jumps from %d to %d; padding", self.topic, self.queue_id, self.max_offset, offset)
                if self.max_offset == self.synced_offset:
                    self.first_unsynced_phy = phy
                self.pending += CQ_BLANK_ENTRY * (offset - self.max_offset)
                self.max_offset = offset
            self.put(offset, phy, size, tags_code)

    def _rewrite(self, offset: int, phy: int, size: int, tags_code: int) -> None:
        if offset < self.min_offset:
            return
        entry = CQ_ENTRY.pack(phy, size, tags_code)
        if offset >= self.file_end:
            i = (offset - self.file_end) * _U
            self.pending[i : i + _U] = entry
            return
        mf = self.files.find(offset * _U)
        if mf is not None and mf.read(offset * _U - mf.start, _U) != entry:
            log.warning("%s:%d rewriting entry %d", self.topic, self.queue_id, offset)
            if offset < self.synced_offset:
                self.synced_offset = offset
                self.first_unsynced_phy = phy
            mf.flushed = min(mf.flushed, offset * _U - mf.start)
            self.files.flushed_where = min(self.files.flushed_where, offset * _U)
            try:
                mf.write_at(offset * _U - mf.start, entry)
            except OSError as exc:  # the disk refuses: the entries from here wait in the tail
                self._failed(exc)
                self._unwrite_from(offset)
                self.pending[0:_U] = entry

    def drain(self) -> None:
        """Move the pending tail into the files (creating files as needed).

        Raises:
            OSError: the disk refused a write or a new file; the tail stays as it was (what
                was written of it is written again next time).
        """
        if not self.pending:
            self.failures.pop(self, None)
            return
        data = self.pending
        off = self.file_end * _U
        p = 0
        view = memoryview(data)
        try:
            while p < len(data):
                mf = self.files.find(off)
                if mf is None:
                    mf = self._create_file_for(off)
                pos = off - mf.start
                n = min(len(data) - p, mf.size - pos)
                mf.write_at(pos, view[p : p + n])
                mf.wrote = pos + n
                p += n
                off += n
        except OSError as exc:
            self._failed(exc)
            raise
        finally:
            view.release()
        self.file_end = self.max_offset
        self.pending = bytearray()
        if self.failures:
            self.failures.pop(self, None)

    def _failed(self, exc: OSError) -> None:
        if self not in self.failures:
            log.error("consume queue %s:%d cannot be written: %s", self.topic, self.queue_id, exc)
        self.failures[self] = f"consume queue {self.topic}:{self.queue_id} cannot be written: {exc}"

    def _unwrite_from(self, offset: int) -> None:
        """Entries ``offset .. file_end`` go back to the head of the pending tail, to be
        written again by the next drain (their file may have lost them: a refused write, a
        failed sync). ``offset`` must be at least ``min_offset``."""
        back = bytearray()
        at = offset
        while at < self.file_end:
            chunk = self.entries(at, self.file_end - at)  # one file at a time
            if not chunk:
                break
            back += chunk
            at += len(chunk) // _U
        self.pending[:0] = back
        self.file_end = offset

    def rewrite_unsynced(self) -> None:
        """A sync of this queue failed: what it did not make durable is written again (after a
        failed fsync the kernel may count those pages clean though the disk lacks them)."""
        if self.synced_offset < self.file_end:
            self._unwrite_from(max(self.synced_offset, self.min_offset))

    def _create_file_for(self, off: int) -> MappedFile:
        if self.files.files:
            return self.files.create()
        start = off - off % self.file_size
        mf = self.files.create(start)
        if off > start:  # a queue that begins mid-file: pad its head (RocketMQ fillPreBlank)
            mf.write_at(0, CQ_BLANK_ENTRY * ((off - start) // _U))
            mf.wrote = off - start
        return mf

    def unsynced_bytes(self) -> int:
        return (self.max_offset - self.synced_offset) * _U

    def mark_synced(self, upto: int) -> None:
        """Entries below ``upto`` were synced (``upto`` was ``max_offset`` when the flush began)."""
        if upto > self.synced_offset:
            self.synced_offset = min(upto, self.max_offset)
        self.files.flushed_where = max(self.files.flushed_where, self.synced_offset * _U)
        e = self.entry(self.synced_offset) if self.synced_offset < self.max_offset else None
        self.first_unsynced_phy = e[0] if e is not None else -1

    # --- reading --------------------------------------------------------------------------

    def entries(self, offset: int, max_entries: int) -> bytes | None:
        """Raw entries from ``offset`` on, at most ``max_entries``, never crossing a file
        boundary; b"" outside ``[min_offset, max_offset)``; None when the file holding
        ``offset`` is missing."""
        if offset < self.min_offset or offset >= self.max_offset or max_entries <= 0:
            return b""
        if offset < self.file_end:
            off = offset * _U
            mf = self.files.find(off)
            if mf is None:
                return None
            pos = off - mf.start
            n = min(max_entries * _U, mf.size - pos, (self.file_end - offset) * _U)
            chunk = mf.read(pos, n)
            got = n // _U
            if offset + got < self.file_end or got >= max_entries or pos + n >= mf.size:
                return chunk
            return chunk + self.entries(self.file_end, max_entries - got)  # type: ignore[operator]
        i = (offset - self.file_end) * _U
        return bytes(self.pending[i : i + max_entries * _U])

    def entry(self, offset: int) -> tuple[int, int, int] | None:
        """(CommitLog offset, size, tags code) of entry ``offset``, or None if not stored."""
        raw = self.entries(offset, 1)
        if not raw:
            return None
        return CQ_ENTRY.unpack(raw)

    def next_file_offset(self, offset: int) -> int:
        """First entry of the file after the one holding ``offset``."""
        per_file = self.file_size // _U
        return (offset // per_file + 1) * per_file

    # --- retention ------------------------------------------------------------------------

    def delete_expired(self, min_phy: int) -> int:
        """Delete head files whose entries all point below ``min_phy``; returns how many."""
        deleted = 0
        files = self.files.files
        while len(files) > 1:
            last_entry = CQ_ENTRY.unpack_from(files[0].mm, files[0].size - _U)
            if last_entry[1] != _BLANK_SIZE and last_entry[0] >= min_phy:
                break
            self.files.delete_first()
            deleted += 1
        self.correct_min_offset(min_phy)
        return deleted

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        self.pending.clear()
        self.files.destroy()


class ConsumeQueueTable:
    """All consume queues under ``root``: ``root/<topic>/<queueId>/<files>``."""

    def __init__(self, root: str, file_size: int, pool: MapPool, *, preallocate: bool = False) -> None:
        self.root = root
        self.file_size = file_size
        self.pool = pool
        self.preallocate = preallocate  # allocate each file's blocks when it is made
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.failures: dict[ConsumeQueue, str] = {}  # queues whose last write failed, and why

    def load(self) -> None:
        if not os.path.isdir(self.root):
            return
        for topic in os.listdir(self.root):
            tdir = os.path.join(self.root, topic)
            if not os.path.isdir(tdir):
                continue
            for qid in os.listdir(tdir):
                if not qid.lstrip("-").isdigit():
                    continue
                cq = self._new(topic, int(qid))
                cq.load()
                self.queues[(topic, int(qid))] = cq

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        directory = os.path.join(self.root, topic, str(queue_id))
        return ConsumeQueue(
            topic, queue_id, directory, self.file_size, self.pool, failures=self.failures, preallocate=self.preallocate
        )

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = self._new(topic, queue_id)
        return cq

    def remove_topic(self, topic: str) -> int:
        """Delete every queue of ``topic``; returns how many."""
        doomed = [key for key in self.queues if key[0] == topic]
        for key in doomed:
            cq = self.queues.pop(key)
            self.failures.pop(cq, None)
            cq.destroy()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(self.root, topic))
        return len(doomed)

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
