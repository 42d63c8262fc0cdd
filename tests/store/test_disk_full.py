"""The store on a full disk, simulated: a write that stops short, one that fails with ENOSPC.
Nothing acknowledged may go missing, before or after a restart, and nothing may raise out of
the store's own rounds (flush, dispatch)."""

from __future__ import annotations

import os

import pytest

from rmq.protocol.message import Message, iter_records
from rmq.store import GetMessageStatus, MessageDraft, MessageStore, PutMessageStatus, batch_drafts
from rmq.store.formats import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE
from rmq.store.index import IndexFile
from rmq.store.mapped_file import MappedFile

from .conftest import FakeClock, SimulatedDisk, crash


def _fill(store: MessageStore, n: int, queues: int = 2) -> None:
    for i in range(n):
        r = store.put(MessageDraft("T", i % queues, b"m%d" % i, properties={"KEYS": f"k{i}"}))
        assert r.ok, r


def _bodies(store: MessageStore, qid: int) -> list[bytes]:
    out, off = [], store.get_min_offset_in_queue("T", qid)
    for _ in range(10_000):
        g = store.get_message("T", qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in iter_records(g.body)]
        off = g.next_begin_offset
    raise AssertionError("the queue does not end")


def _expect_all(store: MessageStore, n: int, queues: int = 2) -> None:
    for q in range(queues):
        assert _bodies(store, q) == [b"m%d" % i for i in range(q, n, queues)]


def test_a_short_consume_queue_write_loses_no_entry(open_store, disk: SimulatedDisk) -> None:
    """A nearly full disk writes part of a pwrite and returns the count without an error: the
    rest must be written (or the write fail), never counted as written."""
    store = open_store()
    _fill(store, 400)  # 200 entries per queue, four consume queue files each
    store.dispatch_pending()
    disk.short("/consumequeue/", times=8)
    store.flush()
    assert disk.calls["/consumequeue/"] == 8
    _expect_all(store, 400)
    store.close()
    store = open_store()
    _expect_all(store, 400)


def test_a_consume_queue_the_disk_refuses_keeps_the_checkpoint_behind_it(open_store, disk: SimulatedDisk) -> None:
    store = open_store()
    _fill(store, 100)
    store.flush()
    synced = store.checkpoint.logics_offset
    _fill_more(store, 100, 200)
    store.dispatch_pending()
    disk.full("/consumequeue/")
    store.flush()  # the drain fails: logged, not raised
    assert store.checkpoint.logics_offset == synced
    _expect_all(store, 200)  # readers see the entries the files lack
    # and appends are refused meanwhile (the CommitLog must not run ahead of them)
    assert store.refusal is not None and "consume queue T:" in store.refusal
    assert "No space left on device" in store.put(MessageDraft("T", 0, b"no")).remark
    crash(store)
    disk.heal()
    store = open_store()
    _expect_all(store, 200)


