"""Pid files of running servers, so `mqshutdown` can find them.

RocketMQ's mqshutdown greps the process list for the Java main class; a pid file per
server (`<kind>-<port>.pid` under ~/.rmq/run, or $RMQ_RUN_DIR) is the portable way.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def run_dir() -> Path:
    return Path(os.environ.get("RMQ_RUN_DIR") or Path.home() / ".rmq" / "run")


@contextlib.contextmanager
def pid_file(kind: str, port: int) -> Iterator[Path]:
    """Write `<kind>-<port>.pid` for the life of the block; removed on exit."""
    directory = run_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}-{port}.pid"
    # whole or absent: `running` (mqshutdown) takes an empty file for a stale one and removes it
    tmp = directory / f".{kind}-{port}.pid.{os.getpid()}"
    tmp.write_text(f"{os.getpid()}\n")
    os.replace(tmp, path)
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            if path.read_text().strip() == str(os.getpid()):
                path.unlink()


def running(kind: str) -> list[tuple[Path, int]]:
    """(pid file, pid) of each live server of this kind; stale files are removed."""
    out = []
    for path in sorted(run_dir().glob(f"{kind}-*.pid")):
        try:
            pid = int(path.read_text().strip())
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        except PermissionError:
            pass
        out.append((path, pid))
    return out
