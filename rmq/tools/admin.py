"""`rmq admin` / `mqadmin`: topics, groups, offsets and messages from the command line.

    rmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t Orders -r 8 -w 8
    rmq admin topicStatus -n 127.0.0.1:9876 -t Orders
    rmq admin queryMsgByKey -n 127.0.0.1:9876 -t Orders -k order-42
    rmq admin dlqResend -n 127.0.0.1:9876 -g my_group

Subcommands carry mqadmin's names and flags (`-n` defaults to $NAMESRV_ADDR) and print
mqadmin's tables. `dlqList` and `dlqResend` are ours: they read `%DLQ%<group>` and send
its messages back to the topic they came from. updateAclConfig, deleteAccessConfig,
updateGlobalWhiteAddr and clusterAclConfigVersion manage brokers' ACL (docs/security.md);
`--accessKey`/`--secretKey` sign the requests (aclopts.py). Tools are thin: everything goes through
`rmq.client.admin.MQAdmin`, plus a Producer for `sendMessage` and `dlqResend`. `--tls` (or
`--tls-config tls.properties`) connects with TLS (tlsopts.py).

A failure prints one line on stderr ("error: <command>: <what failed>") and exits 1;
bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TextIO

import trio

from rmq.client import Message, MessageQueue, MQClientError, MQNoRouteError, Producer
from rmq.client.admin import (
    AdminResponseError,
    ConsumerConnection,
    ConsumeStats,
    MQAdmin,
    SubscriptionGroupConfig,
    TopicConfig,
    version_desc,
)
from rmq.client.message import DLQ_PREFIX, RESERVED_PROPERTIES, RETRY_PREFIX
from rmq.client.route import TopicRoute
from rmq.protocol import ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.acl import PlainAccessConfig
from rmq.protocol.message import MessageExt

from .aclopts import acl_credentials, add_acl_arguments
from .tlsopts import add_tls_arguments, tls_option

Out = TextIO
Args = argparse.Namespace
Runner = Callable[[MQAdmin, Args, Out], Awaitable[int]]

BODY_PREVIEW = 256  # characters of a message body the query commands show
# properties a dead letter keeps when it is sent again: tags, keys and the user's own
RESEND_KEEPS = frozenset({P.TAGS, P.KEYS})

# Table layouts: mqadmin's printf formats as str.format specs.
TOPIC_LIST_CLUSTER = "{:<20}  {:<48}  {:<48}"
TOPIC_ROUTE_LIST = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"
TOPIC_STATUS = "{:<32}  {:<4}  {:<20}  {:<20}    {}"
CLUSTER_LIST = "{:<16}  {:<22}  {:<4}  {:<22} {:<16} {:>19} {:>19} {:>10} {:>5} {:>6}"
CLUSTER_MORE = "{:<16}  {:<32} {:>14} {:>14} {:>14} {:>14}"
DLEDGER_COLUMN = "  {}"
BROKER_STATUS = "{:<32}: {}"
HA_SLAVES = "{:<32}  {:<16} {:>16} {:>16} {:>16} {:>16}"
HA_SLAVE_ROW = "{:<32}  {:<16d} {:>16d} {:>16.2f} {:>16} {:>16d}"
BROKER_STATUS_ADDR = "{:<24} {:<32}: {}"
PROGRESS = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"
GROUPS = "{:<64}  {:<6}  {:<24} {:<5}  {:<14}  {:<7}  {}"
CONNECTION = "{:03d}  {:<32} {:<22} {:<8} {}"
SUBSCRIPTION = "{:03d}  Topic: {:<40} SubExpression: {}"
RESET = "{:<40}  {:<40}  {:<40}"
RESET_OLD = "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}"
BY_KEY = "{:<50} {:>4} {:>40}"
MESSAGE_FIELD = "{:<20} {}"
SEND = "{:<32}  {:<4}  {:<20}    {}"
DLQ_LIST = "{:<32}  {:<32}  {:<4}  {:<8}  {:<10}  {:<23}  {}"
DLQ_RESEND = "{:<32}  {:<32}  {:<12}  {}"
ACL_VERSION = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"


class ToolError(MQClientError):
    """A problem the tool itself found (bad timestamp, message not found...)."""


# -- formatting -----------------------------------------------------------------------------


def row(out: Out, spec: str, *values: object) -> None:
    """One table line: `values` as text, laid out by `spec`."""
    print(spec.format(*(v if isinstance(v, (int, float)) else str(v) for v in values)), file=out)


def front(text: object, width: int) -> str:
    """UtilAll.frontStringAtLeast: at most `width` characters."""
    return str(text)[:width]


def human_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: "yyyy-MM-dd HH:mm:ss,SSS" in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def date_text(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def parse_timestamp(text: str, now_ms: int) -> int:
    """`now`, milliseconds since the epoch, or local time as yyyy-MM-dd#HH:mm:ss:SSS."""
    text = text.strip()
    if text == "now":
        return now_ms
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise ToolError(f"bad timestamp {text!r}: use now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS") from None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value == "true"


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def body_preview(body: bytes) -> str:
    text = body[:BODY_PREVIEW].decode("utf-8", "replace").replace("\r", "\\r").replace("\n", "\\n")
    return text + (f"... ({len(body)} bytes)" if len(body) > BODY_PREVIEW else "")


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def print_message(msg: MessageExt, out: Out) -> None:
    """A message as mqadmin's queryMsgById prints it (the body shown, not saved to a file)."""
    fields: list[tuple[str, object]] = [
        ("OffsetID:", msg.offset_msg_id),
        ("Message ID:", msg.msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags}]"),
        ("Keys:", f"[{msg.keys}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commitlog_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", human_ms(msg.born_timestamp)),
        ("Store Timestamp:", human_ms(msg.store_timestamp)),
        ("Born Host:", _host(msg.born_host)),
        ("Store Host:", _host(msg.store_host)),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in msg.properties.items()) + "}"),
        ("Message Body:", body_preview(msg.body)),
    ]
    for label, value in fields:
        row(out, MESSAGE_FIELD, label, value)


