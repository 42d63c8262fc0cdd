"""Subscription groups: per consumer group settings, persisted in config/subscriptionGroup.json.

A group is created on first use when `autoCreateSubscriptionGroup` is on (the default),
as RocketMQ's SubscriptionGroupManager does on heartbeat and pull. Changes mark the file
for `writer` (jsonfile.CoalescingWriter), which the controller runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from rmq.protocol.bodies.configs import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper
from rmq.protocol.constants import BUILTIN_GROUPS, TOOLS_CONSUMER_GROUP

from .config import BrokerConfig
from .jsonfile import CoalescingWriter, read_json
from .topics import WRITE_DELAY, same_version, wall_ms

log = logging.getLogger("rmq.broker.subscriptions")


class SubscriptionGroupManager:
    def __init__(self, config: BrokerConfig, *, now_ms: Callable[[], int] = wall_ms) -> None:
        self._auto_create = config.auto_create_subscription_group
        self.path = config.config_dir / "subscriptionGroup.json"
        self._now_ms = now_ms
        self.data_version = DataVersion(now_ms())
        self._table: dict[str, SubscriptionGroupConfig] = {}
        for name in BUILTIN_GROUPS:
            self._table[name] = SubscriptionGroupConfig(name, consume_broadcast_enable=name != TOOLS_CONSUMER_GROUP)
        self.writer = CoalescingWriter(self.path, self._snapshot, delay=WRITE_DELAY)

    def load(self) -> None:
        loaded = read_json(self.path, SubscriptionGroupWrapper.from_json)
        if loaded is not None:
            self.data_version = loaded.data_version
            self._table.update(loaded.subscription_group_table)

    def wrapper(self) -> dict[str, Any]:
        """The SubscriptionGroupWrapper's JSON: the file and GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""
        return self._wrapper().to_json()

    def _wrapper(self) -> SubscriptionGroupWrapper:
        """The groups now, by name (configs are frozen, so this is a snapshot)."""
        return SubscriptionGroupWrapper(dict(sorted(self._table.items())), self.data_version)

    def _snapshot(self) -> Iterator[bytes]:
        """The file's content as pieces, from a copy taken now."""
        return self._wrapper().pieces()

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
            master = SubscriptionGroupWrapper.from_json(obj)
        except ValueError as exc:
            raise ValueError(f"bad subscription groups from master: {exc}") from None
        if same_version(self.data_version, master.data_version):
            return False
        self._table = dict(master.subscription_group_table)
        self.data_version = master.data_version
        self.writer.changed()
        return True

    def _changed(self) -> None:
        self.data_version = self.data_version.next(self._now_ms())
        self.writer.changed()
