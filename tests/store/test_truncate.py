"""MessageStore.truncate_to: a slave's CommitLog cut back to the point it shares with a new
master (controller mode), on real store files over several CommitLog files."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageDraft, MessageStore, PutMessageResult, StoreError
from rmq.store.epochs import EpochCache, consistent_point

from .conftest import T0, FakeClock

TOPICS = (("A", 0), ("A", 1), ("B", 0))
FILE = 16 * 1024


def draft(i: int, tag: str = "old") -> MessageDraft:
    """Message ``i`` of a run: its queue, key and size follow ``i``, its body the run's tag
    (so records cut and records written after the cut differ)."""
    topic, qid = TOPICS[i % len(TOPICS)]
    body = f"{tag}-{i}-".encode() + b"x" * (150 + (i * 37) % 400)
    return MessageDraft(
        topic, qid, body, properties={"KEYS": f"{tag}{i}", "UNIQ_KEY": f"U{tag}{i:030d}", "TAGS": f"t{i % 4}"},
        born_timestamp=T0 - 1000 + i, born_host=("10.0.0.1", 4000), store_host=("10.0.0.2", 10911),
    )  # fmt: skip


def put_run(store: MessageStore, clock: FakeClock, indexes: range, tag: str) -> list[PutMessageResult]:
    """Put messages ``indexes`` of run ``tag``, each at its own store time."""
    out = []
    for i in indexes:
        clock.now = T0 + (0 if tag == "old" else 10_000_000) + i * 10
        r = store.put(draft(i, tag))
        assert r.ok, r
        out.append(r)
    return out


def bodies(store: MessageStore, topic: str, qid: int) -> list[bytes]:
    out, off = [], store.get_min_offset_in_queue(topic, qid)
    while True:
        g = store.get_message(topic, qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in iter_records(g.body)]
        off = g.next_begin_offset


def expected_bodies(indexes: list[tuple[int, str]], topic: str, qid: int) -> list[bytes]:
    return [draft(i, tag).body for i, tag in indexes if TOPICS[i % len(TOPICS)] == (topic, qid)]


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def same_files(a: MessageStore, b: MessageStore) -> None:
    """The CommitLog and consume queue files of ``a`` and ``b`` are byte for byte the same."""
    a.flush()
    b.flush()
    for sub in ("commitlog", "consumequeue"):
        fa = files_of(Path(a.config.store_path_root_dir) / sub)
        fb = files_of(Path(b.config.store_path_root_dir) / sub)
        assert sorted(fa) == sorted(fb), sub
        for name in fa:
            assert fa[name] == fb[name], f"{sub}/{name} differs"


def check_contents(store: MessageStore, kept: list[tuple[int, str]], gone: list[tuple[int, str]]) -> None:
    for topic, qid in TOPICS:
        assert bodies(store, topic, qid) == expected_bodies(kept, topic, qid)
        assert store.get_max_offset_in_queue(topic, qid) == len(expected_bodies(kept, topic, qid))
        assert store.queue_offset_for_next(topic, qid) == store.get_max_offset_in_queue(topic, qid)
    for i, tag in kept[:: max(1, len(kept) // 15)] + kept[-3:]:
        topic = TOPICS[i % len(TOPICS)][0]
        got = store.query_message(topic, f"{tag}{i}").records
        assert [bytes(r) for r in got] and all(draft(i, tag).body in bytes(r) for r in got)
    for i, tag in gone:
        topic = TOPICS[i % len(TOPICS)][0]
        assert store.query_message(topic, f"{tag}{i}").records == []
        assert store.query_message(topic, f"U{tag}{i:030d}").records == []


@pytest.fixture
def pair(open_store: Any, tmp_path: Path) -> tuple[Any, Any]:
    """(open the store under test, open the reference store): the same files, two roots."""
    return (lambda: open_store(root=tmp_path / "cut")), (lambda: open_store(root=tmp_path / "ref"))


@pytest.mark.parametrize("where", ["mid-file", "file-boundary"])
def test_truncate_then_append_is_a_store_that_never_had_the_cut_records(
    pair: Any, clock: FakeClock, tmp_path: Path, where: str
) -> None:
    open_cut, open_ref = pair
    store = open_cut()
    old = put_run(store, clock, range(160), "old")
    store.dispatch_pending()
    store.flush()
    assert len(store.commitlog.files.files) >= 4
    if where == "mid-file":
        k = next(i for i, r in enumerate(old) if r.wrote_offset // FILE == 2 and r.wrote_offset % FILE > 2000)
    else:
        k = next(i for i, r in enumerate(old) if r.wrote_offset == 2 * FILE)  # first record of the third file
    offset = old[k].wrote_offset
    store.truncate_to(offset)

    assert store.max_phy_offset == offset
    names = sorted(os.listdir(tmp_path / "cut" / "commitlog"))
    assert names == [f"{n * FILE:020d}" for n in range(offset // FILE + (1 if where == "mid-file" else 0))]
    kept = [(i, "old") for i in range(k)]
    gone = [(i, "old") for i in range(k, 160)]
    check_contents(store, kept, gone)
    assert store.look_message_by_offset(offset) is None
    assert store.select_one_message_by_offset(old[-1].wrote_offset) is None

    # Appends go on at the cut, as in a store that never had what was cut.
    new = put_run(store, clock, range(k, k + 90), "new")
    assert new[0].wrote_offset == offset
    store.dispatch_pending()
    ref = open_ref()
    put_run(ref, clock, range(k), "old")
    put_run(ref, clock, range(k, k + 90), "new")
    ref.dispatch_pending()
    same_files(store, ref)
    kept += [(i, "new") for i in range(k, k + 90)]
    check_contents(store, kept, gone)

    # A restart (clean, then after a crash) finds the same.
    store.close()
    store = open_cut()
    check_contents(store, kept, gone)
    same_files(store, ref)


def test_truncate_survives_a_crash_before_the_next_flush(open_store: Any, clock: FakeClock, tmp_path: Path) -> None:
    from .conftest import crash

    store = open_store(root=tmp_path / "s")
    old = put_run(store, clock, range(120), "old")
    store.dispatch_pending()
    store.flush()
    k = 70
    store.truncate_to(old[k].wrote_offset)
    put_run(store, clock, range(k, k + 5), "new")  # written, neither dispatched nor synced
    crash(store)
    store = open_store(root=tmp_path / "s")
    kept = [(i, "old") for i in range(k)] + [(i, "new") for i in range(k, k + 5)]
    check_contents(store, kept, [(i, "old") for i in range(k, 120)])


def test_truncate_with_dispatch_behind_keeps_queue_offsets(pair: Any, clock: FakeClock) -> None:
    open_cut, open_ref = pair
    store = open_cut()
    old = put_run(store, clock, range(100), "old")
    store.dispatch_pending(20)  # consumers (and the consume queues) saw only the first 20
    k = 60
    store.truncate_to(old[k].wrote_offset)
    assert store.dispatcher.reput_offset == old[20].wrote_offset
    kept = [(i, "old") for i in range(k)]
    for topic, qid in TOPICS:  # from the records the log holds, not the queues
        assert store.queue_offset_for_next(topic, qid) == len(expected_bodies(kept, topic, qid))
    put_run(store, clock, range(k, k + 30), "new")
    store.dispatch_pending()
    ref = open_ref()
    put_run(ref, clock, range(k), "old")
    put_run(ref, clock, range(k, k + 30), "new")
    ref.dispatch_pending()
    same_files(store, ref)


def test_truncate_to_the_first_file_start_empties_the_log(open_store: Any, clock: FakeClock) -> None:
    store = open_store()
    put_run(store, clock, range(100), "old")
    store.dispatch_pending()
    store.truncate_to(0)
    assert store.max_phy_offset == 0 and len(store.commitlog.files.files) == 1
    for topic, qid in TOPICS:
        assert store.get_max_offset_in_queue(topic, qid) == 0
        assert store.queue_offset_for_next(topic, qid) == 0
    r = put_run(store, clock, range(3), "new")
    assert [x.queue_offset for x in r] == [0, 0, 0] and r[0].wrote_offset == 0


def test_refusals_change_nothing(open_store: Any, clock: FakeClock) -> None:
    store = open_store()
    old = put_run(store, clock, range(120), "old")
    store.dispatch_pending()
    end = store.max_phy_offset
    with pytest.raises(StoreError, match="past its end"):
        store.truncate_to(end + 1)
    with pytest.raises(StoreError, match="record boundary"):
        store.truncate_to(old[50].wrote_offset + 1)
    with pytest.raises(StoreError, match="record boundary"):
        store.truncate_to(old[50].wrote_offset + 30)
    store.truncate_to(end)  # the end: nothing to cut
    assert store.max_phy_offset == end
    store.config.delete_files_batch_max = 2
    assert store.run_retention(force=True).commitlog_files_deleted == 2
    with pytest.raises(StoreError, match="retention"):
        store.truncate_to(0)
    assert store.max_phy_offset == end
    left = [(i, "old") for i in range(120) if old[i].wrote_offset >= store.min_phy_offset]
    for topic, qid in TOPICS:
        assert bodies(store, topic, qid) == expected_bodies(left, topic, qid)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.truncate_to(old[100].wrote_offset)


def test_a_slave_truncates_to_the_consistent_point_and_follows_its_new_master(
    open_store: Any, clock: FakeClock, tmp_path: Path
) -> None:
    """Epoch 1: master M1 writes 150 messages and slave S copies them all. M1 dies; M2, which
    had only the first 90, is elected (epoch 2) and writes on. S comes back: the epochs give
    the consistent point, S cuts its log there and copies M2's from there on."""
    m1 = open_store(root=tmp_path / "m1")
    written = put_run(m1, clock, range(150), "old")
    slave = open_store(root=tmp_path / "s")
    rng = random.Random(5)
    _copy(m1, slave, 0)
    slave_epochs = EpochCache(str(tmp_path / "s" / "epochFileCheckpoint"))
    slave_epochs.append(1, 0)

    m2 = open_store(root=tmp_path / "m2")
    k = 90
    put_run(m2, clock, range(k), "old")
    put_run(m2, clock, range(k, k + 80), "new")
    m2_epochs = EpochCache(entries=[])
    m2_epochs.append(1, 0)
    m2_epochs.append(2, written[k].wrote_offset)

    point = consistent_point(slave_epochs.entries, slave.max_phy_offset, m2_epochs.entries, m2.max_phy_offset)
    assert point == written[k].wrote_offset
    slave.truncate_to(point)
    slave_epochs.truncate_suffix_by_offset(point)
    _copy(m2, slave, point, rng)
    slave.dispatch_pending()
    m2.dispatch_pending()
    same_files(slave, m2)
    kept = [(i, "old") for i in range(k)] + [(i, "new") for i in range(k, k + 80)]
    check_contents_replica(slave, kept, [(i, "old") for i in range(k, 150)])

    # Elected in its turn, the slave appends as a master: queue offsets follow the log.
    slave.stop_replica()
    put_run(slave, clock, range(k + 80, k + 85), "new")
    put_run(m2, clock, range(k + 80, k + 85), "new")
    slave.dispatch_pending()
    m2.dispatch_pending()
    same_files(slave, m2)


