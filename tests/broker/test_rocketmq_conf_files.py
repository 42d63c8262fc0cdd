"""Each broker configuration file RocketMQ 4.9.8 and 5.x ship starts our broker as their
mqbroker starts it, adjusted only for where it listens and stores (rocketmq_conf.py), and so
do the variants users write: DLedger files that keep brokerId and brokerRole lines, masters
with brokerId=1. Each deployment runs against a real name server in this process, and the
test checks the role and the id every broker registers with (issue 50)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.config import _SPECS, BrokerConfig, BrokerRole
from rmq.broker.controller import BrokerController
from rmq.namesrv.server import NamesrvServer

from ..ports import free_ports
from . import rocketmq_conf
from .cluster import loopback_namesrv

LIMIT = 60  # s: a deployment registers (DLedger: elects a leader) well within this on a loaded machine


def _load(path: Path, namesrv: str, caplog: pytest.LogCaptureFixture) -> BrokerConfig:
    """BrokerConfig as `mqbroker -c path -n namesrv` loads it; checks that every key of the
    file is acted on or named in the one INFO line, and that nothing is warned about."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rmq.broker.config"):
        config = BrokerConfig.load(path, {"namesrvAddr": namesrv}, environ={})
    records = [r for r in caplog.records if r.name == "rmq.broker.config"]
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []
    ignored = sorted({line.split("=", 1)[0] for line in path.read_text().splitlines()} - set(_SPECS))
    named = [r.getMessage() for r in records if "accepted and ignored" in r.getMessage()]
    if ignored:
        assert named == [f"{path}: accepted and ignored (RocketMQ keys rmq does not act on): {', '.join(ignored)}"]
    else:
        assert named == []
    return config


async def _registered(
    namesrv: NamesrvServer, cluster: str, want: Callable[[], dict[str, dict[int, str]] | None]
) -> None:
    """Wait until the name server holds exactly want() ({brokerName: {brokerId: address}};
    None: not known yet)."""
    seen: Any = None
    with trio.move_on_after(LIMIT):
        while True:
            info = namesrv.routes.cluster_info()
            names = info["clusterAddrTable"].get(cluster, set())
            seen = {name: info["brokerAddrTable"][name]["brokerAddrs"] for name in names}
            expected = want()
            if seen == expected:
                return
            await trio.sleep(0.05)
    pytest.fail(f"registered {seen}, want {want()}")


def _master_id_1(props: dict[str, str]) -> dict[str, str]:
    """A master file with brokerId=1, as users write when they copy a slave's file."""
    return {**props, "brokerId": "1"} if props["brokerRole"] != "SLAVE" else props


@pytest.mark.parametrize(
    ("folder", "variant"),
    [(name, None) for name in rocketmq_conf.DEPLOYMENTS] + [("2m-2s-async", "masters with brokerId=1")],
)
async def test_a_shipped_deployment_registers_as_rocketmq_would(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, folder: str, variant: str | None
) -> None:
    files = rocketmq_conf.DEPLOYMENTS[folder]
    async with loopback_namesrv() as namesrv, trio.open_nursery() as nursery:
        brokers: dict[str, BrokerController] = {}
        # masters first: a slave finds its master through the name server
        for name, props in sorted(files.items(), key=lambda item: item[1]["brokerRole"] == "SLAVE"):
            given = _master_id_1(props) if variant else props
            store = tmp_path / name.replace(".", "-")
            adjusted = rocketmq_conf.adjusted(given, store, free_ports(3, below=2))
            path = rocketmq_conf.write(tmp_path / "conf" / name, adjusted)
            if variant:
                with caplog.at_level(logging.WARNING, logger="rmq.broker.config"):
                    config = BrokerConfig.load(path, {"namesrvAddr": namesrv.address}, environ={})
                if given is not props:
                    [warning] = [r.getMessage() for r in caplog.records if "brokerId=1" in r.getMessage()]
                    assert "a master is brokerId 0; taken as 0" in warning
                caplog.clear()
            else:
                config = _load(path, namesrv.address, caplog)
            assert config.broker_role.value == props["brokerRole"]
            brokers[name] = await nursery.start(BrokerController(config).serve)
        want: dict[str, dict[int, str]] = {}
        for name, broker in brokers.items():
            want.setdefault(files[name]["brokerName"], {})[int(files[name]["brokerId"])] = broker.address
        await _registered(namesrv, "DefaultCluster", lambda: want)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("variant", [None, "2m-2s lines left in", "brokerId lines only"])
