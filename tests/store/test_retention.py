"""Retention by age and at RocketMQ's levels of disk use (diskMaxUsedSpaceRatio: expired files at
once; diskSpaceCleanForciblyRatio: files not expired too; diskSpaceWarningLevelRatio: writes
refused), and manual deletes."""

from __future__ import annotations

import os
from pathlib import Path

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageDraft, PutMessageStatus, batch_drafts

from .conftest import FakeClock, local_ms

HOUR = 3_600_000


def _fill(store, clock: FakeClock, n: int, step_ms: int = 1000) -> list:
    out = []
    for i in range(n):
        clock.advance(step_ms)
        r = store.put(MessageDraft("T", i % 2, b"r" * 200, properties={"KEYS": f"k{i}"}))
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


def _levels_store(open_store, clock: FakeClock, usage: dict, **overrides):
    clock.now = local_ms(13)  # not the delete hour
    store = open_store(
        mapped_file_size_commitlog=4096, disk_usage=lambda _path: usage["ratio"], delete_files_batch_max=3, **overrides
    )
    results = _fill(store, clock, 60)
    return store, results


def test_above_the_max_used_ratio_expired_files_go_at_once_and_only_they(open_store, clock: FakeClock) -> None:
    usage = {"ratio": 0.5}
    store, _ = _levels_store(open_store, clock, usage, file_reserved_time=72)
    files_before = len(store.commitlog.files.files)
    usage["ratio"] = 0.80  # above diskMaxUsedSpaceRatio (75), below the force-clean level (85)
    assert store.run_retention().commitlog_files_deleted == 0  # nothing expired: nothing goes
    assert store.put(MessageDraft("T", 0, b"taken")).ok  # writes go on below the warning level
    clock.advance(73 * HOUR)  # expired now, and still not the delete hour
    res = store.run_retention()
    assert (res.commitlog_files_deleted, res.commitlog_files_unexpired) == (3, 0)
    assert len(store.commitlog.files.files) == files_before - 3


def test_above_the_clean_forcibly_ratio_files_not_expired_go_too(open_store, clock: FakeClock) -> None:
    usage = {"ratio": 0.5}
    store, results = _levels_store(open_store, clock, usage)
    files_before = len(store.commitlog.files.files)
    usage["ratio"] = 0.87  # above diskSpaceCleanForciblyRatio (85)
    res = store.run_retention()
    assert (res.commitlog_files_deleted, res.commitlog_files_unexpired) == (3, 3)
    assert len(store.commitlog.files.files) == files_before - 3
    assert store.stats.commitlog_files_deleted_unexpired == 3
    assert store.put(MessageDraft("T", 0, b"taken")).ok  # below the warning level (90)
    assert store.min_phy_offset > results[0].wrote_offset


def test_without_clean_file_forcibly_files_not_expired_stay(open_store, clock: FakeClock) -> None:
    usage = {"ratio": 0.5}
    store, _ = _levels_store(open_store, clock, usage, clean_file_forcibly_enable=False)
    files_before = len(store.commitlog.files.files)
    usage["ratio"] = 0.95
    assert store.run_retention().commitlog_files_deleted == 0
    assert len(store.commitlog.files.files) == files_before
    assert store.put(MessageDraft("T", 0, b"nope")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_above_the_warning_level_writes_are_refused_until_below(open_store, clock: FakeClock) -> None:
    usage = {"ratio": 0.5}
    store, results = _levels_store(open_store, clock, usage)
    usage["ratio"] = 0.89
    store.check_disk()
    assert store.refusal is None and store.put(MessageDraft("T", 0, b"taken")).ok
    usage["ratio"] = 0.91
    res = store.run_retention()
    assert res.commitlog_files_deleted == 3  # above the force-clean level too
    r = store.put(MessageDraft("T", 0, b"nope"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "91.0%" in r.remark and "diskSpaceWarningLevelRatio=90%" in r.remark
    assert store.put_many(batch_drafts(MessageDraft("T", 0, b""), [])).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    # What is stored is untouched and readable.
    lo = store.get_min_offset_in_queue("T", 1)
    g = store.get_message("T", 1, lo, 64)
    assert g.status is GetMessageStatus.FOUND
    assert all(m.body == b"r" * 200 for m in iter_records(g.body))
    # Once space is back, writes are accepted again.
    usage["ratio"] = 0.6
    store.check_disk()
    assert store.refusal is None
    assert store.put(MessageDraft("T", 0, b"yes")).ok


def test_appends_measure_the_disk_themselves(open_store, clock: FakeClock) -> None:
    """The retention round measures the disk every cleanResourceInterval (10 s); appends do
    not wait for it, they measure at most once a second."""
    usage = {"ratio": 0.5}
    store, _ = _levels_store(open_store, clock, usage)
    usage["ratio"] = 0.95
    assert store.put(MessageDraft("T", 0, b"same second")).ok  # measured less than a second ago
    clock.advance(1000)
    assert store.put(MessageDraft("T", 0, b"nope")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    usage["ratio"] = 0.5
    clock.advance(1000)
    assert store.put(MessageDraft("T", 0, b"again")).ok


def test_a_manual_delete_deletes_expired_files_only(open_store, clock: FakeClock) -> None:
    """DELETE_EXPIRED_COMMITLOG: at any hour, but honouring fileReservedTime."""
    usage = {"ratio": 0.5}
    store, _ = _levels_store(open_store, clock, usage, file_reserved_time=1)
    files_before = len(store.commitlog.files.files)
    assert store.delete_expired_manually().commitlog_files_deleted == 0  # nothing expired
    assert len(store.commitlog.files.files) == files_before
    clock.advance(2 * HOUR)  # expired, still not the delete hour
    assert files_before > 4
    assert store.delete_expired_manually().commitlog_files_deleted == 3  # three per round
    assert store.run_retention().commitlog_files_deleted == files_before - 4  # the rounds after it too
    assert len(store.commitlog.files.files) == 1  # never the newest


def test_disk_full_at_open_refuses_writes(open_store) -> None:
    store = open_store(disk_usage=lambda _p: 0.99, disk_space_warning_level_ratio=90)
    r = store.put(MessageDraft("T", 0, b"x"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert "diskSpaceWarningLevelRatio=90%" in r.remark
    assert store.max_phy_offset == 0
