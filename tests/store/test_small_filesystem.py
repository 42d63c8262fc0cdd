"""A store on a real small filesystem (a tmpfs in a user and mount namespace, tests/small_disk.py)
that fills up: no SIGBUS, writes refused while it is full and taken again once space is freed,
and every acknowledged message readable, before and after a restart. Skipped where the
namespace or the mount is not allowed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.small_disk import SmallDisk

WRITER = Path(__file__).with_name("full_disk_writer.py")
REPO = Path(__file__).resolve().parents[2]

needs_tmpfs = pytest.mark.skipif("not SmallDisk.allowed()", reason="no user and mount namespace for a small tmpfs")


def _write(tmp_path: Path, *args: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with SmallDisk(tmp_path, 4096) as disk:
        done = subprocess.run(
            [sys.executable, str(WRITER), str(disk.root), *args], capture_output=True, timeout=120, env=env
        )
    assert done.returncode != -signal.SIGBUS, "killed by SIGBUS"
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    return result


@needs_tmpfs
def test_a_store_on_a_filesystem_another_file_fills(tmp_path: Path) -> None:
    result = _write(tmp_path)
    assert result["refused_on_full"] > 0
    assert all("SERVICE_NOT_AVAILABLE" in r for r in result["remarks"]), result["remarks"]
    assert result["refused_after_free"] == 0
    acked = result["acked"]
    assert acked >= 700
    assert result["delivered_on_full"] == 600  # dispatched from memory on the full disk
    assert result["delivered_after_free"] == acked
    assert result["delivered_after_restart"] == acked


@needs_tmpfs
def test_a_store_reopened_on_a_full_tmpfs_reads_no_hole(tmp_path: Path) -> None:
    """Recovery reads where the CommitLog ends (here at a page) and the consume queues' last
    entries (here one torn at a page by a full disk): on a full tmpfs a hole read through a
    mapping needs a page the disk cannot give."""
    result = _write(tmp_path, "holes")
    assert result == {"commitlog_end": 4096, "messages": 2, "torn_queue_end": 204}
