"""The 5.x consumer groups the proxy serves, made known to the brokers by heartbeats.

Java's proxy registers each gRPC consumer with the broker's ConsumerManager (consume type
CONSUME_POP, CLUSTERING, CONSUME_FROM_LAST_OFFSET, the client's subscriptions), so the
broker's consumer lists, `mqadmin consumerConnection` and `consumerProgress` show it. rmq's
proxy is one remoting client of the brokers, so each group it serves is one consumer of its
client instance: the instance's heartbeats carry the group's ConsumerData (the subscriptions
of every connected client of the group, the newest settings of a topic winning), and when the
group's last client leaves (NotifyClientTermination, or its Telemetry stream ends) the proxy
drops the group and UNREGISTER_CLIENTs it from the brokers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from rmq.client.instance import ClientInstance
from rmq.client.route import TopicRoute
from rmq.protocol.bodies.heartbeat import ConsumerData, SubscriptionData
from rmq.protocol.constants import EXPRESSION_SQL92
from rmq.protocol.message import MessageExt

from .v2 import definition_pb2 as d

log = logging.getLogger("rmq.proxy")

CONSUME_POP = "CONSUME_POP"


def subscriptions_of(settings: d.Settings) -> tuple[SubscriptionData, ...]:
    """The client's subscriptions as the broker's SubscriptionData (GrpcConverter)."""
    out = []
    for entry in settings.subscription.subscriptions:
        expr = entry.expression
        if expr.type == d.SQL:
            out.append(SubscriptionData.build(entry.topic.name, expr.expression, 0, EXPRESSION_SQL92))
        else:
            out.append(SubscriptionData.build(entry.topic.name, expr.expression or "*"))
    return tuple(out)


class _GroupConsumer:
    """The client instance's member for one consumer group the proxy serves."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.clients: dict[str, tuple[SubscriptionData, ...]] = {}  # by client id

    def subscriptions(self) -> dict[str, SubscriptionData]:
        subs: dict[str, SubscriptionData] = {}
        for client_subs in self.clients.values():
            for sub in client_subs:
                subs[sub.topic] = sub
        return subs

    def route_topics(self) -> Iterable[str]:
        return tuple(self.subscriptions())

    def on_route(self, topic: str, route: TopicRoute) -> None:
        pass

    def consumer_data(self) -> ConsumerData:
        subs = tuple(sub for _, sub in sorted(self.subscriptions().items()))
        return ConsumerData(self.group, CONSUME_POP, "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", subs)

    def on_ids_changed(self) -> None:
        pass  # POP shares the queues on the broker: nothing to rebalance

    def reset_offsets(self, topic: str, offsets: dict[Any, int]) -> None:
        pass  # POP reads the broker's offsets, which the reset already changed

    def running_info(self, namesrv: Sequence[str]) -> dict[str, Any]:
        subs = sorted(self.subscriptions().values(), key=lambda s: s.topic)
        return {
            "properties": {
                "PROP_CONSUME_TYPE": CONSUME_POP,
                "PROP_NAMESERVER_ADDR": ";".join(namesrv),
                "consumerGroup": self.group,
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "PROP_CLIENT_IDS": ",".join(sorted(self.clients)),
            },
            "subscriptionSet": [s.to_json() for s in subs],
            "mqTable": {},
            "statusTable": {},
        }

    async def consume_directly(self, msg: MessageExt) -> dict[str, Any] | None:
        """None: the group's 5.x clients pop; the proxy has no handler to run for them."""
        return None


class Consumers:
    """Consumer group → the clients of the proxy that consume it."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance
        self.groups: dict[str, _GroupConsumer] = {}

    def add_client(self, client_id: str, group: str, subscriptions: tuple[SubscriptionData, ...]) -> None:
        """A consumer's settings (or a heartbeat) named its group: heartbeat the group."""
        member = self.groups.get(group)
        if member is None:
            member = self.groups[group] = _GroupConsumer(group)
            self.instance.add_consumer(member)
        changed = member.clients.get(client_id) != subscriptions
        member.clients[client_id] = subscriptions
        if changed:
            self.instance.heartbeat_soon()

    def knows(self, client_id: str, group: str) -> bool:
        member = self.groups.get(group)
        return member is not None and client_id in member.clients

    async def remove_client(self, client_id: str, group: str | None = None) -> None:
        """The client left `group` (every group when None); a group with no client left is
        unregistered from the brokers."""
        for name in [group] if group is not None else list(self.groups):
            member = self.groups.get(name)
            if member is None or member.clients.pop(client_id, None) is None:
                continue
            if member.clients:
                self.instance.heartbeat_soon()
                continue
            del self.groups[name]
            self.instance.remove(member)
            log.info("consumer group %s: no client left, unregistering it from the brokers", name)
            await self.instance.unregister(None, name)
