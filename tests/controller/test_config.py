"""ControllerConfig from RocketMQ's keys, `rmq controller -p`, and the example files in
conf/controller/ (a group of three that runs on one machine, as controllers of their own or
inside three name servers)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.controller.config import ConfigError, ControllerConfig
from rmq.controller.startup import load_config

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "conf" / "controller").glob("controller-*.conf"))
IN_NAMESRV = sorted((ROOT / "conf" / "controller").glob("namesrv-*.conf"))


def test_keys_and_defaults() -> None:
    config, unknown = ControllerConfig().with_properties(
        {
            "controllerDLegerGroup": "g",
            "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9868",
            "controllerDLegerSelfId": "n1",
            "enableElectUncleanMaster": "true",
            "scanInactiveMasterInterval": "1000",
            "controllerType": "DLedgerController",
            "someTypo": "1",
        }
    )
    assert unknown == ["controllerType", "someTypo"]
    config.validate()
    assert config.address == "127.0.0.1:9868" and config.enable_elect_unclean_master
    assert config.notify_broker_role_changed and config.scan_not_active_broker_interval_ms == 5000
    props = config.to_properties()
    assert props["controllerDLegerPeers"] == "n0-127.0.0.1:9878;n1-127.0.0.1:9868"
    assert ControllerConfig().with_properties(props)[0] == config
    with pytest.raises(ConfigError, match="enableElectUncleanMaster"):
        ControllerConfig().with_properties({"enableElectUncleanMaster": "yes"})
    with pytest.raises(ConfigError, match="controllerDLegerPeers"):
        ControllerConfig().with_properties({"controllerDLegerPeers": "n0:127.0.0.1"})
    with pytest.raises(ConfigError, match="controllerDLegerSelfId"):
        ControllerConfig(peers={"n0": "127.0.0.1:1"}, self_id="n9").validate()
    with pytest.raises(ConfigError, match="controllerDLegerPeers"):
        ControllerConfig().validate()


def test_example_files_make_a_group(caplog: pytest.LogCaptureFixture) -> None:
    assert [p.name for p in FILES] == ["controller-n0.conf", "controller-n1.conf", "controller-n2.conf"]
    with caplog.at_level(logging.INFO, logger="rmq.controller.config"):
        configs = [load_config(str(p)) for p in FILES]
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    for c in configs:
        c.validate()
    assert len({c.self_id for c in configs}) == 3 and len({c.store_path for c in configs}) == 3
    assert all(c.peers == configs[0].peers for c in configs)


def test_example_name_servers_make_a_group(caplog: pytest.LogCaptureFixture) -> None:
    from rmq.namesrv.config import KEYS
    from rmq.namesrv.startup import _parser
    from rmq.namesrv.startup import load_config as load_namesrv

    assert [p.name for p in IN_NAMESRV] == ["namesrv-n0.conf", "namesrv-n1.conf", "namesrv-n2.conf"]
    with caplog.at_level(logging.INFO):
        namesrvs = [load_namesrv(_parser().parse_args(["-c", str(p)])) for p in IN_NAMESRV]
        configs = [load_config(str(p), namesrv_keys=KEYS) for p in IN_NAMESRV]
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert all(n.enable_controller_in_namesrv for n in namesrvs)
    assert len({n.listen_port for n in namesrvs}) == 3 and len({n.kv_config_path for n in namesrvs}) == 3
    for c in configs:
        c.validate()
    assert len({c.self_id for c in configs}) == 3 and len({c.store_path for c in configs}) == 3
    assert all(c.peers == configs[0].peers for c in configs)
    ports = {int(a.rpartition(":")[2]) for a in configs[0].peers.values()}
    assert not ports & {n.listen_port for n in namesrvs}


def test_print_config() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "controller", "-c", str(FILES[0]), "-p"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "controllerDLegerSelfId=n0\n" in done.stdout and "enableElectUncleanMaster=false\n" in done.stdout
