"""Config files written the way RocketMQ's ConfigManager writes them (PROTOCOL.md 6.4).

A write goes to `<file>.tmp` first; the previous content is kept as `<file>.bak`; then
the temporary file is renamed over the old one, so a crash leaves either the old or the
new file whole. A read falls back to `.bak` when the main file is missing, empty or
does not parse.

`CoalescingWriter` keeps a file in step with a table that changes often: many changes,
one write. The content is encoded on the event loop a few milliseconds at a time and
written and synced in a worker thread: encoding in the thread would hold the GIL and
make every socket call of the event loop wait for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import trio

from rmq.protocol import ProtocolError, body
from rmq.scheduling import Turns

log = logging.getLogger("rmq.broker.jsonfile")

T = TypeVar("T")

RETRY_AFTER_FAILURE = 1.0  # seconds before a failed write is tried again


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, keeping the old content in `<path>.bak`.

    Returns once the new content and its name are on disk (file and directory synced).
    Raises OSError when a step fails; `path` then holds the old content or the new, whole.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if path.exists():
        with contextlib.suppress(OSError):
            shutil.copyfile(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    _fsync_directory(path.parent)  # the rename itself survives a power cut only once its directory is synced


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written: a write may take fewer bytes than offered."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"write took {written} bytes")
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path, decode: Callable[[object], T]) -> T | None:
    """Load `path` (fastjson dialect allowed) through `decode`; `.bak` if the main file fails.

    Returns None when neither file exists. Raises ValueError when both exist and both
    fail: starting with empty metadata would silently lose topics or offsets.
    """
    errors = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if not data.strip():
            errors.append(f"{candidate} is empty")
            continue
        try:
            return decode(body.loads(data))
        except (ProtocolError, ValueError, TypeError, KeyError, AttributeError) as exc:
            errors.append(f"{candidate}: {exc}")
            log.warning("cannot read %s (%s); trying the backup", candidate, exc)
    if errors and any("is empty" not in e for e in errors):
        raise ValueError("; ".join(errors))
    return None


Snapshot = Callable[[], Iterable[bytes]]


class CoalescingWriter:
    """One file kept in step with an in-memory table, written off the event loop.

    The table's owner calls `changed()` after every change (cheap, synchronous). `run()`, a
    task, waits for a change, lets `delay` seconds of further changes gather, then calls
    `snapshot()`, which copies what it needs at once and returns the content's pieces;
    they are encoded on the event loop in turns of a few milliseconds, and written
    (write_atomic) in a worker thread. Changes made meanwhile go into the next write. A
    failed write is logged and tried again after RETRY_AFTER_FAILURE.

    The promise: while `run()` runs, a change is on disk `delay` seconds plus at most two
    writes after `changed()` (the write under way may have missed it). `written()` skips
    the delay and waits for that. `flush()` writes at once on the calling thread, whatever
    changed: for start and shutdown, when `run()` is not running.
    """

    def __init__(self, path: Path, snapshot: Snapshot, *, delay: float) -> None:
        self.path = path
        self.delay = delay
        self._snapshot = snapshot
        self._changes = 0  # changes so far
        self._written = 0  # changes on disk
        self._tried = 0  # changes the last attempt covered, whether it failed or not
        self._wake = trio.Event()
        self._hurry = trio.Event()
        self._attempt = trio.Event()

    @property
    def dirty(self) -> bool:
        """Whether a change is not on disk yet."""
        return self._written < self._changes

    def changed(self) -> None:
        self._changes += 1
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write after changes until cancelled; a write under way is finished first."""
        task_status.started()
        while True:
            await self._wake.wait()
            with trio.move_on_after(self.delay):
                await self._hurry.wait()
            self._wake = trio.Event()
            self._hurry = trio.Event()
            if not await self._write():
                self._wake.set()
                await trio.sleep(RETRY_AFTER_FAILURE)

    async def _write(self) -> bool:
        upto = self._changes
        try:
            pieces = []
            turns = Turns()
            for piece in self._snapshot():
                pieces.append(piece)
                await turns.take()
            await trio.to_thread.run_sync(write_atomic, self.path, b"".join(pieces))
        except (OSError, ValueError, TypeError) as exc:  # a table that cannot be encoded must not stop the broker
            log.error("cannot write %s (tried again in %g s): %s", self.path, RETRY_AFTER_FAILURE, exc)
            return False
        else:
            self._written = max(self._written, upto)
            return True
        finally:
            self._tried = max(self._tried, upto)
            self._attempt.set()
            self._attempt = trio.Event()

    async def written(self) -> None:
        """Have the changes made so far written without waiting out the delay, and wait
        until they are on disk or their write failed (logged). Needs `run()` running."""
        upto = self._changes
        while self._tried < upto:
            self._hurry.set()
            await self._attempt.wait()

    def flush(self) -> None:
        """Write now, on this thread (the event loop's, at start or shutdown). Raises OSError."""
        upto = self._changes
        write_atomic(self.path, b"".join(self._snapshot()))
        self._written = self._tried = max(self._written, upto)
