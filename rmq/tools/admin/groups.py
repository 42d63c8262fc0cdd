"""mqadmin's group commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, consumerStatus, getConsumerConfig, producerConnection."""

from __future__ import annotations

import sys
from typing import Any

from rmq.admin import groups
from rmq.client import MQClientError
from rmq.client.admin import MQAdmin, SubscriptionGroupConfig, version_desc
from rmq.protocol.bodies.heartbeat import consume_type_name

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, date_text, front, java_bool, row
from .topics import delete_topic_everywhere

PROGRESS = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}"
GROUPS = "{:<64}  {:<6}  {:<24} {:<5}  {:<14}  {:<7}  {}"
CONNECTION = "{:03d}  {:<32} {:<22} {:<8} {}"
SUBSCRIPTION = "{:03d}  Topic: {:<40} SubExpression: {}"
CLIENTS = "{:<10} {:<40} {:<20} {}"
PRODUCER = "{:04d}  {:<32} {:<22} {:<8} {}"
OFFSET_ROW = "{:<32}  {:<32}  {:<4}  {:<20}"
DETAIL_ROW = "{:<64}  {:<32}  {:<4}  {}"


# -- subscription groups ----------------------------------------------------------------------


async def update_sub_group(admin: MQAdmin, args: Args, out: Out) -> int:
    options = {
        "consume_enable": args.consume_enable,
        "consume_from_min_enable": args.consume_from_min_enable,
        "consume_broadcast_enable": args.consume_broadcast_enable,
        "consume_message_orderly": args.consume_message_orderly,
        "retry_queue_nums": args.retry_queue_nums,
        "retry_max_times": args.retry_max_times,
        "broker_id": args.broker_id,
        "which_broker_when_consume_slowly": args.which_broker_when_consume_slowly,
        "notify_consumer_ids_changed_enable": args.notify_consumer_ids_changed,
    }
    config = SubscriptionGroupConfig(args.group, **{k: v for k, v in options.items() if v is not None})
    async for addr in groups.create(admin, config, args.broker_addr, args.cluster):
        print(f"create subscription group to {addr} success.", file=out)
    print(config, file=out)
    return 0


async def delete_sub_group(admin: MQAdmin, args: Args, out: Out) -> int:
    where = f" in cluster [{args.cluster}]" if args.cluster else ""
    async for addr in groups.delete(admin, args.group, args.broker_addr, args.cluster):
        print(f"delete subscription group [{args.group}] from broker [{addr}]{where} success.", file=out)
    if args.cluster:  # as mqadmin: the group's retry and dead-letter topics go too
        for topic in groups.own_topics(args.group):
            try:
                await delete_topic_everywhere(admin, args.cluster, topic, out)
            except MQClientError as exc:
                print(f"warning: deleting topic {topic} failed: {exc}", file=sys.stderr)
    return 0


async def get_consumer_config(admin: MQAdmin, args: Args, out: Out) -> int:
    async for cluster, name, config in groups.configs(admin, args.group):
        print(f"============================={cluster}:{name}=============================", file=out)
        for key in sorted(config):
            value = config[key]
            text = "" if value is None else java_bool(value) if isinstance(value, bool) else value
            print(f"{key:<40}=  {text}", file=out)
    return 0


# -- consumers --------------------------------------------------------------------------------


