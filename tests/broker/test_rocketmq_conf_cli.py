"""`python -m rmq broker -c FILE -n ADDR` with files RocketMQ's mqbroker starts with, as real
processes against a name server in this process (issue 50): a DLedger member whose file
numbers it brokerId=1 (refused before, "a master's brokerId must be 0"), a master with
brokerId=1, and RocketMQ 5's controller-mode file, refused as not supported yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio

from rmq.namesrv.server import NamesrvServer

from ..ports import free_ports
from . import rocketmq_conf
from .cluster import loopback_namesrv

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60  # s for a process to start and register on a loaded machine


def _spawn(tmp_path: Path, conf: Path, namesrv: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "RMQ_RUN_DIR": str(tmp_path / "run"),
    }
    with open(tmp_path / f"{conf.stem}.out", "wb") as out, open(tmp_path / f"{conf.stem}.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "rmq", "broker", "-c", str(conf), "-n", namesrv],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
        )


async def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.terminate()
    with trio.move_on_after(30):
        while proc.poll() is None:
            await trio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    return proc.wait()


async def _registered_as(namesrv: NamesrvServer, proc: subprocess.Popen[bytes], cluster: str, name: str) -> dict:
    """The {brokerId: address} of group `name` once the process has registered."""
    with trio.fail_after(LIMIT):
        while True:
            assert proc.poll() is None, "the broker exited"
            info = namesrv.routes.cluster_info()
            if name in info["clusterAddrTable"].get(cluster, ()):
                return dict(info["brokerAddrTable"][name]["brokerAddrs"])
            await trio.sleep(0.05)


async def test_a_dledger_member_numbered_brokerid_1_starts_as_a_follower(tmp_path: Path) -> None:
    ports = [free_ports(5, below=2) for _ in range(3)]
    props = {**rocketmq_conf.DLEDGER["broker-n0.conf"], "brokerId": "1"}
    adjusted = rocketmq_conf.adjusted(props, tmp_path / "node00", ports[0], [p + 2 for p in ports])
    conf = rocketmq_conf.write(tmp_path / "broker-n0.conf", adjusted)
    async with loopback_namesrv() as namesrv:
        proc = _spawn(tmp_path, conf, namesrv.address)
        try:
            # its peers are not running: it follows, under the id RocketMQ's follower n0 takes
            ids = await _registered_as(namesrv, proc, "RaftCluster", "RaftNode00")
        finally:
            code = await _stop(proc)
    assert ids == {1: f"127.0.0.1:{ports[0]}"}
    assert code == 0
    err = (tmp_path / "broker-n0.err").read_text()
    assert "bad configuration" not in err
    assert f"{conf}: brokerId ignored with enableDLegerCommitLog=true" in err
    assert f"{conf}: accepted and ignored (RocketMQ keys rmq does not act on): sendMessageThreadPoolNums" in err


async def test_a_master_with_brokerid_1_registers_as_0(tmp_path: Path) -> None:
    port = free_ports(3, below=2)
    props = {**rocketmq_conf.DEPLOYMENTS["2m-2s-async"]["broker-a.properties"], "brokerId": "1"}
    conf = rocketmq_conf.write(tmp_path / "broker-a.properties", rocketmq_conf.adjusted(props, tmp_path / "a", port))
    async with loopback_namesrv() as namesrv:
        proc = _spawn(tmp_path, conf, namesrv.address)
        try:
            ids = await _registered_as(namesrv, proc, "DefaultCluster", "broker-a")
        finally:
            code = await _stop(proc)
    assert (ids, code) == ({0: f"127.0.0.1:{port}"}, 0)
    err = (tmp_path / "broker-a.err").read_text()
    assert f"WARNING rmq.broker.config - {conf}: brokerId=1 with brokerRole=ASYNC_MASTER" in err


def test_the_controller_mode_file_prints_its_settings(tmp_path: Path) -> None:
    """RocketMQ 5's conf/controller/quick-start file loads: `-p` shows controller mode on and
    the role the broker starts with (a slave with no brokerId until its controller names one;
    tests/broker/controller_mode runs such brokers)."""
    props = rocketmq_conf.adjusted(rocketmq_conf.CONTROLLER["broker-n0.conf"], tmp_path / "n0", free_ports(3, below=2))
    conf = rocketmq_conf.write(tmp_path / "broker-n0.conf", props)
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "broker", "-c", str(conf), "-p"],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    assert done.returncode == 0, done.stderr
    shown = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert shown["enableControllerMode"] == "true" and shown["controllerAddr"]
    assert (shown["brokerRole"], shown["brokerId"]) == ("SLAVE", "-1")
    assert not (tmp_path / "n0").exists()  # nothing started
