"""BrokerConfig: broker.conf parsing, validation at the edge, -p round trip."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rmq.broker.config import BrokerConfig, BrokerRole, ConfigError
from rmq.broker.controller import BrokerController
from rmq.protocol.javaprops import parse as parse_properties
from rmq.store.config import FlushDiskType, StoreConfig

CONF = """\
# a RocketMQ 4.x broker.conf
brokerClusterName = DefaultCluster
brokerName=broker-a
brokerId=0
deleteWhen=04
fileReservedTime=48
brokerRole=SYNC_MASTER
flushDiskType=SYNC_FLUSH
namesrvAddr=10.0.0.1:9876;10.0.0.2:9876
listenPort: 30911
brokerIP1 10.0.0.5
storePathRootDir=/tmp/rmq-store
mappedFileSizeCommitLog=1048576
autoCreateTopicEnable=false
sendMessageThreadPoolNums=128
messageDelayLevel=1s 5s \\
   10s 2h
"""


def test_reads_rocketmq_keys(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    c = BrokerConfig.load(path, environ={})
    assert c.broker_name == "broker-a"
    assert c.broker_role is BrokerRole.SYNC_MASTER
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert c.namesrv_addr == ("10.0.0.1:9876", "10.0.0.2:9876")
    assert c.listen_port == 30911
    assert c.broker_ip1 == "10.0.0.5"
    assert c.advertised_ip2 == "10.0.0.5"
    assert c.store_path_root_dir == Path("/tmp/rmq-store")
    assert c.commit_log_dir == Path("/tmp/rmq-store/commitlog")
    assert c.config_dir == Path("/tmp/rmq-store/config")
    assert c.file_reserved_time == 48
    assert c.auto_create_topic_enable is False
    assert c.delay_levels_ms == (1000, 5000, 10000, 7_200_000)


def test_store_keys_reach_the_store() -> None:
    c = BrokerConfig.from_properties(
        {
            "brokerName": "b",
            "messageIndexEnable": "false",
            "maxHashSlotNum": "1000",
            "maxIndexNum": "4000",
            "flushIntervalCommitLog": "200",
            "flushIntervalConsumeQueue": "300",
            "flushConsumeQueueLeastPages": "0",
            "flushConsumeQueueThoroughInterval": "5000",
            "flushIntervalIndex": "2000",
            "cleanResourceInterval": "7000",
            "checkCRCOnRecover": "false",
        },
        environ={},
    )
    s = BrokerController(c).store_config()
    assert (s.message_index_enable, s.max_hash_slot_num, s.max_index_num) == (False, 1000, 4000)
    assert (s.flush_interval_commitlog, s.flush_interval_consume_queue, s.flush_interval_index) == (200, 300, 2000)
    assert (s.flush_consume_queue_least_pages, s.flush_consume_queue_thorough_interval) == (0, 5000)
    assert (s.clean_resource_interval, s.check_crc_on_recover) == (7000, False)
    assert BrokerController(BrokerConfig(broker_name="b")).store_config() == StoreConfig(
        store_path_root_dir=s.store_path_root_dir, store_path_commitlog=s.store_path_commitlog
    )  # the broker's defaults are the store's


def test_unknown_key_is_warned_and_accepted_keys_are_not(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rmq.broker.config"):
        BrokerConfig.from_properties(
            {"brokerName": "b", "brokerNmae": "typo", "pullMessageThreadPoolNums": "16"}, environ={}
        )
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1
    assert "brokerNmae" in warned[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "ten"),
        ("listenPort", "70000"),
        ("autoCreateTopicEnable", "yes"),
        ("brokerRole", "LEADER"),
        ("flushDiskType", "SOMETIMES"),
        ("messageDelayLevel", "1s 5x"),
        ("namesrvAddr", "localhost"),
        ("brokerId", "x"),
        ("deleteWhen", "4am"),
        ("deleteWhen", "04;25"),
        ("maxHashSlotNum", "0"),
        ("flushIntervalIndex", "-1"),
        ("flushConsumeQueueLeastPages", "-1"),
        ("messageIndexEnable", "no"),
        ("serverMaxConnections", "-1"),
        ("serverMaxConnectionsPerAddress", "-1"),
    ],
)
def test_bad_value_is_refused_with_the_key_named(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({"brokerName": "b", key: value}, environ={})


def test_slave_needs_positive_broker_id() -> None:
    with pytest.raises(ConfigError, match="brokerId"):
        BrokerConfig.from_properties({"brokerName": "b", "brokerRole": "SLAVE"}, environ={})
    c = BrokerConfig.from_properties({"brokerName": "b", "brokerRole": "slave", "brokerId": "1"}, environ={})
    assert c.is_slave


def test_contradictory_roles_and_ids_are_refused_with_the_key_named() -> None:
    # (what RocketMQ corrects instead of refusing: test_rocketmq_rules.py)
    with pytest.raises(ConfigError, match="brokerId.*SLAVE's brokerId must be > 0"):
        BrokerConfig.from_properties({"brokerName": "b", "brokerRole": "SLAVE"}, environ={})
    with pytest.raises(ConfigError, match="haMasterAddress"):
        BrokerConfig.from_properties(
            {"brokerName": "b", "brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": "nope"}, environ={}
        )
    with pytest.raises(ConfigError, match="haListenPort"):
        BrokerConfig.from_properties({"brokerName": "b", "listenPort": "10911", "haListenPort": "10911"}, environ={})
    with pytest.raises(ConfigError, match="haTransferBatchSize"):
        BrokerConfig.from_properties({"brokerName": "b", "haTransferBatchSize": "0"}, environ={})


def test_ha_keys_are_read() -> None:
    c = BrokerConfig.from_properties(
        {
            "brokerName": "b",
            "brokerRole": "SLAVE",
            "brokerId": "2",
            "listenPort": "10921",
            "haMasterAddress": "10.0.0.1:10912",
            "haSendHeartbeatInterval": "1000",
            "haHousekeepingInterval": "8000",
            "haTransferBatchSize": "65536",
            "haSlaveFallbehindMax": "1024",
            "accessMessageInMemoryMaxRatio": "30",
            "slaveReadEnable": "true",
        },
        environ={},
    )
    assert (c.broker_id, c.ha_port, c.ha_master_address) == (2, 10922, "10.0.0.1:10912")
    assert (c.ha_send_heartbeat_interval, c.ha_housekeeping_interval, c.ha_transfer_batch_size) == (1000, 8000, 65536)
    assert (c.ha_slave_fallbehind_max, c.access_message_in_memory_max_ratio, c.slave_read_enable) == (1024, 30, True)


def test_namesrv_addr_env_is_the_fallback() -> None:
    env = {"NAMESRV_ADDR": "1.2.3.4:9876"}
    assert BrokerConfig.from_properties({"brokerName": "b"}, environ=env).namesrv_addr == ("1.2.3.4:9876",)
    c = BrokerConfig.from_properties({"brokerName": "b", "namesrvAddr": "5.6.7.8:9876"}, environ=env)
    assert c.namesrv_addr == ("5.6.7.8:9876",)


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    c = BrokerConfig.load(path, {"namesrvAddr": "127.0.0.1:1"}, environ={})
    assert c.namesrv_addr == ("127.0.0.1:1",)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        BrokerConfig.load(tmp_path / "nope.conf", environ={})


def test_to_properties_round_trips() -> None:
    c = BrokerConfig.from_properties(parse_properties(CONF), environ={})
    again = BrokerConfig.from_properties(c.to_properties(), environ={})
    shown = {
        "store_path_commit_log": c.commit_log_dir,
        "store_path_epoch_file": c.epoch_file,
        "store_path_broker_identity": c.broker_identity_file,
        "broker_ip2": c.advertised_ip2,
        "ha_listen_port": c.ha_port,
    }
    assert again == c.replace(**shown)


def test_properties_syntax() -> None:
    text = "a=1\nb : 2\nc 3\n! comment\nd=x\\\n   y\ne\\=k=v\nf=\\u0041\\t\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e=k": "v", "f": "A\t"}


def test_public_names() -> None:
    import rmq.broker

    assert sorted(rmq.broker.__all__) == [
        "BrokerConfig",
        "BrokerController",
        "BrokerRole",
        "ConfigError",
        "build_dispatcher",
    ]


DLEDGER = {
    "enableDLegerCommitLog": "true",
    "dLegerGroup": "RaftNode00",
    "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913",
    "dLegerSelfId": "n1",
}


def test_dledger_keys_are_read() -> None:
    c = BrokerConfig.from_properties({**DLEDGER, "preferredLeaderId": "n2"}, environ={})
    assert c.enable_d_leger_commit_log and c.d_leger_group == "RaftNode00" and c.d_leger_self_id == "n1"
    assert c.dledger_peers == {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912", "n2": "127.0.0.1:40913"}
    assert c.preferred_leader_id == "n2"
    assert (c.d_leger_election_timeout_ms, c.d_leger_heartbeat_interval_ms) == (3000, 1000)
    assert c.d_leger_lazy_push_ms == 200


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"dLegerPeers": ""}, "dLegerPeers"),
        ({"dLegerPeers": "n0-127.0.0.1"}, "dLegerPeers"),
        ({"dLegerPeers": "127.0.0.1:40911"}, "dLegerPeers"),
        ({"dLegerSelfId": "n7"}, "dLegerSelfId"),
        ({"preferredLeaderId": "x"}, "preferredLeaderId"),
        ({"dLegerElectionTimeoutMs": "10"}, "dLegerElectionTimeoutMs"),
        ({"dLegerHeartbeatIntervalMs": "5000"}, "dLegerHeartbeatIntervalMs"),
        ({"dLegerLazyPushMs": "-1"}, "dLegerLazyPushMs"),
        ({"dLegerLazyPushMs": "10001"}, "dLegerLazyPushMs"),
    ],
)
def test_bad_dledger_settings_are_refused_with_the_key_named(changes: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({**DLEDGER, **changes}, environ={})
