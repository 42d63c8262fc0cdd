"""A small real filesystem for a broker process, and the broker on it.

    with SmallDisk(tmp_path, size_kib=40 * 1024) as disk:     # a tmpfs, reachable at disk.root
        broker = DiskBroker(tmp_path, disk.root / "store", namesrv, cleanFileForciblyEnable="false")
        broker.start()
        disk.fill()            # another file takes every free block
        disk.free()            # and goes

The tmpfs is mounted in a user and mount namespace of its own (``unshare -rm``), held by a
sleeping process; this process and the broker reach it through ``/proc/<holder>/root``, so the
broker can be stopped and started again on it. ``SmallDisk.allowed()`` says whether this
machine lets us (tests skip otherwise). Used by test_full_disk_process.py and bench/full_disk.py.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from tests.broker.ha.procs import free_port_block
from tests.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
_HOLD = (
    'mount -t tmpfs -o size="$1"k tmpfs "$2" || exit 1; echo ready; '
    "read _ignored; exit 0"  # held until told (or until its stdin closes)
)


class SmallDisk:
    """A tmpfs of ``size_kib`` KiB under ``base``, held by a process of its own."""

    def __init__(self, base: Path, size_kib: int) -> None:
        self.mount = base / "small-disk"
        self.size_kib = size_kib
        self.holder: subprocess.Popen[bytes] | None = None
        self._ballast = 0

    @staticmethod
    @functools.cache
    def allowed() -> bool:
        """Whether a user and mount namespace with a tmpfs can be made, and reached from here."""
        if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
            return False
        probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"rmq-disk-probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        try:
            with SmallDisk(probe, 64) as disk:
                (disk.root / "x").write_bytes(b"x")
                return os.statvfs(disk.root).f_blocks * os.statvfs(disk.root).f_frsize <= 64 * 1024
        except (OSError, RuntimeError, subprocess.SubprocessError):
            return False
        finally:
            shutil.rmtree(probe, ignore_errors=True)

    def __enter__(self) -> SmallDisk:
        self.mount.mkdir(parents=True, exist_ok=True)
        argv = ["unshare", "-rm", "sh", "-c", _HOLD, "sh", str(self.size_kib), str(self.mount)]
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


class DiskBroker:
    """``python -m rmq broker`` with its store at ``store`` (conf, log and run dir in ``base``)."""

    def __init__(self, base: Path, store: Path, namesrv: str, **conf: str) -> None:
        self.port = free_port_block()
        self.metrics_port = free_ports()
        self.proc: subprocess.Popen[str] | None = None
        self.base = base
        self.exit_codes: list[int] = []
        props = {
            "brokerClusterName": "DiskCluster",
            "brokerName": "broker-disk",
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "namesrvAddr": namesrv,
            "listenPort": str(self.port),
            "storePathRootDir": str(store),
            "mappedFileSizeCommitLog": str(1024 * 1024),
            "mappedFileSizeConsumeQueue": str(3000 * 20),
            "maxHashSlotNum": "20000",
            "maxIndexNum": "80000",
            "cleanResourceInterval": "500",
            "registerNameServerPeriod": "10000",
            "metricsExporterType": "PROM",
            "metricsPromExporterPort": str(self.metrics_port),
            **conf,
        }
        self.conf = base / "broker-disk.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = base / "broker-disk.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        env = {**os.environ, "RMQ_RUN_DIR": str(self.base / "run"), "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmq", "broker", "-c", str(self.conf)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
                cwd=ROOT,
            )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        said = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if "boot success" in line:
                return
            said.append(line)
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(f"the broker did not start: {''.join(said)[-2000:]}; its log:\n{self.log()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """SIGTERM (a clean shutdown); the exit code (negative: the signal that ended it)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.exit_codes.append(proc.returncode)
        return proc.returncode

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-8000:]
        except OSError:
            return ""
