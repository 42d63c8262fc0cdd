"""Every example file under conf/ loads with BrokerConfig.load, and each deployment folder
(conf/2m-2s-sync/, conf/2m-2s-async/, ...) is a cluster that can run on one machine: one
master per group, slaves with ids > 0, no two brokers on the same port or store."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path

import pytest

from rmq.broker.config import BrokerConfig, BrokerRole

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
# (conf/controller/ holds controllers' files: tests/controller/test_config.py loads them)
FILES = sorted(p for p in CONF.rglob("*") if p.suffix in (".conf", ".properties") and p.parent.name != "controller")
# master/slave deployments (conf/dledger/ holds .conf files: its own test is in test_ha_cluster.py)
DEPLOYMENTS = sorted({p.parent for p in FILES if p.parent != CONF and p.suffix == ".properties"})


def _load(path: Path, caplog: pytest.LogCaptureFixture) -> BrokerConfig:
    with caplog.at_level(logging.WARNING, logger="rmq.broker.config"):
        config = BrokerConfig.load(path, environ={})
    unknown = [r.getMessage() for r in caplog.records if r.name == "rmq.broker.config"]
    assert not unknown, f"{path.relative_to(ROOT)}: {unknown}"
    return config


def test_conf_ships_a_single_broker_and_both_2m_2s_deployments() -> None:
    names = {p.relative_to(CONF).as_posix() for p in FILES}
    assert "broker.conf" in names
    for kind in ("2m-2s-sync", "2m-2s-async"):
        for name in ("broker-a", "broker-a-s", "broker-b", "broker-b-s"):
            assert f"{kind}/{name}.properties" in names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(CONF).as_posix())
def test_every_conf_file_loads(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = _load(path, caplog)
    # the role and the id agree and the file name says which; a DLedger member starts as a
    # follower, whatever its name, and a controller-mode broker as a slave with no id yet
    if config.enable_controller_mode:
        assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, -1)
    else:
        assert (config.broker_id > 0) is (config.broker_role is BrokerRole.SLAVE)
    elected = config.enable_d_leger_commit_log or config.enable_controller_mode
    assert (path.stem.endswith("-s") or elected) is config.is_slave, path.name
    assert config.namesrv_addr == ("127.0.0.1:9876",)
    assert config.broker_ip1 == "127.0.0.1"
    # relative to where the broker starts, under ./store/
    assert config.store_path_root_dir.parts[:1] == ("store",), config.store_path_root_dir
    # the start command in the first comment names this very file
    started = re.search(r"mqbroker -c (\S+)", path.read_text())
    assert started is not None and started.group(1) == path.relative_to(ROOT).as_posix()


def test_the_single_broker_conf_is_a_master(caplog: pytest.LogCaptureFixture) -> None:
    config = _load(CONF / "broker.conf", caplog)
    assert (config.broker_id, config.broker_role, config.listen_port) == (0, BrokerRole.ASYNC_MASTER, 10911)


@pytest.mark.parametrize("folder", DEPLOYMENTS, ids=lambda p: p.name)
def test_each_deployment_is_consistent(folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    configs = {p.name: _load(p, caplog) for p in sorted(folder.glob("*.properties"))}
    assert len(configs) >= 2
    assert len({c.broker_cluster_name for c in configs.values()}) == 1
    groups: dict[str, dict[int, BrokerConfig]] = defaultdict(dict)
    for name, c in configs.items():
        assert c.broker_id not in groups[c.broker_name], f"{name}: brokerId {c.broker_id} twice in {c.broker_name}"
        groups[c.broker_name][c.broker_id] = c
    master_roles = set()
    for name, members in groups.items():
        assert 0 in members, f"group {name} has no master (brokerId=0)"
        assert len(members) >= 2, f"group {name} has no slave"
        master_roles.add(members[0].broker_role)
    # the folder's name says how masters replicate: 2m-2s-sync → SYNC_MASTER
    expected = BrokerRole.SYNC_MASTER if folder.name.endswith("-sync") else BrokerRole.ASYNC_MASTER
    assert master_roles == {expected}
    # all of them can run side by side on 127.0.0.1
    ports: dict[int, str] = {}
    for name, c in configs.items():
        for port in (c.listen_port, c.ha_port, c.listen_port - 2):
            assert port not in ports, f"{name} and {ports[port]} both use port {port}"
            ports[port] = name
    stores = [c.store_path_root_dir for c in configs.values()]
    assert len(set(stores)) == len(stores)


def test_the_settings_docs_ha_md_lists_are_broker_keys_with_their_defaults() -> None:
    defaults = BrokerConfig(broker_name="b", broker_ip1="127.0.0.1").to_properties()
    text = (ROOT / "docs" / "ha.md").read_text()
    section = text[text.index("## Settings") : text.index("\n## ", text.index("## Settings") + 1)]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)
    assert len(rows) >= 12
    for key, default in rows:
        assert key in defaults, f"docs/ha.md documents {key}, which BrokerConfig does not have"
        cell = default.strip()
        number = re.fullmatch(r"(\d+)( ms| B| MiB)?", cell)
        if number:
            value = int(number.group(1)) * (1024 * 1024 if number.group(2) == " MiB" else 1)
            assert defaults[key] == str(value), f"{key}: docs say {cell}, the default is {defaults[key]}"
        elif cell.startswith("`"):
            assert defaults[key] == cell.strip("`"), f"{key}: docs say {cell}, the default is {defaults[key]}"
