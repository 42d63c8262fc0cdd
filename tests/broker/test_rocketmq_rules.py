"""broker.conf as RocketMQ's mqbroker reads it: what BrokerStartup and MessageStoreConfig
correct in silence is corrected here in one log line, what they refuse is refused, and
every key is acted on or named (issue 50)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rmq import rocketmq_keys
from rmq.broker.config import _SPECS, ACCEPTED_KEYS, BrokerConfig, BrokerRole, ConfigError

DLEDGER = {
    "enableDLegerCommitLog": "true",
    "dLegerGroup": "RaftNode00",
    "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913",
    "dLegerSelfId": "n1",
}


def _load(caplog: pytest.LogCaptureFixture, **props: str) -> tuple[BrokerConfig, list[logging.LogRecord]]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rmq.broker.config"):
        config = BrokerConfig.from_properties({"brokerName": "b", **props}, environ={}, source="b.conf")
    return config, [r for r in caplog.records if r.name == "rmq.broker.config"]


def _rocketmq(role: str, broker_id: int, dledger: bool) -> int | None:
    """The brokerId RocketMQ's BrokerStartup (4.9.8 and 5.x, controller mode off) starts a
    broker with; None where it exits ("Slave's brokerId must be > 0")."""
    if role in ("ASYNC_MASTER", "SYNC_MASTER"):
        broker_id = 0
    elif broker_id <= 0:
        return None
    return -1 if dledger else broker_id


@pytest.mark.parametrize("dledger", [False, True], ids=["plain", "dledger"])
@pytest.mark.parametrize("broker_id", [-1, 0, 1, 2])
@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"])
def test_every_role_and_id_as_rocketmq_starts_them(
    caplog: pytest.LogCaptureFixture, role: str, broker_id: int, dledger: bool
) -> None:
    props = {"brokerRole": role, "brokerId": str(broker_id), **(DLEDGER if dledger else {})}
    expected = _rocketmq(role, broker_id, dledger)
    if expected is None:
        with pytest.raises(ConfigError, match=r"brokerId: a SLAVE's brokerId must be > 0.*RocketMQ refuses it too"):
            _load(caplog, **props)
        return
    config, records = _load(caplog, **props)
    if expected == -1:
        # RocketMQ's -1 is "the election decides": until then rmq's member is a follower,
        # under the id RocketMQ's follower registers with (n1 → 2)
        assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, 2)
        [line] = [r for r in records if "enableDLegerCommitLog" in r.getMessage()]
        assert line.levelno == logging.INFO
        assert "brokerRole and brokerId ignored" in line.getMessage() and "(brokerId 2)" in line.getMessage()
        return
    assert (config.broker_role.value, config.broker_id) == (role, expected)
    corrected = [r for r in records if "brokerId=" in r.getMessage()]
    if broker_id != expected:  # a master's id other than 0: the file contradicts itself
        [line] = corrected
        assert line.levelno == logging.WARNING
        assert f"b.conf: brokerId={broker_id} with brokerRole={role}" in line.getMessage()
    else:
        assert corrected == []


def test_a_dledger_member_without_role_lines_starts_as_a_follower_quietly(caplog: pytest.LogCaptureFixture) -> None:
    config, records = _load(caplog, **DLEDGER)
    assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, 2)
    assert records == []


def test_controller_mode_settles_the_role_itself(caplog: pytest.LogCaptureFixture) -> None:
    # RocketMQ 5's conf/controller/quick-start/broker-n0.conf says brokerId=-1 and brokerRole=SLAVE
    controller = {"enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878", "brokerId": "-1"}
    config, _ = _load(caplog, brokerRole="SLAVE", **controller)
    assert (config.broker_role, config.broker_id) == (BrokerRole.SLAVE, -1)
    with pytest.raises(ConfigError, match="controllerAddr: required"):
        _load(caplog, enableControllerMode="true")
    with pytest.raises(ConfigError, match="enableControllerMode and enableDLegerCommitLog cannot both be true"):
        _load(caplog, **controller, **DLEDGER)
    config, records = _load(caplog, enableControllerMode="false", controllerAddr="127.0.0.1:9878")
    assert config.broker_id == 0 and not config.enable_controller_mode
    assert records == []  # keys rmq acts on: no "not acted on" line


def test_values_rocketmq_corrects_are_corrected_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    config, records = _load(caplog, haMasterAddress="10.0.0.1:10912")
    assert config.ha_master_address == ""
    assert [r.levelno for r in records] == [logging.WARNING] and "haMasterAddress ignored" in records[0].getMessage()
    config, records = _load(caplog, mappedFileSizeConsumeQueue="1001")
    assert config.mapped_file_size_consume_queue == 1020  # MessageStoreConfig rounds up to whole entries
    assert [r.levelno for r in records] == [logging.WARNING] and "1001 rounded up to 1020" in records[0].getMessage()
    for given, taken in (("5", 10), ("99", 95)):
        config, records = _load(caplog, diskMaxUsedSpaceRatio=given)
        assert config.disk_max_used_space_ratio == taken
        assert [r.levelno for r in records] == [logging.WARNING]
    config, records = _load(caplog, metricsExporterType="OTLP_GRPC")
    assert not config.prometheus_enabled
    assert [r.levelno for r in records] == [logging.WARNING] and "none are exported" in records[0].getMessage()


def test_rocketmq_keys_are_named_once_and_typos_get_the_closest_key(caplog: pytest.LogCaptureFixture) -> None:
    _, records = _load(caplog, sendMessageThreadPoolNums="16", brokerNmae="x", useEpollNativeSelector="true", zzqqy="1")
    messages = [(r.levelno, r.getMessage()) for r in records]
    assert messages == [
        (
            logging.INFO,
            "b.conf: accepted and ignored (RocketMQ keys rmq does not act on): "
            "sendMessageThreadPoolNums, useEpollNativeSelector",
        ),
        (logging.WARNING, "b.conf: unknown key 'brokerNmae' ignored; did you mean 'brokerName'?"),
        (logging.WARNING, "b.conf: unknown key 'zzqqy' ignored"),
    ]


def test_every_key_rocketmq_reads_is_acted_on_or_accepted(caplog: pytest.LogCaptureFixture) -> None:
    keys = sorted(rocketmq_keys.BROKER - set(_SPECS))
    assert keys and set(keys) <= ACCEPTED_KEYS
    log = logging.getLogger("test.keys")
    with caplog.at_level(logging.INFO, logger="test.keys"):
        rocketmq_keys.report_unused(keys, honoured=_SPECS, accepted=ACCEPTED_KEYS, source="all", logger=log)
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_the_file_is_named_in_each_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "broker-a.properties"
    path.write_text("brokerName=broker-a\nbrokerId=1\nbrokerRole=ASYNC_MASTER\n")
    with caplog.at_level(logging.WARNING, logger="rmq.broker.config"):
        assert BrokerConfig.load(path, environ={}).broker_id == 0
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [str(path)]
