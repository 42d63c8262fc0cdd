"""More of AdminBrokerProcessor: what mqadmin's maintenance commands ask a broker.

UPDATE_BROKER_CONFIG (25) changes settings in memory, not in the conf file: what is
read from the broker's config when used takes the new value; what a component copied at
start (ports, store paths and sizes) needs a restart. And
GET_BROKER_CONSUME_STATS (317), CLONE_GROUP_OFFSET (314), QUERY_CONSUME_QUEUE (321),
CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316) and
DELETE_EXPIRED_COMMITLOG (329) work on the store and the offset table;
VIEW_BROKER_STATS_DATA (315) reads the broker's statistics (mqadmin statsAll).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode, javaprops
from rmq.protocol import body as json_body
from rmq.protocol.bodies.stats import ConsumeStats, ConsumeStatsList
from rmq.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)

from ..config import ACCEPTED_KEYS, BrokerConfig, ConfigError
from .common import fail, ok

if TYPE_CHECKING:
    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.admin_ops")

MAX_CQ_ENTRIES = 1000  # QUERY_CONSUME_QUEUE: entries one answer may carry


def update_config(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    if not request.body:
        return fail(request, ResponseCode.SYSTEM_ERROR, "no properties in the request body")
    try:
        changes = javaprops.parse(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"bad properties body: {exc}")
    current = broker.config.to_properties()
    unknown = sorted(set(changes) - set(current) - ACCEPTED_KEYS)  # accepted: as in broker.conf
    if unknown:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"unknown broker config key(s): {', '.join(unknown)}")
    try:
        baseline = BrokerConfig.from_properties(current, environ={})
        updated = BrokerConfig.from_properties({**current, **changes}, environ={})
        changed = {
            f.name: getattr(updated, f.name)
            for f in dataclasses.fields(updated)
            if getattr(updated, f.name) != getattr(baseline, f.name)
        }
        broker.role.config = broker.config.replace(**changed)
    except (ConfigError, ValueError, TypeError) as exc:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"bad broker config: {exc}")
    log.info("broker config updated: %s", changes)
    return ok(request)


def broker_consume_stats(
    broker: BrokerParts, request: RemotingCommand, group_stats: Callable[[RemotingCommand], RemotingCommand]
) -> RemotingCommand:
    """ConsumeStatsList: every subscription group's ConsumeStats per topic it consumes."""
    is_order = GetConsumeStatsInBrokerHeader.from_ext(request.ext_fields).is_order
    groups = {g.group_name: g for g in broker.subscriptions}
    names = sorted(set(groups) | {g for g in broker.clients.consumer_groups()})
    out: list[dict[str, list[ConsumeStats]]] = []
    total = 0
    for group in names:
        info = broker.clients.consumer_group(group)
        topics = set(broker.offsets.topics_of_group(group)) | set(info.subscriptions if info else ())
        if is_order and (info is None or info.consume_type != "CONSUME_ACTIVELY"):
            config = groups.get(group)
            if config is None or not getattr(config, "consume_message_orderly", False):
                continue
        stats = []
        for topic in sorted(topics):
            if broker.topics.get(topic) is None:
                continue
            header = GetConsumeStatsRequestHeader(group, topic).to_ext()
            answer = group_stats(RemotingCommand.request(RequestCode.GET_CONSUME_STATS, header))
            if answer.code != ResponseCode.SUCCESS or not answer.body:
                continue
            consume = ConsumeStats.from_json(json_body.loads(answer.body))
            total += sum(max(offset.diff, 0) for offset in consume.offsets.values())
            stats.append(consume)
        if stats:
            out.append({group: stats})
    return ok(request, body=json_body.dumps(ConsumeStatsList(broker.address, out, total).to_json()))


def clone_group_offset(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    h = CloneGroupOffsetRequestHeader.from_ext(request.ext_fields)
    topics = [h.topic] if h.topic else sorted(broker.offsets.topics_of_group(h.src_group))
    for topic in topics:
        if broker.topics.get(topic) is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        for qid, offset in broker.offsets.offsets_of(h.src_group, topic).items():
            broker.offsets.commit(h.dest_group, topic, qid, offset)
    return ok(request)


def query_consume_queue(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    h = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
    store = broker.message_store
    tc = broker.topics.get(h.topic)
    if tc is None or not 0 <= h.queue_id < max(tc.read_queue_nums, tc.write_queue_nums):
        return fail(request, ResponseCode.SYSTEM_ERROR, f"{h.topic}:{h.queue_id} is not exist!")
    if h.count <= 0 or h.index < 0:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"bad index {h.index} or count {h.count}")
    entries: list[dict[str, Any]] = []
    offset, want = h.index, min(h.count, MAX_CQ_ENTRIES)
    while len(entries) < want:
        got = store.read_consume_queue(h.topic, h.queue_id, offset, want - len(entries))
        if not got:
            break
        for _, phy, size, tags in got:
            entries.append({"bitMap": None, "eval": False, "msg": "", "physicOffset": phy, "physicSize": size,
                            "tagsCode": tags})  # fmt: skip
        offset = got[-1][0] + 1
    body: dict[str, Any] = {
        "maxQueueIndex": store.get_max_offset_in_queue(h.topic, h.queue_id),
        "minQueueIndex": store.get_min_offset_in_queue(h.topic, h.queue_id),
        "queueData": entries,
    }
    if h.consumer_group:
        sub = broker.clients.find_subscription(h.consumer_group, h.topic)
        if sub is not None:
            body["subscriptionData"] = sub.to_json()
    return ok(request, body=json_body.dumps(body))


def clean_unused_topic(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    """Consume queues of topics the broker no longer has (CLEAN_UNUSED_TOPIC and
    CLEAN_EXPIRED_CONSUMEQUEUE; retention already drops queue files below the CommitLog)."""
    store = broker.message_store
    removed = [t for t in store.topics() if broker.topics.get(t) is None]
    for topic in removed:
        store.delete_topic(topic)
    if removed:
        log.info("removed the consume queues of unused topics %s", removed)
    return ok(request)


def delete_expired_commitlog(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    """RocketMQ's executeDeleteFilesManually: expired CommitLog files (fileReservedTime) go now,
    whatever deleteWhen says, and in the next retention rounds; files not expired only as the
    levels of disk use say."""
    result = broker.message_store.delete_expired_manually()
    log.info("deleteExpiredCommitLog: %s", result)
    return ok(request)


def view_stats_data(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    header = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
    data = broker.stats.stats_data(header.stats_name, header.stats_key, broker.config.broker_cluster_name)
    if data is None:  # RocketMQ's answer for an item it never counted
        remark = f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
        return fail(request, ResponseCode.SYSTEM_ERROR, remark)
    return ok(request, body=json_body.dumps(data))


HANDLERS: dict[int, Callable[[BrokerParts, RemotingCommand], RemotingCommand]] = {
    RequestCode.UPDATE_BROKER_CONFIG: update_config,
    RequestCode.CLONE_GROUP_OFFSET: clone_group_offset,
    RequestCode.QUERY_CONSUME_QUEUE: query_consume_queue,
    RequestCode.CLEAN_UNUSED_TOPIC: clean_unused_topic,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: clean_unused_topic,
    RequestCode.DELETE_EXPIRED_COMMITLOG: delete_expired_commitlog,
    RequestCode.VIEW_BROKER_STATS_DATA: view_stats_data,
}
