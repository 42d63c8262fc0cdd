"""A broker process on a small real filesystem (tests/small_disk.py).

    with SmallDisk(tmp_path, size_kib=40 * 1024) as disk:
        broker = DiskBroker(tmp_path, disk.root / "store", namesrv, cleanFileForciblyEnable="false")
        broker.start()         # conf, log and run dir in tmp_path, off the small disk
        disk.fill()
        broker.stop()          # SIGTERM; its exit code

Used by test_full_disk_process.py and bench/full_disk.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.broker.ha.procs import free_port_block
from tests.ports import free_ports
from tests.small_disk import SmallDisk as SmallDisk

ROOT = Path(__file__).resolve().parents[2]


class DiskBroker:
    """``python -m rmq broker`` with its store at ``store`` (conf, log and run dir in ``base``)."""

    def __init__(self, base: Path, store: Path, namesrv: str, *, code: Path = ROOT, **conf: str) -> None:
        self.code = code  # the checkout whose rmq runs
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
        env = {**os.environ, "RMQ_RUN_DIR": str(self.base / "run"), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
        env["PYTHONPATH"] = str(self.code) + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmq", "broker", "-c", str(self.conf)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
                cwd=self.code,
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
        code = self.proc.poll()
        raise RuntimeError(f"the broker did not start (exit {code}): {''.join(said)[-2000:]}; its log:\n{self.log()}")

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