async def consumer_progress(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.group:
        stats = await admin.consume_stats(args.group)
        row(out, PROGRESS, "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
            "#LastTime")  # fmt: skip
        for mq, ow in sorted(stats.offsets.items()):
            last = date_text(ow.last_timestamp) if ow.last_timestamp else "N/A"
            topic, broker = front(mq.topic, 64), front(mq.broker_name, 32)
            row(out, PROGRESS, topic, broker, mq.queue_id, ow.broker_offset, ow.consumer_offset, ow.diff, last)
        print(file=out)
        print(f"Consume TPS: {stats.consume_tps:.2f}", file=out)
        print(f"Diff Total: {stats.diff_total}", file=out)
        return 0
    progress = await groups.all_progress(admin)
    row(out, GROUPS, "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
    for g in progress:
        cc, stats = g.connection, g.stats
        count = len(cc.connections)
        version = version_desc(cc.min_version) if count else "OFFLINE"
        kind, model, tps = consume_type_name(cc.consume_type), cc.message_model, int(stats.consume_tps)
        row(out, GROUPS, front(g.group, 64), count, version, kind, model, tps, stats.diff_total)
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


def _running_info_text(info: dict[Any, Any], out: Out) -> None:
    """ConsumerRunningInfo.formatString()."""
    print("#Consumer Properties#", file=out)
    for key, value in sorted((info.get("properties") or {}).items()):
        print(f"{key:<40}: {value}", file=out)
    print("\n\n#Consumer Subscription#", file=out)
    for i, sub in enumerate(info.get("subscriptionSet") or [], 1):
        mode = java_bool(sub.get("classFilterMode", False))
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
    if info.get("jstack"):  # asked with -s: the client's thread stacks
        print("\n\n#Consumer jstack#", file=out)
        print(info["jstack"], file=out)


async def consumer_status(admin: MQAdmin, args: Args, out: Out) -> int:
    if args.client_id:
        info = await admin.consumer_running_info(args.group, args.client_id, jstack=args.jstack, addr=args.broker_addr)
        _running_info_text(info, out)
        return 0
    clients = await groups.running_infos(admin, args.group, jstack=args.jstack, broker_addr=args.broker_addr)
    row(out, CLIENTS, "#Index", "#ClientId", "#Version", "#ConsumerRunningInfo")
    infos = {}
    for i, (conn, answer) in enumerate(clients, 1):
        if isinstance(answer, MQClientError):
            row(out, CLIENTS, i, conn.client_id, version_desc(conn.version), f"failed: {answer}")
            continue
        infos[conn.client_id] = answer
        queues = len(answer.get("mqTable") or {})
        row(out, CLIENTS, i, conn.client_id, version_desc(conn.version), f"{queues} queues")
    if groups.same_subscription(list(infos.values())):
        print("\n\nSame subscription in the same group of consumer", file=out)
        print(f"\n\nRebalance {'OK' if groups.rebalanced(list(infos.values())) else 'Failed'}", file=out)
    else:
        print("\n\nWARN: Different subscription in the same group of consumer!!!", file=out)
    return 0


# -- producers --------------------------------------------------------------------------------


async def producer_connection(admin: MQAdmin, args: Args, out: Out) -> int:
    for i, c in enumerate(await groups.producer_connections(admin, args.topic, args.group), 1):
        row(out, PRODUCER, i, c.client_id, c.client_addr, c.language, version_desc(c.version))
    return 0


def _update_sub_group_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    o.group(p)
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=o.boolean)
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=o.boolean)
    p.add_argument("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=o.boolean)
    p.add_argument("-o", "--consumeMessageOrderly", dest="consume_message_orderly", type=o.boolean)
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=int)
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int)
    p.add_argument("-i", "--brokerId", dest="broker_id", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int)
    p.add_argument("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed", type=o.boolean)


def _delete_sub_group_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    o.group(p)


def _producer_conn_args(p: Parser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True)
    o.topic(p)


def _consumer_status_args(p: Parser) -> None:
    o.group(p)
    p.add_argument("-i", "--clientId", dest="client_id")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr")
    p.add_argument("-s", "--jstack", action="store_true")


def _consumer_config_args(p: Parser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True)


COMMANDS: Commands = {
    "updateSubGroup": ("create or update a subscription group", update_sub_group, _update_sub_group_args),
    "deleteSubGroup": ("delete a subscription group", delete_sub_group, _delete_sub_group_args),
    "consumerProgress": ("a group's progress (every group without -g)", consumer_progress, lambda p: o.group(p, False)),
    "consumerConnection": ("a group's connections and subscriptions", consumer_connection, o.group),
    "producerConnection": ("a producer group's connections", producer_connection, _producer_conn_args),
    "consumerStatus": ("a consumer group's clients and their running info", consumer_status, _consumer_status_args),
    "getConsumerConfig": ("a subscription group's config on each broker", get_consumer_config, _consumer_config_args),
}
