"""Dispatch never skips acknowledged records: a replica's chunk that ends inside a record is
"not yet", and bytes that are no record stop dispatch loudly (docs/ha.md)."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest

from rmq.store import MessageDraft, MessageStore, PutMessageStatus

from .conftest import FakeClock


def fill_master(store: MessageStore, count: int) -> list[tuple[str, int, str]]:
    """Messages over three topics and four queues, rolling several CommitLog files; returns
    (topic, queue, key) in append order."""
    sent = []
    for i in range(count):
        topic, qid = f"T{i % 3}", i % 4
        key = f"k{i}"
        r = store.put(MessageDraft(topic, qid, b"x" * (50 + i % 200), properties={"TAGS": f"tag{i % 5}", "KEYS": key}))
        assert r.status is PutMessageStatus.PUT_OK
        sent.append((topic, qid, key))
    store.dispatch_pending()
    return sent


def queue_entries(store: MessageStore, topic: str, qid: int) -> list[tuple[int, int, int]]:
    cq = store.queues.get_or_create(topic, qid)
    return [cq.entry(i) for i in range(cq.min_offset, cq.max_offset)]


def copy_in_chunks(master: MessageStore, replica: MessageStore, sizes: Any) -> None:
    """Move the master's CommitLog to ``replica`` in chunks of the next size from ``sizes``
    (never across a file end), dispatching after each, as an HA slave does."""
    offset = master.min_phy_offset
    end = master.max_phy_offset
    while offset < end:
        chunk = master.transfer_data(offset, next(sizes))
        assert chunk
        replica.append_replica(offset, chunk)
        offset += len(chunk)
        replica.dispatch_pending()
        assert replica.dispatcher.stalled is None
        # dispatch never passes what has arrived, but for an end-of-file blank's tail
        reput = replica.dispatcher.reput_offset
        assert reput <= offset or reput % replica.commitlog.file_size == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunks_ending_inside_records_leave_every_queue_complete(
    open_store: Any, tmp_path: Path, clock: FakeClock, seed: int
) -> None:
    master = open_store(root=tmp_path / "m")
    sent = fill_master(master, 400)
    assert len(master.commitlog.files.files) > 3  # the copy crosses file ends
    replica = open_store(root=tmp_path / "s")
    rng = random.Random(seed)
    copy_in_chunks(master, replica, iter(lambda: rng.choice([1, 7, 60, 333, 1000, 4096]), None))
    assert replica.dispatch_behind == 0
    for topic in ("T0", "T1", "T2"):
        for qid in range(4):
            assert queue_entries(replica, topic, qid) == queue_entries(master, topic, qid)
    assert sum(replica.get_max_offset_in_queue(t, q) for t in ("T0", "T1", "T2") for q in range(4)) == len(sent)
    # the keys index matches too
    for topic, _, key in sent[::37]:
        assert replica.query_message(topic, key).records == master.query_message(topic, key).records


def test_a_chunk_ending_inside_a_record_dispatches_up_to_the_record_before_it(open_store: Any, tmp_path: Path) -> None:
    master = open_store(root=tmp_path / "m")
    fill_master(master, 3)
    first = master.commitlog.record_at(0)
    assert first is not None
    replica = open_store(root=tmp_path / "s")
    whole = master.transfer_data(0, 1 << 20)
    assert whole is not None
    cut = len(first) + 40  # the second record's header and part of its body
    replica.append_replica(0, whole[:cut])
    assert replica.dispatch_pending() == 1
    assert replica.dispatch_behind == 0  # what is not whole is not owed to consumers yet
    replica.append_replica(cut, whole[cut:])
    assert replica.dispatch_pending() == 2
    assert queue_entries(replica, "T1", 1) == queue_entries(master, "T1", 1)


def test_bytes_that_are_no_record_stop_dispatch_instead_of_skipping(
    open_store: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store()
    fill_master(store, 6)
    # A record written after the ones dispatched is damaged before dispatch reaches it.
    r = store.put(MessageDraft("T0", 0, b"damaged", properties={"KEYS": "bad"}))
    after = store.put(MessageDraft("T0", 0, b"fine"))
    mf = store.commitlog.files.find(r.wrote_offset)
    assert mf is not None
    mf.write_at(r.wrote_offset - mf.start + 4, b"\x00\x00\x00\x01")  # its magic code
    with caplog.at_level(logging.ERROR, logger="rmq.store.dispatch"):
        assert store.dispatch_pending() == 0
        assert store.dispatch_pending() == 0
    assert store.dispatcher.reput_offset == r.wrote_offset  # stopped, not skipped
    assert store.dispatcher.stalled is not None and str(r.wrote_offset) in store.dispatcher.stalled
    assert store.dispatch_behind == after.wrote_offset + after.wrote_bytes - r.wrote_offset
    errors = [rec for rec in caplog.records if "DISPATCH STOPPED" in rec.getMessage()]
    assert len(errors) == 1  # said once, not at every pass
