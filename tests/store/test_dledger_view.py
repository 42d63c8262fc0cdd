"""A DLedger member's CommitLog as a view over its DLedger data files, with real files and no
Raft: the test plays the member (it seals entries and moves the commit point)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmq.protocol.dledger import BODY_OFFSET, decode_entry_header
from rmq.protocol.message import decode_record
from rmq.store import MessageDraft, MessageStore, StoreConfig, iter_commitlog
from rmq.store.dledger_log import DLedgerLog
from rmq.store.dledger_view import DLedgerView
from rmq.store.errors import StoreError
from rmq.store.results import GetMessageStatus
from rmq_spark.store_scan import first_store_timestamp, list_segments


def member_records(member_dir: str) -> dict[int, bytes]:
    """Every record in a DLedger member's data files, by CommitLog offset."""
    return dict(iter_commitlog(os.path.join(member_dir, "data"), dledger=True))


FILE = 64 * 1024


class Member:
    """A store over a DLedger log, sealing what the store writes as the leader would."""

    def __init__(self, root: Path, *, max_entry_body: int = 1024 * 1024) -> None:
        self.root = root
        self.max_entry_body = max_entry_body
        self.term = 1
        self.open()

    def open(self) -> None:
        self.dlog = DLedgerLog(self.root, "n0", data_file_size=FILE)

        def make() -> DLedgerView:
            view = DLedgerView(self.dlog, max_entry_body=self.max_entry_body)
            view.on_full = self.seal
            return view

        self.store = MessageStore(StoreConfig(store_path_root_dir=self.root), commitlog=make)

    def seal(self) -> bool:
        body = self.dlog.pending_body()
        if body:
            self.dlog.seal_pending(self.dlog.end_index + 1, self.term, len(body))
        return True

    def commit(self) -> None:
        self.dlog.commit(self.dlog.end_index)
        self.store.dispatcher.limit = self.dlog.entry_end(self.dlog.end_index)
        self.store.dispatch_pending()

    def close(self) -> None:
        self.store.close()
        self.dlog.close()


@pytest.fixture
def member(tmp_path: Path) -> Member:
    m = Member(tmp_path)
    m.dlog.append(0, 1, b"")  # the first leader's no-op
    return m


def test_records_live_in_the_entries_and_queues_point_there(member: Member) -> None:
    store = member.store
    offsets = [store.put(MessageDraft("T", 0, b"m%d" % i)).wrote_offset for i in range(3)]
    member.seal()  # the three sends share one entry
    offsets.append(store.put(MessageDraft("T", 0, b"m3")).wrote_offset)
    member.seal()
    entry1 = member.dlog.entry(1)
    assert offsets[0] == entry1.pos + BODY_OFFSET == BODY_OFFSET * 2  # after the no-op's header
    assert offsets[3] == member.dlog.entry(2).pos + BODY_OFFSET
    # nothing is dispatched before the group commits it
    assert store.get_max_offset_in_queue("T", 0) == 0
    member.commit()
    got = store.get_message("T", 0, 0, 10)
    assert got.status is GetMessageStatus.FOUND
    assert [decode_record(r)[0].body for r in got.records] == [b"m0", b"m1", b"m2", b"m3"]
    assert [decode_record(r)[0].commitlog_offset for r in got.records] == offsets
    # tools read the same records from the data files
    records = member_records(member.dlog.path)
    assert sorted(records) == offsets
    assert decode_record(records[offsets[2]])[0].body == b"m2"


def test_an_undecodable_entry_costs_its_own_records_not_the_rest_of_the_file(
    member: Member, caplog: pytest.LogCaptureFixture
) -> None:
    store = member.store
    for i in range(2):
        store.put(MessageDraft("T", 0, b"m%d" % i))
    member.seal()
    # an entry whose body is no message record (a bare member's APPEND, a damaged page)
    bad = member.dlog.append(member.dlog.end_index + 1, member.term, b"\x00\x00\x01\x00 not a record" * 8)
    for i in range(2, 4):
        store.put(MessageDraft("T", 0, b"m%d" % i))
    member.seal()
    member.commit()
    got = store.get_message("T", 0, 0, 10)
    assert [decode_record(r)[0].body for r in got.records] == [b"m0", b"m1", b"m2", b"m3"]
    assert store.dispatcher.reput_offset == member.dlog.entry_end(member.dlog.end_index)
    assert member.dlog.entry_span_at(bad.pos + BODY_OFFSET) == (bad.pos, member.dlog.entry_end(bad.index))
    assert member.dlog.entry_span_at(member.dlog.data_end + 10) is None
    assert "skipping the rest of its DLedger entry" in caplog.text


