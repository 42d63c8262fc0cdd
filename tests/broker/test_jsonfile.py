"""Metadata files: write_atomic's writes and syncs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from rmq.broker.jsonfile import write_atomic


def test_short_writes_are_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_write(fd: int, data: bytes) -> int:  # the kernel may take fewer bytes than offered
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    monkeypatch.setattr(os, "write", short_write)
    data = bytes(range(256)) * 3
    write_atomic(tmp_path / "f.json", data)
    monkeypatch.undo()
    assert (tmp_path / "f.json").read_bytes() == data
    assert len(calls) == -(-len(data) // 7)


def test_the_file_and_its_directory_are_synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomic(tmp_path / "f.json", b"{}")
    write_atomic(tmp_path / "f.json", b'{"a":1}')
    # the content before the rename, the rename (a directory entry) after it
    assert synced == ["file", "dir", "file", "dir"]
    assert (tmp_path / "f.json").read_bytes() == b'{"a":1}'
    assert (tmp_path / "f.json.bak").read_bytes() == b"{}"
