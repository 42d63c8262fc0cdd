"""The epoch file of controller mode (RocketMQ 5's EpochFileCache, RIP-44).

Each master epoch a broker group has had starts at a CommitLog offset: the entries
``(epoch, start_offset)``, epochs and start offsets both rising, say which master wrote which
stretch of the log. An entry ends where the next one starts; the last one is open
(``OPEN_END``, Java's Long.MAX_VALUE) until someone bounds it with the log's end. A slave that
comes back after a failover compares its entries with the new master's and truncates its
CommitLog to the last offset they share (``consistent_point``).

The file is RocketMQ's CheckpointFile (common/utils/CheckpointFile.java)::

    2                 the number of entries
    773307083         CRC32 of the entry lines (as UTF-8, each ending in a newline) & 0x7FFFFFFF
    7-7000            epoch-startOffset, one line per entry, oldest first
    8-8000

A write goes to ``<file>.tmp`` (synced), the previous file, if it reads back whole, is kept as
``<file>.bak`` (MixAll.string2File keeps the previous content there), and the temporary file
is renamed over the file. A read falls back to the ``.bak`` when the file is missing, holds no
entries, or does not check out (count or CRC), as CheckpointFile.read does; a damaged file
without a backup is an error here, not the empty list RocketMQ reads. RocketMQ writes
nothing when no entry is left (the old file stays and its entries come back at the next
start); here both files are removed then, so an empty cache reads back empty.

The entries, their arithmetic, ``consistent_point`` and the text's encoding are pure values
(``EpochCache()`` without a path does no I/O); only ``read_epoch_file`` / ``write_epoch_file``
and a cache with a path touch the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from .errors import StoreError

log = logging.getLogger("rmq.store.epochs")

OPEN_END = 2**63 - 1  # an entry nobody has bounded yet (Java's Long.MAX_VALUE)
EPOCH_FILE_NAME = "epochFileCheckpoint"  # under the store root (MessageStoreConfig.getStorePathEpochFile)
_NO_CRC = 0  # a CRC line of 0 is not checked (CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE)
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN = -(2**63)


class EpochFileError(StoreError):
    """An epoch file's text that is not a whole CheckpointFile of epoch entries."""


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A master epoch and the CommitLog stretch it wrote: ``[start_offset, end_offset)``."""

    epoch: int
    start_offset: int
    end_offset: int = OPEN_END


# --- pure: entries ----------------------------------------------------------------------------


def linked(entries: Iterable[EpochEntry], last_end: int | None = None) -> list[EpochEntry]:
    """``entries`` ordered by epoch, each ending where the next starts (EpochFileCache's
    initEntries); the last keeps its own end, or takes ``last_end`` when that is not below its
    start (setLastEpochEntryEndOffset). A repeated epoch keeps its last entry, as a map would."""
    by_epoch = {e.epoch: e for e in entries}
    out = [by_epoch[k] for k in sorted(by_epoch)]
    for i in range(len(out) - 1):
        out[i] = replace(out[i], end_offset=out[i + 1].start_offset)
    if out and last_end is not None and out[-1].start_offset <= last_end:
        out[-1] = replace(out[-1], end_offset=last_end)
    return out


def consistent_point(
    local_entries: Sequence[EpochEntry], local_end: int, master_entries: Sequence[EpochEntry], master_end: int
) -> int:
    """The CommitLog offset up to which a slave's log and its master's are the same
    (EpochFileCache.findConsistentPoint, as AutoSwitchHAClient.doTruncate calls it), or -1.

    Both lists are linked (``linked``) with their last entry ending at the log's end
    (``local_end``, ``master_end``). Walking the local entries from the newest, the first epoch
    the master has too with the same start offset gives min(the local end of that epoch, the
    master's end of it): up to there both logs hold what that epoch's master wrote. -1 when no
    epoch matches (nothing in common: the slave must start over).
    """
    local = linked(local_entries, local_end)
    master = {e.epoch: e for e in linked(master_entries, master_end)}
    for entry in reversed(local):
        theirs = master.get(entry.epoch)
        if theirs is not None and theirs.start_offset == entry.start_offset:
            return min(entry.end_offset, theirs.end_offset)
    return -1


# --- pure: the file's text --------------------------------------------------------------------


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF  # UtilAll.crc32


def encode_entries(entries: Sequence[EpochEntry]) -> str:
    """The CheckpointFile text of ``entries`` (oldest first): count, CRC, ``epoch-start`` lines."""
    body = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    return f"{len(entries)}\n{_crc(body)}\n{body}"


def _java_int(text: str | None, low: int, high: int) -> int:
    """Integer.parseInt / Long.parseLong: an optional sign and ASCII digits, in range."""
    if text is None:
        raise EpochFileError("the file ends early")
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise EpochFileError(f"not a number: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise EpochFileError(f"out of range: {text!r}")
    return value


def _entry_of(line: str) -> EpochEntry | None:
    """EpochEntrySerializer.fromLine: ``epoch-start``; None for a line of another shape (skipped,
    as RocketMQ skips it, though it counts in the CRC)."""
    parts = line.split("-")
    while parts and not parts[-1]:  # String.split drops trailing empty strings
        parts.pop()
    if len(parts) != 2:
        return None
    return EpochEntry(_java_int(parts[0], _INT_MIN, _INT_MAX), _java_int(parts[1], _LONG_MIN, OPEN_END))


def decode_entries(text: str) -> list[EpochEntry]:
    """The entries of a CheckpointFile's text (CheckpointFile.read), linked (``linked``).

    Raises:
        EpochFileError: a count or CRC line that is no number, a count that is not the number
            of entries, or a CRC (other than 0) that is not the entry lines' (a torn or
            damaged file).
    """
    # BufferedReader.readLine ends a line at \n, \r or \r\n; the CRC is over the lines as read,
    # each followed by a newline
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    it = iter(lines)
    count = _java_int(next(it, None), _INT_MIN, _INT_MAX)
    crc = _java_int(next(it, None), _INT_MIN, _INT_MAX)
    rest = list(it)
    entries = [e for line in rest if (e := _entry_of(line)) is not None]
    if len(entries) != count:
        raise EpochFileError(f"expected {count} entries, found {len(entries)}")
    truth = _crc("".join(line + "\n" for line in rest))
    if crc != _NO_CRC and crc != truth:
        raise EpochFileError(f"entries CRC32 {truth} does not match the file's {crc}")
    return linked(entries)


# --- the files ----------------------------------------------------------------------------------


def epoch_file_path(store_root: str) -> str:
    """Where RocketMQ keeps a store's epoch file unless storePathEpochFile says otherwise."""
    return os.path.join(store_root, EPOCH_FILE_NAME)