def route_json(route: TopicRoute) -> dict[str, Any]:
    """TopicRouteData as standard JSON (broker ids as string keys)."""
    brokers = sorted(route.broker_datas, key=lambda b: b.broker_name)
    queues = sorted(route.queue_datas, key=lambda q: q.broker_name)
    obj: dict[str, Any] = {
        "brokerDatas": [
            {
                "brokerAddrs": {str(i): a for i, a in sorted(bd.addrs.items())},
                "brokerName": bd.broker_name,
                "cluster": bd.cluster,
            }
            for bd in brokers
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "perm": q.perm,
                "readQueueNums": q.read_queue_nums,
                "topicSysFlag": q.topic_sys_flag,
                "writeQueueNums": q.write_queue_nums,
            }
            for q in queues
        ],
    }
    if route.order_topic_conf:
        obj["orderTopicConf"] = route.order_topic_conf
    return obj


async def _targets(admin: MQAdmin, args: Args) -> list[str]:
    """Broker addresses of `-b addr`, or the masters of `-c cluster`."""
    if args.broker_addr:
        return [args.broker_addr]
    return (await admin.cluster_info()).master_addrs(args.cluster)


# -- topics ---------------------------------------------------------------------------------


async def update_topic(admin: MQAdmin, args: Args, out: Out) -> int:
    config = TopicConfig(args.topic, args.read_queue_nums, args.write_queue_nums, args.perm, order=args.order)
    queues = config.write_queue_nums
    if args.broker_addr:
        await admin.create_topic(args.broker_addr, config)
        if args.order:
            name = (await admin.cluster_info()).broker_name_of(args.broker_addr)
            if name is None:
                raise ToolError(f"broker {args.broker_addr} is not registered with the name server")
            conf = await admin.update_order_conf(args.topic, f"{name}:{queues}", whole_cluster=False)
            print(f"set broker orderConf. isOrder=true, orderConf=[{conf}]", file=out)
        print(f"create topic to {args.broker_addr} success.", file=out)
    else:
        masters = (await admin.cluster_info()).masters(args.cluster)
        for _, addr in masters:
            await admin.create_topic(addr, config)
            print(f"create topic to {addr} success.", file=out)
        if args.order:
            conf = ";".join(f"{name}:{queues}" for name, _ in masters)
            await admin.update_order_conf(args.topic, conf, whole_cluster=True)
            print(f"set cluster orderConf. isOrder=true, orderConf=[{conf}]", file=out)
    print(config, file=out)
    return 0


async def _delete_topic(admin: MQAdmin, cluster: str, topic: str, out: Out) -> None:
    """From the cluster's masters first, then from the name servers (a broker's
    registration only ever adds topics there)."""
    for addr in (await admin.cluster_info()).master_addrs(cluster):
        await admin.delete_topic_in_broker(addr, topic)
    print(f"delete topic [{topic}] from cluster [{cluster}] success.", file=out)
    await admin.delete_topic_in_namesrv(topic, cluster)
    print(f"delete topic [{topic}] from NameServer success.", file=out)


async def delete_topic(admin: MQAdmin, args: Args, out: Out) -> int:
    await _delete_topic(admin, args.cluster, args.topic, out)
    return 0


async def topic_list(admin: MQAdmin, args: Args, out: Out) -> int:
    topics = await admin.topic_list()
    if not args.cluster_mode:
        for topic in topics:
            print(topic, file=out)
        return 0
    row(out, TOPIC_LIST_CLUSTER, "#Cluster Name", "#Topic", "#Consumer Group")
    for topic in topics:
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            continue
        cluster, groups = "", [""]
        try:
            route = await admin.topic_route(topic)
            cluster = next((bd.cluster for bd in route.broker_datas if bd.cluster), "")
            groups = await admin.topic_consumed_by(topic) or [""]
        except MQClientError:
            pass  # as mqadmin: a topic we cannot look into is listed without cluster or groups
        for group in groups:
            row(out, TOPIC_LIST_CLUSTER, front(cluster, 20), front(topic, 48), front(group, 48))
    return 0


