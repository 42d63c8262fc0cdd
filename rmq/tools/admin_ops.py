"""mqadmin's maintenance commands: broker and name-server config, write permission,
KV config, per-broker stats, clients (consumerStatus, producerConnection), message and
queue inspection (queryMsgByOffset, printMsg, printMsgByQueue, queryCq,
queryMsgTraceById), offsets (cloneGroupOffset, skipAccumulatedMessage) and send probes
(sendMsgStatus, checkMsgSendRT, clusterRT). Option letters and output are Java's; the
runners share admin.py's helpers and error handling.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import trio

from rmq.client import Message, MessageQueue, MQClientError
from rmq.client.admin import ORDER_TOPIC_CONFIG, MQAdmin, version_desc
from rmq.client.message import DLQ_PREFIX, RETRY_PREFIX
from rmq.client.rebalance import allocate_averagely
from rmq.client.subscription import Subscription
from rmq.protocol import RequestCode
from rmq.protocol import trace as T

from .admin import (
    RESET,
    Args,
    Out,
    Parser,
    Runner,
    ToolError,
    _bool,
    _broker_or_cluster,
    _group,
    _now_ms,
    _targets,
    _topic,
    admin_producer,
    date_text,
    front,
    parse_timestamp,
    print_message,
    row,
)

CONFIG_ROW = "{:<50}=  {}"
BROKER_CONSUME = "{:<64}  {:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"
CLIENTS = "{:<10} {:<40} {:<20} {}"
PRODUCER = "{:04d}  {:<32} {:<22} {:<8} {}"
OFFSET_ROW = "{:<32}  {:<32}  {:<4}  {:<20}"
DETAIL_ROW = "{:<64}  {:<32}  {:<4}  {}"
RT_ROW = "{:<32}  {:<4}  {:<20}    {}"
CLUSTER_RT = "{:<24}  {:<24}  {:<4}  {:<8}  {:<8}"
TRACE_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"
STATS_HEAD = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}"
STATS_ROW = "{:<64}  {:<64} {:>12d} {:>11.2f} {:>11.2f} {:>14d} {:>14d}"
STATS_NO_CONSUMER = "{:<64}  {:<64} {:>12d} {:>11.2f} {:>11} {:>14d} {:>14}"


def _config_table(out: Out, title: str, table: dict[str, str]) -> None:
    print(f"============{title}============", file=out)
    for key in sorted(table):
        row(out, CONFIG_ROW, key, table[key])
    print(file=out)


def _kv(args: Args) -> dict[str, str]:
    return {args.key.strip(): args.value.strip()}


# -- brokers --------------------------------------------------------------------------------


async def get_broker_config(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.broker_addr:
        _config_table(out, args.broker_addr, await admin.broker_config(args.broker_addr))
        return 0
    members = (await admin.cluster_info()).members(args.cluster)
    masters = {name: addr for name, bid, addr in members if bid == 0}
    for name, bid, addr in members:
        title = f"Master: {addr}" if bid == 0 else f"My Master: {masters.get(name, '')}=====Slave: {addr}"
        _config_table(out, title, await admin.broker_config(addr))
    return 0


async def update_broker_config(admin: MQAdmin, args: Args, out: Out) -> int:
    info = None if args.broker_addr else await admin.cluster_info()
    addrs = [args.broker_addr] if info is None else (
        info.all_addrs(args.cluster) if args.update_all else info.master_addrs(args.cluster)
    )  # fmt: skip
    for addr in addrs:
        await admin.update_broker_config(addr, _kv(args))
        print(f"update broker config success, {addr}", file=out)
    return 0


async def broker_consume_stats(admin: MQAdmin, args: Args, out: Out) -> int:
    stats = await admin.broker_consume_stats(args.broker_addr, is_order=args.order)
    row(out, BROKER_CONSUME, "#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
        "#Diff", "#LastTime")  # fmt: skip
    for entry in stats.get("consumeStatsList") or []:
        for group, stats_list in entry.items():
            for cs in stats_list:
                for mq, ow in sorted((cs.get("offsetTable") or {}).items()):
                    diff = int(ow["brokerOffset"]) - int(ow["consumerOffset"])
                    if diff < args.level:
                        continue
                    last = int(ow.get("lastTimestamp") or 0)
                    row(out, BROKER_CONSUME, front(mq.topic, 64), group, front(mq.broker_name, 32), mq.queue_id,
                        ow["brokerOffset"], ow["consumerOffset"], diff, date_text(last) if last else "N/A")  # fmt: skip
    print(f"\nDiff Total: {stats.get('totalDiff', 0)}", file=out)
    return 0


def _day_sum(data: dict[str, dict[str, float]]) -> int:
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        total = int((data.get(window) or {}).get("sum") or 0)
        if total:
            return total
    return 0


async def _item_on_masters(admin: MQAdmin, masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour count) of one stats item summed over `masters`; a master that
    never counted it adds nothing, as in Java."""
    tps, day = 0.0, 0
    for addr in masters:
        try:
            data = await admin.view_broker_stats_data(addr, name, key)
        except MQClientError:  # AdminResponseError too: the item does not exist there
            continue
        tps += float((data.get("statsMinute") or {}).get("tps") or 0)
        day += _day_sum(data)
    return tps, day


