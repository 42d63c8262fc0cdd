"""The name server configuration files RocketMQ 5.x ships (4.9.8 ships none) start our name
server as their mqnamesrv starts them, adjusted only for the port and the KV file (issue 50):
every key is acted on or named in one INFO line. The ones with enableControllerInNamesrv=true
start a controller member beside the name server (`rmq namesrv`, rmq/tools/namesrv.py): `-p`
shows both; tests/controller/test_namesrv_processes.py runs them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rmq import rocketmq_keys
from rmq.namesrv.config import _KEYS
from rmq.namesrv.server import NamesrvServer
from rmq.namesrv.startup import _parser, load_config, main
from rmq.tools import namesrv as mqnamesrv


def _controller(self_id: str, peers: str) -> dict[str, str]:
    return {"controllerDLegerGroup": "group1", "controllerDLegerPeers": peers, "controllerDLegerSelfId": self_id}


THREE = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"

# distribution/conf/<path> of RocketMQ 5.x: keys and values
STARTS = {
    "container/2container-2m-2s/nameserver.conf": {"supportActingMaster": "true"},
    # mqcontroller's files: RocketMQ's mqnamesrv, given one, starts a plain name server too
    **{f"controller/cluster-3n-independent/controller-n{k}.conf": _controller(f"n{k}", THREE) for k in range(3)},
    "controller/controller-standalone.conf": _controller("n0", "n0-127.0.0.1:9878"),
}
EMBEDDED = {
    "controller/quick-start/namesrv.conf": {
        "enableControllerInNamesrv": "true",
        **_controller("n0", "n0-127.0.0.1:9878"),
    },
    # these open with an XML comment (license lines between), which a properties file reads
    # as keys: "<!--", "Licensed", ... "-->"
    **{
        f"controller/cluster-3n-namesrv-plugin/namesrv-n{k}.conf": {
            "<!--": "",
            "Licensed": "to the Apache Software Foundation (ASF) under one or more",
            "-->": "",
            "listenPort": str(9876 + 10 * k),
            "enableControllerInNamesrv": "true",
            **_controller(f"n{k}", THREE),
        }
        for k in range(3)
    },
}


def _write(tmp_path: Path, props: dict[str, str]) -> Path:
    path = tmp_path / "namesrv.conf"
    adjusted = {**props, "listenPort": "0", "kvConfigPath": str(tmp_path / "kvConfig.json")}
    path.write_text("".join(f"{k}={v}\n" for k, v in adjusted.items()))
    return path


@pytest.mark.parametrize("name", sorted(STARTS))
async def test_a_shipped_file_starts_a_name_server_and_names_its_ignored_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    path = _write(tmp_path, STARTS[name])
    with caplog.at_level(logging.INFO, logger="rmq.namesrv.config"):
        config = load_config(_parser().parse_args(["-c", str(path), "--host", "127.0.0.1"]))
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    ignored = ", ".join(sorted(STARTS[name]))
    assert messages == [(logging.INFO, f"{path}: accepted and ignored (RocketMQ keys rmq does not act on): {ignored}")]
    async with NamesrvServer(config) as namesrv:
        assert namesrv.port


@pytest.mark.parametrize("name", sorted(EMBEDDED))
def test_a_controller_in_the_name_server_is_read_from_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, name: str
) -> None:
    path = _write(tmp_path, EMBEDDED[name])
    with caplog.at_level(logging.INFO):
        assert mqnamesrv.main(["-c", str(path), "-p"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "enableControllerInNamesrv=true" in printed and "kvConfigPath=" + str(tmp_path / "kvConfig.json") in printed
    for key in ("controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId"):
        assert f"{key}={EMBEDDED[name][key]}" in printed
    # nothing is named ignored that one of the two acts on; the XML comment's lines are unknown
    messages = [r.getMessage() for r in caplog.records]
    assert not any("accepted and ignored" in m for m in messages), messages
    unknown = sorted(k for k in EMBEDDED[name] if k in ("<!--", "Licensed", "-->"))
    assert sorted(m.split("'")[1] for m in messages if "unknown key" in m) == unknown


def test_the_name_server_alone_refuses_the_controller_it_cannot_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, EMBEDDED["controller/quick-start/namesrv.conf"])
    assert main(["-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert "mqnamesrv: bad configuration: enableControllerInNamesrv: " in err and "rmq namesrv" in err


def test_the_controllers_keys_it_does_not_act_on_are_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    props = {"enableControllerInNamesrv": "true", **_controller("n0", "n0-127.0.0.1:9878")}
    path = _write(tmp_path, {**props, "controllerType": "DLedger", "rocketmqHome": "/opt", "metricsExporterType": "0"})
    with caplog.at_level(logging.INFO):
        assert mqnamesrv.main(["-c", str(path), "-p"]) == 0
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: accepted and ignored (RocketMQ keys rmq does not act on): controllerType, rocketmqHome"
    ]


def test_every_key_rocketmqs_name_server_reads_is_acted_on_or_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = sorted((rocketmq_keys.NAMESRV | rocketmq_keys.CONTROLLER) - set(_KEYS) - {"enableControllerInNamesrv"})
    props = dict.fromkeys(keys, "1")
    path = _write(tmp_path, {**props, "enableControllerInNamesrv": "false"})
    with caplog.at_level(logging.INFO, logger="rmq.namesrv.config"):
        load_config(_parser().parse_args(["-c", str(path)]))
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_a_typo_names_the_closest_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, {"orderMesageEnable": "true"})
    with caplog.at_level(logging.INFO, logger="rmq.namesrv.config"):
        load_config(_parser().parse_args(["-c", str(path)]))
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: unknown key 'orderMesageEnable' ignored; did you mean 'orderMessageEnable'?"
    ]
