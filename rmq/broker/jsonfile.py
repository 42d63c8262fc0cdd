"""Config files written the way RocketMQ's ConfigManager writes them (PROTOCOL.md 6.4).

A write goes to `<file>.tmp` first; the previous content is kept as `<file>.bak`; then
the temporary file is renamed over the old one, so a crash leaves either the old or the
new file whole. A read falls back to `.bak` when the main file is missing, empty or
does not parse.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rmq.protocol import ProtocolError, body

log = logging.getLogger("rmq.broker.jsonfile")

T = TypeVar("T")


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
