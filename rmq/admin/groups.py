"""Subscription groups, consumer groups' progress and clients, producer groups' connections."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from rmq.client import MQClientError
from rmq.client.admin import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    MQAdmin,
    SubscriptionGroupConfig,
)
from rmq.protocol.constants import DLQ_PREFIX, RETRY_PREFIX

from .common import AdminError, masters_or


async def create(
    admin: MQAdmin, config: SubscriptionGroupConfig, broker_addr: str | None, cluster: str | None
) -> AsyncIterator[str]:
    """Create or update `config` on `broker_addr` or every master of `cluster`; yields each address."""
    for addr in await masters_or(admin, broker_addr, cluster):
        await admin.create_subscription_group(addr, config)
        yield addr


async def delete(admin: MQAdmin, group: str, broker_addr: str | None, cluster: str | None) -> AsyncIterator[str]:
    """Delete `group` from `broker_addr` or every master of `cluster`; yields each address.
    With a cluster, mqadmin deletes the group's topics too (`own_topics`)."""
    for addr in await masters_or(admin, broker_addr, cluster):
        await admin.delete_subscription_group(addr, group)
        yield addr


def own_topics(group: str) -> tuple[str, str]:
    """The group's retry and dead-letter topics."""
    return RETRY_PREFIX + group, DLQ_PREFIX + group


# -- progress ---------------------------------------------------------------------------------


@dataclass
class GroupProgress:
    group: str
    connection: ConsumerConnection
    stats: ConsumeStats


async def all_progress(admin: MQAdmin) -> list[GroupProgress]:
    """Every group that has a retry topic, with its clients and offsets (zeros and nobody for
    what cannot be read): groups with the most clients first, then the most behind."""
    groups = []
    for topic in await admin.topic_list():
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX) :]
        stats, cc = ConsumeStats({}), ConsumerConnection([], {})
        try:
            stats = await admin.consume_stats(group)
        except MQClientError:
            pass  # as mqadmin: a group without offsets is listed with zeros
        try:
            cc = await admin.consumer_connection(group)
        except MQClientError:
            pass  # offline
        groups.append(GroupProgress(group, cc, stats))
    groups.sort(key=lambda g: (-len(g.connection.connections), -g.stats.diff_total, g.group))
    return groups


# -- clients ----------------------------------------------------------------------------------


async def running_infos(
    admin: MQAdmin, group: str, *, jstack: bool = False, broker_addr: str | None = None
) -> list[tuple[ClientConnection, dict[Any, Any] | MQClientError]]:
    """Each online client of `group` (by client id) with its ConsumerRunningInfo, or the error
    asking for it."""
    cc = await admin.consumer_connection(group)
    out: list[tuple[ClientConnection, dict[Any, Any] | MQClientError]] = []
    for conn in sorted(cc.connections, key=lambda c: c.client_id):
        try:
            info = await admin.consumer_running_info(group, conn.client_id, jstack=jstack, addr=broker_addr)
        except MQClientError as exc:
            out.append((conn, exc))
            continue
        out.append((conn, info))
    return out


def same_subscription(infos: list[dict[Any, Any]]) -> bool:
    """Whether the clients subscribe to the same topics with the same expressions."""
    subs = {json.dumps(sorted((s["topic"], s["subString"]) for s in i.get("subscriptionSet") or [])) for i in infos}
    return len(subs) <= 1


def rebalanced(infos: list[dict[Any, Any]]) -> bool:
    """Whether no queue is owned by two clients."""
    owned = [mq for i in infos for mq in (i.get("mqTable") or {})]
    return len(owned) == len(set(owned))


async def configs(admin: MQAdmin, group: str) -> AsyncIterator[tuple[str, str, dict[str, Any]]]:
    """(cluster, broker name, settings) of `group` on each master that has it, clusters by
    name; AdminError after the last if none has it."""
    found = 0
    info = await admin.cluster_info()
    for cluster in sorted(info.clusters):
        for name, addr in info.masters(cluster):
            config = (await admin.subscription_groups(addr)).get(group)
            if config is None:
                continue
            found += 1
            yield cluster, name, config
    if not found:
        raise AdminError(f"no broker has a subscription group {group!r}")


async def producer_connections(admin: MQAdmin, topic: str, group: str) -> list[ClientConnection]:
    """The connections of producer `group` on the first master (by broker name) of `topic`."""
    route = await admin.topic_route(topic)
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        if bd.master_addr is not None:
            return await admin.producer_connection_on(bd.master_addr, group)
    return []
