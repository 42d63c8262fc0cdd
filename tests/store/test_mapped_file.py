"""MappedFile.sync: a log's file keeps one descriptor for its syncs (each open and close in
the flush thread would be two more GIL handoffs with the event loop) and lets it go once the
file is flushed to its end, or closed. A log synced every few KiB writes with pwrite, not
through its mapping (expect_appends)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from rmq.protocol.message import Message, decode_record
from rmq.store import FlushDiskType, MessageDraft, MessageStore, PutMessageStatus, batch_drafts
from rmq.store.dledger_log import DLedgerLog
from rmq.store.mapped_file import HEAD_LAST, MappedFile, MapPool, _copy_head_last
from rmq.store.mapped_file_queue import MappedFileQueue

from .conftest import small_config


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_log_file_keeps_one_descriptor_for_its_syncs_until_flushed_to_its_end(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096)
    before = _open_fds()
    mf.mm[0:100] = b"x" * 100
    mf.sync(100)
    assert mf.flushed == 100 and _open_fds() == before + 1
    mf.mm[100:200] = b"y" * 100
    mf.sync(200)  # the same descriptor
    assert mf.flushed == 200 and _open_fds() == before + 1
    mf.sync(4096)  # flushed to its end: no later sync needs it
    assert mf.flushed == 4096 and _open_fds() == before
    mf.sync(4096, begin=0)  # a forced sync still works
    assert _open_fds() == before
    with open(mf.path, "rb") as f:
        assert f.read(200) == b"x" * 100 + b"y" * 100


def test_closing_a_file_releases_its_sync_descriptor(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096)
    before = _open_fds()
    mf.mm[0:10] = b"z" * 10
    mf.sync(10)
    mf.close()
    assert _open_fds() < before + 1
    mf.sync(20)  # skipped: closed
    assert mf.flushed == 10


def test_pooled_files_keep_no_descriptor(tmp_path: Path) -> None:
    pool = MapPool(4)
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096, pool=pool)
    mf.mm[0:10] = b"q" * 10
    before = _open_fds()
    mf.sync(10)
    assert mf.flushed == 10 and _open_fds() == before
    mf.close()


# -- logs synced every few KiB write with pwrite (MappedFile.expect_appends) ----------------


def _mappings(path: str) -> list[tuple[int, int, bool, int]]:
    """(file offset, end, readahead off, resident KiB) of each part of the mappings of
    ``path``, from /proc/self/smaps (``rr`` in VmFlags: MADV_RANDOM)."""
    parts: list[tuple[int, int, bool, int]] = []
    current: list[int] | None = None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header
                current = None
                if len(fields) >= 6 and fields[5] == path:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    offset = int(fields[2], 16)
                    current = [offset, offset + hi - lo, 0]
            elif fields[0] == "Rss:" and current is not None:
                current[2] = int(fields[1])
            elif fields[0] == "VmFlags:" and current is not None:
                parts.append((current[0], current[1], "rr" in fields[1:], current[2]))
                current = None
    return sorted(parts)


needs_smaps = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux /proc/self/smaps")


@needs_smaps
def test_a_log_pwrite_appends_writes_with_pwrite_not_through_its_mapping(tmp_path: Path) -> None:
    size = 64 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, pwrite_appends=True)
    first = queue.create()
    data = os.urandom(3 * mmap.PAGESIZE)
    first.write(0, data[:100])
    first.write_at(100, data[100:])
    # no page of the mapping was touched (a write fault would bring in a large folio), and
    # readahead stays on for readers
    assert _mappings(first.path) == [(0, size, False, 0)]
    assert first.read(0, len(data)) == data  # one page cache: the mapping reads it at once
    assert first.appending and first.wrote == 100
    before = _open_fds()
    first.write(len(data), b"x" * (size - len(data)))
    second = queue.create()  # the first is full: it lets its write descriptor go
    assert not first.appending and second.appending
    assert _open_fds() == before - 1 + 1  # and the second's mapping holds a descriptor of its own
    queue.close()


@needs_smaps
def test_recovery_goes_on_writing_the_last_file_with_pwrite(tmp_path: Path) -> None:
    size = 64 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, pwrite_appends=True)
    queue.create().write(0, b"r" * (10 * mmap.PAGESIZE))
    queue.close()
    again = MappedFileQueue(str(tmp_path), size, pwrite_appends=True)
    again.load()
    again.truncate(10 * mmap.PAGESIZE - 100)  # where recovery found the end
    mf = again.files[0]
    assert mf.appending
    mf.write(mf.wrote, b"s" * 10)
    assert _mappings(mf.path) == [(0, size, False, 0)]
    assert mf.read(10 * mmap.PAGESIZE - 102, 4) == b"rrss"
    again.close()


@needs_smaps
def test_a_log_synced_twice_a_second_writes_through_its_mapping(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path), 16 * mmap.PAGESIZE, allocate_ahead=4 * mmap.PAGESIZE)  # as DLedgerLog
    mf = queue.create()
    mf.write(0, b"m" * mmap.PAGESIZE)
    assert not mf.appending and mf.mapped_writes_at(mmap.PAGESIZE, 1)
    [(start, end, random, resident)] = _mappings(mf.path)
    assert (start, end, random) == (0, 16 * mmap.PAGESIZE, False) and resident > 0
    queue.close()


@needs_smaps
def test_a_file_whose_blocks_are_not_allocated_is_never_written_through_its_mapping(tmp_path: Path) -> None:
    """A store into a mapped block the disk cannot give is a SIGBUS; a pwrite is an error."""
    queue = MappedFileQueue(str(tmp_path), 16 * mmap.PAGESIZE)
    mf = queue.create()
    mf.write(0, b"m" * mmap.PAGESIZE)
    mf.write_at(mmap.PAGESIZE, b"n" * 10)
    assert not mf.allocated and not mf.mapped_writes_at(0, 1)
    assert [resident for *_, resident in _mappings(mf.path)] == [0]
    assert mf.read(mmap.PAGESIZE - 2, 4) == b"mmnn"
    queue.close()


def test_a_pooled_file_unmapped_still_takes_appends(tmp_path: Path) -> None:
    size = 16 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, pool=MapPool(4), pwrite_appends=True)
    mf = queue.create()
    mf.write(0, b"p" * 10)
    mf.unmap()
    mf.write(10, b"q" * 10)  # no mapping made for a write
    assert mf.read(0, 20) == b"p" * 10 + b"q" * 10  # mapped again on use
    queue.close()


@needs_smaps
@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_the_commitlog_writes_with_pwrite_whatever_the_flush(tmp_path: Path, flush: FlushDiskType) -> None:
    store = MessageStore(small_config(tmp_path, flush_disk_type=flush), disk_usage=lambda _p: 0.1)
    try:
        assert store.put_many(
            batch_drafts(MessageDraft("T", 0, b""), [Message("T", b"one"), Message("T", b"two")])
        ).ok  # one pwrite
        assert store.put(MessageDraft("T", 0, b"three")).ok
        mf = store.commitlog.files.files[0]
        assert mf.appending
        assert [resident for *_, resident in _mappings(mf.path)] == [0]  # no page written through it
        store.dispatch_pending()
        got = store.get_message("T", 0, 0, 10)
        assert [decode_record(r, check_crc=True)[0].body for r in got.records] == [b"one", b"two", b"three"]
    finally:
        store.close()


@pytest.mark.parametrize("sync_flush", [True, False])
def test_a_dledger_log_synced_on_every_append_writes_with_pwrite(tmp_path: Path, sync_flush: bool) -> None:
    dlog = DLedgerLog(tmp_path, "n0", data_file_size=64 * mmap.PAGESIZE, pwrite_appends=sync_flush)
    try:
        dlog.append(0, 1, b"entry")
        assert dlog.data.files[0].appending == sync_flush
        assert dlog.entry(0).body == b"entry"
    finally:
        dlog.close()


@pytest.mark.parametrize("batch", [False, True])
def test_a_failed_commitlog_write_refuses_the_append_and_the_next_one_takes_its_place(
    tmp_path: Path, batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MessageStore(small_config(tmp_path), disk_usage=lambda _p: 0.1)
    try:
        assert store.put(MessageDraft("T", 0, b"first")).ok
        mf = store.commitlog.files.files[0]
        wrote = mf.wrote

        def io_error(*_args: object) -> None:
            raise OSError(5, "Input/output error")

        with monkeypatch.context() as patch:  # the kernel refusing the write (EIO; ENOSPC: test_disk_full.py)
            patch.setattr(MappedFile, "pwrite", io_error)
            if batch:
                result = store.put_many(
                    batch_drafts(MessageDraft("T", 0, b""), [Message("T", b"a"), Message("T", b"b")])
                )
            else:
                result = store.put(MessageDraft("T", 0, b"lost"))
        assert result.status is PutMessageStatus.UNKNOWN_ERROR and "Input/output error" in result.remark
        assert mf.wrote == wrote and store.commitlog.max_offset == wrote  # nothing counts as written
        assert store.put(MessageDraft("T", 0, b"second")).ok
        store.dispatch_pending()
        got = store.get_message("T", 0, 0, 10)
        assert [decode_record(r, check_crc=True)[0].body for r in got.records] == [b"first", b"second"]
        assert got.queue_offsets == [0, 1]
    finally:
        store.close()


class _CopyOrder(bytearray):
    """A buffer that notes where each slice copied into it starts."""

    starts: list[int]

    def __setitem__(self, key, value):  # type: ignore[no-untyped-def]
        self.starts.append(key.start)
        super().__setitem__(key, value)


def test_a_copy_into_the_mapping_writes_its_head_last() -> None:
    """As with pwrite: a copy cut short by a kill leaves a record's size (an entry's magic)
    as it was, zeros past the appends, so recovery does not take the torn rest in."""
    buf = _CopyOrder(32)
    buf.starts = []
    _copy_head_last(buf, 8, b"SIZE" + b"rest of the record")  # type: ignore[arg-type]
    assert buf.starts == [8 + HEAD_LAST, 8]
    assert bytes(buf[8:30]) == b"SIZErest of the record"
    buf.starts = []
    _copy_head_last(buf, 0, b"abc")  # type: ignore[arg-type]
    assert buf.starts == [0] and bytes(buf[:3]) == b"abc"


def test_a_file_written_in_order_gets_its_blocks_a_part_ahead_at_a_time(tmp_path: Path) -> None:
    """A DLedger log's 1 GiB data file must not take 1 GiB of disk when it is made."""
    ahead = 4 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), 64 * mmap.PAGESIZE, allocate_ahead=ahead)
    mf = queue.create()
    assert mf.allocated_to == ahead and os.stat(mf.path).st_blocks * 512 <= 2 * ahead
    mf.write(0, b"a" * (3 * mmap.PAGESIZE))
    assert mf.allocated_to == ahead  # within what it has
    mf.write(3 * mmap.PAGESIZE, b"b" * (2 * mmap.PAGESIZE))
    assert mf.allocated_to == 5 * mmap.PAGESIZE + ahead
    assert os.stat(mf.path).st_blocks * 512 < 64 * mmap.PAGESIZE
    assert mf.read(3 * mmap.PAGESIZE - 1, 2) == b"ab"
    queue.close()
