"""mqshutdown stops servers started as separate processes, through their pid files."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq.rundir import pid_file, running

from ..ports import free_ports


def _wait_listening(port: int, limit: float = 15.0) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"nothing listens on {port} after {limit} s")


def test_mqshutdown_stops_a_running_name_server(tmp_path: Path) -> None:
    env = {**os.environ, "RMQ_RUN_DIR": str(tmp_path / "run")}
    port = free_ports()
    server = subprocess.Popen(
        [sys.executable, "-m", "rmq", "namesrv", "--host", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port)
        pid = tmp_path / "run" / f"namesrv-{port}.pid"
        end = time.monotonic() + 10
        while not pid.exists() and time.monotonic() < end:  # written just after the port opens
            time.sleep(0.02)
        assert pid.read_text().strip() == str(server.pid)
        # the server is our child and is not reaped until wait(): mqshutdown must not take
        # the exited-but-unreaped process for a running one
        done = subprocess.run(
            [sys.executable, "-m", "rmq", "shutdown", "namesrv", "--timeout", "10"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Send shutdown request to namesrv({server.pid}) OK" in done.stdout
        assert server.wait(timeout=5) == 0
        assert not (tmp_path / "run" / f"namesrv-{port}.pid").exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_mqshutdown_with_nothing_running(tmp_path: Path) -> None:
    env = {**os.environ, "RMQ_RUN_DIR": str(tmp_path / "run")}
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "shutdown", "broker"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert "No broker running" in done.stdout


def test_a_pid_file_appears_whole_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written under another name and renamed into place: mqshutdown, which removes a pid file
    it cannot read as stale, never sees a starting server's file empty."""
    monkeypatch.setenv("RMQ_RUN_DIR", str(tmp_path / "run"))
    with pid_file("namesrv", 9876) as path:
        assert [p.name for p in (tmp_path / "run").iterdir()] == ["namesrv-9876.pid"]
        assert path.read_text() == f"{os.getpid()}\n"
        assert running("namesrv") == [(path, os.getpid())]
    assert list((tmp_path / "run").iterdir()) == []
