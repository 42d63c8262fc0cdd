"""Topic configs: the broker's topic table, persisted in `config/topics.json`.

Mirrors RocketMQ's TopicConfigManager: built-in topics, auto-creation from a template
topic (TBW102) on first send, retry/DLQ topics created on demand, and a DataVersion
that tells the name server when the table changed. Every change calls `on_change`,
which the controller wires to an immediate re-registration with the name servers, and
marks the file for `writer` (jsonfile.CoalescingWriter), which the controller runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rmq.protocol import body, constants
from rmq.protocol.bodies.configs import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rmq.protocol.constants import (
    AUTO_CREATE_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    SYSTEM_TOPICS,
    reply_topic,
)
from rmq.protocol.pop import revive_topic

from .config import BrokerConfig
from .jsonfile import CoalescingWriter, read_json

log = logging.getLogger("rmq.broker.topics")

# Seconds a change waits for others to share its write: a burst (a heartbeat naming many
# new groups, a producer's first sends to many topics) becomes one write.
WRITE_DELAY = 0.1

MAX_QUEUE_NUMS = 1024  # per topic: queue tables are walked whole by stats and rebalancing

# Sends the broker refuses: TopicValidator's topics, and the timer topic only the timer service
# writes to.
NOT_ALLOWED_SEND_TOPICS = constants.NOT_ALLOWED_SEND_TOPICS | {constants.TIMER_TOPIC}


def same_version(mine: DataVersion, theirs: DataVersion) -> bool:
    """Whether a master's table is the one a slave has: the same counter and time."""
    return (mine.counter, mine.timestamp) == (theirs.counter, theirs.timestamp)


def wall_ms() -> int:
    return int(time.time() * 1000)


class TopicConfigManager:
    """The topic table. Synchronous; every mutation calls `on_change` and `writer.changed()`."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        on_change: Callable[[], None] = lambda: None,
        now_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self._config = config
        self.path: Path = config.config_dir / "topics.json"
        self.on_change = on_change
        self._now_ms = now_ms
        self.data_version = DataVersion(now_ms())
        self._table: dict[str, TopicConfig] = {}
        self._system_topics = set(SYSTEM_TOPICS)
        self._add_builtin_topics()
        self.writer = CoalescingWriter(self.path, self._snapshot, delay=WRITE_DELAY)

    def _add_builtin_topics(self) -> None:
        c = self._config
        builtins = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, 18, 18),
            TopicConfig(reply_topic(c.broker_cluster_name), 1, 1),
            # POP checkpoints and acks (docs/pop.md)
            TopicConfig(revive_topic(c.broker_cluster_name), c.revive_queue_num, c.revive_queue_num),
            TopicConfig(
                c.broker_cluster_name, perm=PERM_INHERIT | (PERM_READ | PERM_WRITE if c.cluster_topic_enable else 0)
            ),
            TopicConfig(
                c.broker_name, 1, 1, perm=PERM_INHERIT | (PERM_READ | PERM_WRITE if c.broker_topic_enable else 0)
            ),
        ]
        if c.trace_topic_enable:  # where clients with tracing on send their records
            builtins.append(TopicConfig(c.msg_trace_topic_name, 1, 1))
        if c.auto_create_topic_enable:
            n = c.default_topic_queue_nums
            builtins.append(TopicConfig(AUTO_CREATE_TOPIC, n, n, PERM_INHERIT | PERM_READ | PERM_WRITE))
        for tc in builtins:
            self._table[tc.topic_name] = tc
        self._system_topics |= {c.broker_cluster_name, c.broker_name, revive_topic(c.broker_cluster_name)}

    # -- persistence ----------------------------------------------------------------------

    def load(self) -> None:
        """Read topics.json; file entries override the built-ins, as in RocketMQ."""
        loaded = read_json(self.path, TopicConfigSerializeWrapper.from_json)
        if loaded is not None:
            self.data_version = loaded.data_version
            self._table.update(loaded.topic_config_table)

    def encode(self) -> bytes:
        return body.dumps(self.wrapper())

    def persist(self) -> None:
        """Write the file now, on this thread (start and shutdown). Raises OSError."""
        self.writer.flush()

    def wrapper(self) -> dict[str, Any]:
        """The TopicConfigSerializeWrapper's JSON: what GET_ALL_TOPIC_CONFIG and REGISTER_BROKER send."""
        return self._wrapper().to_json()

    def _wrapper(self) -> TopicConfigSerializeWrapper:
        """The table now, by topic name (configs are frozen, so this is a snapshot)."""
        return TopicConfigSerializeWrapper(dict(sorted(self._table.items())), self.data_version)

    def _snapshot(self) -> Iterator[bytes]:
        """The file's content as pieces, from a copy taken now."""
        return self._wrapper().pieces()

    def _changed(self) -> None:
        self.data_version = self.data_version.next(self._now_ms())
        self.writer.changed()
        self.on_change()

    def sync_from_master(self, obj: Any) -> bool:
        """A slave takes its master's table (GET_ALL_TOPIC_CONFIG body) when the master's data
        version differs from ours; returns whether it changed. Raises ValueError if malformed."""
        try:
            master = TopicConfigSerializeWrapper.from_json(obj)
        except ValueError as exc:
            raise ValueError(f"bad topic table from master: {exc}") from None
        if same_version(self.data_version, master.data_version):
            return False
        self._table.clear()
        self._add_builtin_topics()
        self._table.update(master.topic_config_table)
        self.data_version = master.data_version
        self.writer.changed()
        self.on_change()
        return True

    # -- queries --------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self._table

    def __iter__(self) -> Iterator[TopicConfig]:
        return iter(list(self._table.values()))

    def __len__(self) -> int:
        return len(self._table)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self._system_topics

    def system_topics(self) -> tuple[str, ...]:
        return tuple(sorted(self._system_topics))

    # -- changes --------------------------------------------------------------------------

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """The topic's config, auto-created from `default_topic` if that one allows inheriting.

        None when the topic is unknown and cannot be created (the caller answers 17).
        """
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        template = self._table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC and not self._config.auto_create_topic_enable:
            return None
        queues = max(0, min(client_queue_nums, template.write_queue_nums))
        created = TopicConfig(
            topic,
            queues,
            queues,
            template.perm & ~PERM_INHERIT,
            topic_sys_flag=topic_sys_flag,
            topic_filter_type=template.topic_filter_type,
        )
        log.info("auto-created topic %s from %s: %d queues, perm %d", topic, default_topic, queues, created.perm)
        self._table[topic] = created
        self._changed()
        return created

    def create_if_absent(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0) -> TopicConfig:
        """Create a retry or DLQ topic on demand (createTopicInSendMessageBackMethod)."""
        existing = self._table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self._table[topic] = created
        log.info("created topic %s: %d queues, perm %d", topic, queue_nums, perm)
        self._changed()
        return created

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        old = self._table.get(tc.topic_name)
        self._table[tc.topic_name] = tc
        log.info("topic %s %s: %s", tc.topic_name, "updated" if old else "created", tc)
        self._changed()

    def delete(self, topic: str) -> bool:
        if self._table.pop(topic, None) is None:
            return False
        log.info("deleted topic %s", topic)
        self._changed()
        return True
