"""Retention by age and by disk usage, and refusing writes on a full disk."""

from __future__ import annotations

import os
from pathlib import Path

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, PutMessageStatus

from .conftest import FakeClock, local_ms

HOUR = 3_600_000


def _fill(store, clock: FakeClock, n: int, step_ms: int = 1000) -> list:
    out = []
    for i in range(n):
        clock.advance(step_ms)
        r = store.put_message("T", i % 2, b"r" * 200, properties={"KEYS": f"k{i}"})
        assert r.ok
        out.append(r)
    store.dispatch_pending()
    return out


def test_expired_files_go_at_the_delete_hour(open_store, clock: FakeClock, tmp_path: Path) -> None:
    clock.now = local_ms(1)
    store = open_store(mapped_file_size_commitlog=4096, max_index_num=30, file_reserved_time=72)
    results = _fill(store, clock, 240)  # 120 per queue: three consume queue files each
    store.flush()
    files_before = len(store.commitlog.files.files)
    assert files_before > 5
    index_before = len(store.index.files)
    assert index_before > 2
    # Not old enough yet, and not the delete hour: nothing goes.
    assert store.run_retention().commitlog_files_deleted == 0
    # 73 hours later but at 02:xx: still not the delete hour ("04").
    clock.now = local_ms(2) + 72 * HOUR
    assert store.run_retention().commitlog_files_deleted == 0
    # At 04:xx everything older than 72 h goes, except the newest file, at most ten files
    # per round.
    clock.now = local_ms(4) + 72 * HOUR
    res = store.run_retention()
    assert res.commitlog_files_deleted == 10
    res2 = store.run_retention()
    assert res.commitlog_files_deleted + res2.commitlog_files_deleted == files_before - 1
    assert len(store.commitlog.files.files) == 1
    assert res.consume_queue_files_deleted + res2.consume_queue_files_deleted == 4
    assert res.index_files_deleted > 0 and len(store.index.files) < index_before
    min_phy = store.min_phy_offset
    survivors = [r for r in results if r.wrote_offset >= min_phy]
    for q in (0, 1):
        lo = store.get_min_offset_in_queue("T", q)
        assert store.get_commitlog_offset_in_queue("T", q, lo) >= min_phy
        g = store.get_message("T", q, 0)
        assert (g.status, g.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, lo)
        g = store.get_message("T", q, lo, 64)
        assert [m.commitlog_offset for m in iter_records(g.body)] == [
            r.wrote_offset for r in survivors if r.queue_offset >= lo and (results.index(r) % 2) == q
        ]
    assert sorted(os.listdir(tmp_path / "store" / "commitlog")) == [f"{min_phy:020d}"]
    # Reopening after retention works and keeps the offsets.
    store.close()
    store = open_store(mapped_file_size_commitlog=4096, max_index_num=30)
    assert store.min_phy_offset == min_phy
    assert store.get_max_offset_in_queue("T", 0) == 120


def test_young_files_stay(open_store, clock: FakeClock) -> None:
    clock.now = local_ms(4)
    store = open_store(mapped_file_size_commitlog=4096, file_reserved_time=1)
    _fill(store, clock, 40)  # written over 40 s
    before = len(store.commitlog.files.files)
    clock.advance(HOUR // 2)
    assert store.run_retention().commitlog_files_deleted == 0
    assert len(store.commitlog.files.files) == before


def test_disk_ratio_forces_deletion_and_refuses_writes(open_store, clock: FakeClock) -> None:
    clock.now = local_ms(13)
    usage = {"ratio": 0.5}
    store = open_store(
        mapped_file_size_commitlog=4096, disk_usage=lambda _path: usage["ratio"], delete_files_batch_max=3
    )
    results = _fill(store, clock, 60)
    files_before = len(store.commitlog.files.files)
    usage["ratio"] = 0.91
    res = store.run_retention()
    # Above the ratio: files go regardless of age or hour (three per round here) ...
    assert res.commitlog_files_deleted == 3
    assert len(store.commitlog.files.files) == files_before - 3
    # ... and appends are refused with a remark naming the ratio and the setting.
    r = store.put_message("T", 0, b"nope")
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "91.0%" in r.remark and "disk_max_used_space_ratio=75" in r.remark
    assert "diskMaxUsedSpaceRatio" in r.remark
    assert store.put_messages("T", 0, []).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    # What is stored is untouched and readable.
    lo = store.get_min_offset_in_queue("T", 1)
    g = store.get_message("T", 1, lo, 64)
    assert g.status is GetMessageStatus.FOUND
    assert all(m.body == b"r" * 200 for m in iter_records(g.body))
    assert store.max_phy_offset == results[-1].end_offset
    # Once space is back, writes are accepted again.
    usage["ratio"] = 0.6
    store.check_disk()
    assert store.refusal is None
    assert store.put_message("T", 0, b"yes").ok


def test_disk_full_at_open_refuses_writes(open_store) -> None:
    store = open_store(disk_usage=lambda _p: 0.99, disk_max_used_space_ratio=90)
    r = store.put_message("T", 0, b"x")
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "disk_max_used_space_ratio=90" in r.remark
    assert store.max_phy_offset == 0
