"""Brokers and clusters: runtime figures, replication status, settings, per-topic traffic
and maintenance requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from rmq.client import MQClientError
from rmq.client.admin import MQAdmin

from .common import masters_or, members_or
from .topics import is_group_topic


@dataclass
class BrokerRuntime:
    """One master or slave and its runtime table ({} with `error` when it did not answer)."""

    cluster: str
    name: str
    broker_id: int
    addr: str
    table: dict[str, str] = field(default_factory=dict)
    error: MQClientError | None = None


async def runtimes(admin: MQAdmin, cluster: str | None = None) -> list[BrokerRuntime]:
    """Every master and slave of `cluster` (else of every cluster, by name), each with its
    runtime table; a broker that does not answer is listed with its error."""
    info = await admin.cluster_info()
    out = []
    for name_of_cluster in [cluster] if cluster else sorted(info.clusters):
        for name, bid, addr in info.members(name_of_cluster):
            broker = BrokerRuntime(name_of_cluster, name, bid, addr)
            try:
                broker.table = await admin.broker_runtime_info(addr)
            except MQClientError as exc:
                broker.error = exc
            out.append(broker)
    return out


async def ha_statuses(
    admin: MQAdmin, broker_addr: str | None, cluster: str | None
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(address, replication status) of `broker_addr`, or of every master of `cluster`."""
    for addr in await masters_or(admin, broker_addr, cluster):
        yield addr, await admin.broker_ha_status(addr)


async def configs(admin: MQAdmin, cluster: str) -> AsyncIterator[tuple[str, str | None, dict[str, str]]]:
    """(address, its master's address for a slave else None, settings) of every master and
    slave of `cluster`."""
    members = (await admin.cluster_info()).members(cluster)
    masters = {name: addr for name, bid, addr in members if bid == 0}
    for name, bid, addr in members:
        yield addr, None if bid == 0 else masters.get(name, ""), await admin.broker_config(addr)


async def update_config(
    admin: MQAdmin, props: dict[str, str], broker_addr: str | None, cluster: str | None, *, slaves: bool
) -> AsyncIterator[str]:
    """Change settings of `broker_addr`, or of the masters of `cluster` (and its slaves with
    `slaves`); yields each address once changed."""
    for addr in await (members_or if slaves else masters_or)(admin, broker_addr, cluster):
        await admin.update_broker_config(addr, props)
        yield addr


async def maintain(admin: MQAdmin, code: int, broker_addr: str | None, cluster: str | None) -> None:
    """Send one maintenance request (CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC,
    DELETE_EXPIRED_COMMITLOG) to `broker_addr` or every master of `cluster`."""
    for addr in await masters_or(admin, broker_addr, cluster):
        await admin.broker_maintenance(addr, code)


# -- traffic (statsAll) -----------------------------------------------------------------------


@dataclass
class Traffic:
    """A topic's traffic, and one consuming group's (`group` None: nobody consumes it)."""

    topic: str
    group: str | None
    in_tps: float
    in_day: int
    out_tps: float = 0.0
    out_day: int = 0
    backlog: int = 0


async def stat_topics(admin: MQAdmin, only: str | None = None) -> list[str]:
    """The topics statsAll reports, by name: not a group's retry or dead-letter topic."""
    return [t for t in sorted(await admin.topic_list()) if not is_group_topic(t) and (not only or t == only)]


async def traffic(admin: MQAdmin, topic: str) -> list[Traffic]:
    """`topic`'s minute TPS and 24-hour counts summed over its masters, one entry per
    consuming group (StatsAllSubCommand); none for a topic whose details cannot be read."""
    try:
        route = await admin.topic_route(topic)
        groups = await admin.topic_consumed_by(topic)
    except MQClientError:
        return []  # as Java: a topic whose details cannot be read is left out
    masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr is not None]
    in_tps, in_day = await item_on_masters(admin, masters, "TOPIC_PUT_NUMS", topic)
    if not groups:
        return [Traffic(topic, None, in_tps, in_day)]
    out = []
    for group in groups:
        out_tps, out_day = await item_on_masters(admin, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
        try:
            backlog = max((await admin.consume_stats(group, topic)).diff_total, 0)
        except MQClientError:
            backlog = 0
        out.append(Traffic(topic, group, in_tps, in_day, out_tps, out_day, backlog))
    return out


def day_sum(data: dict[str, dict[str, float]]) -> int:
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        total = int((data.get(window) or {}).get("sum") or 0)
        if total:
            return total
    return 0


async def item_on_masters(admin: MQAdmin, masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour count) of one stats item summed over `masters`; a master that
    never counted it adds nothing, as in Java."""
    tps, day = 0.0, 0
    for addr in masters:
        try:
            data = await admin.view_broker_stats_data(addr, name, key)
        except MQClientError:  # AdminResponseError too: the item does not exist there
            continue
        tps += float((data.get("statsMinute") or {}).get("tps") or 0)
        day += day_sum(data)
    return tps, day
