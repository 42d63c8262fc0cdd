"""Admin and query requests (AdminBrokerProcessor, QueryMessageProcessor; PROTOCOL.md 3.3, 3.7, 3.9).

Offsets by queue and by time, messages by id and by key, topic and subscription-group
administration, and the statistics mqadmin reads.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmq.protocol import (
    CURRENT_VERSION,
    RemoteProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from rmq.protocol import body as json_body
from rmq.protocol.bodies.clients import (
    Connection,
    ConsumerConnection,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
)
from rmq.protocol.bodies.configs import SubscriptionGroupConfig, TopicConfig
from rmq.protocol.bodies.lists import GroupList, KVTable, TopicList
from rmq.protocol.bodies.stats import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rmq.protocol.body import MessageQueue
from rmq.protocol.constants import SCHEDULE_TOPIC, topic_error
from rmq.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    EarliestMsgStoretimeResponseHeader,
    GetConsumeStatsRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GroupRequestHeader,
    OffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    TopicRequestHeader,
    ViewMessageRequestHeader,
)

from ..jsonfile import CoalescingWriter
from ..stats import processor_queues
from ..topics import MAX_QUEUE_NUMS
from . import admin_ops
from .client_call import CLIENT_CALLS, call_client
from .common import fail, json_of, ok

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

    from ..parts import BrokerParts
    from ..schedule import ScheduleService

log = logging.getLogger("rmq.broker.admin")

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
VERSION_DESC = "V4_9_8"


class AdminProcessor:
    def __init__(self, broker: BrokerParts, schedule: ScheduleService) -> None:
        self.broker = broker
        self.schedule = schedule
        self._handlers: dict[int, Callable[[RemotingCommand], RemotingCommand]] = {
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_ALL_PRODUCER_INFO: self.all_producers,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_offsets,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offsets,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.one_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.GET_BROKER_HA_STATUS: self.ha_status,
        }

    @property
    def codes(self) -> tuple[int, ...]:
        extra = (RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_CONSUME_STATS, *CLIENT_CALLS)
        return (*self._handlers, *extra, *admin_ops.HANDLERS)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_BROKER_RUNTIME_INFO:
            return await self.runtime_info(request)
        if request.code in CLIENT_CALLS:
            return await call_client(self.broker, request)
        if request.code == RequestCode.GET_BROKER_CONSUME_STATS:
            return admin_ops.broker_consume_stats(self.broker, request, self.consume_stats)
        if request.code in admin_ops.HANDLERS:
            return admin_ops.HANDLERS[request.code](self.broker, request)
        response = self._handlers[request.code](request)
        writer = self._written_before_answer(request.code)
        if writer is not None and response.code == ResponseCode.SUCCESS:
            await writer.written()  # as in RocketMQ, an operator's change is on disk when answered
        return response

    def _written_before_answer(self, code: int) -> CoalescingWriter | None:
        if code in (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER):
            return self.broker.topics.writer
        if code in (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP):
            return self.broker.subscriptions.writer
        return None

    def ha_status(self, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_HA_STATUS (RocketMQ 5.x): the HARuntimeInfo of a master or a slave."""
        ha = self.broker.role.ha
        if ha is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, "replication is not running on this broker")
        return ok(request, body=json_body.dumps(ha.runtime_info()))

    # -- offsets --------------------------------------------------------------------------

    def max_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext(request.ext_fields)
        offset = self.broker.message_store.get_max_offset_in_queue(h.topic, h.queue_id)
        return ok(request, OffsetResponseHeader(offset).to_ext())

    def min_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext(request.ext_fields)
        offset = self.broker.message_store.get_min_offset_in_queue(h.topic, h.queue_id)
        return ok(request, OffsetResponseHeader(offset).to_ext())

    def search_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = self.broker.message_store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return ok(request, OffsetResponseHeader(offset).to_ext())

    def earliest_time(self, request: RemotingCommand) -> RemotingCommand:
        h = QueueRequestHeader.from_ext(request.ext_fields)
        timestamp = self.broker.message_store.get_earliest_message_time(h.topic, h.queue_id)
        return ok(request, EarliestMsgStoretimeResponseHeader(timestamp).to_ext())

    # -- messages -------------------------------------------------------------------------

    def view_message(self, request: RemotingCommand) -> RemotingCommand:
        offset = ViewMessageRequestHeader.from_ext(request.ext_fields).offset
        record = self.broker.message_store.select_one_message_by_offset(offset)
        if record is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return ok(request, body=record)

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = h.max_num
        if request.ext_fields.get(UNIQUE_KEY_QUERY, "").lower() == "true":
            max_num = self.broker.config.default_query_max_num
        result = self.broker.message_store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = QueryMessageResponseHeader(
            result.index_last_update_timestamp, result.index_last_update_phy_offset
        ).to_ext()
        if not result.records:
            return fail(
                request, ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext
            )
        return ok(request, ext, result.body)

    # -- topics ---------------------------------------------------------------------------

    def create_topic(self, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        if broker.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        why = topic_error(h.topic)
        if why is not None:
            return fail(request, ResponseCode.SYSTEM_ERROR, why)
        if broker.topics.is_system_topic(h.topic):
            return fail(request, ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system topic.")
        if not (0 <= h.read_queue_nums <= MAX_QUEUE_NUMS and 0 <= h.write_queue_nums <= MAX_QUEUE_NUMS) or not (
            0 <= h.perm <= 15
        ):
            return fail(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"bad topic config: readQueueNums {h.read_queue_nums}, writeQueueNums "
                f"{h.write_queue_nums}, perm {h.perm} (queue counts 0-{MAX_QUEUE_NUMS}, perm 0-15)",
            )
        broker.topics.update(
            TopicConfig(
                h.topic,
                h.read_queue_nums,
                h.write_queue_nums,
                h.perm,
                topic_sys_flag=h.topic_sys_flag or 0,
                topic_filter_type=h.topic_filter_type,
                order=h.order,
            )
        )
        return ok(request)

    def delete_topic(self, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        if broker.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        topic = TopicRequestHeader.from_ext(request.ext_fields).topic
        why = topic_error(topic)
        if why is not None:  # a topic name reaches file paths (its ConsumeQueue directory)
            return fail(request, ResponseCode.SYSTEM_ERROR, why)
        broker.topics.delete(topic)
        broker.offsets.remove_topic(topic)
        broker.message_store.delete_topic(topic)
        return ok(request)

    def all_topics(self, request: RemotingCommand) -> RemotingCommand:
        return ok(request, body=self.broker.topics.encode())

    def topic_stats(self, request: RemotingCommand) -> RemotingCommand:
        topic = TopicRequestHeader.from_ext(request.ext_fields).topic
        broker = self.broker
        tc = broker.topics.get(topic)
        if tc is None:
            return fail(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = broker.message_store
        table: dict[MessageQueue, TopicOffset] = {}
        for qid in range(tc.write_queue_nums):
            low = store.get_min_offset_in_queue(topic, qid)
            high = store.get_max_offset_in_queue(topic, qid)
            last = store.get_message_store_timestamp(topic, qid, high - 1) if high > 0 else 0
            table[MessageQueue(topic, broker.config.broker_name, qid)] = TopicOffset(max(low, 0), high, max(last, 0))
        return ok(request, body=json_body.dumps(TopicStatsTable(table).to_json()))

    # -- consumers and groups ---------------------------------------------------------------

    def consume_stats(self, request: RemotingCommand) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        broker = self.broker
        store = broker.message_store
        group = h.consumer_group
        topics = [h.topic] if h.topic else sorted(broker.offsets.topics_of_group(group))
        info = broker.clients.consumer_group(group)
        table: dict[MessageQueue, OffsetWrapper] = {}
        for topic in topics:
            tc = broker.topics.get(topic)
            if tc is None:
                continue
            if info is not None and info.subscriptions and topic not in info.subscriptions:
                continue  # the group is online and does not consume this topic
            for qid in range(tc.write_queue_nums):
                consumer_offset = max(broker.offsets.query(group, topic, qid), 0)
                last = store.get_message_store_timestamp(topic, qid, consumer_offset - 1) if consumer_offset else 0
                table[MessageQueue(topic, broker.config.broker_name, qid)] = OffsetWrapper(
                    store.get_max_offset_in_queue(topic, qid), consumer_offset, max(last, 0)
                )
        tps = broker.stats.consume_tps(group)  # over every topic the group pulls, as RocketMQ sums them
        return ok(request, body=json_body.dumps(ConsumeStats(table, round(tps, 2)).to_json()))

    def consumer_connections(self, request: RemotingCommand) -> RemotingCommand:
        group = GroupRequestHeader.from_ext(request.ext_fields).consumer_group
        info = self.broker.clients.consumer_group(group)
        if info is None or not info.channels:
            return fail(request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = ConsumerConnection(
            tuple(_connection(ch) for ch in info.channels.values()),
            dict(sorted(info.subscriptions.items())),
            info.consume_type,
            info.message_model,
            info.consume_from_where,
        )
        return ok(request, body=json_body.dumps(body.to_json()))

    def producer_connections(self, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("producerGroup")
        if not group:
            raise RemoteProtocolError("the header field 'producerGroup' is missing")
        channels = self.broker.clients.producer_channels(group)
        if not channels:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = ProducerConnection(tuple(_connection(ch) for ch in channels))
        return ok(request, body=json_body.dumps(body.to_json()))

    def all_producers(self, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (ProducerManager.getProducerTable): every producer group's
        connections, with when each last heartbeat as wall-clock ms."""
        clients, now_ms = self.broker.clients, self.broker.clock_ms()
        table = {
            group: tuple(
                ProducerInfo(
                    ch.client_id,
                    "/" + ch.address,  # Netty's remoteAddress().toString()
                    ch.language,
                    ch.version,
                    now_ms - int(clients.seconds_since_update(ch) * 1000),
                )
                for ch in clients.producer_channels(group)
            )
            for group in clients.producer_groups()
        }
        return ok(request, body=json_body.dumps(ProducerTableInfo(table).to_json()))

    def system_topics(self, request: RemotingCommand) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: TopicValidator's system topics and the broker's
        cluster and own name (what exportMetadata leaves out)."""
        return ok(request, body=json_body.dumps(TopicList(self.broker.topics.system_topics()).to_json()))

    def consumed_by(self, request: RemotingCommand) -> RemotingCommand:
        topic = TopicRequestHeader.from_ext(request.ext_fields).topic
        broker = self.broker
        groups = broker.clients.groups_subscribing(topic) | broker.offsets.groups_of_topic(topic)
        return ok(request, body=json_body.dumps(GroupList(tuple(sorted(groups))).to_json()))

    def all_offsets(self, request: RemotingCommand) -> RemotingCommand:
        return ok(request, body=self.broker.offsets.encode())

    def all_delay_offsets(self, request: RemotingCommand) -> RemotingCommand:
        return ok(request, body=self.schedule.encode())

    def all_groups(self, request: RemotingCommand) -> RemotingCommand:
        return ok(request, body=json_body.dumps(self.broker.subscriptions.wrapper()))

    def one_group(self, request: RemotingCommand) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG: the group's config (created first when groups are
        auto-created, as findSubscriptionGroupConfig does)."""
        name = GetSubscriptionGroupConfigRequestHeader.from_ext(request.ext_fields).group
        group = self.broker.subscriptions.find_or_create(name)
        if group is None:
            return fail(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return ok(request, body=json_body.dumps(group.to_json()))

    def update_group(self, request: RemotingCommand) -> RemotingCommand:
        if self.broker.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        obj = json_of(request, "subscription group")
        try:
            group = SubscriptionGroupConfig.from_json(obj if isinstance(obj, dict) else {})
        except ValueError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {exc}")
        self.broker.subscriptions.update(group)
        return ok(request)

    def delete_group(self, request: RemotingCommand) -> RemotingCommand:
        if self.broker.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        name = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields).group_name
        self.broker.subscriptions.delete(name)
        return ok(request)

    # -- broker ---------------------------------------------------------------------------

    def broker_config(self, request: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.broker.config.to_properties().items())
        version = json_body.dumps(self.broker.topics.data_version.to_json()).decode()
        return ok(request, {"version": version}, text.encode("utf-8"))

    async def runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        store = broker.message_store
        stats = broker.stats
        queues = processor_queues(broker)  # requests waiting for a processor slot
        uptime = int(time.time() - broker.boot_time)
        days, rest = divmod(uptime, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        try:
            usage = shutil.disk_usage(broker.config.commit_log_dir)
            disk_ratio = (usage.total - usage.free) / usage.total if usage.total else 0.0
        except OSError:
            usage, disk_ratio = None, 0.0
        store_stats = store.stats
        puts = store_stats.put_message_times_total
        table = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_today_morning),
            "msgPutTotalTodayNow": str(stats.put_total),
            "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_today_morning),
            "msgGetTotalTodayNow": str(stats.get_total),
            "putTps": stats.tps(1),
            "getTransferedTps": stats.tps(2),
            "getFoundTps": stats.tps("found"),
            "getMissTps": stats.tps("miss"),
            "getTotalTps": stats.tps("found+miss"),
            "putMessageAverageSize": f"{stats.average_put_size():.2f}",
            # StoreStatsService's figures (appends into the CommitLog)
            "putMessageEntireTimeMax": str(store_stats.put_message_entire_time_max),
            "putMessageTimesTotal": str(puts),
            "putMessageFailedTimes": str(store_stats.put_message_failed_times),
            "putMessageSizeTotal": str(store_stats.put_message_size_total),
            "putMessageDistributeTime": store_stats.put_distribute_text(),
            "putLatency99": f"{store_stats.put_latency(0.99):.2f}",
            "putLatency999": f"{store_stats.put_latency(0.999):.2f}",
            "dispatchMaxBuffer": "0",  # no dispatch buffer: records are dispatched from the CommitLog
            "getMessageEntireTimeMax": "0",  # reads are not timed
            "EndTransactionQueueSize": str(queues.get("transaction", 0)),
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "remainTransientStoreBufferNumbs": str(2**31 - 1),  # no transient store pool (Java's answer then)
            "consumeQueueDiskRatio": f"{disk_ratio:.4f}",  # consume queues live on the CommitLog's disk
            "sendThreadPoolQueueSize": str(queues.get("send", 0)),
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": str(queues.get("pull", 0)),
            "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": "20000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": "0",
            "dispatchBehindBytes": str(store.dispatch_behind),
            "dispatchStopped": store.dispatcher.stalled or "",
            "earliestMessageTimeStamp": str(max(store.get_earliest_message_time(), 0)),
            "startAcceptSendRequestTimeStamp": str(int(broker.boot_time * 1000)),
            "commitLogDiskRatio": f"{disk_ratio:.4f}",
            "commitLogMinOffset": str(store.min_phy_offset),
            "commitLogMaxOffset": str(store.max_phy_offset),
            "remainHowManyDataToFlush": str(max(store.max_phy_offset - store.flushed_offset, 0)),
            "bootTimestamp": str(int(broker.boot_time * 1000)),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "pid": str(os.getpid()),
            "brokerRole": broker.config.broker_role.value,
            "brokerId": str(broker.config.broker_id),
        }
        if usage is not None:
            table["commitLogDirCapacity"] = f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        # ScheduleMessageService.buildRunningStats: per delay level in use, "delivered,queue end"
        for level in range(1, self.schedule.max_level + 1):
            offset = self.schedule.offsets.get(level, 0)
            high = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            if offset or high:
                table[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
        ha = broker.role.ha
        if ha is not None:  # a master's slaves or a slave's master, lag in bytes
            table.update(await ha.status_fields())
        dledger = broker.role.dledger
        if dledger is not None:  # the DLedger member under this broker
            table.update(dledger.status_fields())
        controller = broker.role.controller
        if controller is not None:  # controller mode: epoch, brokerId, SyncStateSet
            table.update(controller.status_fields())
        return ok(request, body=json_body.dumps(KVTable(table).to_json()))


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(count, false): "512 B", "1.5 KiB", "20.0 GiB"."""
    if count < 1024:
        return f"{count} B"
    exp = min(int(math.log(count) / math.log(1024)), 6)
    return f"{count / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _connection(channel: Any) -> Connection:
    return Connection(channel.client_id, channel.address, channel.language, channel.version)
