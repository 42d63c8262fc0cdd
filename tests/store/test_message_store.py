"""MessageStore: appends, reads, statuses, batches, transactions, offsets by time, layout."""

from __future__ import annotations

import itertools
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.protocol import properties as P
from rmq.protocol.message import (
    BORNHOST_V6_FLAG,
    STOREHOST_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchItem,
    Message,
    decode_batch_items,
    decode_record,
    encode_batch_body,
    iter_records,
    make_offset_msg_id,
)
from rmq.store import (
    SCHEDULE_TOPIC,
    GetMessageStatus,
    IllegalBatch,
    MessageDraft,
    MessageStore,
    PutMessageStatus,
    StoreLockedError,
    batch_drafts,
)
from rmq.store import formats as F
from rmq.store.mapped_file import MappedFile

from .conftest import T0, FakeClock, small_config


def _put(store: MessageStore, topic: str = "T", qid: int = 0, body: bytes = b"b", **props: str) -> object:
    r = store.put(MessageDraft(topic, qid, body, properties=props or None, born_host=("10.0.0.9", 5555)))
    assert r.status is PutMessageStatus.PUT_OK, r
    return r


def test_put_and_get_round_trip(open_store, clock: FakeClock) -> None:
    store = open_store()
    results = []
    for i in range(5):
        clock.advance(10)
        r = store.put(MessageDraft(
            "TopicA", 1, f"body-{i}".encode(), flag=7,
            properties={"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"UNIQ{i}"},
            born_timestamp=T0 - 5, born_host=("10.0.0.9", 5555), store_host=("192.168.0.1", 10911),
            reconsume_times=2,
        ))  # fmt: skip
        results.append(r)
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    assert results[0].wrote_offset == 0
    for a, b in itertools.pairwise(results):
        assert b.wrote_offset == a.wrote_offset + a.wrote_bytes
    assert results[2].msg_id == make_offset_msg_id("192.168.0.1", 10911, results[2].wrote_offset)
    assert results[2].store_timestamp == T0 + 30
    # Nothing is in the consume queue until dispatch runs.
    assert store.get_max_offset_in_queue("TopicA", 1) == 0
    assert store.dispatch_pending() == 5
    got = store.get_message("TopicA", 1, 0, 32)
    assert got.status is GetMessageStatus.FOUND
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (5, 0, 5)
    assert got.queue_offsets == [0, 1, 2, 3, 4]
    msgs = list(iter_records(got.body))
    for i, m in enumerate(msgs):
        assert m.body == f"body-{i}".encode()
        assert m.properties == {"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"UNIQ{i}"}
        assert (m.queue_id, m.queue_offset, m.flag, m.reconsume_times) == (1, i, 7, 2)
        assert m.commitlog_offset == results[i].wrote_offset
        assert m.store_timestamp == results[i].store_timestamp
        assert m.born_host == ("10.0.0.9", 5555)
        assert m.store_host == ("192.168.0.1", 10911)
        assert m.msg_id == f"UNIQ{i}"
    # The pull body is the stored bytes, byte for byte.
    assert got.records[0] == store.select_one_message_by_offset(0)
    assert store.look_message_by_offset(results[1].wrote_offset).body == b"body-1"
    assert store.stats.put_message_times_total == 5
    assert store.stats.put_message_times_by_topic == {"TopicA": 5}


def test_get_message_statuses(open_store, tmp_path: Path) -> None:
    store = open_store()
    for i in range(3):
        _put(store, body=b"%d" % i)
    store.dispatch_pending()
    r = store.get_message("Nope", 0, 0)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0)
    r = store.get_message("T", 0, 3)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3)
    assert (r.min_offset, r.max_offset) == (0, 3)
    r = store.get_message("T", 0, 9)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 3)
    r = store.get_message("T", 0, 1, 1)
    assert (r.status, r.next_begin_offset, len(r.records)) == (GetMessageStatus.FOUND, 2, 1)
    store.close()
    # A queue directory with an empty file: the queue exists but holds nothing.
    qdir = tmp_path / "store" / "consumequeue" / "Empty" / "0"
    qdir.mkdir(parents=True)
    (qdir / F.offset_to_file_name(0)).write_bytes(bytes(20 * 50))
    store = open_store()
    r = store.get_message("Empty", 0, 5)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)