def _offset_of(store: MessageStore, i: int, queues: int = 2) -> int:
    return store.get_commitlog_offset_in_queue("T", i % queues, i // queues)


def _fill_more(store: MessageStore, start: int, end: int, queues: int = 2) -> None:
    for i in range(start, end):
        assert store.put(MessageDraft("T", i % queues, b"m%d" % i, properties={"KEYS": f"k{i}"})).ok


def test_dispatch_goes_on_when_a_consume_queue_cannot_be_written(open_store, disk: SimulatedDisk) -> None:
    """Dispatch moves a long pending tail into the files itself (bounded memory); a disk that
    refuses it must not stop dispatch, and the entries stay readable."""
    store = open_store(mapped_file_size_consume_queue=20 * 20_000, message_index_enable=False)
    n = 14_000  # more than 256 KiB of entries in one queue
    _fill(store, n, queues=1)
    disk.full("/consumequeue/")
    assert store.dispatch_pending() == n
    _expect_all(store, n, queues=1)
    disk.heal()
    store.close()
    store = open_store(mapped_file_size_consume_queue=20 * 20_000, message_index_enable=False)
    _expect_all(store, n, queues=1)


def test_recovery_on_a_full_disk_opens_and_rebuilds_later(open_store, disk: SimulatedDisk, tmp_path) -> None:
    """Replay finds a consume queue entry its file lacks (pages lost in a crash) and cannot
    rewrite it on a full disk: the store opens all the same, serves the entry, and the files
    get it once there is space."""
    store = open_store()
    _fill(store, 120)  # entries 0..59 of each queue, synced
    store.flush()
    _fill_more(store, 120, 200)
    store.dispatch_pending()
    store.begin_flush(commitlog=True, logics=True)  # entries into their files, not synced
    store.run_flush(store.begin_flush(commitlog=True))  # the CommitLog is synced
    crash(store)
    qfile = tmp_path / "store" / "consumequeue" / "T" / "0" / f"{1000:020d}"  # entries 50..99 of queue 0
    raw = bytearray(qfile.read_bytes())
    raw[200:400] = bytes(200)  # entries 60..69 lost
    qfile.write_bytes(raw)
    disk.full("/consumequeue/")
    store = open_store()
    _expect_all(store, 200)
    store.flush()
    store.close()
    disk.heal()
    store = open_store()
    _expect_all(store, 200)
    store.flush()
    crash(store)
    store = open_store()
    _expect_all(store, 200)


def test_records_the_index_could_not_take_are_indexed_later(open_store, disk: SimulatedDisk) -> None:
    """An index file that cannot be created leaves records unindexed: the checkpoint stays
    before them, and they are indexed once the disk has space (at the latest after a restart)."""
    store = open_store(max_index_num=50)  # 49 entries per file
    _fill(store, 40)
    store.dispatch_pending()
    disk.full("/index/")
    _fill_more(store, 40, 100)
    store.dispatch_pending()
    store.flush()
    assert len(store.query_message("T", "k48").records) == 1  # the file's last entry
    assert store.query_message("T", "k49").records == []  # a new file was refused
    assert store.checkpoint.index_offset <= store.look_message_by_offset(_offset_of(store, 49)).commitlog_offset
    assert store.refusal is not None and store.refusal.startswith("the index cannot be written")
    assert not store.put(MessageDraft("T", 0, b"refused")).ok
    disk.heal()
    store.flush()  # a flush round indexes them, and writes are taken again
    assert store.refusal is None
    _fill_more(store, 100, 110)
    store.dispatch_pending()
    store.flush()
    for i in (0, 45, 99, 109):
        assert len(store.query_message("T", f"k{i}").records) == 1, i
    store.close()
    store = open_store(max_index_num=50)
    for i in (0, 45, 99, 109):
        assert len(store.query_message("T", f"k{i}").records) == 1, i


def test_records_the_index_could_not_take_are_indexed_after_a_restart(open_store, disk: SimulatedDisk) -> None:
    store = open_store(max_index_num=50)
    _fill(store, 40)
    store.dispatch_pending()
    disk.full("/index/")
    _fill_more(store, 40, 100)
    store.dispatch_pending()
    store.flush()
    store.close()
    disk.heal()
    store = open_store(max_index_num=50)
    for i in (0, 45, 99):
        assert len(store.query_message("T", f"k{i}").records) == 1, i


def test_a_consume_queue_sync_that_fails_is_not_counted(open_store, disk: SimulatedDisk) -> None:
    store = open_store()
    _fill(store, 100)
    store.flush()
    synced = store.checkpoint.logics_offset
    _fill_more(store, 100, 200)
    store.dispatch_pending()
    disk.sync_fails("/consumequeue/")
    store.flush()  # logged, not raised
    assert store.checkpoint.logics_offset == synced
    disk.heal()
    store.flush()
    assert store.checkpoint.logics_offset == store.max_phy_offset
    crash(store)
    store = open_store()
    _expect_all(store, 200)


def test_a_new_file_the_disk_cannot_allocate_is_not_left_behind(tmp_path, disk: SimulatedDisk) -> None:
    path = tmp_path / "00000000000000000000"
    disk.full("/0000")
    with pytest.raises(OSError, match="No space left"):
        MappedFile(str(path), 0, 8192, preallocate=True)
    assert not path.exists()  # the next try starts over
    disk.heal()
    mf = MappedFile(str(path), 0, 8192, preallocate=True)
    assert mf.allocated and mf.mapped_writes_at(0, 8192)
    mf.close()


def test_a_file_opened_on_a_full_disk_is_written_with_pwrite_until_allocated(tmp_path, disk: SimulatedDisk) -> None:
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"x" * 100)  # an old sparse file, or one a crash left short
    disk.full("/0000")
    mf = MappedFile(str(path), 0, 8192, preallocate=True)
    assert not mf.allocated and not mf.mapped_writes_at(100, 1)
    with pytest.raises(OSError):
        mf.write_at(100, b"y")  # a pwrite, which the full disk refuses
    with pytest.raises(OSError):
        mf.ensure_allocated()
    disk.heal()
    mf.ensure_allocated()
    assert mf.mapped_writes_at(100, 1)
    mf.write_at(100, b"y")
    assert mf.read(98, 4) == b"xxy\0"
    mf.close()


