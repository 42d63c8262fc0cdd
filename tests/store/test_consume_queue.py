"""ConsumeQueue internals: pending tail, files, truncation, head padding, the mapping pool."""

from __future__ import annotations

import os
from pathlib import Path

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageDraft
from rmq.store.consume_queue import ConsumeQueue
from rmq.store.formats import CQ_BLANK_ENTRY, CQ_ENTRY, offset_to_file_name
from rmq.store.mapped_file import MapPool


def _queue(tmp_path: Path, pool: MapPool | None = None) -> ConsumeQueue:
    return ConsumeQueue("T", 0, str(tmp_path / "T" / "0"), 20 * 10, pool or MapPool(8))


def test_entries_span_files_and_pending_tail(tmp_path: Path) -> None:
    cq = _queue(tmp_path)
    for i in range(25):
        cq.put(i, 1000 * i, 100, i)
    assert cq.entries(0, 100) == b"".join(CQ_ENTRY.pack(1000 * i, 100, i) for i in range(25))
    cq.drain()
    assert sorted(os.listdir(tmp_path / "T" / "0")) == [offset_to_file_name(0), offset_to_file_name(200),
                                                        offset_to_file_name(400)]  # fmt: skip
    for i in range(25, 28):
        cq.put(i, 1000 * i, 100, i)
    # Reads never cross a file boundary, but do join the file tail and the pending entries.
    assert len(cq.entries(0, 100)) == 10 * 20
    tail = cq.entries(22, 100)
    assert [CQ_ENTRY.unpack_from(tail, k * 20)[0] for k in range(6)] == [22000 + 1000 * k for k in range(6)]
    assert cq.entry(27) == (27000, 100, 27)
    assert cq.entry(28) is None
    assert cq.next_file_offset(13) == 20
    cq.close()
    again = _queue(tmp_path)
    again.load()
    assert (again.min_offset, again.max_offset, again.max_phy_end) == (0, 25, 24100)  # the pending tail was lost


def test_truncate_dirty_and_min_offset(tmp_path: Path) -> None:
    cq = _queue(tmp_path)
    for i in range(30):
        cq.put(i, 1000 * i, 100, 0)
    cq.drain()
    for i in range(30, 33):
        cq.put(i, 1000 * i, 100, 0)
    cq.truncate_dirty(25_050)  # the record at 25000 ends at 25100: gone
    assert cq.max_offset == 25
    assert cq.max_phy_end == 24_100
    assert cq.entry(25) is None
    cq.correct_min_offset(12_000)
    assert cq.min_offset == 12
    assert cq.entries(11, 5) == b""


def test_queue_starting_mid_file_is_padded(tmp_path: Path) -> None:
    cq = _queue(tmp_path)
    cq.put(25, 5000, 100, 7)  # an empty queue whose first entry is 25 (RocketMQ fillPreBlank)
    cq.put(26, 5100, 100, 7)
    assert (cq.min_offset, cq.max_offset) == (25, 27)
    cq.drain()
    raw = (tmp_path / "T" / "0" / offset_to_file_name(400)).read_bytes()
    assert raw[:100] == CQ_BLANK_ENTRY * 5
    assert CQ_ENTRY.unpack_from(raw, 100) == (5000, 100, 7)
    assert cq.entry(25) == (5000, 100, 7)
    assert cq.entries(24, 3) == b""


def test_replay_rewrites_and_pads(tmp_path: Path) -> None:
    cq = _queue(tmp_path)
    for i in range(5):
        cq.put(i, 100 * i, 10, 0)
    cq.drain()
    cq.put(2, 200, 10, 0)  # already there: kept
    cq.put(3, 999, 10, 0)  # different: rewritten
    assert cq.entry(3) == (999, 10, 0)
    cq.put(7, 700, 10, 0)  # a gap: padded with blank entries
    assert cq.max_offset == 8
    assert cq.entry(5) == CQ_ENTRY.unpack(CQ_BLANK_ENTRY)


