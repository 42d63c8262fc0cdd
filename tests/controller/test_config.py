"""ControllerConfig from RocketMQ's keys, `rmq controller -p`, and the example files in
conf/controller/ (a group of three that runs on one machine)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.controller.config import ConfigError, ControllerConfig
from rmq.controller.startup import load_config

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "conf" / "controller").glob("*.conf"))


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


def test_print_config() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rmq", "controller", "-c", str(FILES[0]), "-p"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "controllerDLegerSelfId=n0\n" in done.stdout and "enableElectUncleanMaster=false\n" in done.stdout