def _read_one(path: str) -> list[EpochEntry]:
    try:
        with open(path, encoding="utf-8", errors="strict", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise EpochFileError(f"not UTF-8 text: {exc}") from None
    if not text:
        return []
    return decode_entries(text)


def read_epoch_file(path: str) -> list[EpochEntry]:
    """The entries of the epoch file at ``path``, from ``<path>.bak`` when the file is missing,
    holds none, or is damaged (CheckpointFile.read). Empty when neither file exists.

    Raises:
        EpochFileError: the file is damaged and so is its backup, or it has none (RocketMQ
            reads no entries then).
        OSError: a file cannot be read.
    """
    damaged = False
    try:
        entries = _read_one(path)
        why = "holds no entries"
    except EpochFileError as exc:
        entries, why, damaged = [], str(exc), True
    if entries:
        return entries
    bak = path + ".bak"
    if damaged and not os.path.exists(bak):
        # RocketMQ reads an empty list here, and the broker would then take itself for a new
        # replica and keep a log that may have diverged: refuse instead
        raise EpochFileError(f"epoch file {path} is damaged ({why}) and has no backup")
    try:
        entries = _read_one(bak)
    except EpochFileError as exc:
        raise EpochFileError(f"epoch file {path} {why}, and its backup cannot be used either: {exc}") from None
    if entries or os.path.exists(bak):
        log.warning("epoch file %s %s: read %d entries from %s", path, why, len(entries), bak)
    return entries


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_epoch_file(path: str, entries: Sequence[EpochEntry]) -> None:
    """Replace the epoch file at ``path`` with ``entries``: a synced ``<path>.tmp`` renamed
    over it, the previous file kept as ``<path>.bak`` when it reads back whole. No entries
    removes both files.

    Raises:
        OSError: a step failed; ``path`` then holds the old content or the new, whole.
    """
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    bak = path + ".bak"
    if not entries:
        for p in (path, bak):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        _fsync_dir(directory)
        return
    tmp = path + ".tmp"
    data = encode_entries(entries).encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        previous_whole = bool(_read_one(path))
    except (EpochFileError, OSError):
        previous_whole = False  # a damaged file must not replace a good backup
    if previous_whole:
        os.replace(path, bak)  # the rename below puts the new file in its place at once
    os.replace(tmp, path)
    _fsync_dir(directory)


# --- the cache ----------------------------------------------------------------------------------


class EpochCache:
    """A broker's epoch entries (EpochFileCache), oldest first, each ending where the next
    starts and the last one open (``OPEN_END``) unless ``set_last_end`` bounded it.

    With a ``path`` the entries are read from that epoch file at construction (or, given
    ``entries``, those are written there) and every change is written back (an end offset is
    not part of the file). Without one it is a value (a master's entries as they came over the
    wire). Not thread-safe.

    Raises:
        EpochFileError: the file and its backup are both damaged.
        OSError: the file cannot be read.
    """

    def __init__(self, path: str | None = None, entries: Iterable[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        if entries is not None:
            self.replace_all(entries)  # written to the file, if any
        elif path is not None:
            self._entries = read_epoch_file(path)

    def _save(self) -> None:
        if self.path is not None:
            write_epoch_file(self.path, self._entries)

    # --- reading -------------------------------------------------------------------------

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def last_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def last_epoch(self) -> int:
        """The newest epoch, -1 when there is none."""
        return self._entries[-1].epoch if self._entries else -1

    def get(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self._entries if e.epoch == epoch), None)

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry of a later epoch than ``epoch``."""
        return next((e for e in self._entries if e.epoch > epoch), None)

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry whose stretch holds ``offset`` (start <= offset < end), or None."""
        return next((e for e in self._entries if e.start_offset <= offset < e.end_offset), None)

    # --- changes -------------------------------------------------------------------------

    def append(self, epoch: int, start_offset: int) -> bool:
        """Add a new epoch starting at ``start_offset`` (EpochFileCache.appendEntry): the
        previous last entry now ends there. Refused (False, logged, nothing changed) unless both
        the epoch and the start offset are above the last entry's.

        Raises:
            OSError: the file cannot be written (the entry is kept in memory).
        """
        last = self.last_entry
        if last is not None:
            if last.epoch >= epoch or last.start_offset >= start_offset:
                log.error("epoch entry (%d, %d) does not follow the last one (%d, %d): not appended",
                          epoch, start_offset, last.epoch, last.start_offset)  # fmt: skip
                return False
            self._entries[-1] = replace(last, end_offset=start_offset)
        self._entries.append(EpochEntry(epoch, start_offset))
        self._save()
        return True

    def set_last_end(self, end_offset: int) -> None:
        """Bound the last entry at ``end_offset`` (the log's end) unless that is below its
        start (setLastEpochEntryEndOffset). Not written to the file, which holds no ends."""
        last = self.last_entry
        if last is not None and last.start_offset <= end_offset:
            self._entries[-1] = replace(last, end_offset=end_offset)

    def replace_all(self, entries: Iterable[EpochEntry]) -> None:
        """Take ``entries`` instead (initCacheFromEntries), linked, and write them."""
        self._entries = linked(entries)
        self._save()

    def _truncate_suffix(self, doomed: Callable[[EpochEntry], bool]) -> None:
        self._entries = [e for e in self._entries if not doomed(e)]
        if self._entries:
            self._entries[-1] = replace(self._entries[-1], end_offset=OPEN_END)
        self._save()

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Remove the entries starting at or after ``offset`` (the log was cut there); the
        last one left is open again."""
        self._truncate_suffix(lambda e: e.start_offset >= offset)

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Remove the entries of ``epoch`` and later; the last one left is open again."""
        self._truncate_suffix(lambda e: e.epoch >= epoch)

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Remove the entries ending at or before ``offset`` (retention removed their log)."""
        self._entries = [e for e in self._entries if e.end_offset > offset]
        self._save()

    def consistent_point(self, local_end: int, master: EpochCache | Sequence[EpochEntry], master_end: int) -> int:
        """``consistent_point`` of these entries (ending at ``local_end``) and a master's."""
        theirs = master.entries if isinstance(master, EpochCache) else master
        return consistent_point(self._entries, local_end, theirs, master_end)

    def __repr__(self) -> str:
        return f"EpochCache({self.path!r}, {self._entries!r})"