def test_entries_are_bounded_and_files_roll_with_dledger_blanks(tmp_path: Path) -> None:
    m = Member(tmp_path, max_entry_body=3000)
    m.dlog.append(0, 1, b"")
    body = b"x" * 1000
    offsets = [m.store.put(MessageDraft("T", 0, body)).wrote_offset for _ in range(150)]
    m.seal()
    assert m.dlog.end_index > 50  # a full entry was proposed (sealed) before the next record
    assert len(m.dlog.data.files) >= 3
    m.commit()
    seen: list[int] = []
    while len(seen) < 150:
        got = m.store.get_message("T", 0, len(seen), 32)
        assert got.records
        seen += [decode_record(r)[0].commitlog_offset for r in got.records]
    assert seen == offsets
    assert sorted(member_records(m.dlog.path)) == offsets  # across the blanks
    m.close()
    # reopening finds the same entries and dispatches nothing twice
    m.open()
    assert m.store.get_max_offset_in_queue("T", 0) == 150
    assert decode_entry_header(m.dlog.data.files[1].mm, 0).pos == FILE


def test_the_log_reads_its_records_across_entry_headers_and_files(tmp_path: Path) -> None:
    """What the delay and timer services scan at start (redelivery.scan_markers): every record
    from an offset on, though entry headers and DLedger's blanks lie between them."""
    m = Member(tmp_path, max_entry_body=3000)
    m.dlog.append(0, 1, b"")
    offsets = [
        m.store.put(MessageDraft("T", 0, b"x" * 1000, properties={"K": str(i)})).wrote_offset for i in range(150)
    ]
    m.seal()
    assert len(m.dlog.data.files) >= 3
    assert [meta.commitlog_offset for meta in m.store.commitlog.records(0)] == offsets
    assert [meta.properties for meta in m.store.commitlog.records(offsets[100])] == [
        f"K\x01{i}" for i in range(100, 150)
    ]
    m.close()


def test_uncommitted_records_are_not_dispatched_after_a_restart(member: Member) -> None:
    store = member.store
    store.put(MessageDraft("T", 0, b"committed"))
    member.seal()
    member.commit()
    member.dlog.save_checkpoint()
    store.put(MessageDraft("T", 0, b"proposed"))
    member.seal()
    store.put(MessageDraft("T", 0, b"unproposed"))  # still being filled: cut at open
    member.close()
    member.open()
    assert member.dlog.end_index == 2
    assert member.store.get_max_offset_in_queue("T", 0) == 1
    member.dlog.commit(2)
    member.store.dispatcher.limit = member.dlog.entry_end(2)
    member.store.dispatch_pending()
    got = member.store.get_message("T", 0, 0, 10)
    assert [decode_record(r)[0].body for r in got.records] == [b"committed", b"proposed"]


def test_a_follower_holds_the_same_bytes_at_the_same_offsets(member: Member, tmp_path: Path) -> None:
    for i in range(20):
        member.store.put(MessageDraft("T", i % 2, b"m%d" % i))
        if i % 3 == 0:
            member.seal()
    member.seal()
    follower = DLedgerLog(tmp_path / "f", "n1", data_file_size=FILE)
    for e in member.dlog.entries(0):
        follower.append(e.index, e.term, e.body, pos=e.pos)
    assert member_records(follower.path) == member_records(member.dlog.path)


def test_a_new_entry_drops_what_a_deposed_leader_was_filling(member: Member) -> None:
    member.store.put(MessageDraft("T", 0, b"never proposed"))
    assert member.dlog.filling
    member.dlog.append(1, 2, b"")  # the next leader's no-op arrives
    assert not member.dlog.filling and member.dlog.end_index == 1
    with pytest.raises(StoreError, match="not the entry being filled"):
        member.dlog.seal_pending(2, 2, 10)


def test_a_former_plain_brokers_store_is_refused(tmp_path: Path) -> None:
    from rmq.broker.dledger.commitlog import member_commitlog
    from rmq.dledger.node import NodeConfig

    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 16)
    config = NodeConfig("n0", {"n0": "127.0.0.1:1"}, str(tmp_path), data_file_size=FILE)
    with pytest.raises(StoreError, match="holds a CommitLog"):
        MessageStore(
            StoreConfig(store_path_root_dir=tmp_path), commitlog=member_commitlog(config, str(tmp_path / "commitlog"))
        )
    # the store's lock was released: an empty commitlog/ opens
    (tmp_path / "commitlog" / "00000000000000000000").unlink()
    MessageStore(
        StoreConfig(store_path_root_dir=tmp_path), commitlog=member_commitlog(config, str(tmp_path / "commitlog"))
    ).close()