def test_offset_too_small_and_removed_records(open_store) -> None:
    store = open_store(mapped_file_size_commitlog=4096)
    for _ in range(100):
        _put(store, body=b"x" * 100)
    store.dispatch_pending()
    assert len(store.commitlog.files.files) >= 3
    # Drop the first CommitLog file behind the store's back: entries still point there.
    first = store.commitlog.files.files[0]
    gone = first.end
    store.commitlog.files.delete_first()
    r = store.get_message("T", 0, 0, 4)
    assert r.status is GetMessageStatus.FOUND  # the removed head is skipped within one call
    assert store.look_message_by_offset(0) is None
    lost = sum(1 for e in range(100) if store.get_commitlog_offset_in_queue("T", 0, e) < gone)
    assert r.queue_offsets[0] == lost
    # Once the queue's min offset is corrected, older offsets are "too small".
    store.queues.get("T", 0).correct_min_offset(store.min_phy_offset)
    r = store.get_message("T", 0, 0)
    assert (r.status, r.next_begin_offset, r.min_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, lost, lost)


def test_message_was_removing_and_offset_found_null(open_store) -> None:
    store = open_store(mapped_file_size_commitlog=4096)
    for _ in range(60):
        _put(store, body=b"y" * 100)
    store.dispatch_pending()
    per_file = sum(1 for e in range(60) if store.get_commitlog_offset_in_queue("T", 0, e) < 4096)
    store.commitlog.files.delete_first()
    r = store.get_message("T", 0, 0, 4, tags_codes={12345})
    assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE  # filtered before reading
    r = store.get_message("T", 0, 0, 1, max_bytes=1)
    assert r.status is GetMessageStatus.FOUND and r.queue_offsets == [per_file]
    store.flush()
    cq = store.queues.get("T", 0)
    cq.files.delete_first()  # a consume queue file missing under a valid offset
    r = store.get_message("T", 0, 0)
    assert r.status is GetMessageStatus.OFFSET_FOUND_NULL
    assert r.next_begin_offset == 50  # first entry of the next consume queue file


def test_removing_status_when_only_removed_records(open_store) -> None:
    store = open_store(mapped_file_size_commitlog=4096, mapped_file_size_consume_queue=20 * 1000)
    for _ in range(60):
        _put(store, body=b"y" * 100)
    store.dispatch_pending()
    store.commitlog.files.delete_first()
    store.commitlog.files.delete_first()
    # Scan limited to entries that all sit in the deleted files.
    removed = sum(1 for e in range(60) if store.get_commitlog_offset_in_queue("T", 0, e) < 8192)
    cq = store.queues.get("T", 0)
    raw = cq.entries(0, removed)
    assert len(raw) == removed * 20
    r = store.reader._collect(cq, 0, raw, 32, 1 << 20, None)
    assert (r.status, r.next_begin_offset) == (GetMessageStatus.MESSAGE_WAS_REMOVING, removed)


def test_batch_limits(open_store) -> None:
    store = open_store(max_transfer_count_on_message_in_memory=32)
    for _ in range(40):
        _put(store, body=b"z" * 100)
    store.dispatch_pending()
    assert len(store.get_message("T", 0, 0, 64).records) == 32
    assert len(store.get_message("T", 0, 0, 5).records) == 5
    size = store.get_message("T", 0, 0, 1).records[0].__len__()
    r = store.get_message("T", 0, 0, 32, max_bytes=size * 3 + 1)
    assert (len(r.records), r.next_begin_offset, r.buffer_total_size) == (3, 3, size * 3)
    r = store.get_message("T", 0, 0, 32, max_bytes=1)  # at least one message always
    assert len(r.records) == 1


def test_tag_filter(open_store) -> None:
    store = open_store()
    tags = ["TagA", "TagB", "TagB", "TagA", None]
    for t in tags:
        if t:
            _put(store, TAGS=t)
        else:
            _put(store)
    store.dispatch_pending()
    want = {P.java_string_hash("TagA")}
    r = store.get_message("T", 0, 0, 32, tags_codes=want)
    assert r.status is GetMessageStatus.FOUND
    assert r.queue_offsets == [0, 3] and r.next_begin_offset == 5
    r = store.get_message("T", 0, 1, 1, tags_codes=want)
    assert r.queue_offsets == [3] and r.next_begin_offset == 4
    r = store.get_message("T", 0, 1, 32, tags_codes={P.java_string_hash("TagC")})
    assert (r.status, r.next_begin_offset, r.records) == (GetMessageStatus.NO_MATCHED_MESSAGE, 5, [])
    entry = store.queues.get("T", 0).entry(4)
    assert entry is not None and entry[2] == 0  # no tag -> tags code 0


