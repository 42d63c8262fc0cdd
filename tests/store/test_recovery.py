"""Recovery: torn and garbage tails, lost consume queue tails, stale entries, old checkpoints."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageDraft, MessageStore
from rmq.store import formats as F

from .conftest import crash


def _fill(store: MessageStore, n: int, qid: int = 0, start: int = 0) -> list:
    out = []
    for i in range(start, start + n):
        r = store.put(MessageDraft("T", qid, b"message-%d" % i, properties={"UNIQ_KEY": f"U{i}", "KEYS": f"k{i}"}))
        assert r.ok
        out.append(r)
    return out


def _bodies(store: MessageStore, qid: int = 0) -> list[bytes]:
    out, off = [], store.get_min_offset_in_queue("T", qid)
    while True:
        g = store.get_message("T", qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in iter_records(g.body)]
        off = g.next_begin_offset


def _commitlog_file(root: Path, offset: int, size: int = 16 * 1024) -> Path:
    return root / "commitlog" / F.offset_to_file_name(offset - offset % size)


def _write_at(root: Path, offset: int, data: bytes) -> None:
    path = _commitlog_file(root, offset)
    with open(path, "r+b") as f:
        f.seek(offset % (16 * 1024))
        f.write(data)


def test_torn_tail_recovers_to_last_good_record(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 30)
    store.close()
    last = results[-1]
    # The last record was only half written when the machine died.
    _write_at(root, last.wrote_offset + last.wrote_bytes // 2, bytes(last.wrote_bytes - last.wrote_bytes // 2))
    store = open_store()
    assert store.max_phy_offset == last.wrote_offset
    assert store.get_max_offset_in_queue("T", 0) == 29
    assert _bodies(store) == [b"message-%d" % i for i in range(29)]
    assert store.query_message("T", "U29").records == []
    r = store.put(MessageDraft("T", 0, b"after"))
    assert (r.wrote_offset, r.queue_offset) == (last.wrote_offset, 29)
    store.dispatch_pending()
    assert _bodies(store)[-1] == b"after"


def test_a_write_cut_short_by_a_kill_is_not_taken_in(open_store, monkeypatch) -> None:
    """A killed process's pwrite stops between pages; the record's size, written last, is
    still zero, so recovery ends before it even when its body (and body CRC) got written."""
    store = open_store()
    _fill(store, 30)
    end = store.max_phy_offset
    assert end % 4096 + 500 > 4096  # the torn record spans a page boundary, as a cut write must
    real_pwrite = os.pwrite
    calls: list[int] = []

    def killed_during(fd: int, data, pos: int) -> int:  # writes all but the tail, then dies
        calls.append(pos)
        real_pwrite(fd, bytes(data)[:-12], pos)
        raise OSError("killed")

    monkeypatch.setattr(os, "pwrite", killed_during)
    r = store.put(MessageDraft("T", 0, b"torn-" * 100, properties={"UNIQ_KEY": "U-torn", "KEYS": "k-torn"}))
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert not r.ok
    assert calls == [end + 4]  # the record's first four bytes were to go last
    crash(store)
    store = open_store()
    assert store.max_phy_offset == end
    assert _bodies(store) == [b"message-%d" % i for i in range(30)]
    assert store.query_message("T", "U-torn").records == []


def test_garbage_tail_is_cut_and_zeroed(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 20)
    store.close()
    end = results[-1].end_offset
    _write_at(root, end, os.urandom(700))
    store = open_store()
    assert store.max_phy_offset == end
    assert _bodies(store) == [b"message-%d" % i for i in range(20)]
    assert store.commitlog.read(end, 16 * 1024 - end - 1) is None  # nothing readable past the end
    with open(_commitlog_file(root, end), "rb") as f:
        f.seek(end)
        assert f.read(700) == bytes(700)
    _fill(store, 5, start=20)
    store.dispatch_pending()
    assert _bodies(store) == [b"message-%d" % i for i in range(25)]


def test_bad_crc_tail_is_cut(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 10)
    store.close()
    last = results[-1]
    _write_at(root, last.wrote_offset + 88, b"X")  # first body byte
    store = open_store()
    assert store.max_phy_offset == last.wrote_offset
    assert len(_bodies(store)) == 9


def test_torn_record_at_start_of_a_new_file(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 200)
    store.close()
    files = sorted(os.listdir(root / "commitlog"))
    assert len(files) >= 2
    last_start = int(files[-1])
    first_in_last = next(r for r in results if r.wrote_offset == last_start)
    idx = results.index(first_in_last)
    # Everything in the last file is garbage from its first record on.
    with open(root / "commitlog" / files[-1], "r+b") as f:
        f.write(os.urandom(40))
        f.write(bytes(16 * 1024 - 40))
    store = open_store()
    assert store.max_phy_offset == last_start
    assert _bodies(store) == [b"message-%d" % i for i in range(idx)]
    r = store.put(MessageDraft("T", 0, b"x"))
    assert (r.wrote_offset, r.queue_offset) == (last_start, idx)


def test_crash_loses_no_dispatched_or_undispatched_message(open_store) -> None:
    store = open_store()
    _fill(store, 60, qid=0)
    store.dispatch_pending()  # queue entries only in memory (pending), never flushed
    _fill(store, 40, qid=1)  # not even dispatched
    store.flush_commitlog()
    crash(store)
    store = open_store()
    assert _bodies(store, 0) == [b"message-%d" % i for i in range(60)]
    assert _bodies(store, 1) == [b"message-%d" % i for i in range(40)]
    assert [len(store.query_message("T", f"U{i}").records) for i in range(60)] == [2] * 40 + [1] * 20


def test_crash_after_partial_logics_flush(open_store) -> None:
    store = open_store(flush_consume_queue_least_pages=1)
    for i in range(300):
        store.put(MessageDraft("T", i % 3, b"%d" % i))
    store.dispatch_pending()
    # Only queues with a page of entries get synced; the others stay pending in memory.
    plan = store.begin_flush(commitlog=True, logics=True)
    store.run_flush(plan)
    store.end_flush(plan)
    for i in range(300, 330):
        store.put(MessageDraft("T", i % 3, b"%d" % i))
    store.dispatch_pending()
    crash(store)
    store = open_store()
    for q in range(3):
        assert _bodies(store, q) == [b"%d" % i for i in range(q, 330, 3)]


def test_a_round_without_the_index_keeps_its_checkpoint_and_a_crash_indexes_again(open_store) -> None:
    store = open_store()
    _fill(store, 30)
    store.dispatch_pending()
    store.flush()
    indexed = store.checkpoint.index_offset
    assert indexed == store.max_phy_offset
    _fill(store, 20, start=30)
    store.dispatch_pending()
    plan = store.begin_flush(commitlog=True, logics=True, thorough=True, index=False)
    index_files = {f.mf for f in store.index.files}
    assert not any(mf in index_files for mf, _, _ in plan.syncs)
    store.run_flush(plan)
    store.end_flush(plan)
    # The queues are claimed synced; the index only as far as its last sync.
    assert store.checkpoint.logics_offset == store.max_phy_offset
    assert store.checkpoint.index_offset == indexed
    entries = sum(f.index_count for f in store.index.files)
    crash(store)
    store = open_store()
    # Recovery indexed the 20 records after the index checkpoint again (2 keys each): their
    # entries may have been lost with the page cache. Each key still finds its record once.
    assert sum(f.index_count for f in store.index.files) == entries + 40
    assert [len(store.query_message("T", f"U{i}").records) for i in range(50)] == [1] * 50
    assert [len(store.query_message("T", f"k{i}").records) for i in range(50)] == [1] * 50


def test_queue_entries_past_the_log_end_are_dropped(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 30)
    store.dispatch_pending()
    store.flush()
    crash(store)
    # The last five records never reached the disk, but their queue entries did.
    cut = results[25].wrote_offset
    _write_at(root, cut, bytes(results[-1].end_offset - cut))
    store = open_store()
    assert store.get_max_offset_in_queue("T", 0) == 25
    assert _bodies(store) == [b"message-%d" % i for i in range(25)]
    assert store.query_message("T", "U27").records == []
    new = _fill(store, 3, start=100)
    store.dispatch_pending()
    assert [r.queue_offset for r in new] == [25, 26, 27]
    assert _bodies(store)[-3:] == [b"message-100", b"message-101", b"message-102"]
    (rec,) = store.query_message("T", "U101").records
    assert b"message-101" in rec


def test_store_without_rmq_checkpoint_offsets(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    _fill(store, 50)
    store.dispatch_pending()
    store.flush()
    crash(store)
    # A checkpoint as a Java broker writes it: only the timestamps.
    with open(root / "checkpoint", "r+b") as f:
        f.seek(F.CHECKPOINT_RMQ_OFFSET)
        f.write(bytes(F.CHECKPOINT_RMQ.size))
    store = open_store()
    assert _bodies(store) == [b"message-%d" % i for i in range(50)]
    assert [len(store.query_message("T", f"U{i}").records) for i in (0, 49)] == [1, 1]
    store.close()
    with open(root / "checkpoint", "r+b") as f:
        f.seek(F.CHECKPOINT_RMQ_OFFSET)
        f.write(bytes(F.CHECKPOINT_RMQ.size))
    store = open_store()  # clean shutdown, Java checkpoint: the normal path
    assert len(_bodies(store)) == 50


def test_short_files_left_by_a_crash_are_extended(open_store, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store()
    results = _fill(store, 10)
    store.close()
    # A crash between creating the next file and sizing it leaves an empty file behind.
    (root / "commitlog" / F.offset_to_file_name(16 * 1024)).write_bytes(b"")
    store = open_store()
    assert store.max_phy_offset == results[-1].end_offset
    assert len(_bodies(store)) == 10


def _recovery_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "rmq.store.commitlog"]


@pytest.mark.parametrize("preallocate", [False, True], ids=["sparse", "preallocated"])
def test_a_clean_restart_logs_the_end_of_the_log_plainly(
    open_store, caplog: pytest.LogCaptureFixture, preallocate: bool
) -> None:
    """After the last record come zeros (or a hole): the normal end of the log, not an error."""
    store = open_store(warm_maped_file_enable=preallocate)
    end = _fill(store, 12)[-1].end_offset
    store.close()
    caplog.set_level(logging.INFO, logger="rmq.store")
    store = open_store(warm_maped_file_enable=preallocate)
    assert store.max_phy_offset == end
    lines = _recovery_lines(caplog)
    assert lines, "recovery says where the log ends"
    assert all(level == logging.INFO for level, _ in lines), lines
    assert not any("magic" in text or "hole" in text for _, text in lines), lines
    assert any(text.endswith(f"the log ends at offset {end}") for _, text in lines), lines


def test_a_corrupt_tail_is_a_warning(open_store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = open_store()
    end = _fill(store, 5)[-1].end_offset
    store.close()
    _write_at(tmp_path / "store", end, (100).to_bytes(4, "big") + b"\x01" * 696)  # a size, then no magic
    caplog.set_level(logging.INFO, logger="rmq.store")
    store = open_store()
    assert store.max_phy_offset == end
    warnings = [text for level, text in _recovery_lines(caplog) if level == logging.WARNING]
    assert len(warnings) == 1 and "bad magic code 0x01010101" in warnings[0] and str(end) in warnings[0]
