"""The example master/slave configurations and `rmq dev --cluster`."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import trio

from rmq.broker.config import BrokerConfig, BrokerRole
from rmq.client import Message, Producer
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient
from rmq.tools.dev import CLUSTER_BROKERS, cluster_configs, dledger_configs

from ..ports import free_ports

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


@pytest.mark.slow
async def test_dev_cluster_starts_four_brokers_that_replicate(tmp_path: Path) -> None:
    base = free_ports(33, below=2)
    ns_port = free_ports()
    with open(tmp_path / "dev.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "dev", "--cluster", "2m-2s-sync", "--store", str(tmp_path / "store"),
             "--namesrv-port", str(ns_port), "--broker-port", str(base), "--no-proxy", "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while not any(line.startswith("export NAMESRV_ADDR") for line in seen):
            try:  # bounded even if the process hangs without a word
                seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                pytest.fail(f"rmq dev --cluster did not start in 30 s: {seen}")
        assert sum("boot success" in line for line in seen) == 5, seen
        assert sum("role: SLAVE" in line for line in seen) == 2
        async with RemotingClient() as client:
            ns = f"127.0.0.1:{ns_port}"
            want = {"broker-a/0": 0, "broker-a/1": 10, "broker-b/0": 20, "broker-b/1": 30}
            with trio.fail_after(30):  # the name server shows both groups, each a master and a slave
                while True:
                    r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)
                    groups = json_body.loads(r.body)["brokerAddrTable"]
                    ports = {
                        f"{name}/{i}": int(addr.rsplit(":", 1)[1]) - base
                        for name, group in groups.items()
                        for i, addr in group["brokerAddrs"].items()
                    }
                    if ports == want:
                        break
                    await trio.sleep(0.1)
        # the SYNC_MASTER answers SEND_OK once its slave has the message
        async with Producer("dev-pg", namesrv=ns) as producer:
            with trio.fail_after(30):
                while (await producer.send(Message("DevClusterTopic", b"hello"))).status.value != "SEND_OK":
                    await trio.sleep(0.1)
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


def test_shipped_dledger_conf_files_match_the_dev_group(tmp_path: Path) -> None:
    expected = dledger_configs("127.0.0.1:9876", tmp_path)
    for k, want in enumerate(expected):
        config = BrokerConfig.load(ROOT / "conf" / "dledger" / f"broker-n{k}.conf", environ={})
        for attr in ("broker_name", "listen_port", "enable_d_leger_commit_log", "d_leger_group", "d_leger_self_id"):
            assert getattr(config, attr) == getattr(want, attr), (k, attr)
        assert config.dledger_peers == want.dledger_peers
        assert config.namesrv_addr == ("127.0.0.1:9876",)


@pytest.mark.slow
async def test_dev_dledger_group_elects_a_master_that_takes_sends(tmp_path: Path) -> None:
    base = free_ports(33, below=2, extra=range(30000, 30003))  # members' ports and DLedger ports (+30000)
    ns_port = free_ports()
    with open(tmp_path / "dev.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "dev", "--cluster", "dledger", "--store", str(tmp_path / "store"),
             "--namesrv-port", str(ns_port), "--broker-port", str(base), "--no-proxy", "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while not any(line.startswith("export NAMESRV_ADDR") for line in seen):
            try:
                seen.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                pytest.fail(f"rmq dev --cluster dledger did not start in 30 s: {seen}")
        assert sum("boot success" in line for line in seen) == 4, seen
        ns = f"127.0.0.1:{ns_port}"
        async with RemotingClient() as client:
            with trio.fail_after(30):  # a leader registers as brokerId 0, the others as 1 and 2 (+1 of nK)
                while True:
                    r = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)
                    addrs = json_body.loads(r.body)["brokerAddrTable"].get("RaftNode00", {}).get("brokerAddrs", {})
                    if len(addrs) == 3 and "0" in {str(k) for k in addrs}:
                        break
                    await trio.sleep(0.1)
        async with Producer("dev-pg", namesrv=ns) as producer:
            with trio.fail_after(30):
                while (await producer.send(Message("DevRaftTopic", b"hello"))).status.value != "SEND_OK":
                    await trio.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    for k in range(3):
        assert (tmp_path / "store" / f"node0{k}" / f"dledger-n{k}").is_dir()