def test_rolling_across_commitlog_files(open_store, tmp_path: Path) -> None:
    store = open_store(mapped_file_size_commitlog=4096)
    bodies = [os.urandom(i % 700 + 1) for i in range(200)]
    results = [store.put(MessageDraft("T", i % 3, b)) for i, b in enumerate(bodies)]
    assert all(r.ok for r in results)
    files = sorted(os.listdir(tmp_path / "store" / "commitlog"))
    assert len(files) >= 8
    assert files[:2] == [F.offset_to_file_name(0), F.offset_to_file_name(4096)]
    # Every file ends with a blank record filling it up.
    for r, nxt in itertools.pairwise(results):
        if nxt.wrote_offset // 4096 != r.wrote_offset // 4096:
            assert nxt.wrote_offset % 4096 == 0
            blank_at = r.end_offset
            raw = store.commitlog.read(blank_at, 8)
            remaining, magic = struct.unpack(">iI", raw)
            assert (remaining, magic) == (4096 - blank_at % 4096, F.BLANK_MAGIC)
    store.dispatch_pending()
    seen = {}
    for q in range(3):
        off = 0
        while True:
            g = store.get_message("T", q, off, 32)
            if g.status is not GetMessageStatus.FOUND:
                break
            for m in iter_records(g.body):
                seen[m.commitlog_offset] = m.body
            off = g.next_begin_offset
    assert [seen[r.wrote_offset] for r in results] == bodies
    # Consume queue files roll too (50 entries each); entries reach them on flush.
    store.flush()
    qdir = tmp_path / "store" / "consumequeue" / "T" / "0"
    assert sorted(os.listdir(qdir))[:2] == [F.offset_to_file_name(0), F.offset_to_file_name(1000)]


def test_layout_on_disk(open_store, tmp_path: Path) -> None:
    store = open_store()
    r = _put(store, TAGS="TagA", KEYS="order-1")
    store.dispatch_pending()
    store.flush()
    root = tmp_path / "store"
    assert (root / "abort").exists() and (root / "lock").exists()
    assert (root / "checkpoint").stat().st_size == 4096
    cq = (root / "consumequeue" / "T" / "0" / F.offset_to_file_name(0)).read_bytes()
    assert F.CQ_ENTRY.unpack_from(cq, 0) == (0, r.wrote_bytes, P.java_string_hash("TagA"))
    assert F.CQ_ENTRY.unpack_from(cq, 20) == (0, 0, 0)
    (index_name,) = os.listdir(root / "index")
    assert len(index_name) == 17 and index_name.isdigit()
    idx = (root / "index" / index_name).read_bytes()
    assert len(idx) == 40 + 64 * 4 + 200 * 20
    begin_ts, end_ts, begin_phy, end_phy, slots, count = F.INDEX_HEADER.unpack_from(idx, 0)
    assert count == 2  # starts at 1, one key indexed (no UNIQ_KEY here)
    assert (begin_ts, end_ts, begin_phy, end_phy, slots) == (T0, T0, 0, 0, 1)
    from rmq.store.index import index_key_hash

    h = index_key_hash("T#order-1")
    (slot,) = F.INDEX_SLOT.unpack_from(idx, 40 + (h % 64) * 4)
    assert slot == 1
    assert F.INDEX_ENTRY.unpack_from(idx, 40 + 64 * 4 + 20) == (h, 0, 0, 0)
    store.close()
    assert not (root / "abort").exists()


