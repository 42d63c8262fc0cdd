"""A controller-mode replica's cut: MessageStore.truncate_to and become_writer, on real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmq.store import MessageDraft, MessageStore, PutMessageStatus, StoreError
from rmq.store.records import iter_commitlog

from .test_replica_dispatch import fill_master, queue_entries


def records(store: MessageStore) -> list[tuple[int, bytes]]:
    return list(iter_commitlog(str(store.config.commitlog_dir)))


@pytest.mark.parametrize("where", ["middle of a file", "file boundary"])
def test_truncate_then_append_equals_a_store_that_never_had_the_cut_records(
    open_store: Any, tmp_path: Path, where: str
) -> None:
    a = open_store(root=tmp_path / "a")
    sent = fill_master(a, 300)
    recs = records(a)
    assert a.commitlog.files.files[0].end < a.max_phy_offset  # several files
    if where == "file boundary":
        cut = next(o for o, _ in recs if o == a.commitlog.files.files[1].start)
    else:
        cut = recs[len(recs) // 2][0]
    kept = [r for r in recs if r[0] < cut]
    a.truncate_to(cut)
    assert a.max_phy_offset == cut
    assert records(a) == kept
    for topic in ("T0", "T1", "T2"):
        for qid in range(4):
            entries = queue_entries(a, topic, qid)
            assert all(phy + size <= cut for phy, size, _ in entries)
            assert a.get_max_offset_in_queue(topic, qid) == len(entries) + a.queues.get_or_create(topic, qid).min_offset
    # appends go on at the cut, queue offsets from the queues
    r = a.put(MessageDraft("T0", 0, b"after", properties={"KEYS": "after"}))
    assert r.status is PutMessageStatus.PUT_OK and r.wrote_offset == cut
    a.dispatch_pending()
    assert queue_entries(a, "T0", 0)[-1][0] == cut
    # the cut records' keys are not served by the index
    topic, _qid, key = sent[-1]
    assert not a.query_message(topic, key, 32, 0, 2**62).records
    topic, _qid, key = sent[0]
    assert a.query_message(topic, key, 32, 0, 2**62).records


def test_truncate_survives_a_reopen(open_store: Any, tmp_path: Path) -> None:
    a = open_store(root=tmp_path / "a")
    fill_master(a, 120)
    cut = records(a)[50][0]
    a.truncate_to(cut)
    a.close()
    b = open_store(root=tmp_path / "a")
    assert b.max_phy_offset == cut
    assert [o for o, _ in records(b)][-1] < cut


def test_truncate_refuses_what_is_no_record_boundary(open_store: Any, tmp_path: Path) -> None:
    a = open_store(root=tmp_path / "a")
    fill_master(a, 20)
    end = a.max_phy_offset
    with pytest.raises(StoreError):
        a.truncate_to(end + 10)
    with pytest.raises(StoreError):
        a.truncate_to(records(a)[5][0] + 3)
    assert a.max_phy_offset == end


def test_a_replica_becoming_writer_drops_a_partial_record(open_store: Any, tmp_path: Path) -> None:
    m = open_store(root=tmp_path / "m")
    fill_master(m, 10)
    s = open_store(root=tmp_path / "s")
    recs = records(m)
    last = recs[-1][0]
    data = m.transfer_data(0, last + 7)  # ends 7 bytes into the last record
    assert data is not None
    s.append_replica(0, data)
    s.dispatch_pending()
    s.become_writer()
    assert s.max_phy_offset == last
    r = s.put(MessageDraft("T0", 0, b"mine"))
    assert r.status is PutMessageStatus.PUT_OK and r.wrote_offset == last
    s.dispatch_pending()
    assert s.dispatcher.reput_offset == s.max_phy_offset


async def test_the_async_front_cuts_while_its_tasks_run(open_store: Any, tmp_path: Path) -> None:
    from rmq.store.aio import AsyncMessageStore

    a = open_store(root=tmp_path / "a")
    fill_master(a, 120)
    cut = records(a)[40][0]
    async with AsyncMessageStore(a) as front:
        await front.truncate_to(cut)
        r = await front.put(MessageDraft("T0", 0, b"after"))
        assert r.wrote_offset == cut
        await front.wait_dispatched()
    assert a.max_phy_offset > cut