@pytest.mark.parametrize("batch", [False, True])
def test_a_commitlog_write_the_disk_refuses_is_service_not_available_until_space_is_back(
    open_store, disk: SimulatedDisk, clock: FakeClock, batch: bool
) -> None:
    store = open_store()
    _fill(store, 10)
    disk.full("/commitlog/")
    r = (
        store.put_many(batch_drafts(MessageDraft("T", 0, b""), [Message("T", b"x")]))
        if batch
        else store.put(MessageDraft("T", 0, b"x"))
    )
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert r.remark.startswith("disk full: cannot write the CommitLog: [Errno 28] No space left on device")
    disk.heal()
    assert store.put(MessageDraft("T", 0, b"x")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE  # until measured
    clock.advance(1000)  # appends measure the disk at most once a second
    _fill_more(store, 10, 20)
    store.dispatch_pending()
    _expect_all(store, 20)


def test_a_commitlog_file_the_disk_cannot_allocate_is_service_not_available(
    open_store, disk: SimulatedDisk, clock: FakeClock
) -> None:
    store = open_store(warm_maped_file_enable=True, mapped_file_size_commitlog=4096)
    _fill(store, 10)
    disk.no_new_blocks("/commitlog/")
    results = [store.put(MessageDraft("T", 0, b"y" * 500)) for _ in range(10)]  # the file fills up
    refused = [r for r in results if not r.ok]
    assert refused and refused[0].status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert refused[0].remark.startswith("disk full: cannot create a CommitLog file")
    assert len(store.commitlog.files.files) == 1
    disk.heal()
    clock.advance(1000)
    assert store.put(MessageDraft("T", 0, b"y" * 500)).ok
    assert len(store.commitlog.files.files) == 2


def test_a_store_opened_on_a_full_disk_serves_reads_and_refuses_writes(open_store, disk: SimulatedDisk) -> None:
    """A crash left consume queue entries in memory only; the restart on a full disk replays
    them into memory, serves every message and refuses writes until space is back."""
    usage = {"ratio": 0.5}
    store = open_store(disk_usage=lambda _p: usage["ratio"])
    _fill(store, 200)
    store.dispatch_pending()
    store.flush_commitlog()
    crash(store)
    usage["ratio"] = 1.0
    disk.full("/store/")
    store = open_store(disk_usage=lambda _p: usage["ratio"])
    _expect_all(store, 200)
    assert len(store.query_message("T", "k150").records) == 1
    r = store.put(MessageDraft("T", 0, b"no"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and r.remark.startswith("disk full")
    usage["ratio"] = 0.5
    disk.heal()
    store.flush()
    store.check_disk()
    assert store.refusal is None
    _fill_more(store, 200, 210)
    store.dispatch_pending()
    _expect_all(store, 210)
    store.close()
    store = open_store(disk_usage=lambda _p: usage["ratio"])
    _expect_all(store, 210)


def test_an_index_file_is_allocated_its_slots_and_a_part_of_its_entries_ahead(tmp_path, disk: SimulatedDisk) -> None:
    """Written through its mapping, an index file needs its blocks before its writes; but a
    default one is 420 MB, which a small disk need not give at once: the slots (written
    anywhere) are allocated when it is made, the entries (written in order) 1 MiB ahead."""
    f = IndexFile(str(tmp_path / "20240101000000000"), 1000, 200_000)  # 4 MB of entries
    ahead = INDEX_HEADER_SIZE + 1000 * 4 + (1 << 20)
    assert f.mf.allocated_to == ahead
    assert os.stat(f.path).st_blocks * 512 < ahead + 8192
    disk.no_new_blocks("/20240101")
    per_mib = (1 << 20) // INDEX_ENTRY_SIZE
    assert f.put_many([(i, 1000 + i, 0) for i in range(per_mib - 10)], 0) == per_mib - 10  # within what is allocated
    with pytest.raises(OSError, match="No space left"):
        f.put_many([(i, 1000 + i, 0) for i in range(100)], 0)
    disk.heal()
    assert f.put_many([(i, 1000 + i, 0) for i in range(100)], 0) == 100
    assert f.mf.allocated_to > ahead
    f.close()


def test_a_new_index_file_the_disk_has_no_room_for_is_not_left_behind(tmp_path, disk: SimulatedDisk) -> None:
    disk.no_new_blocks("/20240101", new_files=False)  # made, then not allocated
    with pytest.raises(OSError, match="No space left"):
        IndexFile(str(tmp_path / "20240101000000000"), 1000, 200_000)
    assert disk.calls["/20240101"] == 1
    assert os.listdir(tmp_path) == []