async def test_the_shipped_dledger_group_registers_as_rocketmq_would(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, variant: str | None
) -> None:
    """The leader registers as brokerId 0, each follower n<k> as k + 1, whatever the files say
    of roles and ids (RocketMQ's BrokerStartup sets -1 and lets the election decide)."""
    ports = [free_ports(5, below=2) for _ in rocketmq_conf.DLEDGER]
    async with loopback_namesrv() as namesrv, trio.open_nursery() as nursery:
        brokers = []
        for k, (name, props) in enumerate(sorted(rocketmq_conf.DLEDGER.items())):
            ignored = None
            if variant == "2m-2s lines left in":  # a master's and its slaves' files, extended
                props = {**props, "brokerId": str(k), "brokerRole": "SLAVE" if k else "ASYNC_MASTER"}
                ignored = "brokerRole and brokerId"
            elif variant:  # members numbered 1, 2, 3: n0 is then a master (the default role) with id 1
                props = {**props, "brokerId": str(k + 1)}
                ignored = "brokerId"
            store = tmp_path / f"node0{k}"
            adjusted = rocketmq_conf.adjusted(props, store, ports[k], [p + 2 for p in ports])
            path = rocketmq_conf.write(tmp_path / "conf" / name, adjusted)
            config = _dledger_load(path, namesrv.address, caplog, k, ignored)
            brokers.append(BrokerController(config))
        for broker in brokers:
            nursery.start_soon(broker.serve)

        def want() -> dict[str, dict[int, str]] | None:
            leaders = [b for b in brokers if b.config.broker_id == 0]
            if len(leaders) != 1:
                return None  # not elected yet
            return {"RaftNode00": {0 if b in leaders else k + 1: b.address for k, b in enumerate(brokers)}}

        await _registered(namesrv, "RaftCluster", want)
        roles = sorted(b.config.broker_role.value for b in brokers)
        assert roles == ["SLAVE", "SLAVE", "SYNC_MASTER"]
        nursery.cancel_scope.cancel()


def _dledger_load(
    path: Path, namesrv: str, caplog: pytest.LogCaptureFixture, k: int, ignored: str | None
) -> BrokerConfig:
    """The member's config, and the INFO line that names the role lines it ignores."""
    if ignored is None:
        config = _load(path, namesrv, caplog)
    else:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="rmq.broker.config"):
            config = BrokerConfig.load(path, {"namesrvAddr": namesrv}, environ={})
        messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "rmq.broker.config"]
        assert [m for level, m in messages if level >= logging.WARNING] == []
        line = f"{path}: {ignored} ignored with enableDLegerCommitLog=true"
        assert any(m.startswith(line) and f"n{k} starts as a follower (brokerId {k + 1})" in m for _, m in messages)
    # a follower until elected, as RocketMQ's member registers once it knows its role
    assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, k + 1)
    return config


@pytest.mark.parametrize("name", sorted(rocketmq_conf.CONTROLLER))
def test_the_shipped_controller_mode_files_start_as_slaves_of_no_one(tmp_path: Path, name: str) -> None:
    """RocketMQ 5's conf/controller/quick-start files: brokerRole and brokerId are ignored,
    the broker is a slave until its controller names its role (tests/broker/controller_mode)."""
    props = rocketmq_conf.adjusted(rocketmq_conf.CONTROLLER[name], tmp_path / "store", free_ports(3, below=2))
    path = rocketmq_conf.write(tmp_path / name, props)
    config = BrokerConfig.load(path, environ={})
    assert config.enable_controller_mode and config.controller_addrs
    assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, -1)
