"""An ordered run of equal-size mapped files in one directory, each named by its start offset.

The CommitLog and every consume queue are such runs: offsets are contiguous across files, so
the file holding an offset is found by arithmetic. Head files go when retention deletes them;
the tail rolls to a new file when the last is full and is cut back during recovery.
"""

from __future__ import annotations

import contextlib
import os

from .errors import StoreError
from .formats import file_name_to_offset, offset_to_file_name
from .mapped_file import MappedFile, MapPool


class MappedFileQueue:
    """Files ``directory/<20-digit start offset>`` of ``file_size`` bytes each.

    ``flushed_where`` is the offset below which everything is known durable.
    """

    def __init__(
        self,
        directory: str,
        file_size: int,
        *,
        pool: MapPool | None = None,
        preallocate: bool = False,
        allocate_ahead: int = 0,
        pwrite_appends: bool = False,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._pool = pool
        self._preallocate = preallocate
        self._allocate_ahead = allocate_ahead  # see MappedFile.mapped_writes_at
        # The last file is written with pwrite, not through its mapping
        # (MappedFile.expect_appends): the CommitLog's, and a DLedger log synced on every
        # append. Files of small entries (consume queues, the index) write through theirs.
        self._pwrite_appends = pwrite_appends

    def load(self) -> None:
        """Open the files found on disk, all marked full; recovery sets the real write position.

        Raises:
            StoreError: a file of the wrong size or a gap between files.
        """
        if not os.path.isdir(self.directory):
            return
        starts = sorted(off for name in os.listdir(self.directory) if (off := file_name_to_offset(name)) is not None)
        for start in starts:
            if start % self.file_size:
                raise StoreError(
                    f"{self.directory}/{offset_to_file_name(start)} does not start at a multiple of "
                    f"the file size {self.file_size}"
                )
            if self.files and start != self.files[-1].end:
                raise StoreError(f"gap in {self.directory} before {offset_to_file_name(start)}")
            mf = self._open(start)
            mf.wrote = mf.flushed = self.file_size
            self.files.append(mf)
        if self.files:
            self.flushed_where = self.max_offset

    def _open(self, start: int) -> MappedFile:
        path = os.path.join(self.directory, offset_to_file_name(start))
        return MappedFile(
            path,
            start,
            self.file_size,
            pool=self._pool,
            preallocate=self._preallocate,
            allocate_ahead=self._allocate_ahead,
        )

    @property
    def min_offset(self) -> int:
        """Start of the first file (0 when there is none)."""
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        """The write position: start of the last file plus what it holds."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start + last.wrote

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None outside the files on disk."""
        files = self.files
        if not files or offset < files[0].start:
            return None
        i = (offset - files[0].start) // self.file_size
        return files[i] if i < len(files) else None

    def create(self, start: int | None = None) -> MappedFile:
        """Add the next file (or, for an empty queue, the file starting at ``start``).

        Raises:
            OSError: the file cannot be created or mapped.
        """
        if self.files:
            start = self.files[-1].end
        elif start is None:
            start = 0
        os.makedirs(self.directory, exist_ok=True)
        mf = self._open(start)
        if not self.files:
            self.flushed_where = start
        if self.files:
            self.files[-1].appends_done()
        if self._pwrite_appends:
            mf.expect_appends()
        self.files.append(mf)
        return mf

    def truncate(self, offset: int) -> None:
        """Make ``offset`` the write position: files after it are deleted and the bytes after it
        in its own file read as zero."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.end <= offset:
                keep.append(mf)
            elif mf.start <= offset:
                mf.wrote = offset - mf.start
                mf.zero_from(mf.wrote)
                if self._pwrite_appends:
                    mf.expect_appends()
                keep.append(mf)
            else:
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_first(self) -> MappedFile:
        """Remove and delete the first file."""
        mf = self.files.pop(0)
        mf.destroy()
        return mf

    def sync_plan(self, upto: int) -> list[tuple[MappedFile, int]]:
        """(file, file position) pairs to sync so that everything below ``upto`` is durable."""
        plan: list[tuple[MappedFile, int]] = []
        files = self.files
        if not files:
            return plan
        first = max(0, (self.flushed_where - files[0].start) // self.file_size)
        for mf in files[first:]:
            if mf.start >= upto:
                break
            plan.append((mf, min(upto, mf.end) - mf.start))
        return plan

    def close(self) -> None:
        for mf in self.files:
            mf.close()

    def destroy(self) -> None:
        """Delete every file and the directory if it ends up empty."""
        for mf in self.files:
            mf.destroy()
        self.files = []
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)
