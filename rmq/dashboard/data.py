"""What the pages show, gathered with MQAdmin calls and shaped as plain rows.

Nothing here renders HTML; every function takes the admin client and returns data, so the
same queries serve pages, JSON exports and tests.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import trio

from rmq.admin import brokers
from rmq.admin.messages import TimePage, by_time, origin_topic, trace_views
from rmq.client import MessageExt, MessageQueue, MQAdmin, MQBrokerError, MQClientError
from rmq.protocol import properties as P
from rmq.protocol.constants import (
    BUILTIN_GROUPS,
    DLQ_PREFIX,
    MONITOR_CONSUMER_GROUP,
    RETRY_PREFIX,
    SYSTEM_TOPICS,
    TRACE_TOPIC,
    TRANS_CHECK_GROUP,
)

# The broker's own groups, and two more the RocketMQ dashboard hides.
SYSTEM_GROUPS = frozenset(
    {*BUILTIN_GROUPS, TRANS_CHECK_GROUP, MONITOR_CONSUMER_GROUP, "CID_DefaultHeartBeatSyncerTopic", "CID_SYS_RMQ_TRANS"}
)


def topic_kind(topic: str, cluster_names: frozenset[str] | set[str] = frozenset()) -> str:
    if topic.startswith(RETRY_PREFIX):
        return "RETRY"
    if topic.startswith(DLQ_PREFIX):
        return "DLQ"
    if topic in SYSTEM_TOPICS or topic in cluster_names:
        return "SYSTEM"
    return "NORMAL"


def first_figure(tps: str | None) -> float:
    """The 10 s figure of a runtime-info TPS ("a b c")."""
    try:
        return float((tps or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


# -- cluster ----------------------------------------------------------------------------------


async def cluster_rows(admin: MQAdmin) -> list[dict[str, Any]]:
    """One row per broker (masters and slaves) of every cluster, with its runtime figures;
    a broker that does not answer shows its error instead."""
    rows: list[dict[str, Any]] = []
    for broker in await brokers.runtimes(admin):
        bid, rt = broker.broker_id, broker.table
        row: dict[str, Any] = {"cluster": broker.cluster, "broker": broker.name, "bid": bid, "addr": broker.addr}
        if broker.error is not None:
            row["error"] = str(broker.error)
        else:
            role = rt.get("brokerRole") or ("SLAVE" if bid else "MASTER")
            row.update(
                role=role,
                version=rt.get("brokerVersionDesc", ""),
                in_tps=first_figure(rt.get("putTps")),
                out_tps=first_figure(rt.get("getTransferedTps")),
                disk=float(rt.get("commitLogDiskRatio") or 0) * 100,
                today_in=int(rt.get("msgPutTotalTodayNow") or 0) - int(rt.get("msgPutTotalTodayMorning") or 0),
                today_out=int(rt.get("msgGetTotalTodayNow") or 0) - int(rt.get("msgGetTotalTodayMorning") or 0),
                # a master's figure counts only with a slave connected (else it is the whole log)
                lag=rt.get("slaveFallBehind", "") if bid or int(rt.get("haConnectionNum") or 0) else "",
                runtime=rt,
            )
            if rt.get("dLegerGroup"):
                row["dledger"] = dledger_member(rt)
            if rt.get("controllerMasterEpoch"):
                row["replica"] = controller_replica(rt)
        rows.append(row)
    return rows


def dledger_member(rt: dict[str, str]) -> dict[str, str]:
    """A DLedger member's Raft state from its runtime info (the dLeger* keys)."""
    return {
        "group": rt.get("dLegerGroup", ""),
        "self_id": rt.get("dLegerSelfId", ""),
        "role": rt.get("dLegerRole", ""),
        "term": rt.get("dLegerTerm", ""),
        "leader": rt.get("dLegerLeaderId", ""),
        "commit": rt.get("dLegerCommitIndex", ""),
        "end": rt.get("dLegerEndIndex", ""),
        "applied": rt.get("dLegerAppliedIndex", ""),
        "preferred": rt.get("preferredLeaderId", ""),
    }


