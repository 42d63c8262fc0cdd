"""The record reader with bytes alone: plain CommitLog files and DLedger data files."""

from __future__ import annotations

import mmap

from rmq.protocol.dledger import BODY_OFFSET, encode_blank, encode_entry
from rmq.protocol.message import body_crc, decode_record, encode_record
from rmq.store import FileRecords
from rmq.store.formats import BLANK, BLANK_MAGIC

FILE = 4096


def _record(at: int, body: bytes = b"body", **over: object) -> bytes:
    return encode_record(topic="T", body=body, commitlog_offset=at, properties={"KEYS": "k"}, **over)  # type: ignore[arg-type]


def _commitlog_file(base: int, bodies: list[bytes], *, blank: bool = True) -> tuple[bytearray, list[int]]:
    """A CommitLog file starting at ``base`` holding ``bodies``, ended by a blank (or zeros)."""
    data, offsets = bytearray(), []
    for body in bodies:
        offsets.append(base + len(data))
        data += _record(base + len(data), body)
    if blank:
        data += BLANK.pack(FILE - len(data), BLANK_MAGIC)
    return data + bytes(FILE - len(data)), offsets


def _tail_blank(used: int) -> bytes:
    """A DLedger blank over the rest of a file of which ``used`` bytes are written."""
    return encode_blank(FILE - used) + bytes(FILE - used - 8)


def test_a_file_is_read_to_its_blank_and_the_walk_goes_on_in_the_next() -> None:
    data, offsets = _commitlog_file(8192, [b"a", b"bb", b"ccc"])
    walk = FileRecords(data, 8192)
    assert [m.commitlog_offset for m in walk] == offsets
    assert walk.ended and walk.reason is None
    assert walk.offset == 8192 + sum(len(_record(0, b)) for b in (b"a", b"bb", b"ccc"))  # at the blank
    from_second = FileRecords(data, 8192, offsets[1])
    assert [m.body.decode() for m in from_second.messages()] == ["bb", "ccc"]
    assert [m.commitlog_offset for m in FileRecords(data, 8192, end=offsets[2])] == offsets[:2]


def test_the_walk_stops_at_the_first_record_that_is_not_one() -> None:
    data, offsets = _commitlog_file(0, [b"a", b"b", b"c"], blank=False)
    walk = FileRecords(data, 0)
    assert [m.commitlog_offset for m in walk] == offsets and not walk.ended
    assert walk.reason is not None and walk.offset == offsets[-1] + len(_record(0, b"c"))  # the zeros
    moved = bytearray(data)
    moved[offsets[1] : offsets[2]] = _record(4000, b"b")  # says it lives elsewhere
    walk = FileRecords(moved, 0)
    assert [m.commitlog_offset for m in walk] == offsets[:1]
    assert walk.offset == offsets[1] and walk.reason == "the record says it is at 4000"
    torn = bytearray(data)
    torn[offsets[1] + 88] ^= 0xFF  # the second record's body
    assert len(list(FileRecords(torn, 0))) == 3  # the CRC is not checked unless asked
    walk = FileRecords(torn, 0, check_crc=True)
    assert len(list(walk)) == 1 and "CRC" in (walk.reason or "")
    short_blank = bytearray(data)
    short_blank[offsets[2] : offsets[2] + 8] = BLANK.pack(8, BLANK_MAGIC)
    walk = FileRecords(short_blank, 0)
    assert len(list(walk)) == 2 and not walk.ended and "blank of 8 bytes" in (walk.reason or "")


def test_a_hole_is_not_read() -> None:
    page = mmap.PAGESIZE
    data = bytearray(2 * page)
    first = _record(0, bytes(page - 400))
    second = _record(len(first), bytes(page - len(first) - len(_record(0, b""))))  # ends at the page's end
    data[: len(first) + len(second)] = first + second
    assert len(first) + len(second) == page
    asked: list[int] = []

    def has_data(pos: int, n: int) -> bool:
        asked.append(pos)
        return pos < page

    walk = FileRecords(data, 0, has_data=has_data)
    assert len(list(walk)) == 2
    assert walk.offset == page and walk.reason == "nothing was written there (a hole)"
    assert asked == [0, page]  # only where a header starts a page or crosses into one


def test_a_dledger_data_file_is_read_across_entry_headers_and_blanks() -> None:
    base = 2 * FILE
    data = bytearray(encode_blank(100) + bytes(92))  # a rebuilt log's head
    records = []
    for index, bodies in enumerate(([], [b"x", b"yy"], [b"zzz"])):  # a leader's no-op, then two entries
        at = base + len(data)
        body = b""
        for b in bodies:
            records.append(at + BODY_OFFSET + len(body))
            body += _record(at + BODY_OFFSET + len(body), b)
        data += encode_entry(index, 1, at, body)
    data += _tail_blank(len(data))
    walk = FileRecords(data, base, dledger=True)
    assert [m.commitlog_offset for m in walk] == records and walk.ended
    inside = FileRecords(data, base, records[1], dledger=True)  # a record start from a consume queue
    assert [m.commitlog_offset for m in inside] == records[1:]
    assert [m.commitlog_offset for m in FileRecords(data, base, end=records[2], dledger=True)] == records[:2]
    assert list(FileRecords(data, base)) == []  # read as a CommitLog file, the bytes are no records


def test_a_dledger_entry_must_say_where_it_is_and_hold_whole_records() -> None:
    rec = _record(BODY_OFFSET, b"r")
    elsewhere = encode_entry(0, 1, 1000, rec) + _tail_blank(len(rec) + BODY_OFFSET)
    walk = FileRecords(elsewhere, 0, dledger=True)
    assert list(walk) == [] and walk.offset == 0 and "at 1000" in (walk.reason or "")
    # an entry whose body ends inside a record: the record runs past it
    cut = bytearray(encode_entry(0, 1, 0, rec[:-4]) + rec[-4:])
    cut += _tail_blank(len(cut))
    walk = FileRecords(cut, 0, dledger=True)
    assert list(walk) == [] and walk.offset == BODY_OFFSET and "runs past" in (walk.reason or "")


def test_records_from_the_reader_decode_as_stored() -> None:
    data, offsets = _commitlog_file(0, [b"one", b"two"])
    metas = list(FileRecords(data, 0))
    messages = list(FileRecords(data, 0).messages())
    assert [(m.commitlog_offset, m.body) for m in messages] == [
        (o, b) for o, b in zip(offsets, (b"one", b"two"), strict=True)
    ]
    assert [m.body_crc for m in metas] == [body_crc(b"one"), body_crc(b"two")]
    assert [decode_record(data, o)[0] for o in offsets] == messages
