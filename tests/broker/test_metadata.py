"""Topic, offset and subscription-group tables: built-ins, auto-create, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.offsets import ConsumerOffsetManager
from rmq.broker.subscriptions import SubscriptionGroupManager
from rmq.broker.topics import TopicConfigManager
from rmq.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from rmq.protocol.constants import PERM_INHERIT, PERM_READ, PERM_WRITE, topic_error


def make_config(tmp_path: Path, **props: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"brokerName": "broker-a", "brokerClusterName": "C1", "storePathRootDir": str(tmp_path), **props}, environ={}
    )


def test_builtin_topics(tmp_path: Path) -> None:
    topics = TopicConfigManager(make_config(tmp_path))
    tbw = topics.get("TBW102")
    assert tbw is not None
    assert (tbw.read_queue_nums, tbw.write_queue_nums, tbw.perm) == (8, 8, 7)
    assert topics.get("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18  # type: ignore[union-attr]
    assert topics.get("BenchmarkTest").write_queue_nums == 1024  # type: ignore[union-attr]
    assert topics.get("SELF_TEST_TOPIC") and topics.get("OFFSET_MOVED_EVENT") and topics.get("C1_REPLY_TOPIC")
    assert topics.get("C1").perm == PERM_INHERIT | PERM_READ | PERM_WRITE  # type: ignore[union-attr]
    assert topics.get("broker-a").write_queue_nums == 1  # type: ignore[union-attr]
    assert topics.is_system_topic("broker-a") and topics.is_system_topic("TBW102")
    assert not topics.is_system_topic("TopicTest")
    no_auto = TopicConfigManager(make_config(tmp_path, autoCreateTopicEnable="false"))
    assert no_auto.get("TBW102") is None


def test_auto_create_from_tbw102(tmp_path: Path) -> None:
    changes = []
    topics = TopicConfigManager(make_config(tmp_path), on_change=lambda: changes.append(1))
    before = topics.data_version.counter
    tc = topics.create_in_send("TopicTest", "TBW102", 4)
    assert tc == TopicConfig("TopicTest", 4, 4, PERM_READ | PERM_WRITE)
    assert changes == [1]
    assert topics.data_version.counter == before + 1
    assert topics.create_in_send("TopicTest", "TBW102", 4) is tc  # no second change
    assert changes == [1]
    # the queue count is capped by the template's
    assert topics.create_in_send("Big", "TBW102", 100).write_queue_nums == 8  # type: ignore[union-attr]
    # templates without INHERIT, or unknown ones, create nothing
    assert topics.create_in_send("X", "SELF_TEST_TOPIC", 4) is None
    assert topics.create_in_send("X", "NoSuchTemplate", 4) is None


def test_topics_survive_a_restart_and_fall_back_to_bak(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    topics = TopicConfigManager(config)
    topics.update(TopicConfig("Orders", 2, 3, 6, order=True))
    topics.persist()  # the file behind: a write of the table before the last one
    topics.create_in_send("Auto", "TBW102", 4)
    assert topics.writer.dirty
    topics.persist()  # what the writer task or a shutdown does
    assert not topics.writer.dirty
    version = topics.data_version.to_json()

    again = TopicConfigManager(config)
    again.load()
    assert again.get("Orders") == TopicConfig("Orders", 2, 3, 6, order=True)
    assert again.get("Auto") is not None
    assert again.data_version.to_json() == version

    (tmp_path / "config" / "topics.json").write_text("{garbage")
    from_bak = TopicConfigManager(config)
    from_bak.load()
    assert from_bak.get("Orders") is not None  # .bak holds the write before the last one

    assert again.delete("Orders") and not again.delete("Orders")


def test_topic_names() -> None:
    assert topic_error("Topic_Test-1%|") is None
    assert "illegal" in (topic_error("a b") or "")
    assert "longer" in (topic_error("t" * 128) or "")
    assert "blank" in (topic_error(" ") or "")


def test_offsets_file_uses_unquoted_int_keys(tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "config")
    assert offsets.query("g", "t", 0) == -1
    offsets.commit("g", "t", 0, 5)
    offsets.commit("g", "t", 3, 7)
    offsets.commit("g2", "t", 0, 1)
    assert offsets.dirty
    offsets.persist()
    assert not offsets.dirty
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert text == '{"offsetTable":{"t@g":{0:5,3:7},"t@g2":{0:1}}}'
    again = ConsumerOffsetManager(tmp_path / "config")
    again.load()
    assert again.query("g", "t", 3) == 7
    assert again.groups_of_topic("t") == {"g", "g2"}
    assert again.topics_of_group("g") == {"t"}
    again.remove_group("g2")
    assert again.groups_of_topic("t") == {"g"}
    assert again.dirty


def test_offsets_read_a_java_brokers_pretty_file(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"T@G":{0:12,1:7\n\t\t}\n\t}\n}')
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.load()
    assert offsets.offsets_of("G", "T") == {0: 12, 1: 7}


def test_subscription_groups(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    groups = SubscriptionGroupManager(config)
    assert groups.get("TOOLS_CONSUMER") is not None
    created = groups.find_or_create("CG")
    assert created == SubscriptionGroupConfig("CG")
    groups.update(SubscriptionGroupConfig("CG2", retry_max_times=3))
    groups.persist()
    again = SubscriptionGroupManager(config)
    again.load()
    assert again.get("CG2").retry_max_times == 3  # type: ignore[union-attr]
    wrapper = again.wrapper()["subscriptionGroupTable"]["CG"]
    assert wrapper["retryQueueNums"] == 1 and wrapper["groupName"] == "CG"
    no_auto = SubscriptionGroupManager(make_config(tmp_path / "x", autoCreateSubscriptionGroup="false"))
    assert no_auto.find_or_create("CG") is None
    with pytest.raises(ValueError, match="retryMaxTimes"):
        SubscriptionGroupConfig.from_json({"groupName": "g", "retryMaxTimes": True})
