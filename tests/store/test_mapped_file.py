"""MappedFile.sync: a log's file keeps one descriptor for its syncs (each open and close in
the flush thread would be two more GIL handoffs with the event loop) and lets it go once the
file is flushed to its end, or closed."""

from __future__ import annotations

import os
from pathlib import Path

from rmq.store.mapped_file import MappedFile, MapPool


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_log_file_keeps_one_descriptor_for_its_syncs_until_flushed_to_its_end(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096)
    before = _open_fds()
    mf.mm[0:100] = b"x" * 100
    mf.sync(100)
    assert mf.flushed == 100 and _open_fds() == before + 1
    mf.mm[100:200] = b"y" * 100
    mf.sync(200)  # the same descriptor
    assert mf.flushed == 200 and _open_fds() == before + 1
    mf.sync(4096)  # flushed to its end: no later sync needs it
    assert mf.flushed == 4096 and _open_fds() == before
    mf.sync(4096, begin=0)  # a forced sync still works
    assert _open_fds() == before
    with open(mf.path, "rb") as f:
        assert f.read(200) == b"x" * 100 + b"y" * 100


def test_closing_a_file_releases_its_sync_descriptor(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096)
    before = _open_fds()
    mf.mm[0:10] = b"z" * 10
    mf.sync(10)
    mf.close()
    assert _open_fds() < before + 1
    mf.sync(20)  # skipped: closed
    assert mf.flushed == 10


def test_pooled_files_keep_no_descriptor(tmp_path: Path) -> None:
    pool = MapPool(4)
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 0, 4096, pool=pool)
    mf.mm[0:10] = b"q" * 10
    before = _open_fds()
    mf.sync(10)
    assert mf.flushed == 10 and _open_fds() == before
    mf.close()
