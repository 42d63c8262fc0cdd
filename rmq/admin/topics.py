"""Topics: creating them with their order conf, deleting them everywhere, where they live and
who consumes them, how their queues split among clients."""

from __future__ import annotations

from rmq.client import MessageQueue, MQClientError
from rmq.client.admin import MQAdmin, TopicConfig, TopicOffset
from rmq.client.rebalance import allocate_averagely
from rmq.protocol.constants import DLQ_PREFIX, RETRY_PREFIX

from .common import AdminError


async def create_on_broker(admin: MQAdmin, addr: str, config: TopicConfig) -> str | None:
    """Create or update `config` on one broker. An ordered topic gets an order conf naming
    that broker alone (`brokerName:queues`), which is returned."""
    await admin.create_topic(addr, config)
    if not config.order:
        return None
    name = (await admin.cluster_info()).broker_name_of(addr)
    if name is None:
        raise AdminError(f"broker {addr} is not registered with the name server")
    return await admin.update_order_conf(config.topic, f"{name}:{config.write_queue_nums}", whole_cluster=False)


async def set_cluster_order_conf(admin: MQAdmin, config: TopicConfig, masters: list[tuple[str, str]]) -> str:
    """The order conf of a topic created on every master of a cluster (`a:8;b:8`)."""
    conf = ";".join(f"{name}:{config.write_queue_nums}" for name, _ in masters)
    await admin.update_order_conf(config.topic, conf, whole_cluster=True)
    return conf


async def delete_from_brokers(admin: MQAdmin, cluster: str, topic: str) -> None:
    """Delete `topic` from the cluster's masters. The name servers' copy goes next
    (MQAdmin.delete_topic_in_namesrv): a broker's registration only ever adds topics there."""
    for addr in (await admin.cluster_info()).master_addrs(cluster):
        await admin.delete_topic_in_broker(addr, topic)


async def cluster_and_groups(admin: MQAdmin, topic: str) -> tuple[str, list[str]]:
    """The cluster `topic` is in and the groups consuming it ([""] for none). What cannot be
    looked into is left out: "" for the cluster, [""] for the groups (as mqadmin's topicList -c)."""
    cluster, groups = "", [""]
    try:
        route = await admin.topic_route(topic)
        cluster = next((bd.cluster for bd in route.broker_datas if bd.cluster), "")
        groups = await admin.topic_consumed_by(topic) or [""]
    except MQClientError:
        pass
    return cluster, groups


def is_group_topic(topic: str) -> bool:
    """A group's retry or dead-letter topic."""
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


async def queue_offsets(admin: MQAdmin, topic: str) -> dict[MessageQueue, TopicOffset]:
    """Min and max offsets of every queue of `topic`; AdminError if no broker has any."""
    stats = await admin.topic_stats(topic)
    if not stats:
        raise AdminError(f"no broker has stats for topic {topic!r}")
    return stats


async def clusters(admin: MQAdmin, topic: str) -> list[str]:
    """The clusters `topic` is in, by name."""
    route = await admin.topic_route(topic)
    return sorted({bd.cluster for bd in route.broker_datas})


async def allocate(admin: MQAdmin, topic: str, clients: list[str]) -> dict[str, list[MessageQueue]]:
    """How `topic`'s queues split among `clients` (client ids) by the average strategy."""
    route = await admin.topic_route(topic)
    mqs = route.subscribe_queues(topic)
    if not clients:
        raise AdminError("-i ipList names no client")
    return {client: allocate_averagely("aa", client, mqs, clients) for client in clients}


async def update_perm(
    admin: MQAdmin, topic: str, perm: int, *, broker_addr: str | None = None, cluster: str | None = None
) -> tuple[TopicConfig, list[tuple[str, int]]]:
    """Set `topic`'s permission (2 W, 4 R, 6 RW) on one master or every master of a cluster
    (UpdateTopicPermSubCommand): the config keeps the queue counts and sysFlag of the route's
    first queue data. Returns it and (broker address, old permission) per broker written;
    none when the broker's permission is already `perm`."""
    route = await admin.topic_route(topic)
    if not route.queue_datas:
        raise AdminError(f"topic {topic!r} has no queues in its route")
    first = route.queue_datas[0]
    config = TopicConfig(
        topic, first.read_queue_nums, first.write_queue_nums, perm, topic_sys_flag=first.topic_sys_flag
    )
    if broker_addr is not None:
        name = next((bd.broker_name for bd in route.broker_datas if bd.master_addr == broker_addr), None)
        if name is None:
            raise AdminError("updateTopicPerm error broker not exit or broker is not master!.")
        old = next((qd.perm for qd in route.queue_datas if qd.broker_name == name), 0)
        if old == perm:
            return config, []
        await admin.create_topic(broker_addr, config)
        return config, [(broker_addr, old)]
    if cluster is None:
        raise AdminError("give -b brokerAddr or -c clusterName")
    changed = []
    for addr in (await admin.cluster_info()).master_addrs(cluster):
        await admin.create_topic(addr, config)
        changed.append((addr, first.perm))
    return config, changed
