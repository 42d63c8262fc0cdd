"""mqadmin's topic commands: updateTopic, updateTopicPerm, deleteTopic, topicList, topicRoute,
topicStatus, topicClusterList, allocateMQ, updateOrderConf."""

from __future__ import annotations

import json

from rmq.admin import AdminError, topics
from rmq.client.admin import ORDER_TOPIC_CONFIG, MQAdmin, TopicConfig

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, front, human_ms, route_json, row

TOPIC_LIST_CLUSTER = "{:<20}  {:<48}  {:<48}"
TOPIC_ROUTE_LIST = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"
TOPIC_STATUS = "{:<32}  {:<4}  {:<20}  {:<20}    {}"


async def update_topic(admin: MQAdmin, args: Args, out: Out) -> int:
    config = TopicConfig(args.topic, args.read_queue_nums, args.write_queue_nums, args.perm, order=args.order)
    if args.broker_addr:
        conf = await topics.create_on_broker(admin, args.broker_addr, config)
        if conf is not None:
            print(f"set broker orderConf. isOrder=true, orderConf=[{conf}]", file=out)
        print(f"create topic to {args.broker_addr} success.", file=out)
    else:
        masters = (await admin.cluster_info()).masters(args.cluster)
        for _, addr in masters:
            await admin.create_topic(addr, config)
            print(f"create topic to {addr} success.", file=out)
        if args.order:
            conf = await topics.set_cluster_order_conf(admin, config, masters)
            print(f"set cluster orderConf. isOrder=true, orderConf=[{conf}]", file=out)
    print(config, file=out)
    return 0


async def update_topic_perm(admin: MQAdmin, args: Args, out: Out) -> int:
    config, changed = await topics.update_perm(
        admin, args.topic, args.perm, broker_addr=args.broker_addr, cluster=args.cluster
    )
    if args.broker_addr and not changed:
        print("new perm equals to the old one!", file=out)
        return 0
    for addr, old in changed:
        print(f"update topic perm from {old} to {args.perm} in {addr} success.", file=out)
    if args.broker_addr:
        print(f"{config}.", file=out)
    return 0


async def delete_topic_everywhere(admin: MQAdmin, cluster: str, topic: str, out: Out) -> None:
    """From the cluster's masters, then from the name servers."""
    await topics.delete_from_brokers(admin, cluster, topic)
    print(f"delete topic [{topic}] from cluster [{cluster}] success.", file=out)
    await admin.delete_topic_in_namesrv(topic, cluster)
    print(f"delete topic [{topic}] from NameServer success.", file=out)


async def delete_topic(admin: MQAdmin, args: Args, out: Out) -> int:
    await delete_topic_everywhere(admin, args.cluster, args.topic, out)
    return 0


async def topic_list(admin: MQAdmin, args: Args, out: Out) -> int:
    names = await admin.topic_list()
    if not args.cluster_mode:
        for topic in names:
            print(topic, file=out)
        return 0
    row(out, TOPIC_LIST_CLUSTER, "#Cluster Name", "#Topic", "#Consumer Group")
    for topic in names:
        if topics.is_group_topic(topic):
            continue
        cluster, groups = await topics.cluster_and_groups(admin, topic)
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
    stats = await topics.queue_offsets(admin, args.topic)
    row(out, TOPIC_STATUS, "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
    for mq, offset in sorted(stats.items()):
        last = human_ms(offset.last_update_timestamp) if offset.last_update_timestamp > 0 else ""
        row(out, TOPIC_STATUS, front(mq.broker_name, 32), mq.queue_id, offset.min_offset, offset.max_offset, last)
    return 0


async def topic_cluster_list(admin: MQAdmin, args: Args, out: Out) -> int:
    for cluster in await topics.clusters(admin, args.topic):
        print(cluster, file=out)
    return 0


async def allocate_mq(admin: MQAdmin, args: Args, out: Out) -> int:
    clients = [ip.strip() for ip in args.ip_list.split(",") if ip.strip()]
    split = await topics.allocate(admin, args.topic, clients)
    result = {client: [mq.to_json() for mq in mqs] for client, mqs in split.items()}
    print(json.dumps({"result": result}), file=out)
    return 0


async def update_order_conf(admin: MQAdmin, args: Args, out: Out) -> int:
    method = args.method.strip().lower()
    if method == "get":
        conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, args.topic)
        print(f"get orderConf success. topic=[{args.topic}], orderConf=[{conf}] ", file=out)
    elif method == "put":
        if not args.order_conf:
            raise AdminError("-v orderConf is required with -m put (brokerName1:num;brokerName2:num)")
        await admin.put_kv_config(ORDER_TOPIC_CONFIG, args.topic, args.order_conf)
        print(f"update orderConf success. topic=[{args.topic}], orderConf=[{args.order_conf}]", file=out)
    elif method == "delete":
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG, args.topic)
        print(f"delete orderConf success. topic=[{args.topic}]", file=out)
    else:
        raise AdminError(f"bad method {args.method!r}: use get, put or delete")
    return 0


def _update_topic_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    o.topic(p)
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 both (default 6)")
    p.add_argument("-o", "--order", type=o.boolean, default=False, help="true: an ordered topic (default false)")


def _update_topic_perm_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    o.topic(p)
    p.add_argument("-p", "--perm", type=int, required=True, choices=(2, 4, 6), help="2 write, 4 read, 6 both")


def _delete_topic_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)


def _topic_list_args(p: Parser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_mode", action="store_true", help="with clusters and groups")


def _topic_route_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-l", "--list", dest="list_format", action="store_true", help="a table instead of JSON")


def _allocate_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma-separated")


def _order_conf_args(p: Parser) -> None:
    o.topic(p)
    p.add_argument("-v", "--orderConf", dest="order_conf", help="brokerName1:num;brokerName2:num")
    p.add_argument("-m", "--method", required=True, help="get, put or delete")


COMMANDS: Commands = {
    "updateTopic": ("create or update a topic", update_topic, _update_topic_args),
    "updateTopicPerm": ("change a topic's permission (2 W, 4 R, 6 RW)", update_topic_perm, _update_topic_perm_args),
    "deleteTopic": ("delete a topic from a cluster and the name servers", delete_topic, _delete_topic_args),
    "topicList": ("list the topics the name server knows", topic_list, _topic_list_args),
    "topicRoute": ("print a topic's route", topic_route, _topic_route_args),
    "topicStatus": ("print a topic's queue offsets", topic_status, o.topic),
    "updateOrderConf": ("get, put or delete a topic's order conf", update_order_conf, _order_conf_args),
    "topicClusterList": ("the clusters a topic is in", topic_cluster_list, o.topic),
    "allocateMQ": ("how a topic's queues split among clients", allocate_mq, _allocate_args),
}
