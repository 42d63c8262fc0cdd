"""Metadata files: write_atomic's writes and syncs, and the CoalescingWriter's batching."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rmq.broker import jsonfile
from rmq.broker.jsonfile import CoalescingWriter, write_atomic
from rmq.protocol import body
from rmq.protocol.body import dumps_members as encode_members


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


def test_members_are_encoded_as_body_dumps_does() -> None:
    table = {"b": {"x": [1, True, None]}, 'a\u00e9"\n': {3: 4}}
    assert b"".join(encode_members(table.items())) == body.dumps(table)
    assert b"".join(encode_members(table.items(), legacy=True)) == body.dumps(table, legacy=True)


class Table:
    """A table with a CoalescingWriter, counting the snapshots the writer takes."""

    def __init__(self, path: Path, delay: float = 0.1) -> None:
        self.rows: dict[str, int] = {}
        self.snapshots = 0
        self.writer = CoalescingWriter(path, self.snapshot, delay=delay)

    def snapshot(self) -> Iterator[bytes]:
        self.snapshots += 1
        return encode_members(dict(self.rows).items())

    def set(self, key: str, value: int) -> None:
        self.rows[key] = value
        self.writer.changed()


async def test_a_burst_of_changes_is_one_write(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.json")
    async with trio.open_nursery() as nursery:
        await nursery.start(table.writer.run)
        for i in range(1000):
            table.set(f"k{i}", i)
        assert table.writer.dirty and not (tmp_path / "t.json").exists()
        with trio.fail_after(10):
            while table.writer.dirty:
                await trio.sleep(0.01)
        assert table.snapshots == 1
        assert len(body.loads((tmp_path / "t.json").read_bytes())) == 1000
        nursery.cancel_scope.cancel()


async def test_written_does_not_wait_out_the_delay(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.json", delay=3600)
    async with trio.open_nursery() as nursery:
        await nursery.start(table.writer.run)
        table.set("a", 1)
        with trio.fail_after(10):
            await table.writer.written()
        assert body.loads((tmp_path / "t.json").read_bytes()) == {"a": 1}
        with trio.fail_after(1):
            await table.writer.written()  # nothing changed since: at once
        nursery.cancel_scope.cancel()


async def test_a_failed_write_is_logged_and_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(jsonfile, "RETRY_AFTER_FAILURE", 0.05)
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    table = Table(blocker / "t.json", delay=0.01)
    async with trio.open_nursery() as nursery:
        await nursery.start(table.writer.run)
        table.set("a", 1)
        with trio.fail_after(10):
            await table.writer.written()  # the attempt failed: written() returns, the change is still dirty
        assert table.writer.dirty
        assert any(r.levelno == logging.ERROR and "cannot write" in r.getMessage() for r in caplog.records)
        blocker.unlink()
        with trio.fail_after(10):
            while table.writer.dirty:
                await trio.sleep(0.01)
        assert body.loads((blocker / "t.json").read_bytes()) == {"a": 1}
        nursery.cancel_scope.cancel()


def test_flush_writes_now(tmp_path: Path) -> None:
    table = Table(tmp_path / "t.json")
    table.set("a", 1)
    table.writer.flush()
    assert not table.writer.dirty
    assert body.loads((tmp_path / "t.json").read_bytes()) == {"a": 1}


async def test_a_table_that_cannot_be_encoded_is_logged_and_the_writer_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(jsonfile, "RETRY_AFTER_FAILURE", 0.05)
    table = Table(tmp_path / "t.json", delay=0.01)
    async with trio.open_nursery() as nursery:
        await nursery.start(table.writer.run)
        table.rows["bad"] = object()  # type: ignore[assignment]
        table.writer.changed()
        with trio.fail_after(10):
            await table.writer.written()
        assert any("cannot write" in r.getMessage() for r in caplog.records)
        del table.rows["bad"]
        table.set("a", 1)
        with trio.fail_after(10):
            await table.writer.written()
        assert body.loads((tmp_path / "t.json").read_bytes()) == {"a": 1}
        nursery.cancel_scope.cancel()
