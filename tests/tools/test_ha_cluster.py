"""The example master/slave configurations and `rmq dev --cluster`."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq.broker.config import BrokerConfig, BrokerRole
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient
from rmq.tools.dev import CLUSTER_BROKERS, cluster_configs

ROOT = Path(__file__).resolve().parents[2]
FILES = {"broker-a.properties": 0, "broker-a-s.properties": 1, "broker-b.properties": 2, "broker-b-s.properties": 3}


@pytest.mark.parametrize(("kind", "master_role"), [("2m-2s-sync", "SYNC_MASTER"), ("2m-2s-async", "ASYNC_MASTER")])
def test_shipped_conf_files_match_the_dev_cluster(kind: str, master_role: str, tmp_path: Path) -> None:
    expected = cluster_configs(kind, "127.0.0.1:9876", tmp_path)
    for name, i in FILES.items():
        config = BrokerConfig.load(ROOT / "conf" / kind / name, environ={})
        want = expected[i]
        assert (config.broker_name, config.broker_id, config.listen_port) == (
            want.broker_name,
            want.broker_id,
            want.listen_port,
        ), name
        assert config.broker_role is want.broker_role
        assert config.broker_role is (BrokerRole.SLAVE if config.broker_id else BrokerRole(master_role))
        assert config.namesrv_addr == ("127.0.0.1:9876",)
        assert config.ha_port == config.listen_port + 1


def _free_base() -> int:
    for _ in range(200):
        base = random.randrange(20000, 60000)
        try:
            for p in range(base - 2, base + 33):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


@pytest.mark.slow
async def test_dev_cluster_starts_four_brokers_that_replicate(tmp_path: Path) -> None:
    base = _free_base()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ns_port = s.getsockname()[1]
    with open(tmp_path / "dev.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "dev", "--cluster", "2m-2s-sync", "--store", str(tmp_path / "store"),
             "--namesrv-port", str(ns_port), "--broker-port", str(base), "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(line.startswith("export NAMESRV_ADDR") for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        assert sum("boot success" in line for line in lines) == 5, lines
        assert sum("role: SLAVE" in line for line in lines) == 2
        async with RemotingClient() as client:
            ns = f"127.0.0.1:{ns_port}"
            r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)
            info = json_body.loads(r.body)
            addrs = info["brokerAddrTable"]
            assert {str(k) for k in addrs["broker-a"]["brokerAddrs"]} == {"0", "1"}
            assert {str(k) for k in addrs["broker-b"]["brokerAddrs"]} == {"0", "1"}
            # the SYNC_MASTER answers SEND_OK once its slave has the message
            from rmq.client import Message, Producer

            async with Producer("dev-pg", namesrv=ns) as producer:
                result = await producer.send(Message("DevClusterTopic", b"hello"))
                for _ in range(50):
                    if result.status.value == "SEND_OK":
                        break
                    result = await producer.send(Message("DevClusterTopic", b"hello"))
                assert result.status.value == "SEND_OK"
        assert len(CLUSTER_BROKERS) == 4
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    for d in ("broker-a-master", "broker-a-slave", "broker-b-master", "broker-b-slave"):
        assert (tmp_path / "store" / d / "commitlog").is_dir()
        assert not (tmp_path / "store" / d / "abort").exists()
