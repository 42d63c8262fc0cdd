"""`mqbroker -p` / `-m` and `mqnamesrv -p` as RocketMQ's: the settings as `key=value` lines,
exit 0, nothing started (issue 50)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmq.broker import startup as broker_startup
from rmq.broker.config import BrokerConfig
from rmq.namesrv import startup as namesrv_startup
from rmq.namesrv.config import NamesrvConfig

ROOT = Path(__file__).resolve().parents[2]

# RocketMQ 4.9.8's @ImportantField settings of BrokerConfig and MessageStoreConfig, in order
# (common/.../BrokerConfig.java, store/.../MessageStoreConfig.java), and 5.x's listenPort.
ROCKETMQ_IMPORTANT = """
namesrvAddr listenPort brokerIP1 brokerIP2 brokerName brokerClusterName brokerId brokerPermission
defaultTopicQueueNums autoCreateTopicEnable clusterTopicEnable autoCreateSubscriptionGroup
messageStorePlugIn msgTraceTopicName traceTopicEnable rejectTransactionMessage
fetchNamesrvAddrByAddressServer sendThreadPoolQueueCapacity putThreadPoolQueueCapacity
transactionTimeOut transactionCheckMax transactionCheckInterval aclEnable storeReplyMessageEnable
storePathRootDir storePathCommitLog storePathDLedgerCommitLog readOnlyCommitLogStorePaths
flushIntervalCommitLog commitIntervalCommitLog flushCommitLogTimed flushIntervalConsumeQueue
deleteWhen diskMaxUsedSpaceRatio fileReservedTime putMsgIndexHightWater
maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInMemory maxTransferBytesOnMessageInDisk
maxTransferCountOnMessageInDisk accessMessageInMemoryMaxRatio messageIndexEnable maxHashSlotNum
maxIndexNum messageIndexSafe haListenPort haSendHeartbeatInterval haMasterAddress
haSlaveFallbehindMax brokerRole flushDiskType syncFlushTimeout slaveTimeout cleanFileForciblyEnable
warmMapedFileEnable offsetCheckInSlave transientStorePoolEnable transientStorePoolSize
fastFailIfNoBufferInStorePool
""".split()


def _lines(out: str) -> list[tuple[str, str]]:
    pairs = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        assert sep and key, f"not a key=value line: {line!r}"
        pairs.append((key, value))
    return pairs


def _conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(f"storePathRootDir={tmp_path / 'store'}\nlistenPort=30911\n{text}")
    return path


def test_broker_p_prints_every_setting_and_starts_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = _conf(tmp_path, "brokerName=broker-a\nbrokerId=1\nbrokerRole=ASYNC_MASTER\nsendMessageThreadPoolNums=16\n")
    assert broker_startup.main(["-c", str(conf), "-p"]) == 0
    pairs = _lines(capsys.readouterr().out)
    expected = BrokerConfig.load(conf, environ={}).to_properties()
    assert dict(pairs) == expected and len(pairs) == len(expected)
    shown = dict(pairs)
    # the values it would start with, corrected as RocketMQ's BrokerStartup corrects them
    assert (shown["brokerId"], shown["brokerRole"], shown["haListenPort"]) == ("0", "ASYNC_MASTER", "30912")
    assert not (tmp_path / "store").exists()


def test_broker_m_prints_rocketmqs_important_settings_in_its_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf(tmp_path, "brokerName=broker-a\n")
    assert broker_startup.main(["-c", str(conf), "-m"]) == 0
    keys = [key for key, _ in _lines(capsys.readouterr().out)]
    assert keys == list(broker_startup.IMPORTANT_KEYS)
    assert keys == [k for k in ROCKETMQ_IMPORTANT if k in BrokerConfig.load(conf, environ={}).to_properties()]
    assert not (tmp_path / "store").exists()


def test_broker_p_shows_a_dledger_member_as_the_follower_it_starts_as(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf(
        tmp_path,
        "brokerName=RaftNode00\nbrokerId=0\nenableDLegerCommitLog=true\n"
        "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913\ndLegerSelfId=n2\n",
    )
    assert broker_startup.main(["-c", str(conf), "-n", "127.0.0.1:9876", "-p"]) == 0
    shown = dict(_lines(capsys.readouterr().out))
    assert (shown["brokerRole"], shown["brokerId"], shown["namesrvAddr"]) == ("SLAVE", "3", "127.0.0.1:9876")


def test_namesrv_p_prints_every_setting_and_p_with_a_number_is_still_the_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=19876\norderMessageEnable=true\nrocketmqHome=/opt/rocketmq\n")
    for argv in (["-c", str(conf), "-p"], ["-p", "-c", str(conf)], ["-c", str(conf), "--printConfigItem"]):
        assert namesrv_startup.main([*argv, "-n", "127.0.0.1:9876"]) == 0
        pairs = _lines(capsys.readouterr().out)
        assert pairs == list(NamesrvConfig(listen_port=19876, order_message_enable=True).to_properties().items())
    args = namesrv_startup._parser().parse_args(["-c", str(conf), "-p", "1234"])
    assert namesrv_startup.load_config(args).listen_port == 1234  # rmq's older spelling of --port
    assert namesrv_startup.main(["-p", "70000"]) == 2
    assert "listenPort" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "key"), [("broker", "brokerName"), ("namesrv", "listenPort")])
def test_p_as_a_process_exits_0_with_only_key_value_lines(tmp_path: Path, command: str, key: str) -> None:
    conf = _conf(tmp_path, "brokerName=broker-p\n") if command == "broker" else None
    argv = [sys.executable, "-m", "rmq", command, *(["-c", str(conf)] if conf else []), "-p"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HOME": str(tmp_path)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert key in dict(_lines(done.stdout))
    assert not (tmp_path / "store").exists() and not (tmp_path / "namesrv").exists()
