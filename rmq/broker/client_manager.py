"""Who is connected: producer and consumer groups as learnt from HEART_BEAT.

RocketMQ's ConsumerManager + ProducerManager in one synchronous object. A client is a
connection (the remoting Connection it heartbeats on) plus what it said about itself.
A consumer leaves its group on UNREGISTER_CLIENT, when its connection closes, or when it
has been silent for 120 s. The methods that change a consumer group's membership or
subscriptions return whether the group's consumers must be told
(NOTIFY_CONSUMER_IDS_CHANGED); sending that is the controller's job, since it needs I/O.

Times come from `clock` (Trio's clock in the broker: seconds, monotonic).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from rmq.protocol.bodies.heartbeat import ConsumerData, SubscriptionData

log = logging.getLogger("rmq.broker.client_manager")

CHANNEL_EXPIRED_TIMEOUT = 120.0  # seconds of silence before a client is dropped


@dataclass(slots=True)
class ClientChannel:
    """One client connection as a member of a group."""

    conn: Hashable
    client_id: str
    language: str
    version: int
    address: str
    last_update: float


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[Hashable, ClientChannel] = field(default_factory=dict)
    last_update: float = 0.0

    def client_ids(self) -> list[str]:
        return sorted({ch.client_id for ch in self.channels.values()})

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Adopt a heartbeat's subscription set; True if a topic was added or removed.

        A known topic is replaced only by a newer subVersion, as in RocketMQ, so a late
        heartbeat from an old client cannot roll a subscription back.
        """
        changed = False
        seen = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ClientManager:
    def __init__(self, clock: Callable[[], float], expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT) -> None:
        self._clock = clock
        self._expired_timeout = expired_timeout
        self._consumers: dict[str, ConsumerGroupInfo] = {}
        self._producers: dict[str, dict[Hashable, ClientChannel]] = {}

    # -- registration -----------------------------------------------------------------

    def _channel(self, conn: Hashable, client_id: str, language: str, version: int, address: str) -> ClientChannel:
        return ClientChannel(conn, client_id, language, version, address, self._clock())

    def register_consumer(
        self, data: ConsumerData, conn: Hashable, client_id: str, language: str, version: int, address: str
    ) -> bool:
        """Add or refresh a consumer; True if the group's members or topics changed."""
        now = self._clock()
        info = self._consumers.get(data.group_name)
        if info is None:
            info = ConsumerGroupInfo(data.group_name, data.consume_type, data.message_model, data.consume_from_where)
            self._consumers[data.group_name] = info
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        info.last_update = now
        existing = info.channels.get(conn)
        new_member = existing is None or existing.client_id != client_id
        if new_member:
            info.channels[conn] = self._channel(conn, client_id, language, version, address)
            log.info("consumer %s joined group %s from %s", client_id, data.group_name, address)
        else:
            assert existing is not None
            existing.last_update = now
        subs_changed = info.update_subscriptions(data.subscriptions)
        return new_member or subs_changed

    def register_producer(
        self, group: str, conn: Hashable, client_id: str, language: str, version: int, address: str
    ) -> None:
        channels = self._producers.setdefault(group, {})
        existing = channels.get(conn)
        if existing is None or existing.client_id != client_id:
            channels[conn] = self._channel(conn, client_id, language, version, address)
        else:
            existing.last_update = self._clock()

    def unregister_consumer(self, group: str, conn: Hashable) -> bool:
        """Remove a consumer; True if it was a member (its group should be told)."""
        info = self._consumers.get(group)
        if info is None or info.channels.pop(conn, None) is None:
            return False
        if not info.channels:
            del self._consumers[group]
        return True

    def unregister_producer(self, group: str, conn: Hashable) -> None:
        channels = self._producers.get(group)
        if channels is not None:
            channels.pop(conn, None)
            if not channels:
                del self._producers[group]

    def connection_closed(self, conn: Hashable) -> list[str]:
        """Forget every registration made over `conn`; return the consumer groups that lost a member."""
        changed = [group for group in list(self._consumers) if self.unregister_consumer(group, conn)]
        for group in list(self._producers):
            self.unregister_producer(group, conn)
        return changed

    def scan_expired(self) -> list[str]:
        """Drop clients silent for longer than the timeout; return consumer groups that lost members."""
        deadline = self._clock() - self._expired_timeout
        changed = []
        for group, info in list(self._consumers.items()):
            stale = [conn for conn, ch in info.channels.items() if ch.last_update < deadline]
            for conn in stale:
                log.warning(
                    "consumer %s of group %s silent for %.0f s, dropped",
                    info.channels[conn].client_id,
                    group,
                    self._expired_timeout,
                )
                self.unregister_consumer(group, conn)
            if stale:
                changed.append(group)
        for group, channels in list(self._producers.items()):
            for conn in [c for c, ch in channels.items() if ch.last_update < deadline]:
                log.warning("producer %s of group %s silent, dropped", channels[conn].client_id, group)
                self.unregister_producer(group, conn)
        return changed

    # -- queries ----------------------------------------------------------------------

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self._consumers.get(group)

    def consumer_groups(self) -> list[str]:
        return sorted(self._consumers)

    def consumer_channels(self, group: str) -> list[ClientChannel]:
        info = self._consumers.get(group)
        return list(info.channels.values()) if info else []

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self._consumers.get(group)
        return info.subscriptions.get(topic) if info else None

    def groups_subscribing(self, topic: str) -> set[str]:
        return {g for g, info in self._consumers.items() if topic in info.subscriptions}

    def producer_channels(self, group: str) -> list[ClientChannel]:
        return list(self._producers.get(group, {}).values())

    def producer_channel(self, client_id: str) -> ClientChannel | None:
        """The connection of the producer that heartbeats as `client_id` (ProducerManager.findChannel:
        where the broker pushes a reply to its requester)."""
        for channels in self._producers.values():
            for channel in channels.values():
                if channel.client_id == client_id:
                    return channel
        return None

    def producer_groups(self) -> list[str]:
        return sorted(self._producers)

    def seconds_since_update(self, channel: ClientChannel) -> float:
        """How long ago `channel` last heartbeat (or joined), on this manager's clock."""
        return self._clock() - channel.last_update