def check_contents_replica(store: MessageStore, kept: list[tuple[int, str]], gone: list[tuple[int, str]]) -> None:
    for topic, qid in TOPICS:
        assert bodies(store, topic, qid) == expected_bodies(kept, topic, qid)
    for i, tag in gone:
        assert store.query_message(TOPICS[i % len(TOPICS)][0], f"{tag}{i}").records == []


def _copy(master: MessageStore, replica: MessageStore, offset: int, rng: random.Random | None = None) -> None:
    """The master's CommitLog from ``offset`` to the replica, in chunks as an HA slave gets it."""
    end = master.max_phy_offset
    while offset < end:
        chunk = master.transfer_data(offset, rng.choice([100, 999, 4096]) if rng else 1 << 20)
        assert chunk
        replica.append_replica(offset, chunk)
        offset += len(chunk)
        replica.dispatch_pending()


def test_stop_replica_cuts_an_incomplete_record(open_store: Any, clock: FakeClock, tmp_path: Path) -> None:
    master = open_store(root=tmp_path / "m")
    written = put_run(master, clock, range(10), "old")
    replica = open_store(root=tmp_path / "s")
    whole = master.transfer_data(0, 1 << 20)
    assert whole is not None
    part = written[6].wrote_offset + 50  # inside record 6
    replica.append_replica(0, whole[:part])
    replica.dispatch_pending()
    assert replica.dispatcher.limit == written[6].wrote_offset
    replica.stop_replica()
    assert replica.max_phy_offset == written[6].wrote_offset
    assert replica.dispatcher.limit is None
    r = put_run(replica, clock, range(6, 7), "new")[0]
    assert r.wrote_offset == written[6].wrote_offset and r.queue_offset == written[6].queue_offset
    replica.dispatch_pending()
    assert bodies(replica, *TOPICS[0]) == expected_bodies([(i, "old") for i in range(6)] + [(6, "new")], *TOPICS[0])