def test_many_queues_through_a_small_pool(open_store) -> None:
    store = open_store(max_mapped_consume_queue_files=4, mapped_file_size_consume_queue=20 * 5)
    for i in range(400):
        assert store.put(MessageDraft(f"T{i % 40}", i % 2, b"%d" % i)).ok
    store.dispatch_pending()
    store.flush()  # 40 queues: synced with one syncfs where available
    assert not store.dispatcher.dirty
    assert len(store.pool) <= 4
    for t in range(40):
        bodies, offset = [], 0
        while (got := store.get_message(f"T{t}", t % 2, offset, 32)).status is GetMessageStatus.FOUND:
            assert len(got.records) <= 5  # one call never crosses a consume queue file
            bodies += [m.body for m in iter_records(got.body)]
            offset = got.next_begin_offset
        assert bodies == [b"%d" % i for i in range(t, 400, 40)]
    assert len(store.pool) <= 4


def test_flush_rounds_respect_the_queue_budget(open_store) -> None:
    store = open_store(flush_consume_queue_least_pages=0)
    results = [store.put(MessageDraft(f"T{i}", 0, b"x")) for i in range(10)]
    store.dispatch_pending()
    plan = store.begin_flush(commitlog=True, logics=True, max_queues=3)
    assert len(plan.queues) == 3 and plan.queues_left == 7
    covered = {cq.topic for cq, _ in plan.queues}
    first_left = min(r.wrote_offset for i, r in enumerate(results) if f"T{i}" not in covered)
    assert plan.logics_offset == first_left
    store.run_flush(plan)
    store.end_flush(plan)
    assert store.checkpoint.logics_offset == first_left
    assert len(store.dispatcher.dirty) == 7
    store.flush()
    assert not store.dispatcher.dirty
    assert store.checkpoint.logics_offset == store.max_phy_offset


def test_rounds_write_small_queues_but_sync_them_only_when_due(open_store, tmp_path: Path) -> None:
    store = open_store()  # least pages 2: a few entries are not worth a sync
    first = store.put(MessageDraft("Small", 0, b"x"))
    store.put(MessageDraft("Small", 0, b"y"))
    store.dispatch_pending()
    plan = store.begin_flush(commitlog=True, logics=True)
    store.run_flush(plan)
    store.end_flush(plan)
    # The entries are in the file already (visible to other readers) ...
    raw = (tmp_path / "store" / "consumequeue" / "Small" / "0" / offset_to_file_name(0)).read_bytes()
    assert CQ_ENTRY.unpack_from(raw, 20)[0] == first.end_offset
    # ... but not synced, so the checkpoint does not claim them.
    assert plan.queues_left == 1
    assert store.checkpoint.logics_offset == first.wrote_offset
    plan = store.begin_flush(commitlog=True, logics=True, thorough=True)
    store.run_flush(plan)
    store.end_flush(plan)
    assert store.checkpoint.logics_offset == store.max_phy_offset


def test_a_queue_whose_pending_entries_all_point_below_the_commitlog_pads_before_a_jump(tmp_path: Path) -> None:
    # A DLedger member rebuilt from its leader: its entries not yet in a file point below the
    # new CommitLog start, and the next record's queue offset is far ahead.
    cq = _queue(tmp_path)
    for i in range(3):
        cq.put(i, 100 * i, 100, i)
    cq.correct_min_offset(10_000)
    assert cq.min_offset == cq.max_offset == 3
    cq.put(12, 10_000, 100, 7)
    cq.drain()
    assert cq.entry(12) == (10_000, 100, 7) and cq.entries(3, 1) == CQ_BLANK_ENTRY
    cq.close()


def test_a_write_cut_short_at_a_page_is_not_taken_for_an_entry(tmp_path: Path) -> None:
    """A full disk stops a write at a page: the entry across it has its offset and size but
    not its tags, and the rest of the file is a hole. Load ends before that entry (replay
    writes it again) and reads nothing past the hole through the mapping."""
    directory = tmp_path / "T" / "0"
    directory.mkdir(parents=True)
    path = directory / offset_to_file_name(0)
    entries = b"".join(CQ_ENTRY.pack(1000 * i, 100, 7) for i in range(300))
    with open(path, "wb") as f:
        f.write(entries[: 204 * 20 + 12])  # entry 204 (4080..4100) torn after its size field
        f.truncate(20 * 300)
    assert os.lseek(os.open(path, os.O_RDONLY), 0, os.SEEK_HOLE) == 4096
    cq = ConsumeQueue("T", 0, str(directory), 20 * 300, MapPool(8))
    cq.load()
    assert cq.max_offset == 204
    assert cq.entry(203) == (203_000, 100, 7) and cq.max_phy_end == 203_100
    cq.close()
