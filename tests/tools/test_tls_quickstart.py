"""The quickstart over TLS, as an operator runs it: `rmq namesrv` and `rmq broker` enforcing TLS with
their certificates in a tls.properties (`tls.config.file`), then `rmq admin`, `rmq quickstart
producer` and `rmq quickstart consumer` with `--tls --tls-config tls.properties`; plain text is
refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..broker.ha.procs import free_port_block
from ..tls_certs import Certs

ROOT = Path(__file__).resolve().parents[2]
COUNT = 1000


class Servers:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.env = {**os.environ, "RMQ_RUN_DIR": str(tmp_path / "run"), "PYTHONUNBUFFERED": "1"}
        self.env.pop("NAMESRV_ADDR", None)
        self.procs: list[subprocess.Popen[str]] = []
        self.namesrv = ""

    def start(self, name: str, args: list[str], ready: str) -> str:
        """Start `python -m rmq <args>`; returns its first stdout line containing `ready`."""
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 - the process owns it
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", *args],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env,
            cwd=ROOT,
        )
        log.close()
        self.procs.append(proc)
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if ready in line:
                return line
            if not line and proc.poll() is not None:
                break
        raise AssertionError(f"{name} did not start:\n{(self.tmp / f'{name}.log').read_text()[-4000:]}")

    def rmq(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rmq", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.stop()


def test_quickstart_over_tls(tmp_path: Path, servers: Servers) -> None:
    certs = Certs.write(tmp_path / "certs")
    tls_properties = tmp_path / "tls.properties"
    tls_properties.write_text(
        "tls.test.mode.enable=false\n"
        f"tls.server.certPath={certs.server_cert}\n"
        f"tls.server.keyPath={certs.server_key}\n"
        "tls.server.need.client.auth=none\n"
        f"tls.client.trustCertPath={certs.ca_path}\n"
        "tls.client.authServer=true\n"
    )
    ns_conf = tmp_path / "namesrv.properties"
    ns_conf.write_text(f"kvConfigPath=\ntls.server.mode=enforcing\ntls.config.file={tls_properties}\n")
    line = servers.start("namesrv", ["namesrv", "-c", str(ns_conf), "--host", "127.0.0.1", "-p", "0"], "boot success")
    match = re.search(r"listening on [\d.]+:(\d+)", line)
    assert match, line
    namesrv = f"127.0.0.1:{match.group(1)}"

    port = free_port_block()
    broker_conf = tmp_path / "broker.conf"
    broker_conf.write_text(
        "brokerClusterName=DefaultCluster\n"
        "brokerName=broker-a\n"
        f"namesrvAddr={namesrv}\n"
        "brokerIP1=127.0.0.1\n"
        "bindAddress=127.0.0.1\n"
        f"listenPort={port}\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        f"mappedFileSizeCommitLog={16 * 1024 * 1024}\n"
        f"mappedFileSizeConsumeQueue={30_000 * 20}\n"
        "tls.server.mode=enforcing\n"
        "tls.enable=true\n"
        f"tls.config.file={tls_properties}\n"
    )
    servers.start("broker", ["broker", "-c", str(broker_conf)], "boot success")

    tls = ["--tls", "--tls-config", str(tls_properties)]
    deadline = time.monotonic() + 30
    while True:  # the broker registered with the name server over TLS
        done = servers.rmq("admin", "clusterList", "-n", namesrv, *tls, timeout=30)
        if done.returncode == 0 and "broker-a" in done.stdout:
            break
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(0.2)
    assert f"127.0.0.1:{port}" in done.stdout

    plain = servers.rmq("admin", "clusterList", "-n", namesrv, timeout=30)
    assert plain.returncode == 1 and "error: clusterList" in plain.stderr

    sent = servers.rmq("quickstart", "producer", "-n", namesrv, "-c", str(COUNT), *tls)
    assert sent.returncode == 0, sent.stderr[-3000:]
    results = sent.stdout.splitlines()
    assert len(results) == COUNT and all(r.startswith("SendResult [sendStatus=SEND_OK") for r in results)

    got = servers.rmq("quickstart", "consumer", "-n", namesrv, "--count", str(COUNT), "--seconds", "90", *tls)
    assert got.returncode == 0, got.stderr[-3000:]
    lines = got.stdout.splitlines()
    assert lines[0] == "Consumer Started."
    received = [line for line in lines[1:] if "Receive New Messages" in line]
    assert len(received) == COUNT
    assert all("brokerName=broker-a" in line and "topic='TopicTest'" in line for line in received)
    # the plain clusterList above, refused by the name server
    assert "plain connection refused: the server enforces TLS" in (tmp_path / "namesrv.log").read_text()


def test_tls_options_of_the_client_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rmq.client import TlsClientSettings
    from rmq.tools.quickstart import _producer_parser, producer_main
    from rmq.tools.tlsopts import tls_option

    assert tls_option(_producer_parser().parse_args([])) is False
    assert tls_option(_producer_parser().parse_args(["--tls"])) is True
    props = tmp_path / "tls.properties"
    props.write_text("tls.client.authServer=false\n")
    assert tls_option(_producer_parser().parse_args(["--tls-config", str(props)])) is False  # no tls.enable
    with_tls = tls_option(_producer_parser().parse_args(["--tls", "--tls-config", str(props)]))
    assert with_tls == TlsClientSettings(enable=False, auth_server=False)
    props.write_text("tls.enable=true\n")
    assert tls_option(_producer_parser().parse_args(["--tls-config", str(props)])) == TlsClientSettings()

    assert producer_main(["-n", "127.0.0.1:1", "--tls-config", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