async def stats_all(admin: MQAdmin, args: Args, out: Out) -> int:
    """Per topic and consumer group: backlog, in/out TPS over the last minute and 24-hour
    counts, from every master's VIEW_BROKER_STATS_DATA (StatsAllSubCommand's layout)."""
    row(out, STATS_HEAD, "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
        "#OutMsg24Hour")  # fmt: skip
    for topic in sorted(await admin.topic_list()):
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or (args.topic and topic != args.topic):
            continue
        try:
            route = await admin.topic_route(topic)
            groups = await admin.topic_consumed_by(topic)
        except MQClientError:
            continue  # as Java: a topic whose details cannot be read is left out
        masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr is not None]
        in_tps, in_day = await _item_on_masters(admin, masters, "TOPIC_PUT_NUMS", topic)
        if not groups:
            if not args.active or in_day > 0:
                row(out, STATS_NO_CONSUMER, front(topic, 64), "", 0, in_tps, "", in_day, "NO_CONSUMER")
            continue
        for group in groups:
            out_tps, out_day = await _item_on_masters(admin, masters, "GROUP_GET_NUMS", f"{topic}@{group}")
            try:
                backlog = max((await admin.consume_stats(group, topic)).diff_total, 0)
            except MQClientError:
                backlog = 0
            if not args.active or in_day > 0 or out_day > 0:
                row(out, STATS_ROW, front(topic, 64), front(group, 64), backlog, in_tps, out_tps, in_day, out_day)
    return 0


async def _maintenance(admin: MQAdmin, args: Args, out: Out, code: int) -> int:
    for addr in await _targets(admin, args):
        await admin.broker_maintenance(addr, code)
    print("success", file=out)
    return 0


