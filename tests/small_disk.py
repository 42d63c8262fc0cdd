"""A small real filesystem for tests and benchmarks that fill a disk.

    with SmallDisk(tmp_path, size_kib=40 * 1024) as disk:     # a tmpfs, reachable at disk.root
        ...                    # put a store at disk.root / "store"
        disk.fill()            # another file takes every free block
        disk.free()            # and goes

The tmpfs is mounted in a user and mount namespace of its own (``unshare -rm``), held by a
waiting process; this process and its children reach it through ``/proc/<holder>/root``, so a
broker can be stopped and started again on it. ``SmallDisk.allowed()`` says whether this
machine lets us (tests skip otherwise). ``fs="ext4"`` mounts a loop ext4 image instead, in a
mount namespace only: that needs root.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import TracebackType

_WAIT = "echo ready; read _ignored; exit 0"  # held until told (or until its stdin closes)
_MOUNT = {
    "tmpfs": ("-rm", 'mount -t tmpfs -o size="$1"k tmpfs "$2" || exit 1; '),
    "ext4": (
        "-m",
        'truncate -s "$1"k "$3" && mkfs.ext4 -q -F -m 0 "$3" && mount -o loop "$3" "$2" || exit 1; rm -f "$3"; ',
    ),
}


class SmallDisk:
    """A filesystem of ``size_kib`` KiB (``fs``: tmpfs or ext4) under ``base``, held by a
    process of its own."""

    def __init__(self, base: Path, size_kib: int, fs: str = "tmpfs") -> None:
        self.mount = base / "small-disk"
        self.size_kib = size_kib
        self.fs = fs
        self.holder: subprocess.Popen[bytes] | None = None
        self._ballast = 0

    @staticmethod
    @functools.cache
    def allowed(fs: str = "tmpfs") -> bool:
        """Whether such a filesystem can be made here, and reached from this process."""
        if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
            return False
        if fs == "ext4" and (os.geteuid() != 0 or shutil.which("mkfs.ext4") is None):
            return False
        probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"rmq-disk-probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            with SmallDisk(probe, 4096 if fs == "ext4" else 64, fs) as disk:
                (disk.root / "x").write_bytes(b"x")
                st = os.statvfs(disk.root)
                return st.f_blocks * st.f_frsize <= disk.size_kib * 1024
        except (OSError, RuntimeError, subprocess.SubprocessError):
            return False
        finally:
            shutil.rmtree(probe, ignore_errors=True)

    def __enter__(self) -> SmallDisk:
        self.mount.mkdir(parents=True, exist_ok=True)
        flags, mount = _MOUNT[self.fs]
        image = self.mount.parent / "small-disk.img"  # ext4: removed once mounted
        argv = ["unshare", flags, "sh", "-c", mount + _WAIT, "sh", str(self.size_kib), str(self.mount), str(image)]
        self.holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if line != b"ready\n":
            self.__exit__(None, None, None)
            raise RuntimeError(f"no small tmpfs: {line!r}")
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        holder, self.holder = self.holder, None
        if holder is None:
            return
        try:
            assert holder.stdin is not None
            holder.stdin.close()  # the holder exits, and the namespace and its tmpfs with it
            holder.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            holder.kill()
            holder.wait(10)

    @property
    def root(self) -> Path:
        """The tmpfs, as this process (and its children) reach it."""
        assert self.holder is not None
        return Path(f"/proc/{self.holder.pid}/root{self.mount}")

    def used_ratio(self) -> float:
        st = os.statvfs(self.root)
        return 1 - st.f_bavail / st.f_blocks

    def fill(self, leave_kib: int = 0) -> int:
        """Another file takes the free blocks, all but ``leave_kib`` KiB; returns its bytes."""
        path = self.root / f"ballast-{self._ballast}"
        self._ballast += 1
        st = os.statvfs(self.root)
        todo = st.f_bavail * st.f_frsize - leave_kib * 1024
        total = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for chunk in (1 << 20, 1 << 16, 1 << 12):
                data = bytes(chunk)
                while total + chunk <= todo or (not leave_kib and chunk == 1 << 12):
                    try:
                        n = os.write(fd, data)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        return total
                    total += n
                    if n < chunk:
                        break
        finally:
            os.close(fd)
        return total

    def free(self) -> None:
        """The files ``fill`` made go."""
        for path in self.root.glob("ballast-*"):
            path.unlink()
