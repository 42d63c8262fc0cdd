"""One round of Apache's MonitorService (mqadmin startMonitoring): for every consumer group
with a retry topic that is online, its undone messages per topic (UndoneMsgs) and what
DefaultMonitorListener notices in its clients' running info: a subscription that differs
among them, a queue a push consumer cannot lock or has not consumed from for a while."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq.client import MessageQueue, MQClientError
from rmq.client.admin import ConsumeStats, MQAdmin, OffsetWrapper
from rmq.protocol.constants import RETRY_PREFIX

from . import groups
from .common import now_ms

BLOCKED_MS = 60_000  # a queue with messages cached and none consumed this long is "blocked"
SETTLED_MS = 120_000  # subscriptions are compared once the consumers have run this long


@dataclass(frozen=True)
class UndoneMsgs:
    """A group's backlog on one topic: in all, on its most behind queue, and how much older
    than the topic's newest message its last consumed one is (ms)."""

    group: str
    topic: str
    total: int
    single_mq: int
    delay_ms: int

    def __str__(self) -> str:
        return (
            f"UndoneMsgs [consumerGroup={self.group}, topic={self.topic}, undoneMsgsTotal={self.total}, "
            f"undoneMsgsSingleMQ={self.single_mq}, undoneMsgsDelayTimeMills={self.delay_ms}]"
        )


@dataclass
class GroupReport:
    group: str
    undone: list[UndoneMsgs] = field(default_factory=list)
    subscription_differs: bool = False
    notes: list[tuple[str, str]] = field(default_factory=list)  # (client id, what is wrong with its queues)


async def _delay_ms(admin: MQAdmin, mq: MessageQueue, ow: OffsetWrapper) -> int:
    """Store time of the queue's newest message less that of the group's last consumed one."""
    if ow.last_timestamp <= 0:
        return 0
    try:
        newest = await admin.pull_queue(mq, ow.broker_offset - 1, 1) if ow.broker_offset > 0 else []
    except MQClientError:
        return 0  # as Java: a queue that cannot be read adds no delay
    return newest[0].store_timestamp - ow.last_timestamp if newest else 0


async def undone_msgs(admin: MQAdmin, group: str, stats: ConsumeStats) -> list[UndoneMsgs]:
    """MonitorService.computeUndoneMsgs for each topic of `stats`, by topic name."""
    by_topic: dict[str, list[tuple[MessageQueue, OffsetWrapper]]] = {}
    for mq, ow in stats.offsets.items():
        by_topic.setdefault(mq.topic, []).append((mq, ow))
    out = []
    for topic, queues in sorted(by_topic.items()):
        total = single = delay = 0
        for mq, ow in sorted(queues):
            single = max(single, ow.diff)
            total += max(ow.diff, 0)
            delay = max(delay, await _delay_ms(admin, mq, ow))
        out.append(UndoneMsgs(group, topic, total, single, delay))
    return out


def _push(info: dict[Any, Any]) -> bool:
    return (info.get("properties") or {}).get("PROP_CONSUME_TYPE") == "CONSUME_PASSIVELY"


def queue_notes(client_id: str, info: dict[Any, Any], now: int) -> str:
    """ConsumerRunningInfo.analyzeProcessQueue: a line per queue of a push consumer that an
    orderly consumer cannot lock, or that a concurrent one has not consumed from for a
    minute with messages cached; "" when all is well."""
    if not _push(info):
        return ""
    orderly = str((info.get("properties") or {}).get("PROP_CONSUMEORDERLY", "false")).lower() == "true"
    lines = []
    for mq, pq in sorted((info.get("mqTable") or {}).items()):
        if not isinstance(pq, dict):
            continue
        text = str(mq)  # MessageQueue's toString
        if orderly and not pq.get("locked"):
            lines.append(f"{client_id} {text} can't lock for a while, {now - int(pq.get('lastLockTimestamp') or 0)}ms")
        elif orderly and pq.get("droped") and int(pq.get("tryUnlockTimes") or 0) > 0:
            lines.append(f"{client_id} {text} unlock {pq['tryUnlockTimes']} times, still failed")
        elif not orderly:
            idle = now - int(pq.get("lastConsumeTimestamp") or 0)
            if idle > BLOCKED_MS and int(pq.get("cachedMsgCount") or 0) > 0:
                lines.append(f"{client_id} {text} can't consume for a while, maybe blocked, {idle}ms")
    return "".join(line + "\n" for line in lines)


def subscription_differs(infos: dict[str, dict[Any, Any]], now: int) -> bool:
    """ConsumerRunningInfo.analyzeSubscription, negated: push consumers that have run for two
    minutes and do not all subscribe alike."""
    first = infos[min(infos)]
    started = int((first.get("properties") or {}).get("PROP_CONSUMER_START_TIMESTAMP") or 0)
    if not _push(first) or now - started <= SETTLED_MS:
        return False
    return not groups.same_subscription(list(infos.values()))


async def group_report(admin: MQAdmin, group: str) -> GroupReport | None:
    """What a round reports of `group`; None when it has no offsets or is offline."""
    try:
        stats = await admin.consume_stats(group)
        await admin.consumer_connection(group)
    except MQClientError:
        return None
    report = GroupReport(group, await undone_msgs(admin, group, stats))
    infos = {conn.client_id: info for conn, info in await groups.running_infos(admin, group) if isinstance(info, dict)}
    if infos:
        now = now_ms()
        report.subscription_differs = subscription_differs(infos, now)
        report.notes = [(cid, text) for cid, info in sorted(infos.items()) if (text := queue_notes(cid, info, now))]
    return report


async def monitor_round(admin: MQAdmin) -> list[GroupReport]:
    """MonitorService.doMonitorWork: every group that has a retry topic, by name."""
    names = sorted(t[len(RETRY_PREFIX) :] for t in await admin.topic_list() if t.startswith(RETRY_PREFIX))
    return [r for name in names if (r := await group_report(admin, name)) is not None]
