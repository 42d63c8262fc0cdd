"""`mqnamesrv` as a user runs it: a subprocess, its listen line, its pid file, SIGTERM."""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.startup import _parser, load_config, main

from ..ports import free_ports

REPO = Path(__file__).resolve().parents[2]
LISTEN_LINE = "The Name Server boot success. serializeType=JSON, listening on "


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "RMQ_RUN_DIR": str(tmp_path / "run"),
        "HOME": str(tmp_path),  # the default kvConfig.json lives under ~/namesrv
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return proc.stdout.readline()


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str, float]:
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path)
    )
    try:
        line = _read_line(proc, 10.0)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, line, time.monotonic() - began


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, err


def test_boot_line_pid_file_and_sigterm(tmp_path: Path) -> None:
    proc, line, elapsed = _start(tmp_path, "-m", "rmq.namesrv.startup", "-p", "0", "--host", "127.0.0.1")
    try:
        assert line.startswith(LISTEN_LINE), line
        # "well under a second" on an idle machine; the bound leaves room for a busy CI box
        assert elapsed < 3.0, f"startup took {elapsed:.2f} s"
        port = int(line.rsplit(":", 1)[1])
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        pid_path = tmp_path / "run" / f"namesrv-{port}.pid"
        assert pid_path.read_text().strip() == str(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
    code, err = _stop(proc)
    assert code == 0, err
    assert "SIGTERM received, shutting down" in err
    assert not pid_path.exists()


def test_rmq_namesrv_and_mqshutdown(tmp_path: Path) -> None:
    port = free_ports()
    proc, line, _ = _start(tmp_path, "-m", "rmq", "namesrv", "-p", str(port), "--host", "127.0.0.1")
    try:
        assert line == f"{LISTEN_LINE}127.0.0.1:{port}\n"
        # mqshutdown waits until the pid is gone, so reap our child while it waits
        stop = subprocess.Popen(
            [sys.executable, "-m", "rmq", "shutdown", "namesrv", "--port", str(port)],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        code, err = _stop(proc)
        out, _ = stop.communicate(timeout=20)
        assert stop.returncode == 0, out
        assert f"Send shutdown request to namesrv({proc.pid}) OK" in out
        assert code == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _args(*argv: str) -> NamesrvConfig:
    return load_config(_parser().parse_args(list(argv)))


def test_config_file_then_flags(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        "# a RocketMQ namesrv.properties\n"
        "listenPort=19876\n"
        f"kvConfigPath={tmp_path / 'kv.json'}\n"
        "orderMessageEnable=true\n"
        "rocketmqHome=/opt/rocketmq\n"
    )
    with caplog.at_level(logging.INFO, logger="rmq.namesrv.config"):
        config = _args("-c", str(conf))
    assert (config.listen_port, config.kv_config_path, config.order_message_enable) == (
        19876,
        str(tmp_path / "kv.json"),
        True,
    )
    assert f"{conf}: accepted and ignored (RocketMQ keys rmq does not act on): rocketmqHome" in caplog.text
    overridden = _args("-c", str(conf), "-p", "1234", "--host", "127.0.0.1")
    assert (overridden.listen_host, overridden.listen_port) == ("127.0.0.1", 1234)
    assert _args() == NamesrvConfig()


@pytest.mark.parametrize(
    ("text", "words"),
    [("listenPort=abc\n", "listenPort"), ("orderMessageEnable=perhaps\n", "orderMessageEnable")],
)
def test_bad_config_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text(text)
    assert main(["-c", str(conf)]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert str(conf) in err


def test_bad_port_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-p", "70000"]) == 2
    assert "listenPort" in capsys.readouterr().err
    assert main(["-c", str(tmp_path / "missing.properties")]) == 1
    assert "missing.properties" in capsys.readouterr().err


def test_a_rocketmq_file_and_n_as_a_process(tmp_path: Path) -> None:
    """RocketMQ 5.x's conf/container/2container-2m-2s/nameserver.conf (supportActingMaster=true)
    with `-n`, as RocketMQ's mqnamesrv takes them: it starts and says what it ignores."""
    conf = tmp_path / "nameserver.conf"
    conf.write_text("supportActingMaster=true\n")
    argv = ["-m", "rmq", "namesrv", "-c", str(conf), "--port", "0", "--host", "127.0.0.1", "-n", "127.0.0.1:9876"]
    proc, line, _ = _start(tmp_path, *argv)
    try:
        assert line.startswith(LISTEN_LINE), line
    finally:
        proc.send_signal(signal.SIGTERM)
    code, err = _stop(proc)
    assert code == 0, err
    assert f"{conf}: accepted and ignored (RocketMQ keys rmq does not act on): supportActingMaster" in err
    assert "-n 127.0.0.1:9876 ignored" in err
