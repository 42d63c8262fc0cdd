"""DLedger's file layout: the entry codec with bytes alone, the log with real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.protocol.dledger import (
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    blank_size_at,
    decode_entry_header,
    decode_index,
    encode_blank,
    encode_entry,
    encode_index,
    entry_size_at,
    first_record_at,
    patch_record_offset,
)
from rmq.protocol.errors import ProtocolError, RemoteProtocolError
from rmq.protocol.message import decode_record, encode_record
from rmq.store import iter_commitlog
from rmq.store.dledger_log import DLedgerLog
from rmq.store.errors import StoreError


def member_records(member_dir: str) -> dict[int, bytes]:
    """Every record in a DLedger member's data files, by CommitLog offset."""
    return dict(iter_commitlog(os.path.join(member_dir, "data"), dledger=True))


SMALL = {"data_file_size": 4096, "index_file_size": INDEX_UNIT_SIZE * 16}


def test_entry_layout_is_dledgers() -> None:
    raw = encode_entry(7, 3, 1000, b"body")
    assert len(raw) == BODY_OFFSET + 4 == 52
    # magic 1 | size | index | term | pos | channel | chainCrc | bodyCrc | bodyLength
    assert raw[:8] == bytes.fromhex("00000001 00000034")
    assert raw[8:16] == (7).to_bytes(8, "big") and raw[16:24] == (3).to_bytes(8, "big")
    assert raw[24:32] == (1000).to_bytes(8, "big") and raw[44:48] == (4).to_bytes(4, "big")
    h = decode_entry_header(raw)
    assert (h.index, h.term, h.pos, h.size, h.body_length) == (7, 3, 1000, 52, 4)
    assert decode_index(encode_index(1000, 52, 7, 3)) == (1, 1000, 52, 7, 3)


@given(st.binary(max_size=120))
def test_garbage_headers_raise_protocol_errors_only(junk: bytes) -> None:
    try:
        decode_entry_header(junk)
    except ProtocolError:
        pass


def test_bad_headers_are_refused() -> None:
    raw = bytearray(encode_entry(1, 1, 0, b"xy"))
    raw[3] = 9
    with pytest.raises(RemoteProtocolError, match="magic"):
        decode_entry_header(raw)
    with pytest.raises(RemoteProtocolError, match="truncated"):
        decode_entry_header(encode_entry(1, 1, 0, b"")[:20])


def test_entry_headers_and_the_first_record_are_found_with_bytes_alone() -> None:
    rec = encode_record(topic="T", queue_id=0, body=b"x")
    noop, full = encode_entry(0, 1, 0, b""), encode_entry(1, 1, 48, rec)
    data = noop + full + encode_blank(64)
    assert entry_size_at(data, 0) == 48 and entry_size_at(data, 48) == 48 + len(rec)
    assert entry_size_at(data, 96) is None  # a record is no entry header
    assert entry_size_at(data, len(noop + full)) is None  # nor is a blank
    assert entry_size_at(data[:40], 0) is None
    assert first_record_at(data, len(data)) == 96
    assert first_record_at(data, 100) is None  # the entry with the record is not all written
    assert first_record_at(noop, len(noop)) is None
    assert first_record_at(rec, len(rec)) is None  # a plain CommitLog file


def record(body: bytes) -> bytes:
    return encode_record(topic="T", queue_id=0, body=body, properties={"KEYS": "k"})