def test_lock_refuses_a_second_opener(open_store, tmp_path: Path) -> None:
    open_store()
    with pytest.raises(StoreLockedError, match="in use by another process"):
        MessageStore(small_config(tmp_path / "store"))
    code = (
        "import sys\nfrom rmq.store import MessageStore, StoreConfig, StoreLockedError\n"
        f"try:\n    MessageStore(StoreConfig(store_path_root_dir={str(tmp_path / 'store')!r}, "
        "mapped_file_size_commitlog=16384, mapped_file_size_consume_queue=1000))\n"
        "except StoreLockedError:\n    sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], check=False)
    assert proc.returncode == 3


def test_reopen_keeps_everything(open_store, tmp_path: Path) -> None:
    store = open_store()
    for i in range(30):
        _put(store, qid=i % 2, body=b"%d" % i)
    store.close()
    store = open_store()
    assert store.get_max_offset_in_queue("T", 0) == 15
    r = _put(store, qid=0)
    assert r.queue_offset == 15
    store.dispatch_pending()
    assert [m.body for m in iter_records(store.get_message("T", 1, 0).body)] == [b"%d" % i for i in range(1, 30, 2)]


def test_batches(open_store) -> None:
    store = open_store(mapped_file_size_commitlog=4096)
    _put(store, body=b"a" * 3000)  # leaves less than a batch's worth in the first file
    msgs = [Message("", b"m%d" % i, i, {"UNIQ_KEY": f"U{i}", "KEYS": f"K{i}"}) for i in range(10)]
    r = store.put_many(batch_drafts(MessageDraft("T", 0, b"", properties={"CLUSTER": "c1", "WAIT": "true"}), msgs))
    assert r.status is PutMessageStatus.PUT_OK
    assert (r.msg_num, r.queue_offset, r.wrote_offset) == (10, 1, 4096)  # whole batch in the next file
    ids = r.msg_id.split(",")
    assert len(ids) == 10
    store.dispatch_pending()
    got = list(iter_records(store.get_message("T", 0, 1).body))
    assert [m.queue_offset for m in got] == list(range(1, 11))
    assert [m.offset_msg_id for m in got] == ids
    assert got[3].properties == {"UNIQ_KEY": "U3", "KEYS": "K3", "CLUSTER": "c1", "WAIT": "true"}
    assert got[3].flag == 3
    assert sum(m.store_size for m in got) == r.wrote_bytes
    assert len(store.query_message("T", "U7").records) == 1
    with pytest.raises(IllegalBatch, match="transactional"):
        batch_drafts(MessageDraft("T", 0, b"", sys_flag=TRANSACTION_PREPARED_TYPE), msgs)
    delayed = [Message("", b"x", 0, {"DELAY": "3"})]
    with pytest.raises(IllegalBatch, match="delayed"):
        batch_drafts(MessageDraft("T", 0, b""), delayed)
    too_big = [Message("", b"x" * 1000, 0, {}) for _ in range(5)]
    assert store.put_many(batch_drafts(MessageDraft("T", 0, b""), too_big)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.queue_offset_for_next("T", 0) == 11


def test_put_many_writes_drafts_to_several_queues_in_one_piece(open_store, monkeypatch) -> None:
    """What a transaction's commit needs: drafts to other topics and queues, of other
    transaction types, written together or not at all, each queue's offsets in order."""
    store = open_store()
    _put(store, "A", 0)
    drafts = [
        MessageDraft("A", 0, b"a0"),
        MessageDraft("A", 1, b"a1", tags_code=77),
        MessageDraft("B", 0, b"b0", born_host=("2001:db8::1", 9)),
        MessageDraft("A", 0, b"a0'"),
        MessageDraft("A", 0, b"half", sys_flag=TRANSACTION_PREPARED_TYPE),  # takes no queue offset
        MessageDraft("A", 0, b"a0''"),
    ]
    r = store.put_many(drafts)
    assert r.ok and r.msg_num == 6 and list(r.queue_offsets) == [1, 0, 0, 2, 0, 3]
    assert [store.queue_offset_for_next(t, q) for t, q in (("A", 0), ("A", 1), ("B", 0))] == [4, 1, 1]
    store.dispatch_pending()
    stored = [store.look_message_by_offset(int(i[-16:], 16)) for i in r.msg_id.split(",")]
    assert [(m.topic, m.queue_id, m.body) for m in stored] == [(d.topic, d.queue_id, d.body) for d in drafts]
    assert stored[2].sys_flag & BORNHOST_V6_FLAG and stored[-1].commitlog_offset + stored[-1].store_size == r.end_offset
    assert store.queues.get("A", 1).entry(0)[2] == 77
    # a write the kernel refuses (the records go with one pwrite): none counts, no offset moved
    assert not store.commitlog.files.last().mapped_writes_at(0, 1)

    def io_error(*_args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(MappedFile, "pwrite", io_error)
    end = store.max_phy_offset
    assert store.put_many(drafts).status is PutMessageStatus.UNKNOWN_ERROR
    assert store.max_phy_offset == end
    assert [store.queue_offset_for_next(t, q) for t, q in (("A", 0), ("A", 1), ("B", 0))] == [4, 1, 1]


def test_put_group_stores_what_single_puts_store(open_store, clock: FakeClock, tmp_path: Path, monkeypatch) -> None:
    """Sends that came together (Appender.put_group): the same records, offsets and results
    as one put after another, each refusal its own, files rolled where single puts roll them;
    a write the kernel refuses fails them all with nothing counted."""
    host = ("10.0.0.9", 5555)

    def drafts(n: int) -> list[MessageDraft]:
        out = [
            MessageDraft("T", n % 2, b"x" * 700, properties={"UNIQ_KEY": f"U{n}", "KEYS": "k"}, born_host=host),
            MessageDraft("T", -1, b"bad queue", born_host=host),
            MessageDraft("U", 0, b"y", properties={"P": "v" * 40000}, born_host=host),
            MessageDraft("U", 0, b"z" * 300, tags_code=5, born_host=("2001:db8::1", 9)),
            MessageDraft("T", 0, b"half", sys_flag=TRANSACTION_PREPARED_TYPE, born_host=host),
        ]
        return out

    def fields(r: object) -> tuple[object, ...]:
        return (r.status, r.wrote_offset, r.wrote_bytes, r.msg_id, r.queue_offset, r.msg_num)  # type: ignore[attr-defined]

    single, grouped = open_store(), open_store(root=tmp_path / "grouped")
    for n in range(40):  # 16 KiB files: groups of 2 KiB cross file ends now and then
        group = drafts(n)
        expected = [fields(single.put(d)) for d in group]
        assert [fields(r) for r in grouped.appender.put_group(group)] == expected
    assert [s for s, *_ in expected] == [PutMessageStatus.PUT_OK, PutMessageStatus.MESSAGE_ILLEGAL,
                                         PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, PutMessageStatus.PUT_OK,
                                         PutMessageStatus.PUT_OK]  # fmt: skip
    assert len(single.commitlog.files.files) > 3
    assert single.commitlog.read(0, single.max_phy_offset) == grouped.commitlog.read(0, grouped.max_phy_offset)
    for store in (single, grouped):
        store.dispatch_pending()
    assert grouped.queues.get("U", 0).entry(3)[2] == 5
    assert len(grouped.query_message("T", "U7").records) == 1
    stats = (single.stats.put_message_times_total, single.stats.put_message_failed_times)
    assert (grouped.stats.put_message_times_total, grouped.stats.put_message_failed_times) == stats

    def io_error(*_args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(MappedFile, "pwrite", io_error)
    end = grouped.max_phy_offset
    statuses = [r.status for r in grouped.appender.put_group(drafts(0)[:1] * 3)]
    assert statuses == [PutMessageStatus.UNKNOWN_ERROR] * 3 and grouped.max_phy_offset == end
    assert grouped.queue_offset_for_next("T", 0) == single.queue_offset_for_next("T", 0)


def test_batch_items_keep_their_properties_as_they_came(open_store, clock: FakeClock, tmp_path: Path) -> None:
    """A batch from the wire (decode_batch_items) is stored with each item's properties as
    sent and the batch's appended, as RocketMQ stores them: the same records as the decoded
    messages give; properties that may name DELAY or a batch property are decoded first."""
    msgs = [Message("", b"m%d" % i, i, {"UNIQ_KEY": f"U{i}", "KEYS": f"K{i} k"}) for i in range(5)]
    extra = {"CLUSTER": "c1", "WAIT": "true"}
    items = decode_batch_items(encode_batch_body(msgs))
    assert items[2] == BatchItem(2, b"m2", b"UNIQ_KEY\x01U2\x02KEYS\x01K2 k")
    a, b = open_store(), open_store(root=tmp_path / "other")
    for store, batch in ((a, msgs), (b, items)):
        clock.now = T0
        assert (
            store.put_many(batch_drafts(MessageDraft("T", 0, b"", properties=extra), batch)).status
            is PutMessageStatus.PUT_OK
        )
    assert a.commitlog.read(0, a.commitlog.max_offset) == b.commitlog.read(0, b.commitlog.max_offset)
    # as the C++ client sends them (a trailing separator): kept, then the batch's
    raw = [BatchItem(0, b"x", b"UNIQ_KEY\x01C1\x02"), BatchItem(0, b"y", b"")]
    r = b.put_many(batch_drafts(MessageDraft("T", 0, b"", properties={"CLUSTER": "c1"}), raw))
    b.dispatch_pending()
    got = list(iter_records(b.get_message("T", 0, r.queue_offset).body))
    assert [m.properties for m in got] == [{"UNIQ_KEY": "C1", "CLUSTER": "c1"}, {"CLUSTER": "c1"}]
    assert b.commitlog.read(r.wrote_offset, r.wrote_bytes).count(b"UNIQ_KEY\x01C1\x02CLUSTER\x01c1") == 1
    # no batch properties: an item's are stored byte for byte, no separator added
    r = b.put_many(batch_drafts(MessageDraft("T", 0, b""), items[:1]))
    stored = b.commitlog.read(r.wrote_offset, r.wrote_bytes)
    assert stored.count(items[0].properties) == 1 and items[0].properties + b"\x02" not in stored
    # a batch property in the item: the batch's wins; a DELAY level: refused
    r = b.put_many(
        batch_drafts(
            MessageDraft("T", 0, b"", properties={"CLUSTER": "c1"}),
            [BatchItem(0, b"z", b"CLUSTER\x01mine\x02KEYS\x01k")],
        )
    )
    b.dispatch_pending()
    assert next(iter_records(b.get_message("T", 0, r.queue_offset).body)).properties == {"CLUSTER": "c1", "KEYS": "k"}
    delayed = [BatchItem(0, b"d", b"KEYS\x01k\x02DELAY\x013")]
    with pytest.raises(IllegalBatch, match="delayed"):
        batch_drafts(MessageDraft("T", 0, b""), delayed)
    not_delayed = [BatchItem(0, b"d", b"NODELAY\x013\x02DELAY\x010")]
    assert b.put_many(batch_drafts(MessageDraft("T", 0, b""), not_delayed)).status is PutMessageStatus.PUT_OK


def test_transactions(open_store) -> None:
    store = open_store()
    _put(store)
    prep = store.put(MessageDraft("T", 0, b"half", properties={"UNIQ_KEY": "TX1"}, sys_flag=TRANSACTION_PREPARED_TYPE))
    assert prep.queue_offset == 0
    commit = store.put(MessageDraft(
        "T", 0, b"real", properties={"UNIQ_KEY": "TX1"}, sys_flag=TRANSACTION_COMMIT_TYPE,
        prepared_transaction_offset=prep.wrote_offset,
    ))  # fmt: skip
    assert commit.queue_offset == 1  # the prepared record did not take a queue offset
    rb = store.put(MessageDraft("T", 0, b"gone", properties={"UNIQ_KEY": "TX2"}, sys_flag=TRANSACTION_ROLLBACK_TYPE))
    assert rb.queue_offset == 0
    store.dispatch_pending()
    assert store.get_max_offset_in_queue("T", 0) == 2
    bodies = [m.body for m in iter_records(store.get_message("T", 0, 0).body)]
    assert bodies == [b"b", b"real"]
    assert decode_record(store.select_one_message_by_offset(prep.wrote_offset))[0].body == b"half"
    assert len(store.query_message("T", "TX1").records) == 2  # prepared records are indexed
    assert store.query_message("T", "TX2").records == []  # rollback records are not


def test_an_ipv6_host_gets_the_bit_of_the_role_it_has_in_each_record(open_store) -> None:
    """One host may be a born host in one record and the store host in the next (a broker's
    own op records name it as both): each record carries the V6 bit of its own role."""
    store = open_store()
    v6 = ("2001:db8::1", 10911)
    first = store.put(MessageDraft("T", 0, b"a", born_host=v6, store_host=("127.0.0.1", 1)))
    second = store.put(MessageDraft("T", 0, b"b", born_host=("127.0.0.1", 2), store_host=v6))
    both = store.put_many(batch_drafts(MessageDraft("T", 0, b"", born_host=v6, store_host=v6), [Message("T", b"c")]))
    got = [store.look_message_by_offset(r.wrote_offset) for r in (first, second, both)]
    assert [(m.born_host, m.store_host) for m in got] == [
        (v6, ("127.0.0.1", 1)),
        (("127.0.0.1", 2), v6),
        (v6, v6),
    ]
    assert [m.sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) for m in got] == [
        BORNHOST_V6_FLAG,
        STOREHOST_V6_FLAG,
        BORNHOST_V6_FLAG | STOREHOST_V6_FLAG,
    ]


def test_schedule_topic_tags_code_is_delivery_time(open_store, clock: FakeClock) -> None:
    store = open_store()
    r = store.put(MessageDraft(SCHEDULE_TOPIC, 2, b"later", properties={"DELAY": "3", "TAGS": "x"}))
    r2 = store.put(MessageDraft(SCHEDULE_TOPIC, 2, b"later", properties={"DELAY": "99"}))
    r3 = store.put(MessageDraft("T", 0, b"custom", properties={"TAGS": "x"}, tags_code=424242))
    store.dispatch_pending()
    cq = store.queues.get(SCHEDULE_TOPIC, 2)
    assert cq.entry(0)[2] == r.store_timestamp + 10_000  # level 3 = 10 s
    assert cq.entry(1)[2] == r2.store_timestamp + 7_200_000  # clamped to level 18 = 2 h
    assert store.queues.get("T", 0).entry(r3.queue_offset)[2] == 424242


def test_put_statuses(open_store) -> None:
    store = open_store(max_message_size=1000)
    assert store.put(MessageDraft("x" * 128, 0, b"")).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put(MessageDraft("T", 0, b"x" * 1001)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put(MessageDraft("T", -1, b"")).status is PutMessageStatus.MESSAGE_ILLEGAL
    r = store.put(MessageDraft("T", 0, b"", properties={"k": "v" * 40000}))
    assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.stats.put_message_failed_times == 4
    v6 = store.put(MessageDraft("T", 0, b"6", born_host=("2001:db8::1", 9)))
    assert v6.ok
    store.dispatch_pending()
    m = store.look_message_by_offset(v6.wrote_offset)
    assert m.sys_flag & BORNHOST_V6_FLAG and m.born_host == ("2001:db8::1", 9)
    store.close()
    assert store.put(MessageDraft("T", 0, b"")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_offset_by_time(open_store, clock: FakeClock) -> None:
    store = open_store()
    times = [1000, 2000, 2000, 3000, 7000]
    for t in times:
        clock.now = T0 + t
        _put(store)
    store.dispatch_pending()

    def find(t: int) -> int:
        return store.get_offset_in_queue_by_time("T", 0, T0 + t)

    assert find(1000) == 0
    assert find(2000) == 1  # exact hit: the first one stored at that time
    assert find(3000) == 3
    assert find(2400) == 2  # nearer neighbour: the last one stored at 2000
    assert find(2600) == 3  # nearer neighbour (3000)
    assert find(5000) == 3  # tie: the earlier one
    assert find(0) == 0  # before everything: the first
    assert find(99999) == 4  # after everything: the last
    assert store.get_offset_in_queue_by_time("Nope", 0, T0) == 0
    assert store.get_earliest_message_time("T", 0) == T0 + 1000
    assert store.get_earliest_message_time() == T0 + 1000
    assert store.get_message_store_timestamp("T", 0, 4) == T0 + 7000
    assert store.get_message_store_timestamp("T", 0, 5) == -1
    entries = store.read_consume_queue("T", 0, 3, 10)
    assert [(q, size > 0, tags) for q, _, size, tags in entries] == [(3, True, 0), (4, True, 0)]
    assert entries[1][1] == store.get_commitlog_offset_in_queue("T", 0, 4)
    assert store.read_consume_queue("T", 0, 5) == []
    assert store.read_consume_queue("Nope", 0, 0) == []


def test_query_message(open_store, clock: FakeClock) -> None:
    store = open_store(max_index_num=20)  # roll index files every 19 entries
    offsets = []
    for i in range(40):
        clock.advance(1000)
        r = store.put(
            MessageDraft("T", i % 2, b"%d" % i, properties={"KEYS": f"order-{i % 5} all", "UNIQ_KEY": f"ID{i}"})
        )
        offsets.append((r.wrote_offset, r.store_timestamp))
    store.dispatch_pending()
    assert len(store.index.files) > 3
    res = store.query_message("T", "order-2", 32)
    want = [off for i, (off, _) in enumerate(offsets) if i % 5 == 2][::-1]  # newest first
    assert [decode_record(r)[0].commitlog_offset for r in res.records] == want
    assert res.index_last_update_phy_offset == offsets[-1][0]
    assert res.index_last_update_timestamp == offsets[-1][1]
    assert len(store.query_message("T", "all", 3).records) == 3
    assert len(store.query_message("T", "all", 1000).records) == 40  # capped by max_msgs_num_batch=64
    lo, hi = offsets[10][1], offsets[19][1]
    res = store.query_message("T", "all", 64, lo, hi)
    assert [decode_record(r)[0].body for r in res.records] == [b"%d" % i for i in range(19, 9, -1)]
    (one,) = store.query_message("T", "ID33").records
    assert decode_record(one)[0].body == b"33"
    assert store.query_message("Other", "ID33").records == []
    assert store.query_message("T", "missing").records == []


class _Arrivals:
    """An arrival listener that notes (topic, queue, logic offset, tags code, TAGS)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int, str | None]] = []

    def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, properties) -> None:
        self.calls.append((topic, queue_id, logic_offset, tags_code, properties.get("TAGS")))


def test_arrival_listener_and_topics(open_store) -> None:
    store = open_store()
    store.arrival_listener = listener = _Arrivals()
    calls = listener.calls
    _put(store, "A", 0, TAGS="t1")
    _put(store, "A", 3)
    _put(store, "B", 1, TAGS="t2")
    store.put(MessageDraft("A", 0, b"p", sys_flag=TRANSACTION_PREPARED_TYPE))
    store.dispatch_pending()
    assert calls == [
        ("A", 0, 1, P.java_string_hash("t1"), "t1"),
        ("A", 3, 1, 0, None),
        ("B", 1, 1, P.java_string_hash("t2"), "t2"),
    ]
    assert store.topics() == {"A": [0, 3], "B": [1]}
    assert store.delete_topic("A") == 2
    assert store.topics() == {"B": [1]}
    assert store.get_max_offset_in_queue("A", 0) == 0
    assert _put(store, "A", 0).queue_offset == 0


def test_a_pass_tells_the_listener_once_per_queue_with_its_newest_record(open_store) -> None:
    store = open_store()
    store.arrival_listener = listener = _Arrivals()
    calls = listener.calls
    for tags in ("t1", "t2", "t3"):
        _put(store, "A", 0, TAGS=tags)
    _put(store, "B", 1)
    store.put(MessageDraft("A", 0, b"p", sys_flag=TRANSACTION_PREPARED_TYPE))  # in no queue: not told
    assert store.dispatch_pending() == 5
    assert calls == [("A", 0, 3, P.java_string_hash("t3"), "t3"), ("B", 1, 1, 0, None)]
    _put(store, "A", 0)
    store.dispatch_pending()
    assert calls[-1] == ("A", 0, 4, 0, None)


def test_woken_pulls_run_before_the_index_and_a_long_pass_indexes_everything(open_store) -> None:
    """A dispatch pass tells its listener (the broker answers woken pulls there) before it
    writes index entries, and the index is complete when the pass returns; a pass longer
    than the held batch (a replay) indexes every record."""
    seen = []

    class Listener:
        def arriving(self, *args) -> None:
            pass

        def dispatched(self) -> None:
            seen.append(len(store.query_message("T", "K1", 32).records))

    store = open_store()
    store.arrival_listener = Listener()
    _put(store, "T", 0, KEYS="K1")
    store.dispatch_pending()
    assert seen == [0]  # not indexed yet while the pulls were answered
    assert len(store.query_message("T", "K1", 32).records) == 1
    store.arrival_listener = None
    for i in range(600):
        _put(store, "T", 0, KEYS=f"L{i}")
    assert store.dispatch_pending() == 600
    assert [len(store.query_message("T", f"L{i}", 32).records) for i in (0, 255, 256, 599)] == [1, 1, 1, 1]


def test_import_does_not_pull_in_trio() -> None:
    code = (
        "import sys, rmq.store, rmq.protocol.message\n"
        "assert 'trio' not in sys.modules and 'construct' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_iter_commitlog_reads_a_live_store(open_store, tmp_path: Path) -> None:
    from rmq.store import iter_commitlog

    store = open_store(mapped_file_size_commitlog=4096)
    results = [store.put(MessageDraft("T", 0, b"%d" % i)) for i in range(80)]
    got = list(iter_commitlog(str(tmp_path / "store" / "commitlog")))
    assert [off for off, _ in got] == [r.wrote_offset for r in results]
    start = results[40].wrote_offset
    tail = iter_commitlog(str(tmp_path / "store" / "commitlog"), start=start)
    assert [decode_record(raw)[0].body for _, raw in tail] == [b"%d" % i for i in range(40, 80)]


def test_a_senders_v6_bits_do_not_change_the_record_layout(open_store) -> None:
    """The V6 sysFlag bits describe the hosts the store writes: a sender that sets them (or
    sends -32769, as the fuzzer did) must not get a record whose size disagrees with its parts,
    which made dispatch skip the rest of the file."""
    store = open_store()
    wrote = []
    for flag in (0x30, BORNHOST_V6_FLAG, -32769):  # the last is a rollback type: no queue entry
        r = store.put(MessageDraft("T", 0, b"x" * 10, sys_flag=flag, born_host=("10.0.0.9", 5555)))
        assert r.status is PutMessageStatus.PUT_OK
        wrote.append(r.wrote_offset)
    assert store.dispatch_pending() == 3
    got = store.get_message("T", 0, 0, 32)
    assert [m.body for m in iter_records(got.body)] == [b"x" * 10] * 2
    last = store.look_message_by_offset(wrote[2])
    assert last.body == b"x" * 10 and last.born_host == ("10.0.0.9", 5555)


def _file_sizes(root: Path) -> tuple[int, int]:
    """(bytes allocated on disk, apparent size) of every file of the store's data directories."""
    allocated = apparent = 0
    for sub in ("commitlog", "consumequeue", "index"):
        for dirpath, _dirs, files in os.walk(root / sub):
            for name in files:
                st = os.stat(os.path.join(dirpath, name))
                allocated += st.st_blocks * 512
                apparent += st.st_size
    return allocated, apparent


def test_storage_bytes_is_the_stores_own_accounting(open_store, tmp_path: Path) -> None:
    store = open_store()
    assert store.storage_bytes() == 0
    for i in range(60):  # rolls CommitLog (16 KiB) and consume-queue (50 entries) files
        _put(store, "T", i % 2, b"x" * 500, KEYS=f"k{i}")
    store.dispatch_pending()
    store.flush()
    used = store.storage_bytes()
    cq_bytes = 60 * 20
    assert used >= store.max_phy_offset + cq_bytes  # at least what was written
    allocated, apparent = _file_sizes(tmp_path / "store")
    assert used <= apparent  # never more than the files' size
    assert allocated <= used + 64 * 1024  # the disk holds no more than the store accounts for (blocks round up)
    _put(store, "T", 0, b"y" * 500)
    store.dispatch_pending()
    assert store.storage_bytes() > used  # kept current without a directory walk
