"""One fixed-size, memory-mapped store file, and a pool that bounds how many stay mapped.

A store into a mapping that needs a block the filesystem cannot give (a full disk, a sparse
file) kills the process with SIGBUS. So a file is written through its mapping only when its
blocks were allocated when it was made (``preallocate``: posix_fallocate, where a full disk
is an error); every other write goes with pwrite, where it is an error too.

Threads: the store runs on one thread; only ``sync`` (msync / fdatasync) may run in a worker
thread. Each file has a lock held by ``sync`` and by anything that unmaps, so a sync never sees
a closed mapping and an unmap never waits for more than one sync. Callers must not keep
memoryviews of ``mm`` beyond a call: an exported buffer would make unmapping fail.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import mmap
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import islice

from .errors import StoreError

log = logging.getLogger("rmq.store.mapped_file")

_HAS_PWRITE = hasattr(os, "pwrite")  # not on Windows
_PAGE = mmap.PAGESIZE
HEAD_LAST = 4  # bytes a pwrite writes after the rest: a record's size, an entry's magic (see pwrite)


def _copy_head_last(mm: mmap.mmap, pos: int, data: bytes | bytearray | memoryview) -> None:
    """Copy ``data`` into the mapping at ``pos``, its first ``HEAD_LAST`` bytes last: a copy
    cut short by a kill leaves them as they were (zeros past the appends), as with pwrite."""
    n = len(data)
    if n > HEAD_LAST:
        view = memoryview(data)
        mm[pos + HEAD_LAST : pos + n] = view[HEAD_LAST:]
        mm[pos : pos + HEAD_LAST] = view[:HEAD_LAST]
    else:
        mm[pos : pos + n] = data


class MappedFile:
    """A store file of ``size`` bytes at ``path`` holding the offsets ``start .. start+size``.

    ``wrote`` is how far data has been written; ``flushed`` how far it is known durable.
    With a ``pool`` the mapping is made on first use and may be dropped by the pool when idle
    (the page cache keeps the data; ``sync`` then goes through a fresh descriptor).

    With ``preallocate`` every block of the file is allocated now (``allocated``); a new file
    the disk has no room for is removed again and the error raised. An existing file that
    cannot be allocated is opened all the same, and is written with pwrite until
    ``ensure_allocated`` succeeds. ``allocate`` allocates a head of the file (a file written
    in order, through its mapping, a part ahead at a time).

    Raises:
        StoreError: the file exists and is larger than ``size``.
        OSError: the file cannot be created, extended, allocated (a new file) or mapped.
    """

    __slots__ = (
        "allocated_to",
        "_lock",
        "_mm",
        "_pool",
        "_ahead",
        "_preallocate",
        "_appending",
        "_sync_fd",
        "_write_fd",
        "closed",
        "flushed",
        "path",
        "size",
        "start",
        "wrote",
    )

    def __init__(
        self,
        path: str,
        start: int,
        size: int,
        *,
        pool: MapPool | None = None,
        preallocate: bool = False,
        allocate_ahead: int = 0,
    ) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.wrote = 0
        self.flushed = 0
        self._mm: mmap.mmap | None = None
        self._lock = threading.Lock()
        self._pool = pool
        self._preallocate = preallocate
        self._sync_fd = -1
        self._write_fd = -1  # the descriptor appends are written through (expect_appends)
        self._appending = False
        self.closed = False
        self.allocated_to = 0  # blocks below this file position are allocated
        self._ahead = 0 if preallocate else allocate_ahead
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_RDWR)
            created = False
        try:
            actual = os.fstat(fd).st_size
            if actual > size:
                raise StoreError(
                    f"{path} is {actual} bytes but the configured file size is {size}; "
                    "the store was written with another mapped file size"
                )
            if preallocate:
                try:
                    os.posix_fallocate(fd, 0, size)
                    self.allocated_to = size
                except OSError as exc:
                    if created:  # no half-made file left behind: the next try starts over
                        os.close(fd)
                        fd = -1
                        with contextlib.suppress(OSError):
                            os.unlink(path)
                        raise
                    log.warning("cannot allocate %s (%s): written with pwrite until it can be", path, exc)
            if actual < size and not self.allocated:  # new, or a crash left it short: zeros
                os.ftruncate(fd, size)
            if self._ahead and created:
                try:
                    os.posix_fallocate(fd, 0, min(size, self._ahead))
                except OSError:
                    os.close(fd)
                    fd = -1
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    raise
                self.allocated_to = min(size, self._ahead)
        finally:
            if fd >= 0:
                os.close(fd)
        if pool is None:
            self._map()

    @property
    def allocated(self) -> bool:
        """Whether every block of the file is allocated."""
        return self.allocated_to >= self.size

    def ensure_allocated(self) -> None:
        """Allocate the file's blocks unless they are (the disk was full when it was opened);
        a no-op once they are.

        Raises:
            OSError: the disk still has no room for them.
        """
        self.allocate(self.size)

    def allocate(self, upto: int) -> None:
        """Allocate the blocks below file position ``upto`` unless they are.

        Raises:
            OSError: the disk has no room for them (those below ``allocated_to`` stay).
        """
        upto = min(upto, self.size)
        if upto <= self.allocated_to:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, self.allocated_to, upto - self.allocated_to)
        finally:
            os.close(fd)
        self.allocated_to = upto

    def _map(self) -> mmap.mmap:
        if self.closed:
            raise StoreError(f"{self.path} is closed")
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, self.size)  # keeps its own duplicate of fd
        finally:
            os.close(fd)
        if self._pool is not None:
            self._pool.added(self)
        return self._mm

    def expect_appends(self) -> None:
        """Appends go on from ``wrote`` (a log's last file): from now on every write goes to
        the file with pwrite, not through the mapping, which stays for reading (one page
        cache: what is written reads back at once).

        A write fault in a file mapping goes through readahead, which on recent kernels (ext4
        with large folios, Linux 6.x) fills the page cache with folios of up to 2 MiB; the
        first byte written dirties the whole folio, and every sync writes all of it again
        until the appends move past it. A SYNC_FLUSH log then wrote about 2 MiB per sync of
        32 KiB (20-40 times its data) and each sync took 2.5 ms instead of 0.5. A pwrite
        dirties only the pages it writes. It also costs the broker less CPU than the faults:
        with batches of 30 records 10-15 % less per message than writing through the mapping
        (readahead's folios; 2-3 µs per KiB written, as the profile showed), and with SYNC_FLUSH
        less than faulting single pages in (MADV_RANDOM, what this did before). A lone record's
        pwrite costs a little more than a copy into the mapping (plain sends: 1-3 µs per
        message at 64 in flight), but a log written both ways lost the batches' gain.
        """
        self._appending = True

    def appends_done(self) -> None:
        """No more appends (the file is full): writes go through the mapping again, and the
        write descriptor is let go."""
        self._appending = False
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    @property
    def appending(self) -> bool:
        """Whether appends go with pwrite (``expect_appends``)."""
        return self._appending

    def mapped_writes_at(self, pos: int, n: int) -> bool:
        """Whether ``n`` bytes at ``pos`` may be written straight into ``mm``: appends do not go
        with pwrite and the blocks there are allocated. A file made with ``allocate_ahead``
        allocates its next ``allocate_ahead`` bytes here when a write reaches past what it has
        (files written in order, such as a DLedger log's, get their blocks as they fill rather
        than all at once: a 1 GiB data file would take 1 GiB of disk when made). Otherwise,
        or when the disk has no room, a record is built in a buffer and written with
        ``pwrite``, where a full disk is an error rather than a SIGBUS."""
        if self._appending:
            return False
        end = pos + n
        if end <= self.allocated_to:
            return True
        if not self._ahead:
            return False
        try:
            self.allocate(end + self._ahead)
        except OSError:
            return False
        return True

    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``pos`` with pwrite, through a descriptor kept until
        ``appends_done`` or ``close``. Does not move ``wrote``.

        When ``data`` spans pages, its first ``HEAD_LAST`` bytes go last. A write to a file
        stops short when the process is killed during it (the kernel checks for a fatal signal
        between pages), which would leave the start of a record or DLedger entry with zeros
        or old bytes after it. The first four bytes of a record are its size and of an entry
        its magic, so a write cut short leaves zeros there, where the appends end (the space
        beyond them is zeros), and recovery stops before it rather than taking in a torn
        record whose body CRC still holds. Within one page a write is whole or not at all.
        Writes through the mapping (``write``, ``write_at``) put the head last too.

        Raises:
            OSError: the write failed (disk full, I/O error); some of it may be written.
        """
        if not _HAS_PWRITE:  # Windows: through the mapping
            _copy_head_last(self.mm, pos, data)
            return
        fd = self._write_fd
        if fd < 0:
            if self.closed:
                raise StoreError(f"{self.path} is closed")
            fd = self._write_fd = os.open(self.path, os.O_RDWR)
        self._pwrite_head_last(fd, pos, data)

    def _pwrite_head_last(self, fd: int, pos: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        if len(view) > HEAD_LAST and pos // _PAGE != (pos + len(view) - 1) // _PAGE:
            # within one page a write is whole or not at all: no need for two
            self._pwrite_all(fd, view[HEAD_LAST:], pos + HEAD_LAST)
            view = view[:HEAD_LAST]
        self._pwrite_all(fd, view, pos)

    def _pwrite_all(self, fd: int, view: memoryview, pos: int) -> None:
        """Write all of ``view``: a nearly full disk writes part of it and says so without an
        error; the next call then writes more or raises (ENOSPC)."""
        while view:
            n = os.pwrite(fd, view, pos)
            if n <= 0:
                raise OSError(errno.EIO, f"pwrite to {self.path} wrote nothing")
            view = view[n:]
            pos += n

    def has_data(self, pos: int, n: int = 1) -> bool:
        """Whether the pages holding ``pos .. pos+n`` hold data (are not holes). Reading a hole
        through a mapping of a tmpfs file allocates a page, which a full tmpfs cannot give:
        SIGBUS. Recovery asks before it reads past what it knows to be written."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for at in {pos - pos % _PAGE, (pos + n - 1) - (pos + n - 1) % _PAGE}:
                try:
                    if os.lseek(fd, at, os.SEEK_DATA) != at:
                        return False
                except OSError:  # ENXIO: no data from there on
                    return False
        finally:
            os.close(fd)
        return True

    @property
    def mm(self) -> mmap.mmap:
        """The mapping, made on demand; counts as a use for the pool's LRU order."""
        mm = self._mm
        if mm is None:
            return self._map()
        if self._pool is not None:
            self._pool.touch(self)
        return mm

    @property
    def end(self) -> int:
        """The offset just past this file."""
        return self.start + self.size

    @property
    def full(self) -> bool:
        return self.wrote >= self.size

    def read(self, pos: int, n: int) -> bytes:
        """Copy ``n`` bytes from file position ``pos``."""
        return self.mm[pos : pos + n]

    def write(self, pos: int, data: bytes) -> None:
        """Write ``data`` at file position ``pos`` and move ``wrote`` past it if needed.

        Raises:
            OSError: the write failed (disk full, I/O error); ``wrote`` stays.
        """
        end = pos + len(data)
        if self.mapped_writes_at(pos, len(data)):
            _copy_head_last(self.mm, pos, data)
        else:
            self.write_at(pos, data)
        self.wrote = max(self.wrote, end)

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``pos``: through the mapping if there is one and ``mapped_writes_at``,
        else with pwrite (far cheaper than mapping a file for one small write). Does not move
        ``wrote``.

        Raises:
            OSError: the write failed (disk full, I/O error); some of it may be written.
        """
        if self._appending:
            self.pwrite(pos, data)
            return
        mm = self._mm
        if mm is not None and self.mapped_writes_at(pos, len(data)):
            if self._pool is not None:
                self._pool.touch(self)
            _copy_head_last(mm, pos, data)
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._pwrite_head_last(fd, pos, data)
        finally:
            os.close(fd)

    def sync(self, upto: int, *, begin: int | None = None) -> None:
        """Make bytes up to ``upto`` durable; safe to call from a worker thread. Without ``begin``
        a file already flushed that far is skipped; with it the sync always happens. A closed file
        is skipped (it was deleted or truncated meanwhile).
        """
        with self._lock:
            if self.closed or (begin is None and upto <= self.flushed):
                return
            # fdatasync rather than mmap.flush: msync through mmap.flush holds the GIL for the
            # whole disk write, stalling the event loop; fdatasync releases it, and on Linux it
            # writes back the pages dirtied through the mapping too (one page cache). Each
            # syscall of this worker thread costs a GIL handoff with the busy event loop:
            # no open and close around every sync of a log's file.
            if self._pool is not None:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            else:  # a log's file, synced round after round: keep a descriptor for it
                os.fdatasync(self._descriptor())
            self._synced(upto)

    def sync_cut(self) -> None:
        """fsync the file after ``zero_from`` cut it: the data and the cut itself (its blocks
        freed), so that bytes past the cut cannot come back after a crash. Store thread."""
        with self._lock:
            if self.closed:
                return
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._synced(self.wrote)

    def sync_descriptor(self) -> int:
        """A descriptor to sync this (log) file through, kept until it is flushed to its end
        or closed; report the sync with ``synced``. -1 for a closed file."""
        with self._lock:
            return -1 if self.closed else self._descriptor()

    def synced(self, upto: int) -> None:
        """Bytes up to ``upto`` were made durable through ``sync_descriptor``."""
        with self._lock:
            self._synced(upto)

    def _descriptor(self) -> int:
        if self._sync_fd < 0:
            self._sync_fd = os.open(self.path, os.O_RDWR)
        return self._sync_fd

    def _synced(self, upto: int) -> None:
        self.flushed = max(self.flushed, upto)
        if upto >= self.size and self._sync_fd >= 0:  # flushed to its end: not synced again
            os.close(self._sync_fd)
            self._sync_fd = -1

    def unmap(self, *, blocking: bool = True) -> bool:
        """Drop the mapping (data stays in the page cache). False if a sync holds the file and
        ``blocking`` is false."""
        if not self._lock.acquire(blocking):
            return False
        try:
            if self._mm is not None:
                self._mm.close()
                self._mm = None
        finally:
            self._lock.release()
        if self._pool is not None:
            self._pool.removed(self)
        return True

    def zero_from(self, pos: int) -> None:
        """Discard everything from ``pos`` to the end of the file: those bytes read as zero.

        Cut and re-extend the file, so stale bytes beyond a recovery point can never be
        mistaken for data later, without writing the whole tail.
        """
        was_mapped = self._mm is not None
        self.unmap()
        os.truncate(self.path, pos)
        os.truncate(self.path, self.size)
        self.allocated_to = min(self.allocated_to, pos)
        if self._preallocate:
            try:
                self.ensure_allocated()
            except OSError as exc:  # cutting back must work on a full disk: allocate later
                log.warning("cannot allocate %s again (%s): written with pwrite until it can be", self.path, exc)
        self.wrote = min(self.wrote, pos)
        self.flushed = min(self.flushed, pos)
        if was_mapped or self._pool is None:
            self._map()

    def close(self) -> None:
        """Unmap for good; later syncs are skipped."""
        self.unmap()
        with self._lock:
            self.closed = True
            if self._sync_fd >= 0:
                os.close(self._sync_fd)
                self._sync_fd = -1
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, start={self.start}, wrote={self.wrote})"


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn: Callable[[int], int] = libc.syncfs
        return fn
    except (OSError, AttributeError):
        return None


_syncfs = _load_syncfs()
# Above this many files one syncfs (one journal commit) beats a sync per file by far.
SYNCFS_MIN_FILES = 32


def sync_files(directory: str, items: list[tuple[MappedFile, int]]) -> None:
    """Make ``[flushed, upto)`` of each (file, upto) durable. Many files on one filesystem
    (``directory``'s) are synced with a single syncfs where Linux offers it. Safe from a
    worker thread."""
    if len(items) < SYNCFS_MIN_FILES or _syncfs is None:
        for mf, upto in items:
            mf.sync(upto)
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({directory}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)
    for mf, upto in items:
        mf.flushed = max(mf.flushed, upto)


def sync_directory(directory: str) -> None:
    """fsync a directory: the files created, renamed or deleted in it stay so after a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def default_pool_capacity() -> int:
    """Mapped consume queue files allowed at once: a quarter of the descriptor limit, so
    sockets and CommitLog files keep their share."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(64, min(16384, soft // 4))


class MapPool:
    """Least-recently-used set of mapped files with a capacity.

    Every mapping holds a file descriptor (CPython's mmap keeps one), and a store with tens of
    thousands of queues would otherwise exceed the process's descriptor limit.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._lru: OrderedDict[MappedFile, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def touch(self, mf: MappedFile) -> None:
        self._lru.move_to_end(mf)

    def added(self, mf: MappedFile) -> None:
        self._lru[mf] = None
        if len(self._lru) > self.capacity:
            self._evict()

    def removed(self, mf: MappedFile) -> None:
        self._lru.pop(mf, None)

    def _evict(self) -> None:
        # Oldest first; a file busy in a sync is skipped and tried again next time.
        for victim in list(islice(self._lru, len(self._lru) - self.capacity)):
            victim.unmap(blocking=False)
