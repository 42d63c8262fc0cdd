"""Store fixtures: small files, a clock the test drives, and a store factory."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq.store import MessageStore, StoreConfig

# 2023-11-14 04:13:20 UTC; tests that care about the local hour set it themselves.
T0 = 1_700_000_000_000


class FakeClock:
    """Wall-clock milliseconds that only move when the test says so."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def local_ms(hour: int, minute: int = 0) -> int:
    """A timestamp (ms) whose local time of day is hour:minute, on a fixed day."""
    t = time.mktime((2024, 3, 5, hour, minute, 0, 0, 0, -1))
    return int(t * 1000)


def small_config(root: Path, **overrides: Any) -> StoreConfig:
    """Tiny files so tests roll CommitLog, consume queue and index files quickly."""
    values: dict[str, Any] = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=16 * 1024,
        mapped_file_size_consume_queue=20 * 50,
        max_hash_slot_num=64,
        max_index_num=200,
        flush_interval_commitlog=50,
        flush_interval_consume_queue=100,
    )
    values.update(overrides)
    return StoreConfig(**values)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., MessageStore]]:
    """open_store(**config overrides) -> MessageStore on tmp_path/store; all closed at the end."""
    opened: list[MessageStore] = []

    def factory(
        *, root: Path | None = None, store_clock: Any = None, disk_usage: Any = None, **overrides: Any
    ) -> MessageStore:
        cfg = small_config(root or tmp_path / "store", **overrides)
        s = MessageStore(cfg, clock=store_clock or clock, disk_usage=disk_usage or (lambda _p: 0.1))
        opened.append(s)
        return s

    yield factory
    for s in opened:
        s.close()


def crash(store: MessageStore) -> None:
    """Abandon a store as a killed process would: no dispatch, no flush, abort file kept,
    memory-only state (pending consume queue entries) lost. Page-cache writes survive, as
    they do when a process is killed."""
    store.appender.closed = True
    store.queues.close()
    if store.index is not None:
        store.index.close()
    store.commitlog.close()
    store.checkpoint.close()
    store._release_lock()


class SimulatedDisk:
    """The filesystem's answers to the store's writes, for files whose path contains a
    pattern: a short count (what a nearly full disk returns without an error) or an error
    (ENOSPC, or EIO from a sync). Wraps os.pwrite, os.posix_fallocate, os.fdatasync and
    os.open with O_CREAT of a new file (extending a sparse file needs no blocks); writes
    through a mapping cannot be simulated (a real small filesystem does that:
    tests/store/test_full_disk.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._pwrite = os.pwrite
        self._fallocate = os.posix_fallocate
        self._fdatasync = os.fdatasync
        self._open = os.open
        self.rules: list[tuple[str, str, int]] = []  # (path pattern, "short" or "error", calls left)
        self.calls: dict[str, int] = {}  # pattern -> writes it answered
        monkeypatch.setattr(os, "pwrite", self.pwrite)
        monkeypatch.setattr(os, "posix_fallocate", self.posix_fallocate)
        monkeypatch.setattr(os, "fdatasync", self.fdatasync)
        monkeypatch.setattr(os, "open", self.open)

    def short(self, pattern: str, times: int = 1) -> None:
        """The next ``times`` pwrites to such files write half their bytes and say so."""
        self.rules.append((pattern, "short", times))

    def full(self, pattern: str, times: int = 1 << 30) -> None:
        """Writes and allocations of such files fail with ENOSPC (``times`` of them)."""
        self.rules.append((pattern, "error", times))

    def no_new_blocks(self, pattern: str, times: int = 1 << 30, *, new_files: bool = True) -> None:
        """Allocations (and new such files, unless ``new_files`` is false) fail with ENOSPC;
        writes into allocated blocks go on."""
        self.rules.append((pattern, "alloc" if new_files else "fallocate", times))

    def sync_fails(self, pattern: str, times: int = 1 << 30) -> None:
        """fdatasync of such files fails with EIO (``times`` of them)."""
        self.rules.append((pattern, "sync", times))

    def heal(self) -> None:
        """Space is back: every call goes through again."""
        self.rules.clear()

    def _rule(self, fd: int, kinds: tuple[str, ...], path: str | None = None) -> str | None:
        if not self.rules:
            return None
        if path is None:
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return None
        for i, (pattern, kind, left) in enumerate(self.rules):
            if pattern in path and kind in kinds and left > 0:
                self.rules[i] = (pattern, kind, left - 1)
                self.calls[pattern] = self.calls.get(pattern, 0) + 1
                return kind
        return None

    def pwrite(self, fd: int, data: Any, pos: int) -> int:
        kind = self._rule(fd, ("short", "error"))
        if kind == "error":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if kind == "short" and len(data) > 1:
            return self._pwrite(fd, memoryview(data)[: len(data) // 2], pos)
        return self._pwrite(fd, data, pos)

    def posix_fallocate(self, fd: int, offset: int, length: int) -> None:
        if self._rule(fd, ("error", "alloc", "fallocate")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._fallocate(fd, offset, length)

    def fdatasync(self, fd: int) -> None:
        if self._rule(fd, ("sync",)):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self._fdatasync(fd)

    def open(self, path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        new = flags & os.O_CREAT and self.rules and not os.path.exists(path)
        if new and self._rule(-1, ("error", "alloc"), str(path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return self._open(path, flags, mode, **kwargs)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> SimulatedDisk:
    return SimulatedDisk(monkeypatch)