async def topic_route(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    if not args.list_format:
        print(json.dumps(route_json(route), indent="\t", ensure_ascii=False), file=out)
        return 0
    row(out, TOPIC_ROUTE_LIST, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    reads = writes = 0
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        bd = route.broker(q.broker_name)
        cluster = bd.cluster if bd else ""
        addrs = "{" + ", ".join(f"{i}={a}" for i, a in sorted(bd.addrs.items())) + "}" if bd else "{}"
        row(out, TOPIC_ROUTE_LIST, cluster, q.broker_name, addrs, q.read_queue_nums, q.write_queue_nums, q.perm)
        reads += q.read_queue_nums
        writes += q.write_queue_nums
    row(out, TOPIC_ROUTE_LIST, "Total:", len(route.broker_datas), "", reads, writes, "")
    return 0


async def topic_status(admin: MQAdmin, args: Args, out: Out) -> int:
    stats = await admin.topic_stats(args.topic)
    if not stats:
        raise ToolError(f"no broker has stats for topic {args.topic!r}")
    row(out, TOPIC_STATUS, "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
    for mq, offset in sorted(stats.items()):
        last = human_ms(offset.last_update_timestamp) if offset.last_update_timestamp > 0 else ""
        row(out, TOPIC_STATUS, front(mq.broker_name, 32), mq.queue_id, offset.min_offset, offset.max_offset, last)
    return 0


# -- brokers and clusters -------------------------------------------------------------------


def _num(table: dict[str, str], key: str) -> float:
    """The first number of a runtime-info value ("putTps" holds three), 0 if absent."""
    try:
        return float(table.get(key, "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _cluster_row(
    out: Out, cluster: str, name: str, bid: int, addr: str, t: dict[str, str], now: int, dledger: bool = False
) -> None:
    earliest = _num(t, "earliestMessageTimeStamp")
    hours = (now - earliest) / 3600 / 1000 if earliest > 0 else 0.0
    in_tps = "{:9.2f}({},{}ms)".format(
        _num(t, "putTps"), t.get("sendThreadPoolQueueSize", ""), t.get("sendThreadPoolQueueHeadWaitTimeMills", "")
    )
    out_tps = "{:9.2f}({},{}ms)".format(
        _num(t, "getTransferedTps"),
        t.get("pullThreadPoolQueueSize", ""),
        t.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
    )
    version = t.get("brokerVersionDesc", "")
    wait = t.get("pageCacheLockTimeMills", "")
    space = _num(t, "commitLogDiskRatio")
    fields = (cluster, name, bid, addr, version, in_tps, out_tps, wait, f"{hours:2.2f}", f"{space:.4f}")
    if dledger:  # e.g. "n1 LEADER term 3"
        member = f"{t.get('dLegerSelfId', '-')} {t.get('dLegerRole', '-')} term {t.get('dLegerTerm', '-')}"
        row(out, CLUSTER_LIST + DLEDGER_COLUMN, *fields, member)
    else:
        row(out, CLUSTER_LIST, *fields)


def _cluster_more_row(out: Out, cluster: str, name: str, t: dict[str, str]) -> None:
    def delta(later: str, earlier: str) -> int:
        return int(_num(t, later) - _num(t, earlier))

    row(
        out,
        CLUSTER_MORE,
        cluster,
        name,
        delta("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
        delta("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
        delta("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        delta("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
    )


async def cluster_list(admin: MQAdmin, args: Args, out: Out) -> int:
    """One row per broker, masters and slaves (#BID), as mqadmin's clusterList; with -i,
    again every interval seconds until interrupted."""
    return await _repeat(args, lambda: _cluster_list_once(admin, args, out))


async def _cluster_list_once(admin: MQAdmin, args: Args, out: Out) -> int:
    info = await admin.cluster_info()
    clusters = [args.cluster] if args.cluster else sorted(info.clusters)
    failed = 0
    rows: list[tuple[str, str, int, str, dict[str, str]]] = []
    for cluster in clusters:
        for name, bid, addr in info.members(cluster):
            try:
                table = await admin.broker_runtime_info(addr)
            except MQClientError as exc:  # as mqadmin: the row is printed anyway
                print(f"warning: {exc}", file=sys.stderr)
                failed += 1
                table = {}
            rows.append((cluster, name, bid, addr, table))
    dledger = any("dLegerRole" in t for *_, t in rows)  # DLedger members: who leads, in which term
    if args.more_stats:
        totals = ("#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
        row(out, CLUSTER_MORE, "#Cluster Name", "#Broker Name", *totals)
    else:
        loads = ("#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE")
        head = ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", *loads)
        row(out, CLUSTER_LIST + DLEDGER_COLUMN if dledger else CLUSTER_LIST, *head, *(("#DLedger",) if dledger else ()))
    now = _now_ms()
    for cluster, name, bid, addr, table in rows:
        if args.more_stats:
            _cluster_more_row(out, cluster, name, table)
        else:
            _cluster_row(out, cluster, name, bid, addr, table, now, dledger)
    return 1 if failed else 0


async def _repeat(args: Args, once: Callable[[], Awaitable[int]]) -> int:
    """`once()`, then with `-i N` again every N seconds until interrupted (mqadmin's
    clusterList and haStatus loop the same way); the last exit code."""
    code = await once()
    while args.interval:
        await trio.sleep(args.interval)
        code = await once()
    return code


async def ha_status(admin: MQAdmin, args: Args, out: Out) -> int:
    """RocketMQ 5.x's haStatus layout: a master's slaves, or a slave's master (`-c`: every
    master of the cluster); with -i, again every interval seconds until interrupted."""
    return await _repeat(args, lambda: _ha_status_once(admin, args, out))


async def _ha_status_once(admin: MQAdmin, args: Args, out: Out) -> int:
    for addr in await _targets(admin, args):
        info = await admin.broker_ha_status(addr)
        if info.get("master"):
            conns = info.get("haConnectionInfo") or []
            print(f"\n#MasterAddr\t{addr}", file=out)
            print(f"#MasterCommitLogMaxOffset\t{info.get('masterCommitLogMaxOffset', 0)}", file=out)
            print(f"#SlaveNum\t{len(conns)}\n#InSyncSlaveNum\t{info.get('inSyncSlaveNums', 0)}", file=out)
            row(out, HA_SLAVES, "#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                "#TransferFromWhere")  # fmt: skip
            for c in conns:
                print(
                    HA_SLAVE_ROW.format(
                        str(c.get("addr", "")), int(c.get("slaveAckOffset", 0)), int(c.get("diff", 0)),
                        int(c.get("transferredByteInSecond", 0)) / 1024.0,
                        "OK" if c.get("inSync") else "Fall Behind", int(c.get("transferFromWhere", 0)),
                    ),
                    file=out,
                )  # fmt: skip
        else:
            c = info.get("haClientRuntimeInfo") or {}
            print(f"\n#MasterAddr\t{c.get('masterAddr', '')}", file=out)
            print(f"#CommitLogMaxOffset\t{c.get('maxOffset', 0)}", file=out)
            print(f"#TransferSpeed(KB/s)\t{int(c.get('transferredByteInSecond', 0)) / 1024.0:.2f}", file=out)
            print(f"#LastReadTime\t{human_ms(int(c.get('lastReadTimestamp', 0)))}", file=out)
            print(f"#LastWriteTime\t{human_ms(int(c.get('lastWriteTimestamp', 0)))}", file=out)
            print(f"#MasterFlushOffset\t{c.get('masterFlushOffset', 0)}", file=out)
    return 0


async def leadership_transfer(admin: MQAdmin, args: Args, out: Out) -> int:
    """Hand a DLedger group's leadership to one member (-t, default its preferredLeaderId)."""
    leader = await admin.transfer_leadership(args.broker_addr, args.transferee)
    print(f"leadership transferred to {leader}", file=out)
    return 0


async def broker_status(admin: MQAdmin, args: Args, out: Out) -> int:
    """A broker's runtime table (a slave's holds its replication fields); `-c`: every master
    and slave of the cluster, each line led by its address, a broker that fails skipped."""
    if args.broker_addr:
        table = await admin.broker_runtime_info(args.broker_addr)
        for key in sorted(table):
            row(out, BROKER_STATUS, key, table[key])
        return 0
    failed = 0
    for addr in (await admin.cluster_info()).all_addrs(args.cluster):
        try:
            table = await admin.broker_runtime_info(addr)
        except MQClientError as exc:  # as mqadmin: report it and go on with the others
            print(f"warning: {exc}", file=sys.stderr)
            failed += 1
            continue
        for key in sorted(table):
            row(out, BROKER_STATUS_ADDR, addr, key, table[key])
    return 1 if failed else 0


# -- subscription groups --------------------------------------------------------------------


async def update_sub_group(admin: MQAdmin, args: Args, out: Out) -> int:
    options = {
        "consume_enable": args.consume_enable,
        "consume_from_min_enable": args.consume_from_min_enable,
        "consume_broadcast_enable": args.consume_broadcast_enable,
        "retry_queue_nums": args.retry_queue_nums,
        "retry_max_times": args.retry_max_times,
        "broker_id": args.broker_id,
        "which_broker_when_consume_slowly": args.which_broker_when_consume_slowly,
        "notify_consumer_ids_changed_enable": args.notify_consumer_ids_changed,
    }
    config = SubscriptionGroupConfig(args.group, **{k: v for k, v in options.items() if v is not None})
    for addr in await _targets(admin, args):
        await admin.create_subscription_group(addr, config)
        print(f"create subscription group to {addr} success.", file=out)
    print(config, file=out)
    return 0


async def delete_sub_group(admin: MQAdmin, args: Args, out: Out) -> int:
    where = f" in cluster [{args.cluster}]" if args.cluster else ""
    for addr in await _targets(admin, args):
        await admin.delete_subscription_group(addr, args.group)
        print(f"delete subscription group [{args.group}] from broker [{addr}]{where} success.", file=out)
    if args.cluster:  # as mqadmin: the group's retry and dead-letter topics go too
        for topic in (RETRY_PREFIX + args.group, DLQ_PREFIX + args.group):
            try:
                await _delete_topic(admin, args.cluster, topic, out)
            except MQClientError as exc:
                print(f"warning: deleting topic {topic} failed: {exc}", file=sys.stderr)
    return 0


# -- consumers and offsets ------------------------------------------------------------------


def _type_desc(consume_type: str) -> str:
    return {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}.get(consume_type, consume_type)


async def _group_progress(admin: MQAdmin, group: str, out: Out) -> int:
    stats = await admin.consume_stats(group)
    row(out, PROGRESS, "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime")
    for mq, ow in sorted(stats.offsets.items()):
        last = date_text(ow.last_timestamp) if ow.last_timestamp else "N/A"
        topic, broker = front(mq.topic, 64), front(mq.broker_name, 32)
        row(out, PROGRESS, topic, broker, mq.queue_id, ow.broker_offset, ow.consumer_offset, ow.diff, last)
    print(file=out)
    print(f"Consume TPS: {stats.consume_tps:.2f}", file=out)
    print(f"Diff Total: {stats.diff_total}", file=out)
    return 0


async def consumer_progress(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.group:
        return await _group_progress(admin, args.group, out)
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
        groups.append((group, cc, stats))
    groups.sort(key=lambda g: (-len(g[1].connections), -g[2].diff_total, g[0]))
    row(out, GROUPS, "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
    for group, cc, stats in groups:
        count = len(cc.connections)
        version = version_desc(cc.min_version) if count else "OFFLINE"
        kind, model, tps = _type_desc(cc.consume_type), cc.message_model, int(stats.consume_tps)
        row(out, GROUPS, front(group, 64), count, version, kind, model, tps, stats.diff_total)
    return 0


async def consumer_connection(admin: MQAdmin, args: Args, out: Out) -> int:
    cc = await admin.consumer_connection(args.group)
    for i, c in enumerate(cc.connections, 1):
        row(out, CONNECTION, i, c.client_id, c.client_addr, c.language, version_desc(c.version))
    print("\nBelow is subscription:", file=out)
    for i, (topic, expression) in enumerate(sorted(cc.subscriptions.items()), 1):
        row(out, SUBSCRIPTION, i, topic, expression)
    print(file=out)
    print(f"ConsumeType: {cc.consume_type}", file=out)
    print(f"MessageModel: {cc.message_model}", file=out)
    print(f"ConsumeFromWhere: {cc.consume_from_where}", file=out)
    return 0


def _rollback_title(args: Args, timestamp: int, group_word: str) -> str:
    return (
        f"rollback consumer offset by specified {group_word}[{args.group}], topic[{args.topic}], "
        f"force[{_java_bool(args.force)}], timestamp(string)[{args.timestamp}], timestamp(long)[{timestamp}]"
    )


async def _reset_old(admin: MQAdmin, args: Args, timestamp: int, out: Out) -> int:
    stats = await admin.reset_offset_by_time_old(args.group, args.topic, timestamp, force=args.force)
    print(_rollback_title(args, timestamp, "consumerGroup"), file=out)
    headers = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset")
    row(out, RESET_OLD, *headers)
    for s in stats:
        name = front(s.broker_name, 32)
        row(out, RESET_OLD, name, s.queue_id, s.broker_offset, s.consumer_offset, s.timestamp_offset, s.rollback_offset)
    return 0


async def reset_offset_by_time(admin: MQAdmin, args: Args, out: Out) -> int:
    timestamp = parse_timestamp(args.timestamp, _now_ms())
    try:
        offsets = await admin.reset_offset_by_time(args.topic, args.group, timestamp, force=args.force, cpp=args.cpp)
    except AdminResponseError as exc:
        if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        # nobody online to tell: reset the offsets in the brokers instead, as mqadmin does
        return await _reset_old(admin, args, timestamp, out)
    print(_rollback_title(args, timestamp, "group"), file=out)
    row(out, RESET, "#brokerName", "#queueId", "#offset")
    for mq, offset in sorted(offsets.items()):
        row(out, RESET, front(mq.broker_name, 32), mq.queue_id, offset)
    return 0


async def reset_offset_by_time_old(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _reset_old(admin, args, parse_timestamp(args.timestamp, _now_ms()), out)


# -- messages -------------------------------------------------------------------------------


async def query_msg_by_key(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await admin.query_message(args.topic, args.key, max_num=args.max_num, begin=args.begin, end=args.end)
    if not msgs:
        raise ToolError(f"no message with key {args.key!r} in topic {args.topic!r}")
    row(out, BY_KEY, "#Message ID", "#QID", "#Offset")
    for msg in msgs:
        row(out, BY_KEY, msg.msg_id, msg.queue_id, msg.queue_offset)
    return 0


async def query_msg_by_id(admin: MQAdmin, args: Args, out: Out) -> int:
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    for n, msg_id in enumerate(ids):
        if n:
            print(file=out)
        print_message(await admin.view_message(msg_id), out)
    return 0


async def query_msg_by_unique_key(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await admin.query_message(args.topic, args.msg_id, unique=True)
    if not msgs:
        raise ToolError(f"no message with unique key {args.msg_id!r} in topic {args.topic!r}")
    for n, msg in enumerate(msgs if args.show_all else msgs[:1]):
        if n:
            print(file=out)
        print_message(msg, out)
    return 0


def admin_producer(admin: MQAdmin) -> Producer:
    # mqadmin names its one-off producer group by the time
    credentials: dict[str, Any] = {}
    if admin.credentials:
        credentials = dict(zip(("access_key", "secret_key"), admin.credentials, strict=True))
    return Producer(f"RMQ_ADMIN_{_now_ms()}", list(admin.namesrv) or None, tls=admin.tls, **credentials)


async def send_message(admin: MQAdmin, args: Args, out: Out) -> int:
    msg = Message(args.topic, args.body, tags=args.tags, keys=args.keys)
    queue = None
    if args.broker_name is not None or args.queue_id is not None:
        if args.broker_name is None or args.queue_id is None:
            raise ToolError("-b brokerName and -i queueId go together")
        queue = MessageQueue(args.topic, args.broker_name, args.queue_id)
    async with admin_producer(admin) as producer:
        result = await producer.send(msg, queue=queue)
    mq = result.message_queue
    row(out, SEND, "#Broker Name", "#QID", "#Send Result", "#MsgId")
    row(out, SEND, mq.broker_name, mq.queue_id, result.status, result.msg_id)
    return 0


async def dead_letters(admin: MQAdmin, group: str, count: int) -> list[MessageExt]:
    """Up to `count` messages of `%DLQ%<group>`; none when the group has no such topic
    (the broker creates it with the first dead letter)."""
    try:
        return await admin.pull_messages(DLQ_PREFIX + group, max_messages=count)
    except MQNoRouteError:
        return []


def origin_topic(msg: MessageExt) -> str | None:
    return msg.properties.get(P.RETRY_TOPIC) or msg.properties.get(P.REAL_TOPIC)


async def dlq_list(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await dead_letters(admin, args.group, args.count)
    row(out, DLQ_LIST, "#Message ID", "#Origin Topic", "#QID", "#Offset", "#Reconsume", "#Store Time", "#Body")
    for m in msgs:
        stored, body = human_ms(m.store_timestamp), front(body_preview(m.body), 60)
        row(out, DLQ_LIST, m.msg_id, origin_topic(m) or "", m.queue_id, m.queue_offset, m.reconsume_times, stored, body)
    print(f"Total: {len(msgs)}", file=out)
    return 0


def resend_copy(msg: MessageExt, topic: str) -> Message:
    """A new message for `topic` with the dead letter's body, flag, tags, keys and user
    properties (it gets a new unique key)."""
    props = {k: v for k, v in msg.properties.items() if k in RESEND_KEEPS or k not in RESERVED_PROPERTIES}
    return Message(topic, msg.body, properties=props, flag=msg.flag)


async def dlq_resend(admin: MQAdmin, args: Args, out: Out) -> int:
    msgs = await dead_letters(admin, args.group, args.count)
    if args.msg_id:
        picked = [m for m in msgs if args.msg_id in (m.msg_id, m.offset_msg_id)]
        if not picked:
            dlq = DLQ_PREFIX + args.group
            raise ToolError(f"message {args.msg_id} is not among the {len(msgs)} messages read from {dlq}")
        msgs = picked
    row(out, DLQ_RESEND, "#Message ID", "#Resent To", "#Send Result", "#New MsgId")
    failed = 0
    if not msgs:
        print("Resent: 0 of 0", file=out)
        return 0
    async with admin_producer(admin) as producer:
        for m in msgs:
            target = args.topic or origin_topic(m)
            if not target:
                failed += 1
                row(out, DLQ_RESEND, m.msg_id, "", "SKIPPED", "no origin topic recorded; pass -t topic")
                continue
            try:
                result = await producer.send(resend_copy(m, target))
            except MQClientError as exc:
                failed += 1
                row(out, DLQ_RESEND, m.msg_id, target, "FAILED", exc)
                continue
            row(out, DLQ_RESEND, m.msg_id, target, result.status, result.msg_id)
    print(f"Resent: {len(msgs) - failed} of {len(msgs)}", file=out)
    return 1 if failed else 0


# -- ACL 1.0 --------------------------------------------------------------------------------


async def _acl_targets(admin: MQAdmin, args: Args) -> list[str]:
    """`-b addr`, or every master and slave of `-c cluster` (fetchMasterAndSlaveAddrByClusterName)."""
    if args.broker_addr:
        return [args.broker_addr]
    return (await admin.cluster_info()).all_addrs(args.cluster)


def _perm_list(text: str | None) -> list[str] | None:
    return None if text is None else [item.strip() for item in text.split(",") if item.strip()]


async def update_acl_config(admin: MQAdmin, args: Args, out: Out) -> int:
    config = PlainAccessConfig(
        access_key=args.access_key.strip(),
        secret_key=args.secret_key.strip(),
        white_remote_address=None if args.white_remote_address is None else args.white_remote_address.strip(),
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=_perm_list(args.topic_perms),
        group_perms=_perm_list(args.group_perms),
    )
    for addr in await _acl_targets(admin, args):
        await admin.update_acl_config(addr, config)
        print(f"create or update plain access config to {addr} success.", file=out)
    shown = {k: v for k, v in config.to_json().items() if k != "secretKey"}
    print(f"PlainAccessConfig{shown}", file=out)
    return 0


async def delete_acl_config(admin: MQAdmin, args: Args, out: Out) -> int:
    access_key = args.access_key.strip()
    for addr in await _acl_targets(admin, args):
        await admin.delete_acl_config(addr, access_key)
        print(f"delete plain access config account from {addr} success.", file=out)
    print(f"account's accesskey is:{access_key}", file=out)
    return 0


async def update_global_white_addr(admin: MQAdmin, args: Args, out: Out) -> int:
    addresses = [a.strip() for a in args.global_white_addrs.split(",") if a.strip()]
    for addr in await _acl_targets(admin, args):
        await admin.update_global_white_addrs(addr, addresses, args.acl_file)
        print(f"update global white remote addresses to {addr} success.", file=out)
    return 0


async def cluster_acl_config_version(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.broker_addr:
        addrs = [args.broker_addr]
    else:
        addrs = (await admin.cluster_info()).master_addrs(args.cluster)
        row(
            out,
            ACL_VERSION,
            "#Cluster Name",
            "#Broker Name",
            "#Broker Addr",
            "#AclFilePath",
            "#AclConfigVersionNum",
            "#AclLastUpdateTime",
        )
    for addr in addrs:
        info = await admin.acl_version_info(addr)
        for path, (counter, timestamp) in sorted(info.files.items()):
            row(
                out,
                ACL_VERSION,
                info.cluster_name,
                info.broker_name,
                info.broker_addr,
                path,
                counter,
                date_text(timestamp),
            )
    if args.broker_addr:
        print("get broker's plain access config version success.", file=out)
    else:
        print("get cluster's plain access config version success.", file=out)
    return 0


# -- command line ---------------------------------------------------------------------------

Parser = argparse.ArgumentParser


def _broker_or_cluster(p: Parser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port")
    group.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")


def _broker_status_args(p: Parser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address ip:port (master or slave)")
    group.add_argument("-c", "--clusterName", dest="cluster", help="every master and slave of this cluster")


def _leadership_transfer_args(p: Parser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="any member's broker address")
    p.add_argument("-t", "--transfereeId", dest="transferee", help="dLegerSelfId of the new leader")


def _topic(p: Parser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _group(p: Parser, required: bool = True) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=required, help="consumer group name")


def _update_topic_args(p: Parser) -> None:
    _broker_or_cluster(p)
    _topic(p)
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 both (default 6)")
    p.add_argument("-o", "--order", type=_bool, default=False, help="true: an ordered topic (default false)")


def _delete_topic_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)


def _topic_list_args(p: Parser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_mode", action="store_true", help="with clusters and groups")


def _topic_route_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-l", "--list", dest="list_format", action="store_true", help="a table instead of JSON")


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _cluster_list_args(p: Parser) -> None:
    p.add_argument("-m", "--moreStats", dest="more_stats", action="store_true", help="message totals")
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")
    p.add_argument("-i", "--interval", type=_seconds, help="print again every this many seconds, until Ctrl-C")


def _ha_status_args(p: Parser) -> None:
    _broker_or_cluster(p)
    p.add_argument(
        "-i", "--interval", type=_seconds, nargs="?", const=3, help="print again every this many seconds (default 3)"
    )


def _update_sub_group_args(p: Parser) -> None:
    _broker_or_cluster(p)
    _group(p)
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=_bool)
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=_bool)
    p.add_argument("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=_bool)
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=int)
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int)
    p.add_argument("-i", "--brokerId", dest="broker_id", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int)
    p.add_argument("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed", type=_bool)


def _delete_sub_group_args(p: Parser) -> None:
    _broker_or_cluster(p)
    _group(p)


def _reset_old_args(p: Parser) -> None:
    _group(p)
    _topic(p)
    p.add_argument("-s", "--timestamp", required=True, help="now, ms since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-f", "--force", type=_bool, default=True, help="true: also move offsets forward (default)")


def _reset_args(p: Parser) -> None:
    _reset_old_args(p)
    p.add_argument("-c", "--cplus", dest="cpp", action="store_true", help="the group's clients are C++ clients")


def _query_key_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-k", "--msgKey", dest="key", required=True)
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=(1 << 63) - 1)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


def _query_id_args(p: Parser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="offset message id(s), comma-separated")


def _query_unique_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the unique key (client message id)")
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="every stored copy")


def _send_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-p", "--body", required=True)
    p.add_argument("-k", "--key", dest="keys")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--broker", dest="broker_name", help="broker name (with -i)")
    p.add_argument("-i", "--qid", dest="queue_id", type=int, help="queue id (with -b)")


def _dlq_list_args(p: Parser) -> None:
    _group(p)
    p.add_argument("-c", "--count", type=int, default=100, help="at most this many messages (default 100)")


def _dlq_resend_args(p: Parser) -> None:
    _dlq_list_args(p)
    p.add_argument("-i", "--msgId", dest="msg_id", help="only this message (unique key or offset id)")
    p.add_argument("-t", "--topic", help="send here instead of the recorded origin topic")


def _update_acl_args(p: Parser) -> None:
    _broker_or_cluster(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account's access key")
    p.add_argument("-s", "--secretKey", dest="secret_key", required=True, help="the account's secret key")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white_remote_address", help="addresses that need no signature")
    p.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="groupA=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", type=_bool, default=False, help="true: an admin account (default false)")


def _delete_acl_args(p: Parser) -> None:
    _broker_or_cluster(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account to delete")


def _update_white_args(p: Parser) -> None:
    _broker_or_cluster(p)
    p.add_argument(
        "-g", "--globalWhiteRemoteAddresses", dest="global_white_addrs", required=True, help="10.10.103.*,192.168.0.*"
    )
    p.add_argument("-p", "--aclFileFullPath", dest="acl_file", help="the broker's ACL file (default: its own)")


# name → (one-line help, runner, options)
COMMANDS: dict[str, tuple[str, Runner, Callable[[Parser], None]]] = {
    "updateTopic": ("create or update a topic", update_topic, _update_topic_args),
    "deleteTopic": ("delete a topic from a cluster and the name servers", delete_topic, _delete_topic_args),
    "topicList": ("list the topics the name server knows", topic_list, _topic_list_args),
    "topicRoute": ("print a topic's route", topic_route, _topic_route_args),
    "topicStatus": ("print a topic's queue offsets", topic_status, _topic),
    "clusterList": ("list brokers with their load", cluster_list, _cluster_list_args),
    "brokerStatus": ("print a broker's runtime figures", broker_status, _broker_status_args),
    "haStatus": ("replication status: a master's slaves or a slave's master", ha_status, _ha_status_args),
    "leadershipTransfer": (
        "hand a DLedger group's leadership to a member",
        leadership_transfer,
        _leadership_transfer_args,
    ),
    "updateSubGroup": ("create or update a subscription group", update_sub_group, _update_sub_group_args),
    "deleteSubGroup": ("delete a subscription group", delete_sub_group, _delete_sub_group_args),
    "consumerProgress": ("a group's progress (every group without -g)", consumer_progress, lambda p: _group(p, False)),
    "consumerConnection": ("a group's connections and subscriptions", consumer_connection, _group),
    "queryMsgByKey": ("find messages by key", query_msg_by_key, _query_key_args),
    "queryMsgById": ("print messages by offset message id", query_msg_by_id, _query_id_args),
    "queryMsgByUniqueKey": ("print a message by unique key", query_msg_by_unique_key, _query_unique_args),
    "resetOffsetByTime": ("reset a group's offsets to a time", reset_offset_by_time, _reset_args),
    "resetOffsetByTimeOld": ("reset a group's offsets in the brokers only", reset_offset_by_time_old, _reset_old_args),
    "sendMessage": ("send one message", send_message, _send_args),
    "dlqList": ("print a group's dead letters", dlq_list, _dlq_list_args),
    "dlqResend": ("send a group's dead letters back to their topics", dlq_resend, _dlq_resend_args),
    "updateAclConfig": ("create or update an ACL account in brokers", update_acl_config, _update_acl_args),
    "deleteAccessConfig": ("delete an ACL account from brokers", delete_acl_config, _delete_acl_args),
    "updateGlobalWhiteAddr": ("set the ACL global white list of brokers", update_global_white_addr, _update_white_args),
    "clusterAclConfigVersion": ("print brokers' ACL file versions", cluster_acl_config_version, _broker_or_cluster),
}
ALIASES = {"deleteAclConfig": "deleteAccessConfig"}  # RocketMQ's command name; deleteAccessConfig is its alias
# these use -a/--accessKey and -s/--secretKey for the account they change (Java's options)
_ACCOUNT_COMMANDS = frozenset({"updateAclConfig", "deleteAccessConfig"})


def all_commands() -> dict[str, tuple[str, Runner, Callable[[Parser], None]]]:
    """COMMANDS and the maintenance commands of admin_ops.py (imported late: it uses this module)."""
    from .admin_ops import COMMANDS as MORE

    return {**COMMANDS, **MORE}


def build_parser() -> Parser:
    parser = Parser(prog="mqadmin", description="Administer a RocketMQ cluster.")
    add_acl_arguments(parser, dest_prefix="global")  # before the command: for every command
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, (help_, runner, add_options) in all_commands().items():
        aliases = [alias for alias, target in ALIASES.items() if target == name]
        p = sub.add_parser(name, help=help_, description=help_, aliases=aliases)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="name server(s), a:9876;b:9876 ($NAMESRV_ADDR)")
        add_tls_arguments(p)
        if name not in _ACCOUNT_COMMANDS:
            add_acl_arguments(p)
        add_options(p)
        p.set_defaults(run=runner)
    return parser


def usage() -> str:
    lines = ["usage: mqadmin <command> [-n namesrvAddr] [options]", "", "commands:"]
    lines += [f"  {name:<24}{help_}" for name, (help_, _, _) in all_commands().items()]
    lines += ["", "See `mqadmin help <command>` for a command's options."]
    return "\n".join(lines)


async def run(argv: Sequence[str], out: Out | None = None, err: Out | None = None) -> int:
    """Run one mqadmin command line in the caller's Trio loop; returns the exit code."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        if len(argv) < 2:
            print(usage(), file=out if argv else err)
            return 0 if argv else 2
        argv = [argv[1], "--help"]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the help or the usage error
        return exc.code if isinstance(exc.code, int) else 2
    try:
        credentials = acl_credentials(args, tools_yml=True)
        async with MQAdmin(args.namesrv, tls=tls_option(args), **credentials) as admin:
            code: int = await args.run(admin, args, out)
            return code
    except MQClientError as exc:
        print(f"error: {args.command}: {exc}", file=err)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return trio.run(run, sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        return 130
