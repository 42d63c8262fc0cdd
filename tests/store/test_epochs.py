"""The epoch file (EpochFileCache): entries and the consistent point as values, the
CheckpointFile text, and the files with their backup on a real disk."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from rmq.store.epochs import (
    OPEN_END,
    EpochCache,
    EpochEntry,
    EpochFileError,
    consistent_point,
    decode_entries,
    encode_entries,
    epoch_file_path,
    linked,
    read_epoch_file,
    write_epoch_file,
)

E = EpochEntry


def _cache(*pairs: tuple[int, int]) -> EpochCache:
    c = EpochCache()
    for epoch, start in pairs:
        assert c.append(epoch, start)
    return c


# --- values -----------------------------------------------------------------------------------


def test_append_links_entries_and_refuses_what_does_not_rise() -> None:
    c = _cache((1, 100), (2, 300), (3, 500))
    assert c.entries == [E(1, 100, 300), E(2, 300, 500), E(3, 500, OPEN_END)]
    assert c.last_epoch == 3 and c.last_entry == E(3, 500) and c.first_entry == E(1, 100, 300)
    assert not c.append(3, 900)  # same epoch
    assert not c.append(2, 900)  # older epoch
    assert not c.append(4, 500)  # same start offset
    assert not c.append(4, 400)  # lower start offset
    assert len(c) == 3 and c.last_entry == E(3, 500)
    assert EpochCache().last_epoch == -1 and EpochCache().last_entry is None


def test_find_by_offset_get_and_next() -> None:
    c = _cache((1, 100), (2, 300), (3, 500))
    assert c.find_by_offset(350) == E(2, 300, 500)
    assert c.find_by_offset(300) == E(2, 300, 500)
    assert c.find_by_offset(499) == E(2, 300, 500)
    assert c.find_by_offset(10**12) == E(3, 500)
    assert c.find_by_offset(99) is None
    c.set_last_end(700)
    assert c.find_by_offset(700) is None and c.find_by_offset(699) == E(3, 500, 700)
    assert c.get(2) == E(2, 300, 500) and c.get(9) is None
    assert c.next_entry(1) == E(2, 300, 500) and c.next_entry(3) is None


def test_set_last_end_ignores_an_end_before_the_start() -> None:
    c = _cache((1, 100), (2, 300))
    c.set_last_end(200)
    assert c.last_entry == E(2, 300)
    c.set_last_end(300)
    assert c.last_entry == E(2, 300, 300)


def test_truncations() -> None:
    c = _cache((1, 100), (2, 300), (3, 500))
    c.truncate_suffix_by_offset(150)  # EpochFileCacheTest.testTruncate
    assert c.entries == [E(1, 100)]
    c = _cache((1, 100), (2, 300), (3, 500))
    c.truncate_suffix_by_offset(500)
    assert c.entries == [E(1, 100, 300), E(2, 300)]
    c = _cache((1, 100), (2, 300), (3, 500))
    c.truncate_suffix_by_epoch(2)
    assert c.entries == [E(1, 100)]
    c.truncate_suffix_by_epoch(1)
    assert c.entries == []
    c = _cache((1, 100), (2, 300), (3, 500))
    c.truncate_prefix_by_offset(300)
    assert c.entries == [E(2, 300, 500), E(3, 500)]
    c.truncate_prefix_by_offset(10**15)  # the open last entry stays
    assert c.entries == [E(3, 500)]


def test_linked_orders_by_epoch_and_bounds_the_last() -> None:
    assert linked([E(2, 300, 1), E(1, 100, 7)], 900) == [E(1, 100, 300), E(2, 300, 900)]
    assert linked([E(1, 100)], 50) == [E(1, 100)]  # an end below the start is ignored
    assert linked([]) == []


@pytest.mark.parametrize(
    ("local", "local_end", "master", "master_end", "expected"),
    [
        # EpochFileCacheTest's samples
        ([(1, 100), (2, 300), (3, 500)], OPEN_END, [(1, 100), (2, 300), (3, 450)], OPEN_END, 450),
        ([(1, 100), (2, 300), (3, 500)], 700, [(1, 100), (2, 300), (3, 500)], 600, 600),
        ([(1, 100), (2, 300), (3, 500)], 700, [(1, 200), (2, 500)], OPEN_END, -1),
        ([(1, 100), (2, 300), (3, 500), (4, 800)], 900, [(1, 100), (2, 300), (3, 500)], 700, 700),
        # the slave is behind in the master's epoch: its own end
        ([(1, 0), (2, 4096)], 5000, [(1, 0), (2, 4096), (3, 9000)], 12000, 5000),
        # the slave wrote as master of an epoch the new master never saw
        ([(1, 0), (2, 4096), (3, 8000)], 9500, [(1, 0), (2, 4096), (4, 7000)], 12000, 7000),
        ([], 0, [(1, 0)], 10, -1),
        ([(1, 0)], 10, [], 0, -1),
    ],
)
def test_consistent_point(
    local: list[tuple[int, int]], local_end: int, master: list[tuple[int, int]], master_end: int, expected: int
) -> None:
    mine = [E(*p) for p in local]
    theirs = [E(*p) for p in master]
    assert consistent_point(mine, local_end, theirs, master_end) == expected
    assert EpochCache(entries=mine).consistent_point(local_end, EpochCache(entries=theirs), master_end) == expected


def test_consistent_point_ignores_the_ends_the_entries_carry() -> None:
    # ends come from the next entry's start and the log's end, not from the values passed in
    mine = [E(1, 0, 5), E(2, 100, 7)]
    theirs = [E(1, 0, 1), E(2, 100, 2)]
    assert consistent_point(mine, 400, theirs, 300) == 300


# --- the text ----------------------------------------------------------------------------------


def test_encode_is_rocketmqs_checkpoint_file() -> None:
    # CheckpointFile's own example: 2 entries, CRC 773307083
    assert encode_entries([E(7, 7000), E(8, 8000)]) == "2\n773307083\n7-7000\n8-8000\n"
    assert decode_entries("2\n773307083\n7-7000\n8-8000\n") == [E(7, 7000, 8000), E(8, 8000)]
    assert encode_entries([]) == "0\n0\n"


def test_decode_like_checkpoint_file_read() -> None:
    assert decode_entries("2\r\n773307083\r\n7-7000\r\n8-8000\r\n") == [E(7, 7000, 8000), E(8, 8000)]
    assert decode_entries("2\n0\n7-7000\n8-8000") == [E(7, 7000, 8000), E(8, 8000)]  # CRC 0: not checked
    # a line of another shape is skipped, but counts in the CRC
    crc = zlib.crc32(b"7-7000\nnoise\n") & 0x7FFFFFFF
    assert decode_entries(f"1\n{crc}\n7-7000\nnoise\n") == [E(7, 7000)]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "ends early"),
        ("2\n", "ends early"),
        ("x\n0\n", "not a number"),
        ("2\n773307083\n7-7000\n", "expected 2 entries, found 1"),  # torn after the first entry
        ("2\n773307083\n7-7000\n8-8001\n", "CRC32"),
        ("1\n0\n7-x\n", "not a number"),
        ("1\n0\n99999999999-1\n", "out of range"),
    ],
)
def test_decode_refuses_damaged_text(text: str, why: str) -> None:
    with pytest.raises(EpochFileError, match=why):
        decode_entries(text)


# --- the files ---------------------------------------------------------------------------------


def test_file_round_trip_with_backup(tmp_path: Path) -> None:
    path = epoch_file_path(str(tmp_path / "store"))
    assert path.endswith("epochFileCheckpoint")
    c = EpochCache(path)
    assert c.entries == []
    assert c.append(1, 0)
    assert Path(path).read_text() == encode_entries([E(1, 0)])
    assert not os.path.exists(path + ".bak")
    assert c.append(2, 4096)
    assert Path(path + ".bak").read_text() == encode_entries([E(1, 0)])  # the previous version
    assert not os.path.exists(path + ".tmp")
    again = EpochCache(path)
    assert again.entries == [E(1, 0, 4096), E(2, 4096)]
    again.truncate_suffix_by_offset(4096)
    assert EpochCache(path).entries == [E(1, 0)]


def test_torn_write_reads_the_backup(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    c = EpochCache(path)
    c.append(1, 0)
    c.append(2, 4096)
    c.append(3, 9000)
    # A writer (RocketMQ's own writes in place) died half way through the file.
    whole = Path(path).read_text()
    Path(path).write_text(whole[: len(whole) // 2 + 3])
    assert read_epoch_file(path) == [E(1, 0, 4096), E(2, 4096)]  # the .bak: one change older
    # The next write must not put the torn file in the backup's place.
    back = EpochCache(path)
    assert back.append(3, 9000)
    assert Path(path + ".bak").read_text() == encode_entries([E(1, 0), E(2, 4096)])
    assert EpochCache(path).entries == [E(1, 0, 4096), E(2, 4096, 9000), E(3, 9000)]


def test_bad_crc_missing_or_empty_file_reads_the_backup(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    write_epoch_file(path, [E(1, 0)])
    write_epoch_file(path, [E(1, 0), E(2, 100)])
    good = [E(1, 0)]
    Path(path).write_text("2\n12345\n1-0\n2-100\n")  # a flipped bit somewhere
    assert read_epoch_file(path) == good
    Path(path).write_text("")
    assert read_epoch_file(path) == good
    Path(path).write_text("0\n0\n")
    assert read_epoch_file(path) == good
    os.unlink(path)
    assert read_epoch_file(path) == good
    Path(path).write_bytes(b"\xff\xfe garbage")
    assert read_epoch_file(path) == good


def test_both_damaged_is_an_error(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    Path(path).write_text("2\n1\n1-0\n")
    with pytest.raises(EpochFileError, match="backup"):
        read_epoch_file(path)
    Path(path + ".bak").write_text("garbage\n")
    with pytest.raises(EpochFileError, match="backup"):
        EpochCache(path)
    assert read_epoch_file(str(tmp_path / "none")) == []


def test_emptied_cache_reads_back_empty(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    c = EpochCache(path)
    c.append(1, 0)
    c.append(2, 100)
    c.truncate_suffix_by_epoch(1)
    assert not os.path.exists(path) and not os.path.exists(path + ".bak")
    assert EpochCache(path).entries == []


def test_entries_given_with_a_path_are_written(tmp_path: Path) -> None:
    path = str(tmp_path / "sub" / "epochs")
    c = EpochCache(path, [E(2, 50), E(1, 0)])
    assert c.entries == [E(1, 0, 50), E(2, 50)]
    crc = zlib.crc32(b"1-0\n2-50\n") & 0x7FFFFFFF
    assert Path(path).read_text() == f"2\n{crc}\n1-0\n2-50\n"
    c.replace_all([E(5, 10)])
    assert EpochCache(path).entries == [E(5, 10)]
