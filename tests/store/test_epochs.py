"""The epoch file (RocketMQ's EpochFileCache): its text, its backups, the consistent point."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from rmq.store.epochs import EpochCache, EpochEntry, consistent_point, decode, encode


def test_the_file_is_rocketmqs_checkpoint_text() -> None:
    text = encode([EpochEntry(1, 0), EpochEntry(3, 4096)])
    lines = "1-0\n3-4096\n"
    assert text == f"2\n{zlib.crc32(lines.encode())}\n{lines}"
    assert decode(text) == [EpochEntry(1, 0), EpochEntry(3, 4096)]
    signed = zlib.crc32(lines.encode()) - 2**32  # Java writes the CRC as a signed int
    assert decode(f"2\n{signed}\n{lines}") == [EpochEntry(1, 0), EpochEntry(3, 4096)]
    with pytest.raises(ValueError):
        decode(text.replace("4096", "4097"))


def test_append_persists_and_a_damaged_file_falls_back_to_its_backup(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    cache = EpochCache(path)
    assert cache.last_epoch() == -1
    cache.append(1, 0)
    cache.append(2, 100)
    assert EpochCache(path).entries() == [EpochEntry(1, 0), EpochEntry(2, 100)]
    path.write_text("2\n123\n1-0\n2-1")  # torn
    assert EpochCache(path).entries() == [EpochEntry(1, 0)]  # the .bak: the version before


def test_append_refuses_going_back_and_replaces_an_empty_epoch(tmp_path: Path) -> None:
    cache = EpochCache(tmp_path / "e")
    cache.append(2, 100)
    with pytest.raises(ValueError):
        cache.append(2, 200)
    with pytest.raises(ValueError):
        cache.append(3, 50)
    cache.append(3, 100)  # epoch 2 wrote nothing
    assert cache.entries() == [EpochEntry(3, 100)]
    cache.truncate_suffix_by_offset(100)
    assert cache.entries() == []
    assert EpochCache(tmp_path / "e").entries() == []


@pytest.mark.parametrize(
    ("local", "local_end", "master", "master_end", "point"),
    [
        ([(1, 0)], 500, [(1, 0), (2, 300)], 900, 300),  # an old master's tail past the new epoch
        ([(1, 0), (2, 300)], 400, [(1, 0), (2, 300)], 900, 400),  # a slave behind: nothing to cut
        ([(1, 0), (2, 300)], 600, [(1, 0), (3, 450)], 900, 300),  # our epoch 2 the master never had: cut where it began
        ([(2, 0)], 100, [(1, 0)], 900, -1),  # nothing shared
        ([], 0, [(1, 0)], 900, -1),
    ],
)
def test_consistent_point(
    local: list[tuple[int, int]], local_end: int, master: list[tuple[int, int]], master_end: int, point: int
) -> None:
    assert consistent_point(local, local_end, master, master_end) == point