def controller_replica(rt: dict[str, str]) -> dict[str, str]:
    """A controller-mode broker's view of its group, from its runtime info (controller* keys)."""
    return {
        "broker_id": rt.get("controllerBrokerId", ""),
        "role": rt.get("brokerRole", ""),
        "epoch": rt.get("controllerMasterEpoch", ""),
        "master": rt.get("controllerMasterBrokerId", ""),
        "sync_state_set": rt.get("syncStateSet", ""),
        "sync_state_set_epoch": rt.get("syncStateSetEpoch", ""),
        "controller": rt.get("controllerLeaderAddress", ""),
        "max_offset": rt.get("commitLogMaxOffset", ""),
    }


def controller_rows(brokers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The controller-mode brokers among `cluster_rows`, by group and controller brokerId."""
    members = [{**b["replica"], "addr": b["addr"], "broker": b["broker"]} for b in brokers if "replica" in b]
    return sorted(members, key=lambda m: (m["broker"], m["broker_id"]))


def dledger_rows(brokers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The DLedger members among `cluster_rows`, by group and member id."""
    members = [{**b["dledger"], "addr": b["addr"], "broker": b["broker"]} for b in brokers if "dledger" in b]
    return sorted(members, key=lambda m: (m["group"], m["self_id"]))


# -- topics -----------------------------------------------------------------------------------


async def topic_rows(
    admin: MQAdmin, query: str = "", kinds: frozenset[str] = frozenset({"NORMAL"})
) -> list[dict[str, str]]:
    info = await admin.cluster_info()
    clusters = set(info.clusters) | set(info.brokers)
    out = []
    for topic in sorted(await admin.topic_list()):
        kind = topic_kind(topic, clusters)
        if kind in kinds and query.lower() in topic.lower():
            out.append({"topic": topic, "kind": kind})
    return out


async def topic_detail(admin: MQAdmin, topic: str) -> dict[str, Any]:
    route = await admin.topic_route(topic)
    stats = await admin.topic_stats(topic)
    queues = [
        {
            "broker": mq.broker_name,
            "qid": mq.queue_id,
            "min": o.min_offset,
            "max": o.max_offset,
            "last": _time_text(o.last_update_timestamp),
        }  # fmt: skip
        for mq, o in sorted(stats.items())
    ]
    brokers = [{"name": bd.broker_name, "addrs": dict(sorted(bd.addrs.items()))} for bd in route.broker_datas]
    queue_datas = [
        {"broker": q.broker_name, "read": q.read_queue_nums, "write": q.write_queue_nums, "perm": q.perm}
        for q in route.queue_datas
    ]
    groups = await admin.topic_consumed_by(topic)
    return {"topic": topic, "queues": queues, "brokers": brokers, "queue_datas": queue_datas, "groups": groups,
            "total": sum(o.max_offset - o.min_offset for o in stats.values())}  # fmt: skip


# -- consumers --------------------------------------------------------------------------------


async def group_names(admin: MQAdmin, *, system: bool = False) -> list[str]:
    """Every subscription group known to a master, system groups only when asked."""
    info = await admin.cluster_info()
    names: set[str] = set()
    for cluster in info.clusters:
        for _, addr in info.masters(cluster):
            try:
                names.update(await admin.subscription_groups(addr))
            except MQClientError:
                continue
    return sorted(n for n in names if system or n not in SYSTEM_GROUPS)


async def group_rows(admin: MQAdmin) -> list[dict[str, Any]]:
    rows = []
    for group in await group_names(admin):
        row: dict[str, Any] = {"group": group, "lag": 0, "tps": 0.0, "clients": 0, "mode": "", "type": ""}
        try:
            stats = await admin.consume_stats(group)
            row.update(lag=stats.diff_total, tps=stats.consume_tps)
        except MQClientError:
            row["lag"] = "-"
        try:
            conn = await admin.consumer_connection(group)
            row.update(clients=len(conn.connections), mode=conn.message_model, type=conn.consume_type)
        except MQClientError:
            pass  # offline: no clients
        rows.append(row)
    return rows


async def group_detail(admin: MQAdmin, group: str) -> dict[str, Any]:
    out: dict[str, Any] = {"group": group, "queues": [], "lag": 0, "tps": 0.0, "clients": [], "subscriptions": []}
    try:
        stats = await admin.consume_stats(group)
        out["queues"] = [
            {
                "topic": mq.topic,
                "broker": mq.broker_name,
                "qid": mq.queue_id,
                "broker_offset": o.broker_offset,
                "consumer_offset": o.consumer_offset,
                "lag": o.diff,
                "last": _time_text(o.last_timestamp),
            }  # fmt: skip
            for mq, o in sorted(stats.offsets.items())
        ]
        out.update(lag=stats.diff_total, tps=stats.consume_tps)
    except MQClientError as exc:
        out["stats_error"] = str(exc)
    try:
        conn = await admin.consumer_connection(group)
        out["clients"] = [{"id": c.client_id, "addr": c.client_addr, "language": c.language, "version": c.version}
                          for c in conn.connections]  # fmt: skip
        out["subscriptions"] = [{"topic": t, "expression": e} for t, e in sorted(conn.subscriptions.items())]
        out.update(mode=conn.message_model, type=conn.consume_type, where=conn.consume_from_where)
    except MQClientError as exc:
        out["offline"] = str(exc)
    info = await admin.cluster_info()
    configs = {}
    for cluster in info.clusters:
        for name, addr in info.masters(cluster):
            try:
                table = await admin.subscription_groups(addr)
            except MQClientError:
                continue
            if group in table:  # Java's spelling of booleans, as mqadmin prints them
                configs[name] = {k: str(v).lower() if isinstance(v, bool) else v for k, v in table[group].items()}
                out.setdefault("config", table[group])  # as the broker holds it, for the edit form
    out["configs"] = configs
    return out


# -- producers --------------------------------------------------------------------------------


async def producer_rows(admin: MQAdmin, topic: str, group: str) -> list[dict[str, Any]]:
    route = await admin.topic_route(topic)
    rows = []
    for bd in route.broker_datas:
        if bd.master_addr is None:
            continue
        try:
            connections = await admin.producer_connection_on(bd.master_addr, group)
        except MQBrokerError as exc:
            if "not exist" in exc.remark:  # the broker's answer when no producer of it is connected
                continue
            raise
        for c in connections:
            rows.append({"broker": bd.broker_name, "id": c.client_id, "addr": c.client_addr,
                         "language": c.language, "version": c.version})  # fmt: skip
    return rows


# -- messages ---------------------------------------------------------------------------------


def message_view(m: MessageExt) -> dict[str, Any]:
    text = m.body.decode("utf-8", "replace")
    return {
        "msg_id": m.properties.get(P.UNIQ_KEY) or m.offset_msg_id,
        "offset_msg_id": m.offset_msg_id,
        "topic": m.topic,
        "tags": m.tags or "",
        "keys": m.keys or "",
        "qid": m.queue_id,
        "offset": m.queue_offset,
        "born": _time_text(m.born_timestamp),
        "stored": _time_text(m.store_timestamp),
        "born_host": f"{m.born_host[0]}:{m.born_host[1]}",
        "store_host": f"{m.store_host[0]}:{m.store_host[1]}",
        "reconsume": m.reconsume_times,
        "size": len(m.body),
        "properties": dict(sorted(m.properties.items())),
        "text": text,
        "hex": m.body.hex(" "),
        "origin": origin_topic(m) or "",
    }


async def messages_by_key(admin: MQAdmin, topic: str, key: str) -> list[dict[str, Any]]:
    return [message_view(m) for m in await admin.query_message(topic, key)]


async def message_by_id(admin: MQAdmin, msg_id: str, topic: str = "") -> dict[str, Any] | None:
    """By offset message id, or by unique key (UNIQ_KEY) within `topic`."""
    msg_id = msg_id.strip()
    if len(msg_id) == 32 and topic:
        found = await admin.query_message(topic, msg_id, unique=True)
        if found:
            return message_view(found[0])
    try:
        return message_view(await admin.view_message(msg_id))
    except MQClientError:
        if not topic:
            raise
    return None


async def messages_by_time(
    admin: MQAdmin, topic: str, begin_ms: int, end_ms: int, page: int = 1, newest_first: bool = True
) -> tuple[list[dict[str, Any]], TimePage]:
    """One page of the messages stored in [begin_ms, end_ms] on every queue of `topic`, newest
    first by default as rocketmq-dashboard shows them, and the page's counts."""
    found = await by_time(admin, topic, begin_ms, end_ms, page=page, newest_first=newest_first)
    return [message_view(m) for m in found.messages], found


async def message_trace(admin: MQAdmin, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[dict[str, Any]]:
    """The message's trace records (Pub, SubBefore, SubAfter) from the trace topic; none when
    tracing was off or the topic does not exist."""
    try:
        views = await trace_views(admin, msg_id, trace_topic)
    except MQClientError:  # MQNoRouteError too: no trace topic
        return []
    rows = [{"type": ctx.trace_type.value, "group": ctx.group_name, "host": host, "time": _time_text(ctx.timestamp),
             "cost": ctx.cost_time, "status": "success" if ctx.success else "failed", "ts": ctx.timestamp}
            for ctx, host in views]  # fmt: skip
    rows.sort(key=lambda r: r["ts"])
    return rows


async def message_tracks(admin: MQAdmin, m: dict[str, Any]) -> list[dict[str, Any]]:
    """Whether each group consuming the message's topic has consumed it, as rocketmq-dashboard's
    message track: NOT_ONLINE (no client), CONSUMED (the group's offset is past it),
    NOT_CONSUME_YET; with the group's online clients, to resend the message to one."""
    try:
        route = await admin.topic_route(m["topic"])
        groups = await admin.topic_consumed_by(m["topic"])
    except MQClientError:
        return []
    broker = next((bd.broker_name for bd in route.broker_datas if m["store_host"] in bd.addrs.values()), None)
    rows = []
    for group in groups:
        row: dict[str, Any] = {"group": group, "clients": [], "error": ""}
        try:
            row["clients"] = [c.client_id for c in (await admin.consumer_connection(group)).connections]
        except MQClientError:
            pass
        offset = None
        try:
            stats = await admin.consume_stats(group, m["topic"])
            mq = MessageQueue(m["topic"], broker or "", m["qid"])
            offset = stats.offsets[mq].consumer_offset if mq in stats.offsets else None
        except MQClientError as exc:
            row["error"] = str(exc)
        if not row["clients"]:
            row["status"] = "NOT_ONLINE"
        elif offset is not None and offset > m["offset"]:
            row["status"] = "CONSUMED"
        else:
            row["status"] = "NOT_CONSUME_YET"
        rows.append(row)
    return rows


async def dlq_topics(admin: MQAdmin) -> list[dict[str, Any]]:
    """Every group's dead-letter topic and the messages it holds."""
    rows = []
    for topic in sorted(t for t in await admin.topic_list() if t.startswith(DLQ_PREFIX)):
        try:
            held: int | str = sum(o.max_offset - o.min_offset for o in (await admin.topic_stats(topic)).values())
        except MQClientError:
            held = "-"
        rows.append({"group": topic[len(DLQ_PREFIX) :], "topic": topic, "held": held})
    return rows


def running_tables(info: dict[Any, Any]) -> list[dict[str, Any]]:
    """A client's running info (ConsumerRunningInfo) as tables: its properties, subscriptions,
    queues (mqTable) and per-topic RT/TPS (statusTable), whatever other part it has too."""
    titles = {"properties": "Properties", "subscriptionSet": "Subscriptions", "mqTable": "Queues",
              "statusTable": "Consume RT and TPS per topic"}  # fmt: skip
    tables = []
    for key in sorted(info, key=lambda k: (list(titles).index(k) if k in titles else 99, str(k))):
        value = info[key]
        title = titles.get(str(key), str(key))
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            columns = sorted({c for v in value.values() for c in v})
            first = "Queue" if key == "mqTable" else "Topic"
            rows = [[_cell(k), *(_cell(v.get(c, "")) for c in columns)] for k, v in sorted(value.items(), key=str)]
            tables.append({"title": title, "columns": [first, *columns], "rows": rows})
        elif isinstance(value, dict):
            tables.append({"title": title, "columns": ["Name", "Value"],
                           "rows": [[str(k), _cell(v)] for k, v in sorted(value.items(), key=str)]})  # fmt: skip
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            columns = sorted({c for v in value for c in v}, key=lambda c: (c != "topic", c))
            tables.append(
                {"title": title, "columns": columns, "rows": [[_cell(v.get(c, "")) for c in columns] for v in value]}
            )
        else:
            tables.append({"title": title, "columns": ["Value"], "rows": [[_cell(value)]]})
    return tables


def _cell(value: Any) -> str:
    if isinstance(value, MessageQueue):
        return f"{value.topic} {value.broker_name} #{value.queue_id}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(_cell(v) for v in sorted(value, key=str))
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in sorted(value.items(), key=str))
    return str(value)


def sort_rows(rows: list[dict[str, Any]], key: str, desc: bool) -> list[dict[str, Any]]:
    """`rows` ordered by column `key` (numbers before text, so "-" lags go last)."""
    if not rows or key not in rows[0]:
        return rows

    def order(row: dict[str, Any]) -> tuple[int, Any]:
        value = row.get(key)
        return (0, value) if isinstance(value, (int, float)) else (1, str(value).lower())

    numbers = [r for r in rows if isinstance(r.get(key), (int, float))]
    texts = [r for r in rows if not isinstance(r.get(key), (int, float))]
    return sorted(numbers, key=order, reverse=desc) + sorted(texts, key=order, reverse=desc)


# -- sampling for the home page -------------------------------------------------------------


@dataclass
class Sampler:
    """TPS of the whole cluster every `interval` seconds for the last hour, and the busiest
    topics (messages in the last hour) every `topics_interval` seconds."""

    admin: MQAdmin
    interval: float = 10.0
    topics_interval: float = 60.0
    max_topics: int = 100
    points: deque[tuple[float, float, float]] = field(default_factory=lambda: deque(maxlen=361))
    busiest: list[tuple[str, float]] = field(default_factory=list)
    error: str = ""

    async def sample_tps(self) -> None:
        rows = await cluster_rows(self.admin)
        masters = [r for r in rows if r.get("bid") == 0 and "error" not in r]
        self.points.append((time.time(), sum(r["in_tps"] for r in masters), sum(r["out_tps"] for r in masters)))

    async def sample_topics(self) -> None:
        sums: list[tuple[str, float]] = []
        for row in (await topic_rows(self.admin))[: self.max_topics]:
            topic = row["topic"]
            try:
                route = await self.admin.topic_route(topic)
            except MQClientError:
                continue
            total = 0.0
            for bd in route.broker_datas:
                if bd.master_addr is None:
                    continue
                try:
                    data = await self.admin.view_broker_stats_data(bd.master_addr, "TOPIC_PUT_NUMS", topic)
                except MQClientError:
                    continue  # nothing sent to it on that broker
                total += float((data.get("statsHour") or {}).get("sum") or 0)
            if total:
                sums.append((topic, total))
        sums.sort(key=lambda item: -item[1])
        self.busiest = sums[:10]

    async def run(self) -> None:
        next_topics = 0.0
        while True:
            try:
                await self.sample_tps()
                if trio.current_time() >= next_topics:
                    await self.sample_topics()
                    next_topics = trio.current_time() + self.topics_interval
                self.error = ""
            except MQClientError as exc:
                self.error = str(exc)
            await trio.sleep(self.interval)


def _time_text(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"
