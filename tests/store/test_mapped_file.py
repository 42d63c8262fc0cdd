"""MappedFile.sync: a log's file keeps one descriptor for its syncs (each open and close in
the flush thread would be two more GIL handoffs with the event loop) and lets it go once the
file is flushed to its end, or closed. A log synced every few KiB maps the part still to be
written page by page (expect_appends)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from rmq.store import FlushDiskType, MessageStore
from rmq.store.dledger_log import DLedgerLog
from rmq.store.mapped_file import MappedFile, MapPool
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


# -- page by page for logs synced every few KiB (MappedFile.expect_appends) ------------------


def _mapped_parts(path: str) -> list[tuple[int, int, bool]]:
    """(file offset, end, readahead off) of each part of the mappings of ``path``, from
    /proc/self/smaps (``rr`` in VmFlags: MADV_RANDOM)."""
    parts: list[tuple[int, int, bool]] = []
    current: list[int] | None = None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header
                current = None
                if len(fields) >= 6 and fields[5] == path:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    offset = int(fields[2], 16)
                    current = [offset, offset + hi - lo]
            elif fields[0] == "VmFlags:" and current is not None:
                parts.append((current[0], current[1], "rr" in fields[1:]))
                current = None
    return sorted(parts)


needs_smaps = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux /proc/self/smaps")


@needs_smaps
def test_a_log_synced_often_maps_its_new_file_page_by_page_until_the_next_one(tmp_path: Path) -> None:
    size = 64 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, synced_often=True)
    first = queue.create()
    assert _mapped_parts(first.path) == [(0, size, True)]
    first.write(0, b"x" * size)
    second = queue.create()  # the first is full: readahead again for its readers
    assert _mapped_parts(first.path) == [(0, size, False)]
    assert _mapped_parts(second.path) == [(0, size, True)]
    queue.close()


@needs_smaps
def test_recovery_maps_only_the_part_after_the_write_position_page_by_page(tmp_path: Path) -> None:
    size = 64 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, synced_often=True)
    queue.create().write(0, b"r" * (10 * mmap.PAGESIZE))
    queue.close()
    again = MappedFileQueue(str(tmp_path), size, synced_often=True)
    again.load()
    again.truncate(10 * mmap.PAGESIZE + 100)  # where recovery found the end
    mf = again.files[0]
    # the page holding the write position on: the appends' part; before it, readahead
    assert _mapped_parts(mf.path) == [(0, 10 * mmap.PAGESIZE, False), (10 * mmap.PAGESIZE, size, True)]
    assert mf.read(0, 3) == b"rrr"
    again.close()


@needs_smaps
def test_a_log_synced_twice_a_second_keeps_readahead(tmp_path: Path) -> None:
    queue = MappedFileQueue(str(tmp_path), 16 * mmap.PAGESIZE)
    mf = queue.create()
    assert _mapped_parts(mf.path) == [(0, 16 * mmap.PAGESIZE, False)]
    queue.close()


@needs_smaps
def test_a_pooled_file_mapped_again_keeps_its_advice(tmp_path: Path) -> None:
    size = 16 * mmap.PAGESIZE
    queue = MappedFileQueue(str(tmp_path), size, pool=MapPool(4), synced_often=True)
    mf = queue.create()
    mf.write(0, b"p" * (3 * mmap.PAGESIZE))
    mf.expect_appends()  # as a recovery at this position would
    mf.unmap()
    assert _mapped_parts(mf.path) == []
    assert mf.read(0, 1) == b"p"  # mapped again on use
    assert _mapped_parts(mf.path) == [(0, 3 * mmap.PAGESIZE, False), (3 * mmap.PAGESIZE, size, True)]
    queue.close()


@needs_smaps
@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_only_a_sync_flush_commitlog_maps_its_appends_page_by_page(tmp_path: Path, flush: FlushDiskType) -> None:
    store = MessageStore(small_config(tmp_path, flush_disk_type=flush), disk_usage=lambda _p: 0.1)
    try:
        assert store.put_message("T", 0, b"body").ok
        path = store.commitlog.files.files[0].path
        assert any(random for _, _, random in _mapped_parts(path)) == (flush is FlushDiskType.SYNC_FLUSH)
    finally:
        store.close()


@needs_smaps
@pytest.mark.parametrize("sync_flush", [True, False])
def test_a_dledger_log_synced_on_every_append_maps_its_appends_page_by_page(tmp_path: Path, sync_flush: bool) -> None:
    dlog = DLedgerLog(tmp_path, "n0", data_file_size=64 * mmap.PAGESIZE, synced_often=sync_flush)
    try:
        dlog.append(0, 1, b"entry")
        assert any(random for _, _, random in _mapped_parts(dlog.data.files[0].path)) == sync_flush
    finally:
        dlog.close()
