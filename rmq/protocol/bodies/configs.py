"""Topic and subscription-group configs, their tables and the DataVersion that dates a table.

A broker's topics.json and GET_ALL_TOPIC_CONFIG body are a TopicConfigSerializeWrapper, its
subscriptionGroup.json and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body a SubscriptionGroupWrapper;
REGISTER_BROKER carries the topic table too (register.py). `pieces()` writes a table's JSON
a member at a time, so a broker can encode a big one in turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from .. import body
from ..constants import MASTER_ID, PERM_READ, PERM_WRITE, perm_to_string
from ..errors import BodyError
from . import _fields as F

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DataVersion:
    """When a table last changed (ms) and how many changes it has had. `state_version`
    (RocketMQ 5: the controller's master epoch; our DLedger brokers: the term) orders a
    group's registrations; 4.x brokers send none."""

    timestamp: int = 0
    counter: int = 0
    state_version: int | None = None

    @property
    def state(self) -> int:
        """stateVersion for ordering registrations: 0 when absent, as RocketMQ reads it."""
        return self.state_version or 0

    def next(self, now_ms: int) -> DataVersion:
        """The version after one more change at `now_ms` (DataVersion.nextVersion)."""
        return DataVersion(now_ms, self.counter + 1, self.state_version)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counter": self.counter}
        if self.state_version is not None:
            out["stateVersion"] = self.state_version
        out["timestamp"] = self.timestamp
        return out

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        obj = F.obj(obj, "dataVersion")
        state = obj.get("stateVersion")
        return cls(
            F.integer(obj.get("timestamp", 0), "dataVersion.timestamp"),
            F.integer(obj.get("counter", 0), "dataVersion.counter"),
            None if state is None else F.integer(state, "dataVersion.stateVersion"),
        )


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic on one broker; defaults are TopicConfig.java's."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    topic_filter_type: str = "SINGLE_TAG"
    order: bool = False

    @property
    def topic(self) -> str:
        """topic_name, by the name the admin API has always given it."""
        return self.topic_name

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def __str__(self) -> str:
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={str(self.order).lower()}]"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any, name: str | None = None) -> TopicConfig:
        """`name` (its table key) stands in for a missing topicName; `topicSynFlag` is the
        pre-4.9.0 spelling of topicSysFlag."""
        obj = F.obj(obj, "topic config")
        topic = obj.get("topicName") or name
        if not topic:
            raise BodyError(f"topic config without a topicName: {obj!r:.200}")
        topic = F.text(topic, "topicName")
        default = cls(topic)
        return cls(
            topic,
            F.integer(obj.get("readQueueNums", default.read_queue_nums), f"{topic}.readQueueNums"),
            F.integer(obj.get("writeQueueNums", default.write_queue_nums), f"{topic}.writeQueueNums"),
            F.integer(obj.get("perm", default.perm), f"{topic}.perm"),
            F.integer(obj.get("topicSysFlag", obj.get("topicSynFlag", 0)), f"{topic}.topicSysFlag"),
            F.text(obj.get("topicFilterType") or default.topic_filter_type, f"{topic}.topicFilterType"),
            F.flag(obj.get("order", False), f"{topic}.order"),
        )


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """A consumer group's settings on one broker; defaults are SubscriptionGroupConfig.java's.

    `consume_message_orderly` is RocketMQ 5's (the gRPC proxy serves the group FIFO, by
    orderly POP); it is written only when true, so a 4.x group's JSON stays 4.9.8's."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False

    def __str__(self) -> str:
        def text(v: object) -> str:
            return str(v).lower() if isinstance(v, bool) else str(v)

        return (
            f"SubscriptionGroupConfig [groupName={self.group_name}, consumeEnable={text(self.consume_enable)}, "
            f"consumeFromMinEnable={text(self.consume_from_min_enable)}, "
            f"consumeBroadcastEnable={text(self.consume_broadcast_enable)}, retryQueueNums={self.retry_queue_nums}, "
            f"retryMaxTimes={self.retry_max_times}, brokerId={self.broker_id}, "
            f"whichBrokerWhenConsumeSlowly={self.which_broker_when_consume_slowly}, "
            f"notifyConsumerIdsChangedEnable={text(self.notify_consumer_ids_changed_enable)}]"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            wire: getattr(self, attr)
            for attr, wire in _GROUP_KEYS
            if attr != "consume_message_orderly" or self.consume_message_orderly
        }

    @classmethod
    def from_json(cls, obj: Any) -> SubscriptionGroupConfig:
        """Fields left out keep their defaults; BodyError without a groupName."""
        obj = F.obj(obj, "subscription group")
        defaults = cls("")
        kwargs: dict[str, Any] = {}
        for attr, wire in _GROUP_KEYS:
            if wire in obj:
                read = _READERS[type(getattr(defaults, attr))]
                kwargs[attr] = read(obj[wire], wire)
        if not kwargs.get("group_name"):
            raise BodyError("groupName is missing")
        return cls(**kwargs)


# (attribute, wire name) of SubscriptionGroupConfig, in the order fastjson writes them
_GROUP_KEYS = (
    ("broker_id", "brokerId"),
    ("consume_broadcast_enable", "consumeBroadcastEnable"),
    ("consume_enable", "consumeEnable"),
    ("consume_from_min_enable", "consumeFromMinEnable"),
    ("consume_message_orderly", "consumeMessageOrderly"),
    ("group_name", "groupName"),
    ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable"),
    ("retry_max_times", "retryMaxTimes"),
    ("retry_queue_nums", "retryQueueNums"),
    ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly"),
)
_READERS: dict[type, Any] = {bool: F.flag, int: F.integer, str: F.text}


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table (topic → config) and its version."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return _versioned_json(self.data_version, "topicConfigTable", self.topic_config_table)

    def pieces(self) -> Iterator[bytes]:
        """`body.dumps(self.to_json())` in pieces, a topic each."""
        return _versioned_pieces(self.data_version, "topicConfigTable", self.topic_config_table)

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """A missing table is empty, a missing version (0, 0)."""
        return cls(*_read_versioned(obj, "TopicConfigSerializeWrapper", "topicConfigTable", TopicConfig.from_json))


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """A broker's subscription groups (group → config) and their version."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return _versioned_json(self.data_version, "subscriptionGroupTable", self.subscription_group_table)

    def pieces(self) -> Iterator[bytes]:
        """`body.dumps(self.to_json())` in pieces, a group each."""
        return _versioned_pieces(self.data_version, "subscriptionGroupTable", self.subscription_group_table)

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """A missing table is empty, a missing version (0, 0)."""

        def read(group: Any, name: str) -> SubscriptionGroupConfig:
            return SubscriptionGroupConfig.from_json(group)

        return cls(*_read_versioned(obj, "SubscriptionGroupWrapper", "subscriptionGroupTable", read))


# The two tables share their shape: {"dataVersion":{..},"<key>":{name: config}}.


def _versioned_json(version: DataVersion, key: str, table: Mapping[str, Any]) -> dict[str, Any]:
    return {"dataVersion": version.to_json(), key: {name: item.to_json() for name, item in table.items()}}


def _versioned_pieces(version: DataVersion, key: str, table: Mapping[str, Any]) -> Iterator[bytes]:
    yield b'{"dataVersion":' + body.dumps(version.to_json()) + b"," + body.dumps(key) + b":"
    yield from body.dumps_members(table.items())
    yield b"}"


def _read_versioned(obj: Any, what: str, key: str, read: Callable[[Any, str], T]) -> tuple[dict[str, T], DataVersion]:
    obj = F.obj(obj, what)
    table = F.table(obj.get(key), key)
    version = obj.get("dataVersion")
    return (
        {str(name): read(item, str(name)) for name, item in table.items()},
        DataVersion() if version is None else DataVersion.from_json(version),
    )