async def clean_expired_cq(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _maintenance(admin, args, out, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


async def clean_unused_topic(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _maintenance(admin, args, out, RequestCode.CLEAN_UNUSED_TOPIC)


async def delete_expired_commit_log(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _maintenance(admin, args, out, RequestCode.DELETE_EXPIRED_COMMITLOG)


# -- name servers ---------------------------------------------------------------------------


async def get_namesrv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    for addr, table in (await admin.namesrv_config()).items():
        _config_table(out, addr, table)
    return 0


async def update_namesrv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    addrs = await admin.update_namesrv_config(_kv(args))
    print(f"update name server config success![{', '.join(addrs)}]\n{args.key} : {args.value}", file=out)
    return 0


async def _write_perm(admin: MQAdmin, args: Args, out: Out, add: bool) -> int:
    word = "add" if add else "wipe"
    for ns, count in await admin.change_write_perm(args.broker_name, add=add):
        print(f"{word} write perm of broker[{args.broker_name}] in name server[{ns}] OK, {count}", file=out)
    return 0


async def wipe_write_perm(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _write_perm(admin, args, out, add=False)


async def add_write_perm(admin: MQAdmin, args: Args, out: Out) -> int:
    return await _write_perm(admin, args, out, add=True)


async def update_kv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    await admin.put_kv_config(args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.", file=out)
    return 0


async def delete_kv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    await admin.delete_kv_config(args.namespace, args.key)
    print("delete kv config from namespace success.", file=out)
    return 0


async def update_order_conf(admin: MQAdmin, args: Args, out: Out) -> int:
    method = args.method.strip().lower()
    if method == "get":
        conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, args.topic)
        print(f"get orderConf success. topic=[{args.topic}], orderConf=[{conf}] ", file=out)
    elif method == "put":
        if not args.order_conf:
            raise ToolError("-v orderConf is required with -m put (brokerName1:num;brokerName2:num)")
        await admin.put_kv_config(ORDER_TOPIC_CONFIG, args.topic, args.order_conf)
        print(f"update orderConf success. topic=[{args.topic}], orderConf=[{args.order_conf}]", file=out)
    elif method == "delete":
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG, args.topic)
        print(f"delete orderConf success. topic=[{args.topic}]", file=out)
    else:
        raise ToolError(f"bad method {args.method!r}: use get, put or delete")
    return 0


# -- topics ---------------------------------------------------------------------------------


async def topic_cluster_list(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    for cluster in sorted({bd.cluster for bd in route.broker_datas}):
        print(cluster, file=out)
    return 0


async def allocate_mq(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    mqs = route.subscribe_queues(args.topic)
    ips = [ip.strip() for ip in args.ip_list.split(",") if ip.strip()]
    if not ips:
        raise ToolError("-i ipList names no client")
    result = {ip: [mq.to_json() for mq in allocate_averagely("aa", ip, mqs, ips)] for ip in ips}
    print(json.dumps({"result": result}), file=out)
    return 0


# -- clients --------------------------------------------------------------------------------


async def producer_connection(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    conns = []
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        if bd.master_addr is not None:
            conns = await admin.producer_connection_on(bd.master_addr, args.group)
            break
    for i, c in enumerate(conns, 1):
        row(out, PRODUCER, i, c.client_id, c.client_addr, c.language, version_desc(c.version))
    return 0


def _running_info_text(info: dict[Any, Any], out: Out) -> None:
    """ConsumerRunningInfo.formatString()."""
    print("#Consumer Properties#", file=out)
    for key, value in sorted((info.get("properties") or {}).items()):
        print(f"{key:<40}: {value}", file=out)
    print("\n\n#Consumer Subscription#", file=out)
    for i, sub in enumerate(info.get("subscriptionSet") or [], 1):
        mode = _java_bool(sub.get("classFilterMode", False))
        print(f"{i:03d} Topic: {sub.get('topic', ''):<40} ClassFilter: {mode:<8} SubExpression: "
              f"{sub.get('subString', '')}", file=out)  # fmt: skip
    mq_table = info.get("mqTable") or {}
    print("\n\n#Consumer Offset#", file=out)
    row(out, "{:<64}  {:<32}  {:<4}  {:<20}", "#Topic", "#Broker Name", "#QID", "#Consumer Offset")
    for mq, pq in sorted(mq_table.items()):
        row(out, OFFSET_ROW, mq.topic, mq.broker_name, mq.queue_id, pq.get("commitOffset", -1))
    print("\n\n#Consumer MQ Detail#", file=out)
    row(out, DETAIL_ROW, "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo")
    for mq, pq in sorted(mq_table.items()):
        detail = "ProcessQueueInfo [" + ", ".join(f"{k}={v}" for k, v in pq.items()) + "]"
        row(out, DETAIL_ROW, mq.topic, mq.broker_name, mq.queue_id, detail)
    print("\n\n#Consumer RT&TPS#", file=out)
    row(out, "{:<64}  {:<14}  {:<14}  {:<14}  {:<14}  {:<18}  {:<25}", "#Topic", "#Pull RT", "#Pull TPS",
        "#Consume RT", "#ConsumeOK TPS", "#ConsumeFailed TPS", "#ConsumeFailedMsgsInHour")  # fmt: skip
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        row(out, "{:<64}  {:<14.2f}  {:<14.2f}  {:<14.2f}  {:<14.2f}  {:<18.2f}  {:<25}", topic,
            float(st.get("pullRT", 0)), float(st.get("pullTPS", 0)), float(st.get("consumeRT", 0)),
            float(st.get("consumeOKTPS", 0)), float(st.get("consumeFailedTPS", 0)),
            int(st.get("consumeFailedMsgs", 0)))  # fmt: skip


def _java_bool(value: object) -> str:
    return "true" if value else "false"


async def consumer_status(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.client_id:
        info = await admin.consumer_running_info(args.group, args.client_id, jstack=args.jstack, addr=args.broker_addr)
        _running_info_text(info, out)
        return 0
    cc = await admin.consumer_connection(args.group)
    row(out, CLIENTS, "#Index", "#ClientId", "#Version", "#ConsumerRunningInfo")
    infos = {}
    for i, conn in enumerate(sorted(cc.connections, key=lambda c: c.client_id), 1):
        try:
            info = await admin.consumer_running_info(
                args.group, conn.client_id, jstack=args.jstack, addr=args.broker_addr
            )
        except MQClientError as exc:
            row(out, CLIENTS, i, conn.client_id, version_desc(conn.version), f"failed: {exc}")
            continue
        infos[conn.client_id] = info
        queues = len(info.get("mqTable") or {})
        row(out, CLIENTS, i, conn.client_id, version_desc(conn.version), f"{queues} queues")
    subs = {json.dumps(sorted((s["topic"], s["subString"]) for s in i.get("subscriptionSet") or []))
            for i in infos.values()}  # fmt: skip
    if len(subs) <= 1:
        print("\n\nSame subscription in the same group of consumer", file=out)
        owned = [mq for i in infos.values() for mq in (i.get("mqTable") or {})]
        ok = len(owned) == len(set(owned))
        print(f"\n\nRebalance {'OK' if ok else 'Failed'}", file=out)
    else:
        print("\n\nWARN: Different subscription in the same group of consumer!!!", file=out)
    return 0


async def get_consumer_config(admin: MQAdmin, args: Args, out: Out) -> int:
    found = 0
    info = await admin.cluster_info()
    for cluster in sorted(info.clusters):
        for name, addr in info.masters(cluster):
            config = (await admin.subscription_groups(addr)).get(args.group)
            if config is None:
                continue
            found += 1
            print(f"============================={cluster}:{name}=============================", file=out)
            for key in sorted(config):
                value = config[key]
                text = "" if value is None else _java_bool(value) if isinstance(value, bool) else value
                print(f"{key:<40}=  {text}", file=out)
    if not found:
        raise ToolError(f"no broker has a subscription group {args.group!r}")
    return 0


# -- offsets --------------------------------------------------------------------------------


async def clone_group_offset(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    for bd in route.broker_datas:
        if bd.master_addr is not None:
            await admin.clone_group_offset(bd.master_addr, args.src_group, args.dest_group, args.topic, args.offline)
    print(f"clone group offset success. srcGroup[{args.src_group}], destGroup=[{args.dest_group}], "
          f"topic[{args.topic}]", file=out)  # fmt: skip
    return 0


async def skip_accumulated_message(admin: MQAdmin, args: Args, out: Out) -> int:
    offsets = await admin.reset_offset_by_time(args.topic, args.group, -1, force=args.force)
    row(out, RESET, "#brokerName", "#queueId", "#offset")
    for mq, offset in sorted(offsets.items()):
        row(out, RESET, front(mq.broker_name, 32), mq.queue_id, offset)
    return 0


# -- messages and queues --------------------------------------------------------------------


async def query_msg_by_offset(admin: MQAdmin, args: Args, out: Out) -> int:
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    msgs = await admin.pull_queue(mq, args.offset, 1)
    if not msgs or msgs[0].queue_offset != args.offset:
        raise ToolError(f"no message at offset {args.offset} of {mq}")
    print_message(msgs[0], out)
    return 0


def _decode(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset, "replace")
    except LookupError:
        raise ToolError(f"unknown charset {charset!r}") from None


def _msg_line(msg: Any, args: Args) -> str:
    body = _decode(msg.body, args.charset) if args.print_body else "NOT PRINT BODY"
    text = (
        f"MessageExt [queueId={msg.queue_id}, queueOffset={msg.queue_offset}, commitLogOffset={msg.commitlog_offset}, "
        f"storeTimestamp={msg.store_timestamp}, reconsumeTimes={msg.reconsume_times}, topic={msg.topic}, "
        f"tags={msg.tags}, keys={msg.keys}]"
    )
    return f"MSGID: {msg.msg_id} {text} BODY: {body}"


async def _queue_range(admin: MQAdmin, mq: MessageQueue, args: Args) -> tuple[int, int]:
    """[first, end) offsets of `mq` within -b/-e (the whole queue without them)."""
    stats = (await admin.topic_stats(mq.topic)).get(mq)
    if stats is None:
        raise ToolError(f"no queue {mq}")
    low, high = stats.min_offset, stats.max_offset
    now = _now_ms()
    if args.begin:
        begin = parse_timestamp(args.begin, now)
        low = max(low, await admin.api.search_offset(await _addr(admin, mq), mq, begin, admin.timeout))
    if args.end:
        end = parse_timestamp(args.end, now)
        high = min(high, await admin.api.search_offset(await _addr(admin, mq), mq, end, admin.timeout))
    return low, high


async def _addr(admin: MQAdmin, mq: MessageQueue) -> str:
    bd = (await admin.topic_route(mq.topic)).broker(mq.broker_name)
    addr = bd.any_addr() if bd is not None else None
    if addr is None:
        raise ToolError(f"broker {mq.broker_name} is not in the route of {mq.topic}")
    return addr


async def _matching(admin: MQAdmin, mq: MessageQueue, args: Args) -> tuple[int, int, list[Any]]:
    low, high = await _queue_range(admin, mq, args)
    sub = Subscription.parse(mq.topic, args.sub_expression or "*", 0)
    msgs = await admin.pull_queue(mq, low, max(high - low, 0)) if high > low else []
    return low, high, [m for m in msgs if sub.matches(m.tags)]


async def print_msg(admin: MQAdmin, args: Args, out: Out) -> int:
    route = await admin.topic_route(args.topic)
    for mq in sorted(route.subscribe_queues(args.topic)):
        low, high, msgs = await _matching(admin, mq, args)
        print(f"minOffset={low}, maxOffset={high}, {mq}", file=out)
        for msg in msgs:
            print(_msg_line(msg, args), file=out)
        print("--------------------------------------------------------", file=out)
    return 0


async def print_msg_by_queue(admin: MQAdmin, args: Args, out: Out) -> int:
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    _, _, msgs = await _matching(admin, mq, args)
    if args.print_msg:
        for msg in msgs:
            print(_msg_line(msg, args), file=out)
    if args.calculate:
        for tag, count in sorted(Counter(m.tags or "" for m in msgs).items(), key=lambda t: (-t[1], t[0])):
            print(f"Tag: {tag:<30} Count: {count}", file=out)
    return 0


async def query_cq(admin: MQAdmin, args: Args, out: Out) -> int:
    addr = args.broker_addr
    if not addr:
        route = await admin.topic_route(args.topic)
        addr = next((bd.master_addr for bd in route.broker_datas if bd.master_addr), None)
        if addr is None:
            raise ToolError(f"no master serves topic {args.topic!r}")
    body = await admin.query_consume_queue(addr, args.topic, args.queue, args.index, args.count, args.group)
    if body.get("subscriptionData"):
        print(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=4)}", file=out)
        print("======================================", file=out)
    print(f"Queue data: \nmax: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}", file=out)
    print("======================================", file=out)
    for i, entry in enumerate(body.get("queueData") or [], args.index):
        print(f"idx: {i}", file=out)
        text = (
            f"ConsumeQueueData{{physicOffset={entry['physicOffset']}, physicSize={entry['physicSize']}, "
            f"tagsCode={entry['tagsCode']}, extendDataJson='null', bitMap='null', eval=false, "
            f"msg='{entry.get('msg', '')}'}}"
        )
        print(text, file=out)
        print("======================================", file=out)
    return 0


async def query_msg_trace_by_id(admin: MQAdmin, args: Args, out: Out) -> int:
    """Java's layout: each Pub, then each consumer group's SubAfter records (SubBefore is
    not shown); the client host is the trace message's born host."""
    topic = args.trace_topic or T.TRACE_TOPIC
    msgs = await admin.query_message(topic, args.msg_id, max_num=args.max_num, begin=args.begin, end=args.end)
    views: list[tuple[T.TraceContext, str]] = []
    for m in msgs:
        try:
            contexts = T.decode_trace(m.body.decode("utf-8", "replace"))
        except T.TraceFormatError:
            continue  # not a trace message we can read: skipped, as Java skips what it cannot parse
        host = m.born_host[0]
        views += [(ctx, host) for ctx in contexts if any(b.msg_id == args.msg_id for b in ctx.beans)]
    if not any(ctx.trace_type is not T.SUB_BEFORE for ctx, _ in views):
        raise ToolError(f"no trace of message {args.msg_id} in {topic}")
    consumers: dict[str, list[tuple[T.TraceContext, str]]] = {}
    for ctx, host in sorted(views, key=lambda v: v[0].timestamp):
        status = "success" if ctx.success else "failed"
        if ctx.trace_type is T.PUB:
            row(out, TRACE_ROW, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
            row(out, TRACE_ROW, "Pub", ctx.group_name, host, date_text(ctx.timestamp), f"{ctx.cost_time}ms", status)
            print(file=out)
        elif ctx.trace_type is T.SUB_AFTER:
            consumers.setdefault(ctx.group_name, []).append((ctx, host))
    for group, subs in consumers.items():
        row(out, TRACE_ROW, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        for ctx, host in subs:
            status = "success" if ctx.success else "failed"
            row(out, TRACE_ROW, "Sub", group, host, date_text(ctx.timestamp), f"{ctx.cost_time}ms", status)
        print(file=out)
    return 0


# -- send probes ----------------------------------------------------------------------------


async def send_msg_status(admin: MQAdmin, args: Args, out: Out) -> int:
    body = os.urandom(args.message_size // 2 + 1).hex()[: args.message_size].encode()
    async with admin_producer(admin) as producer:
        for _ in range(args.count):
            begin = time.monotonic()
            result = await producer.send(Message(args.broker_name, body))
            print(f"rt={int((time.monotonic() - begin) * 1000)}ms, SendResult={result}", file=out)
    return 0


async def check_msg_send_rt(admin: MQAdmin, args: Args, out: Out) -> int:
    body = b"x" * args.size
    total = 0.0
    row(out, RT_ROW, "#Broker Name", "#QID", "#Send Result", "#RT")
    async with admin_producer(admin) as producer:
        for _ in range(args.amount):
            begin = time.monotonic()
            try:
                result = await producer.send(Message(args.topic, body))
                ok, mq = True, result.message_queue
            except MQClientError:
                ok, mq = False, None
            rt = (time.monotonic() - begin) * 1000
            total += rt
            row(out, RT_ROW, mq.broker_name if mq else "", mq.queue_id if mq else "", _java_bool(ok), f"{rt:.0f}")
    print(f"Avg RT: {total / max(args.amount, 1):.2f}", file=out)
    return 0


async def cluster_rt(admin: MQAdmin, args: Args, out: Out) -> int:
    """Sends `-a` messages to each master's broker-name topic, `-i` seconds apart when
    given more than once (`-c` limits it to one cluster)."""
    info = await admin.cluster_info()
    clusters = [args.cluster] if args.cluster else sorted(info.clusters)
    body = b"x" * args.size
    row(out, CLUSTER_RT, "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
    async with admin_producer(admin) as producer:
        for cluster in clusters:
            for name, _ in info.masters(cluster):
                ok = failed = 0
                spent = 0.0
                for _ in range(args.amount):
                    begin = time.monotonic()
                    try:
                        await producer.send(Message(name, body))
                        ok += 1
                        spent += time.monotonic() - begin
                    except MQClientError:
                        failed += 1
                rt = spent * 1000 / ok if ok else 0.0
                row(out, CLUSTER_RT, cluster, name, f"{rt:.2f}", ok, failed)
                if args.interval:
                    await trio.sleep(args.interval)
    return 0


# -- command line ---------------------------------------------------------------------------


def _key_value(p: Parser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


def _broker_config_args(p: Parser) -> None:
    _broker_or_cluster(p)


def _update_broker_config_args(p: Parser) -> None:
    _broker_or_cluster(p)
    p.add_argument("-a", "--updateAllBroker", dest="update_all", type=_bool, default=False,
                   help="true: slaves of the cluster too")  # fmt: skip
    _key_value(p)


def _broker_consume_stats_args(p: Parser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True)
    p.add_argument("-t", "--timeoutMillis", dest="timeout_ms", type=int, default=50000)
    p.add_argument("-l", "--level", type=int, default=0, help="print only queues at least this far behind")
    p.add_argument("-o", "--order", type=_bool, default=False, help="true: only orderly groups")


def _stats_all_args(p: Parser) -> None:
    p.add_argument("-a", "--activeTopic", dest="active", action="store_true", help="print active topics only")
    p.add_argument("-t", "--topic", help="print this topic only")


def _maintenance_args(p: Parser) -> None:
    _broker_or_cluster(p)


def _broker_name(p: Parser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)


def _kv_args(p: Parser, value: bool = True) -> None:
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    if value:
        p.add_argument("-v", "--value", required=True)


def _order_conf_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-v", "--orderConf", dest="order_conf", help="brokerName1:num;brokerName2:num")
    p.add_argument("-m", "--method", required=True, help="get, put or delete")


def _allocate_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma-separated")


def _producer_conn_args(p: Parser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True)
    _topic(p)


def _consumer_status_args(p: Parser) -> None:
    _group(p)
    p.add_argument("-i", "--clientId", dest="client_id")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr")
    p.add_argument("-s", "--jstack", action="store_true")


def _consumer_config_args(p: Parser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True)


def _clone_args(p: Parser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src_group", required=True)
    p.add_argument("-d", "--destGroup", dest="dest_group", required=True)
    _topic(p)
    p.add_argument("-o", "--offline", type=_bool, default=False)


def _skip_args(p: Parser) -> None:
    _group(p)
    _topic(p)
    p.add_argument("-f", "--force", type=_bool, default=True)
    p.add_argument("-c", "--cluster", help="accepted for Java compatibility")


def _by_offset_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)
    p.add_argument("-f", "--bodyFormat", dest="body_format", help="accepted; the body is shown as text")


def _print_common(p: Parser) -> None:
    _topic(p)
    p.add_argument("-c", "--charsetName", dest="charset", default="utf-8")
    p.add_argument("-s", "--subExpression", dest="sub_expression", default="*")
    p.add_argument("-b", "--beginTimestamp", dest="begin")
    p.add_argument("-e", "--endTimestamp", dest="end")
    p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=True)


def _print_by_queue_args(p: Parser) -> None:
    _print_common(p)
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-p", "--printMsg", dest="print_msg", type=_bool, default=False)
    p.add_argument("-f", "--calculate", type=_bool, default=False, help="count messages by tag")
    p.set_defaults(print_body=False)  # Java: printBody false(default) here, true for printMsg


def _query_cq_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-q", "--queue", type=int, required=True)
    p.add_argument("-i", "--index", type=int, required=True)
    p.add_argument("-c", "--count", type=int, required=True)
    p.add_argument("-b", "--broker", dest="broker_addr")
    p.add_argument("-g", "--consumer", dest="group")


def _trace_args(p: Parser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True)
    p.add_argument("-t", "--traceTopic", dest="trace_topic")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=(1 << 63) - 1)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


def _send_status_args(p: Parser) -> None:
    _broker_name(p)
    p.add_argument("-s", "--messageSize", dest="message_size", type=int, default=128)
    p.add_argument("-c", "--count", type=int, default=50)


def _send_rt_args(p: Parser) -> None:
    _topic(p)
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)


def _cluster_rt_args(p: Parser) -> None:
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)
    p.add_argument("-c", "--cluster")
    p.add_argument("-i", "--interval", type=int, default=0, help="seconds to wait between brokers")
    p.add_argument("-p", "--print log", dest="print_log", type=_bool, default=False)
    p.add_argument("-m", "--machine room", dest="machine_room", default="noname")


def _positive(args: Args) -> None:
    for name in ("count", "amount", "size", "message_size"):
        value = getattr(args, name, None)
        if isinstance(value, int) and value <= 0:
            raise ToolError(f"{name} must be > 0, got {value}")


def _checked(runner: Runner) -> Runner:
    async def run(admin: MQAdmin, args: Args, out: Out) -> int:
        _positive(args)
        return await runner(admin, args, out)

    return run


COMMANDS: dict[str, tuple[str, Runner, Callable[[argparse.ArgumentParser], None]]] = {
    "getBrokerConfig": ("print brokers' settings", get_broker_config, _broker_config_args),
    "updateBrokerConfig": ("change a setting of running brokers", update_broker_config, _update_broker_config_args),
    "brokerConsumeStats": ("every group's progress on one broker", broker_consume_stats, _broker_consume_stats_args),
    "cleanExpiredCQ": ("drop consume queues of deleted topics", clean_expired_cq, _maintenance_args),
    "cleanUnusedTopic": ("drop consume queues of unused topics", clean_unused_topic, _maintenance_args),
    "deleteExpiredCommitLog": ("delete expired CommitLog files now", delete_expired_commit_log, _maintenance_args),
    "getNamesrvConfig": ("print the name servers' settings", get_namesrv_config, lambda p: None),
    "updateNamesrvConfig": ("change a setting of the name servers", update_namesrv_config, _key_value),
    "wipeWritePerm": ("take write permission from a broker", wipe_write_perm, _broker_name),
    "addWritePerm": ("give write permission back to a broker", add_write_perm, _broker_name),
    "updateKvConfig": ("create or update a name-server KV entry", update_kv_config, _kv_args),
    "deleteKvConfig": ("delete a name-server KV entry", delete_kv_config, lambda p: _kv_args(p, value=False)),
    "updateOrderConf": ("get, put or delete a topic's order conf", update_order_conf, _order_conf_args),
    "topicClusterList": ("the clusters a topic is in", topic_cluster_list, _topic),
    "allocateMQ": ("how a topic's queues split among clients", allocate_mq, _allocate_args),
    "producerConnection": ("a producer group's connections", producer_connection, _producer_conn_args),
    "consumerStatus": ("a consumer group's clients and their running info", consumer_status, _consumer_status_args),
    "getConsumerConfig": ("a subscription group's config on each broker", get_consumer_config, _consumer_config_args),
    "cloneGroupOffset": ("copy a group's offsets to another group", clone_group_offset, _clone_args),
    "skipAccumulatedMessage": ("move a group to the end of a topic", skip_accumulated_message, _skip_args),
    "queryMsgByOffset": ("print the message at a queue offset", query_msg_by_offset, _by_offset_args),
    "printMsg": ("print a topic's messages", _checked(print_msg), _print_common),
    "printMsgByQueue": ("print or count one queue's messages", _checked(print_msg_by_queue), _print_by_queue_args),
    "queryCq": ("print consume queue entries", _checked(query_cq), _query_cq_args),
    "queryMsgTraceById": ("print a message's trace", query_msg_trace_by_id, _trace_args),
    "sendMsgStatus": ("send probe messages to a broker", _checked(send_msg_status), _send_status_args),
    "checkMsgSendRT": ("send probe messages to a topic, with RT", _checked(check_msg_send_rt), _send_rt_args),
    "clusterRT": ("send RT of every master", _checked(cluster_rt), _cluster_rt_args),
    "statsAll": ("every topic's and group's TPS and 24-hour counts", stats_all, _stats_all_args),
}