def test_retention_deletes_old_data_files_and_the_index_files_they_no_longer_need(tmp_path: Path) -> None:
    m = Member(tmp_path, max_entry_body=2000)
    m.dlog.close()
    m.store.close()
    # small index files too, so that whole index files fall below the first entry kept
    m.dlog = DLedgerLog(tmp_path, "n0", data_file_size=FILE, index_file_size=32 * 16)
    m.store = MessageStore(
        StoreConfig(store_path_root_dir=tmp_path),
        commitlog=lambda: DLedgerView(m.dlog, max_entry_body=2000),
    )
    m.store.commitlog.on_full = m.seal  # type: ignore[attr-defined]
    m.dlog.append(0, 1, b"")
    for _ in range(200):
        m.store.put(MessageDraft("T", 0, bytes(1000)))
    m.seal()
    m.commit()
    files = len(m.dlog.data.files)
    assert files >= 3 and len(m.dlog.index.files) >= 3
    result = m.store.run_retention(force=True)
    assert result.commitlog_files_deleted >= 1 and len(m.dlog.data.files) < files
    first = m.dlog.data.files[0]
    assert m.dlog.begin_index == decode_entry_header(first.mm, 0).index > 0
    assert m.dlog.index.files[0].start <= m.dlog.begin_index * 32 < m.dlog.index.files[0].end
    assert m.store.get_min_offset_in_queue("T", 0) > 0  # the consume queue start moved too
    got = m.store.get_message("T", 0, m.store.get_min_offset_in_queue("T", 0), 4)
    assert got.records and decode_record(got.records[0])[0].commitlog_offset >= first.start
    m.close()
    reopened = DLedgerLog(tmp_path, "n0", data_file_size=FILE, index_file_size=32 * 16)
    assert (reopened.begin_index, reopened.end_index) == (m.dlog.begin_index, m.dlog.end_index)
    reopened.close()


def test_a_follower_rebuilt_inside_a_data_file_dispatches_reads_and_reopens(member: Member, tmp_path: Path) -> None:
    leader = member
    for i in range(300):
        leader.store.put(MessageDraft("T", 0, b"m%03d" % i * 60))
        if i % 4 == 3:
            leader.seal()
    leader.seal()
    leader.commit()
    entries = list(leader.dlog.entries(0))
    first = next(e for e in entries if e.index > 3 and e.pos % FILE > 0 and e.pos > FILE)  # mid-file
    follower = Member(tmp_path / "f")
    for e in entries[:3]:
        follower.dlog.append(e.index, e.term, e.body, pos=e.pos)
    follower.commit()  # it held and dispatched a little before it fell behind
    follower.dlog.rebuild(first.index, first.term, first.body, first.pos)
    follower.store.commitlog_restarted(first.pos)
    for e in entries[first.index + 1 :]:
        follower.dlog.append(e.index, e.term, e.body, pos=e.pos)
    follower.commit()
    ours = member_records(leader.dlog.path)
    theirs = member_records(follower.dlog.path)
    assert theirs == {o: r for o, r in ours.items() if o > first.pos}
    # its queue holds what it holds, at the leader's queue offsets, and nothing before
    lo = follower.store.get_min_offset_in_queue("T", 0)
    assert follower.store.get_max_offset_in_queue("T", 0) == leader.store.get_max_offset_in_queue("T", 0)
    got = read_queue(follower.store, lo)
    assert [decode_record(r)[0].commitlog_offset for r in got] == sorted(theirs)
    assert got == read_queue(leader.store, decode_record(got[0])[0].queue_offset)
    follower.close()
    follower.open()
    assert (follower.dlog.begin_index, follower.dlog.end_index) == (first.index, entries[-1].index)
    assert read_queue(follower.store, follower.store.get_min_offset_in_queue("T", 0)) == got
    segments = [s for s in list_segments(follower.root) if s.base == follower.dlog.data.files[0].start]
    assert segments and first_store_timestamp(segments[0]) == decode_record(got[0])[0].store_timestamp
    follower.close()


def read_queue(store: MessageStore, offset: int) -> list[bytes]:
    """Every record of queue T:0 from ``offset`` on."""
    out: list[bytes] = []
    while (got := store.get_message("T", 0, offset, 32)).records:
        out += [bytes(r) for r in got.records]
        offset = got.next_begin_offset
    return out