def test_append_read_truncate_and_reopen(tmp_path: Path) -> None:
    log = DLedgerLog(tmp_path, "n0", **SMALL)
    assert (log.end_index, log.end_term) == (-1, -1)
    entries = [log.append(i, 1 + i // 10, record(b"m%d" % i * 20), patch_record=True) for i in range(40)]
    assert log.end_index == 39 and len(log.data.files) >= 3  # rolled over files with blanks
    for e in entries:
        got = log.entry(e.index)
        assert got == e
        msg, _ = decode_record(got.body)
        assert msg.commitlog_offset == e.pos + BODY_OFFSET  # the record says where it lives
        assert log.term_at(e.index) == e.term
    log.commit(25)
    with pytest.raises(StoreError, match="committed"):
        log.truncate_after(20)
    log.truncate_after(30)
    assert (log.end_index, log.end_term) == (30, 4)
    again = log.append(31, 5, record(b"new"))
    assert again.pos == entries[31].pos
    log.save_term(5, "n2")
    log.sync()
    log.close()
    reopened = DLedgerLog(tmp_path, "n0", **SMALL)
    assert (reopened.end_index, reopened.end_term, reopened.committed_index) == (31, 5, 25)
    assert (reopened.term, reopened.voted_for) == (5, "n2")
    assert reopened.entry(31).body == record(b"new")
    # the last record was appended without its offset patched in (a member's hook writes it):
    # it does not say where it sits, so the record reader stops there, as at any such record
    assert list(member_records(reopened.path)) == [e.pos + BODY_OFFSET for e in entries[:31]]


def test_follower_appends_at_the_leaders_positions(tmp_path: Path) -> None:
    leader = DLedgerLog(tmp_path / "a", "n0", **SMALL)
    follower = DLedgerLog(tmp_path / "b", "n1", **SMALL)
    for i in range(30):
        e = leader.append(i, 1, record(b"x" * (i * 7 % 200)), patch_record=True)
        follower.append(e.index, e.term, e.body, pos=e.pos)
    assert [f.read_bytes() for f in sorted((tmp_path / "a" / "dledger-n0" / "data").iterdir())] == [
        f.read_bytes() for f in sorted((tmp_path / "b" / "dledger-n1" / "data").iterdir())
    ]
    with pytest.raises(StoreError, match="belongs at"):
        follower.append(30, 1, b"x", pos=1)
    with pytest.raises(StoreError, match="after end"):
        follower.append(35, 1, b"x")
    with pytest.raises(StoreError, match="term"):
        follower.append(30, 0, b"x")


def test_torn_tail_is_cut_at_open(tmp_path: Path) -> None:
    log = DLedgerLog(tmp_path, "n0", **SMALL)
    entries = [log.append(i, 1, record(b"y" * 50)) for i in range(10)]
    log.sync()
    last = sorted((tmp_path / "dledger-n0" / "data").iterdir())[-1]
    data = bytearray(last.read_bytes())
    cut = entries[8].pos - int(last.name) + 10  # garble entry 8's header
    data[cut : cut + 8] = b"\xff" * 8
    log.data.close()
    log.index.close()
    last.write_bytes(bytes(data))
    # and tear the index unit of entry 3
    index_file = sorted((tmp_path / "dledger-n0" / "index").iterdir())[0]
    units = bytearray(index_file.read_bytes())
    units[3 * INDEX_UNIT_SIZE : 4 * INDEX_UNIT_SIZE] = bytes(INDEX_UNIT_SIZE)
    index_file.write_bytes(bytes(units))
    reopened = DLedgerLog(tmp_path, "n0", **SMALL)
    assert reopened.end_index == 7
    assert reopened.entry(3) == entries[3]
    assert reopened.append(8, 2, b"z").pos == entries[8].pos
    assert os.path.exists(reopened.path)


def test_patch_record_offset() -> None:
    raw = bytearray(encode_entry(0, 1, 4096, record(b"p")))
    patch_record_offset(raw)
    msg, _ = decode_record(bytes(raw[BODY_OFFSET:]))
    assert msg.commitlog_offset == 4096 + BODY_OFFSET


def test_blanks_are_found_with_bytes_alone() -> None:
    entry = encode_entry(9, 2, 4096 + 100, record(b"r"))
    file = encode_blank(100) + bytes(92) + entry + encode_blank(200) + bytes(192)  # a rebuilt log's first file
    assert blank_size_at(file, 0) == 100 and entry_size_at(file, 100) == len(entry)
    assert first_record_at(file, len(file)) == 100 + BODY_OFFSET
    assert blank_size_at(file, 100 + len(entry)) == 200  # the end-of-file blank
    assert blank_size_at(entry + encode_blank(200), 0) is None  # an entry first: no blank
    assert blank_size_at(encode_blank(300) + bytes(200), 0) is None  # a blank larger than the file
    assert blank_size_at(bytes(400), 0) is None and blank_size_at(b"\xff\xff", 0) is None
    assert first_record_at(encode_blank(64) + bytes(56), 64) is None


def test_rebuild_starts_the_log_over_at_the_leaders_position(tmp_path: Path) -> None:
    leader = DLedgerLog(tmp_path / "a", "n0", **SMALL)
    entries = [leader.append(i, 1, record(b"z" * (i * 13 % 150))) for i in range(40)]
    k = next(e.index for e in entries if e.index > 5 and e.pos % 4096 > 0)  # mid-file
    first = entries[k]
    follower = DLedgerLog(tmp_path / "b", "n1", **SMALL)
    for e in entries[:3]:
        follower.append(e.index, e.term, e.body, pos=e.pos)
    follower.commit(2)
    with pytest.raises(StoreError, match="refusing to rebuild"):
        follower.rebuild(2, 1, entries[2].body, entries[2].pos)  # never over a committed entry
    follower.rebuild(k, first.term, first.body, first.pos)
    assert (follower.begin_index, follower.end_index, follower.committed_index) == (k, k, k - 1)
    head = follower.data.files[0]
    assert blank_size_at(head.mm, 0) == first.pos - head.start > 0
    assert follower.entry_end(k - 1) == first.pos
    # its first entry is not committed yet: a new leader may replace it, at the same place
    follower.truncate_after(k - 1)
    assert (follower.end_index, follower.data_end, follower.entry_end(k - 1)) == (k - 1, first.pos, first.pos)
    for e in entries[k:]:
        follower.append(e.index, e.term, e.body, pos=e.pos)
    follower.sync()
    follower.close()
    reopened = DLedgerLog(tmp_path / "b", "n1", **SMALL)
    assert (reopened.begin_index, reopened.end_index) == (k, 39)
    assert [reopened.entry(i) for i in range(k, 40)] == [leader.entry(i) for i in range(k, 40)]
    ours = member_records(leader.path)
    assert member_records(reopened.path) == {o: r for o, r in ours.items() if o > first.pos}
    reopened.close()
