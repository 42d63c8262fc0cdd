"""Subscription groups: per consumer group settings, persisted in config/subscriptionGroup.json.

A group is created on first use when `autoCreateSubscriptionGroup` is on (the default),
as RocketMQ's SubscriptionGroupManager does on heartbeat and pull. Changes mark the file
for `writer` (jsonfile.CoalescingWriter), which the controller runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rmq.protocol import body
from rmq.protocol.constants import BUILTIN_GROUPS, TOOLS_CONSUMER_GROUP

from .config import BrokerConfig
from .jsonfile import CoalescingWriter, encode_members, read_json
from .topics import WRITE_DELAY, DataVersion, wall_ms

log = logging.getLogger("rmq.broker.subscriptions")


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _KEYS = (
        ("broker_id", "brokerId"),
        ("consume_broadcast_enable", "consumeBroadcastEnable"),
        ("consume_enable", "consumeEnable"),
        ("consume_from_min_enable", "consumeFromMinEnable"),
        ("group_name", "groupName"),
        ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable"),
        ("retry_max_times", "retryMaxTimes"),
        ("retry_queue_nums", "retryQueueNums"),
        ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly"),
    )

    def to_json(self) -> dict[str, Any]:
        return {wire: getattr(self, attr) for attr, wire in self._KEYS}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        """Read a group config; fields left out keep their defaults, types are checked."""
        kwargs: dict[str, Any] = {}
        defaults = cls(group_name="")
        for attr, wire in cls._KEYS:
            if wire not in obj:
                continue
            value = obj[wire]
            want = type(getattr(defaults, attr))
            if want is bool:
                if isinstance(value, str):
                    value = value.lower() == "true"
                elif not isinstance(value, bool):
                    raise ValueError(f"{wire} must be true or false, not {value!r}")
            elif want is int:
                if isinstance(value, bool):
                    raise ValueError(f"{wire} must be an integer, not {value!r}")
                value = int(value)
            else:
                value = str(value)
            kwargs[attr] = value
        if not kwargs.get("group_name"):
            raise ValueError("groupName is missing")
        return cls(**kwargs)


class SubscriptionGroupManager:
    def __init__(self, config: BrokerConfig, *, now_ms: Callable[[], int] = wall_ms) -> None:
        self._auto_create = config.auto_create_subscription_group
        self.path = config.config_dir / "subscriptionGroup.json"
        self.data_version = DataVersion(now_ms)
        self._table: dict[str, SubscriptionGroupConfig] = {}
        for name in BUILTIN_GROUPS:
            self._table[name] = SubscriptionGroupConfig(name, consume_broadcast_enable=name != TOOLS_CONSUMER_GROUP)
        self.writer = CoalescingWriter(self.path, self._snapshot, delay=WRITE_DELAY)

    def load(self) -> None:
        loaded = read_json(self.path, self._decode)
        if loaded is not None:
            version, table = loaded
            self.data_version.load(version)
            self._table.update(table)

    @staticmethod
    def _decode(obj: Any) -> tuple[dict[str, Any], dict[str, SubscriptionGroupConfig]]:
        table = {str(k): SubscriptionGroupConfig.from_json(v) for k, v in obj.get("subscriptionGroupTable", {}).items()}
        return obj.get("dataVersion", {}), table

    def wrapper(self) -> dict[str, Any]:
        """SubscriptionGroupWrapper: the file and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""
        return _wrapper(self.data_version.to_json(), self._table)

    def _snapshot(self) -> Iterator[bytes]:
        """The file's content as pieces, from a copy taken now (configs are frozen)."""
        return _pieces(self.data_version.to_json(), dict(self._table))

    def persist(self) -> None:
        """Write the file now, on this thread (shutdown). Raises OSError."""
        self.writer.flush()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; created with defaults if auto-creation is on, else None."""
        found = self._table.get(group)
        if found is not None or not self._auto_create:
            return found
        created = SubscriptionGroupConfig(group)
        self._table[group] = created
        log.info("auto-created subscription group %s", group)
        self._changed()
        return created

    def update(self, group: SubscriptionGroupConfig) -> None:
        self._table[group.group_name] = group
        self._changed()

    def delete(self, group: str) -> bool:
        if self._table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def __iter__(self) -> Iterator[SubscriptionGroupConfig]:
        return iter(list(self._table.values()))

    def sync_from_master(self, obj: Any) -> bool:
        """A slave takes its master's groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG body) when the
        data version differs; returns whether it changed. Raises ValueError if malformed."""
        try:
            version, table = self._decode(obj)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad subscription groups from master: {exc}") from None
        if DataVersion.same(self.data_version, version):
            return False
        self._table = table
        self.data_version.load(version)
        self.writer.changed()
        return True

    def _changed(self) -> None:
        self.data_version.next_version()
        self.writer.changed()


def _pieces(version: dict[str, int], table: dict[str, SubscriptionGroupConfig]) -> Iterator[bytes]:
    """body.dumps(_wrapper(version, table)), a group at a time."""
    yield b'{"dataVersion":' + body.dumps(version) + b',"subscriptionGroupTable":'
    yield from encode_members(sorted(table.items()))
    yield b"}"


def _wrapper(version: dict[str, int], table: dict[str, SubscriptionGroupConfig]) -> dict[str, Any]:
    return {
        "dataVersion": version,
        "subscriptionGroupTable": {name: g.to_json() for name, g in sorted(table.items())},
    }
