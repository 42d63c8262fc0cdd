"""Message index: ``topic#key`` -> CommitLog offsets, in RocketMQ's index file format.

An index file is a 40-byte header, ``hash_slot_num`` 4-byte slots and ``index_num`` 20-byte
entries (PROTOCOL.md 6.2). A key's slot holds the number of its newest entry; each entry links
to the previous entry of the same slot, so a lookup walks newest to oldest. Entry 0 is never
used (the index count starts at 1) so that 0 can mean "none". Keys are hashed, not stored:
lookups can return other keys' offsets, and callers re-check the records.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from rmq.protocol.message import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK
from rmq.protocol.properties import java_string_hash, java_string_hash_extend, java_string_hashes, split_keys

from .formats import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    INDEX_SLOT_SIZE,
    index_file_name,
)
from .mapped_file import MappedFile

UNIQ_KEY_LENGTH = 32  # MessageClientIDSetter's ids: 16 bytes in hex
# of which IP, pid and class loader hash (20) and the millisecond it was made in (8) lead,
# the same for the ids a producer makes in one millisecond; the counter's 4 close it
_UNIQ_HEAD = 28

log = logging.getLogger("rmq.store.index")

_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1
_ALLOCATE_AHEAD = 1 << 20  # bytes of entries allocated ahead of the last one written


def index_key_hash(key: str) -> int:
    """abs(Java hash of ``key``), with Integer.MIN_VALUE mapped to 0 (IndexFile.indexKeyHashMethod)."""
    h = java_string_hash(key)
    return 0 if h == _INT_MIN else abs(h)


class IndexFile:
    """One index file; the header lives in attributes, written out by `write_header`."""

    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        *,
        begin_phy_offset: int = 0,
        begin_timestamp: int = 0,
    ) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        existed = os.path.exists(path) and os.path.getsize(path) > 0
        self.mf = MappedFile(path, 0, size)
        self.mf.wrote = size
        self._entries_at = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE
        if not existed:  # a new file starts with its blocks allocated, or not at all
            try:
                self._allocate(self._entries_at)
            except OSError:
                self.mf.destroy()
                raise
        self.begin_timestamp: int
        self.end_timestamp: int
        self.begin_phy_offset: int
        self.end_phy_offset: int
        self.hash_slot_count: int
        self.index_count: int
        if existed:
            (
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            ) = INDEX_HEADER.unpack_from(self.mf.mm, 0)
            if self.index_count <= 0:
                self.index_count = 1
            self.index_count = min(self.index_count, index_num)
            self._catch_up_header()
        else:
            self.begin_timestamp = self.end_timestamp = max(begin_timestamp, 0)
            self.begin_phy_offset = self.end_phy_offset = max(begin_phy_offset, 0)
            self.hash_slot_count = 0
            self.index_count = 1
            self.write_header()
        self.dirty = not existed

    def _catch_up_header(self) -> None:
        """Count entries written after the header was last written (a process killed between
        the two). Left uncounted, the next put would overwrite an entry that a slot already
        points at and cut that slot's chain."""
        mm = self.mf.mm
        count = self.index_count
        while count < self.index_num:
            entry = INDEX_ENTRY.unpack_from(mm, self._entries_at + count * INDEX_ENTRY_SIZE)
            if entry == (0, 0, 0, 0):
                break
            _, phy, diff, _ = entry
            if count == 1:
                self.begin_phy_offset = phy
            self.end_phy_offset = phy
            self.end_timestamp = self.begin_timestamp + diff * 1000
            count += 1
        if count != self.index_count:
            log.info("index file %s: %d entries past its header", self.path, count - self.index_count)
            self.index_count = count
            try:
                self.write_header()
            except OSError as exc:  # a full disk: the header is written with the next entries
                log.warning("cannot write the header of %s: %s", self.path, exc)

    def _allocate(self, upto: int) -> None:
        """Allocate the blocks below ``upto`` and ``_ALLOCATE_AHEAD`` beyond it (unless they
        are): the file is written through its mapping, and a store into a block the disk
        cannot give is a SIGBUS. The slots are written anywhere, so they are allocated with the
        header; the entries in order, so they are allocated a part ahead at a time (a default
        index file is 420 MB, 20 of them slots).

        Raises:
            OSError: the disk has no room for them.
        """
        if upto > self.mf.allocated_to:
            self.mf.allocate(max(upto + _ALLOCATE_AHEAD, self._entries_at))

    @property
    def full(self) -> bool:
        return self.index_count >= self.index_num

    def write_header(self) -> None:
        """Write the header fields into the file; ``IndexService`` does it once per batch.
        A header behind its entries after a crash only makes recovery index a few records
        again.

        Raises:
            OSError: the file's blocks could not be allocated (it was opened on a full disk).
        """
        self._allocate(self._entries_at)
        INDEX_HEADER.pack_into(
            self.mf.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def put(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add an entry; False when the file is full."""
        return self.put_many([(key_hash, phy_offset, store_timestamp)], 0) == 1

    def put_many(self, entries: list[tuple[int, int, int]], start: int) -> int:
        """Add ``entries[start:]`` (key hash, CommitLog offset, store time) in order until the
        file is full; returns how many were added. The header is the caller's to write.

        Raises:
            OSError: the disk has no room for the blocks they go to.
        """
        count = self.index_count
        todo = entries[start : start + max(self.index_num - count, 0)]
        if not todo:
            return 0
        self._allocate(self._entries_at + (count + len(todo)) * INDEX_ENTRY_SIZE)
        mm = self.mf.mm
        slot_num = self.hash_slot_num
        entry_at = self._entries_at + count * INDEX_ENTRY_SIZE
        read_slot, write_slot, write_entry = INDEX_SLOT.unpack_from, INDEX_SLOT.pack_into, INDEX_ENTRY.pack_into
        begin_ts = self.begin_timestamp
        new_slots = 0
        for key_hash, phy_offset, store_timestamp in todo:
            slot_pos = INDEX_HEADER_SIZE + (key_hash % slot_num) * INDEX_SLOT_SIZE
            prev = read_slot(mm, slot_pos)[0]
            if prev <= 0 or prev >= count:  # entry `count` is the one being written
                prev = 0
                new_slots += 1
            if count <= 1:  # first entry of the file fixes its begin time and offset
                self.begin_phy_offset = phy_offset
                self.begin_timestamp = begin_ts = store_timestamp
            diff = (store_timestamp - begin_ts) // 1000 if begin_ts > 0 else 0
            if diff < 0 or diff > _INT_MAX:  # a clock set back, or decades: clamped as Java does
                diff = 0 if diff < 0 else _INT_MAX
            write_entry(mm, entry_at, key_hash, phy_offset, diff, prev)
            write_slot(mm, slot_pos, count)
            count += 1
            entry_at += INDEX_ENTRY_SIZE
        self.index_count = count
        self.hash_slot_count += new_slots
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self.dirty = True
        return len(todo)

    def time_matches(self, begin: int, end: int) -> bool:
        """Whether ``[begin, end]`` overlaps this file's time span (IndexFile.isTimeMatched)."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    def select(self, key_hash: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` (up to ``max_num`` in total) the offsets of entries with
        ``key_hash`` stored within ``[begin, end]``, newest first."""
        mm = self.mf.mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * INDEX_SLOT_SIZE
        current = INDEX_SLOT.unpack_from(mm, slot_pos)[0]
        if current <= 0 or current > self.index_count or self.index_count <= 1:
            return
        while len(out) < max_num:
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(mm, self._entries_at + current * INDEX_ENTRY_SIZE)
            if diff < 0:
                break
            t = self.begin_timestamp + diff * 1000
            if h == key_hash and begin <= t <= end and phy not in out:  # replays may index twice
                out.append(phy)
            if prev <= 0 or prev > self.index_count or prev == current or t < begin:
                break
            current = prev

    def close(self) -> None:
        self.mf.close()

    def destroy(self) -> None:
        self.mf.destroy()


class IndexService:
    """The index files of a store, oldest first; builds entries and answers key queries."""

    def __init__(self, directory: str, hash_slot_num: int, index_num: int, clock: Callable[[], int]) -> None:
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.clock = clock
        self.files: list[IndexFile] = []
        self.last_indexed = -1  # CommitLog offset of the newest record indexed
        self._prefix_hashes: dict[str, int] = {}  # topic -> Java hash of "topic#"
        # (hash of "topic#", a UNIQ_KEY's first 28 characters) -> hash of both: the part of
        # the id that names the producer (address, pid, class loader) and the millisecond,
        # the same for all it sent in that millisecond, so only the counter's 4 characters
        # are hashed per message
        self._uniq_heads: dict[tuple[int, str], int] = {}

    def load(self) -> None:
        if os.path.isdir(self.directory):
            for name in sorted(os.listdir(self.directory)):
                if len(name) == 17 and name.isdigit():
                    path = os.path.join(self.directory, name)
                    self.files.append(IndexFile(path, self.hash_slot_num, self.index_num))
        if self.files:
            last = self.files[-1]
            if last.index_count > 1 or last.end_phy_offset > 0:
                self.last_indexed = last.end_phy_offset

    def _writable(self) -> IndexFile:
        if self.files and not self.files[-1].full:
            return self.files[-1]
        prev = self.files[-1] if self.files else None
        os.makedirs(self.directory, exist_ok=True)
        millis = self.clock()
        while os.path.exists(os.path.join(self.directory, index_file_name(millis))):
            millis += 1  # two files within one millisecond: keep names unique and ordered
        f = IndexFile(
            os.path.join(self.directory, index_file_name(millis)),
            self.hash_slot_num,
            self.index_num,
            begin_phy_offset=prev.end_phy_offset if prev else 0,
            begin_timestamp=prev.end_timestamp if prev else 0,
        )
        self.files.append(f)
        return f

    def build(
        self,
        topic: str,
        phy_offset: int,
        store_timestamp: int,
        sys_flag: int,
        keys: str | None,
        uniq_key: str | None,
    ) -> None:
        """Index the record at ``phy_offset`` under its UNIQ_KEY and each of its KEYS (see
        ``build_all``).

        Raises:
            OSError: a new index file cannot be created.
        """
        self.build_all([(topic, phy_offset, store_timestamp, sys_flag, keys, uniq_key)])

    def build_all(self, records: list[tuple[str, int, int, int, str | None, str | None]]) -> None:
        """Index ``records`` (topic, CommitLog offset, store timestamp, sysFlag, KEYS, UNIQ_KEY),
        in CommitLog order, under their UNIQ_KEY and each of their KEYS; the header is written
        once at the end (a header behind its entries is caught up when the file is opened).

        Records at or before ``last_indexed`` are skipped (recovery replays), and so are
        transaction ROLLBACK records.

        Raises:
            OSError: a new index file cannot be created; ``last_indexed`` is the last record
                indexed with all its keys.
        """
        entries: list[tuple[int, int, int]] = []  # (abs hash, CommitLog offset, store time)
        keys_at: list[tuple[int, str]] = []  # KEYS: (Java hash of "topic#", the key), hashed together
        keys_slot: list[int] = []  # where in `entries` each of those goes
        prefixes, heads = self._prefix_hashes, self._uniq_heads
        last = self.last_indexed
        for topic, phy_offset, store_timestamp, sys_flag, keys, uniq_key in records:
            if phy_offset <= last or sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            prefix = prefixes.get(topic)
            if prefix is None:
                if len(prefixes) > 100_000:
                    prefixes.clear()
                prefix = prefixes[topic] = java_string_hash(topic + "#")
            if uniq_key:
                tail = uniq_key[_UNIQ_HEAD:].encode() if len(uniq_key) == UNIQ_KEY_LENGTH else b""
                if len(tail) == 4:  # an id of 32 ASCII characters
                    lead = uniq_key[:_UNIQ_HEAD]
                    head = heads.get((prefix, lead))
                    if head is None:
                        if len(heads) > 10_000:
                            heads.clear()
                        head = heads[prefix, lead] = java_string_hash_extend(prefix, lead)
                    a, b, c, d = tail
                    h = (head * 923_521 + a * 29_791 + b * 961 + c * 31 + d) & 0xFFFFFFFF  # 923521 = 31**4
                    # abs() of the signed value, Integer.MIN_VALUE as 0 (index_key_hash)
                    entries.append(
                        (h if h < 0x80000000 else (0x100000000 - h) & 0x7FFFFFFF, phy_offset, store_timestamp)
                    )
                else:
                    keys_slot.append(len(entries))
                    keys_at.append((prefix, uniq_key))
                    entries.append((0, phy_offset, store_timestamp))
            if keys:
                for key in split_keys(keys):
                    keys_slot.append(len(entries))
                    keys_at.append((prefix, key))
                    entries.append((0, phy_offset, store_timestamp))
            last = phy_offset
        if keys_at:
            for slot, h in zip(keys_slot, java_string_hashes(keys_at), strict=True):
                entries[slot] = (0 if h == _INT_MIN else abs(h), *entries[slot][1:])
        done = 0
        while done < len(entries):
            f = self._writable()
            done += f.put_many(entries, done)
            f.write_header()
            phy = entries[done - 1][1]
            # a record whose keys did not all fit is not indexed yet: a retry indexes it again
            self.last_indexed = phy - 1 if done < len(entries) and entries[done][1] == phy else phy
        self.last_indexed = last

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """Offsets of records indexed under ``topic#key`` within ``[begin, end]``, newest file
        first; plus the newest file's end timestamp and end offset."""
        found: list[int] = []
        last_ts = last_phy = 0
        h = index_key_hash(f"{topic}#{key}")
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.time_matches(begin, end):
                f.select(h, max_num, begin, end, found)
            if f.begin_timestamp < begin or len(found) >= max_num:
                break
        return found, last_ts, last_phy

    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the newest) whose entries all point below ``min_phy``."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy:
            log.info("deleting index file %s", self.files[0].path)
            self.files.pop(0).destroy()
            deleted += 1
        return deleted

    def dirty_files(self) -> list[IndexFile]:
        return [f for f in self.files if f.dirty]

    def close(self) -> None:
        for f in self.files:
            f.close()
