"""A store on a real small filesystem (a tmpfs in a user and mount namespace) that fills up:
no SIGBUS, writes refused while it is full and taken again once space is freed, and every
acknowledged message readable, before and after a restart. Skipped where the namespace or
the mount is not allowed."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WRITER = Path(__file__).with_name("full_disk_writer.py")
REPO = Path(__file__).resolve().parents[2]


def in_small_tmpfs(directory: Path, size_kib: int, *argv: str) -> list[str]:
    """argv run in a new user and mount namespace with a tmpfs of ``size_kib`` on ``directory``."""
    script = 'mount -t tmpfs -o size="$1"k tmpfs "$2" && shift 2 && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", script, "sh", str(size_kib), str(directory), *argv]


@functools.cache
def small_tmpfs_allowed() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        done = subprocess.run(in_small_tmpfs(probe, 64, "true"), capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


needs_tmpfs = pytest.mark.skipif(
    "not small_tmpfs_allowed()", reason="no user and mount namespace for a small tmpfs (unshare -rm, mount)"
)


@needs_tmpfs
def test_a_store_on_a_filesystem_another_file_fills(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = in_small_tmpfs(tmp_path, 4096, sys.executable, str(WRITER), str(tmp_path))
    done = subprocess.run(argv, capture_output=True, timeout=120, env=env)
    assert done.returncode != -signal.SIGBUS and done.returncode != 128 + signal.SIGBUS, "killed by SIGBUS"
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result = json.loads(done.stdout.decode().splitlines()[-1])
    assert result["refused_on_full"] > 0
    assert all("SERVICE_NOT_AVAILABLE" in r for r in result["remarks"]), result["remarks"]
    assert result["refused_after_free"] == 0
    acked = result["acked"]
    assert acked >= 700
    assert result["delivered_on_full"] == 600  # dispatched from memory on the full disk
    assert result["delivered_after_free"] == acked
    assert result["delivered_after_restart"] == acked
