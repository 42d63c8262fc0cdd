"""Consumer offsets: reset by time (through the clients, else in the brokers), cloned to
another group, moved to the end."""

from __future__ import annotations

from dataclasses import dataclass

from rmq.client import MessageQueue
from rmq.client.admin import AdminResponseError, MQAdmin, RollbackStats
from rmq.protocol import ResponseCode


@dataclass
class Reset:
    """What a reset by time did: the clients moved to `offsets`, or, nobody being online,
    the brokers' stored offsets were reset (`stats`)."""

    offsets: dict[MessageQueue, int] | None = None
    stats: list[RollbackStats] | None = None


async def reset_by_time(
    admin: MQAdmin, topic: str, group: str, timestamp: int, *, force: bool = True, cpp: bool = False
) -> Reset:
    """Reset `group`'s offsets of `topic` to `timestamp` (ms) through its online clients; with
    none online, in the brokers instead, as mqadmin does."""
    try:
        return Reset(offsets=await admin.reset_offset_by_time(topic, group, timestamp, force=force, cpp=cpp))
    except AdminResponseError as exc:
        if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    return Reset(stats=await admin.reset_offset_by_time_old(group, topic, timestamp, force=force))


async def clone(admin: MQAdmin, src: str, dest: str, topic: str, offline: bool) -> None:
    """Copy `src`'s offsets of `topic` to `dest` on every master serving the topic."""
    route = await admin.topic_route(topic)
    for bd in route.broker_datas:
        if bd.master_addr is not None:
            await admin.clone_group_offset(bd.master_addr, src, dest, topic, offline)


async def skip_accumulated(admin: MQAdmin, topic: str, group: str, *, force: bool = True) -> dict[MessageQueue, int]:
    """Move `group` to the end of `topic` (a reset to timestamp -1)."""
    return await admin.reset_offset_by_time(topic, group, -1, force=force)
