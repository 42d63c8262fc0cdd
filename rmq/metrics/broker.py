"""BrokerCollector: the broker's metrics, read from its own state when scraped.

Counters come from BrokerStats (bumped once per send, pull, DLQ move, transaction end and
timer message) and RpcLatency (once per answered request); gauges (lag, connections,
storage, half and timer messages, long polls) are computed here, at scrape time, so the
request paths pay nothing for them. Every series carries RocketMQ's constant labels
cluster, node_type="broker" and node_id (the broker name); names and labels are RocketMQ
5.3's (BrokerMetricsManager, DefaultStoreMetricsManager), so its dashboards and alert
rules apply. As in RocketMQ, messages in and out of retry and DLQ topics are not counted
in rocketmq_messages_*_total and rocketmq_throughput_*_total.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rmq.broker.stats import (
    DELAY_LATENCY_BUCKETS,
    FINISH_LATENCY_BUCKETS,
    MESSAGE_SIZE_BUCKETS,
    OUT_BYTES,
    OUT_MSGS,
    TYPED_BUCKETS,
    TYPED_BYTES,
    TYPED_MSGS,
    processor_queues,
)
from rmq.client.admin import version_desc
from rmq.protocol.bodies.heartbeat import consume_type_name
from rmq.protocol.constants import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_TOPICS

from .exporter import MetricsExporter
from .latency import RpcLatency, cumulative
from .remoting import connection_metrics

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController

OFFSET_SEPARATOR = "@"  # consumer offsets are keyed "topic@group"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"  # MixAll.CID_RMQ_SYS_PREFIX, compared in lower case
# rocketmq_timer_message_snapshot bounds (seconds ahead), TimerMetrics.timerDist
TIMER_DIST = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_system(topic: str, group: str) -> str:
    """BrokerMetricsManager.isSystem as a label value."""
    return _bool(is_system_topic(topic) or group.lower().startswith(SYSTEM_GROUP_PREFIX))


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerController, latency: RpcLatency) -> None:
        self.broker = broker
        self.latency = latency

    def _labels(self) -> dict[str, str]:
        c = self.broker.config
        return {"cluster": c.broker_cluster_name, "node_type": "broker", "node_id": c.broker_name}

    def collect(self) -> Iterator[Metric]:
        const = self._labels()
        yield from self._traffic(const)
        yield from self.latency.collect(const)
        yield from self._consumers(const)
        yield from self._connections(const)
        yield from connection_metrics(getattr(self.broker, "_servers", ()), const)
        yield from self._store(const)
        yield from self._events(const)
        yield from self._timer(const)
        yield from self._broker(const)
        yield from self._controller_mode(const)

    def _controller_mode(self, const: dict[str, str]) -> Iterator[Metric]:
        """enableControllerMode: the master epoch, elections seen, the SyncStateSet's size."""
        replicas = self.broker.replicas
        if replicas is None:
            return
        names, values = [*const], [*const.values()]
        for name, doc, value in (
            (
                "rocketmq_broker_master_epoch",
                "The group's master epoch as this broker last learned it",
                replicas.master_epoch,
            ),
            (
                "rocketmq_broker_in_sync_replicas",
                "Brokers in the SyncStateSet (this master included; 0 on a slave)",
                len(replicas.insync.members) if not self.broker.config.is_slave else 0,
            ),
        ):
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            yield family
        elections = CounterMetricFamily(
            "rocketmq_broker_role_changes", "Role changes the controller made this broker follow", labels=names
        )
        elections.add_metric(values, replicas.elections_seen)
        yield elections

    def _traffic(self, const: dict[str, str]) -> Iterator[Metric]:
        stats = self.broker.stats
        names = [*const]
        values = [*const.values()]
        labels = ["topic", "message_type", "is_system", *names]
        messages_in = CounterMetricFamily(
            "rocketmq_messages_in_total", "Total number of incoming messages", labels=labels
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in_total", "Total traffic of incoming messages (bytes)", labels=labels
        )
        sizes = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size", labels=labels)
        bounds = tuple(float(b) for b in MESSAGE_SIZE_BUCKETS)
        for (topic, kind), entry in sorted(stats.typed_in.items()):
            if _retry_or_dlq(topic):
                continue
            row = [topic, kind, _bool(is_system_topic(topic)), *values]
            messages_in.add_metric(row, entry[TYPED_MSGS])
            bytes_in.add_metric(row, entry[TYPED_BYTES])
            sizes.add_metric(row, cumulative(bounds, entry[TYPED_BUCKETS:]), entry[TYPED_BYTES])
        yield from (messages_in, bytes_in, sizes)
        labels = ["topic", "consumer_group", "is_system", *names]
        messages_out = CounterMetricFamily(
            "rocketmq_messages_out_total", "Total number of outgoing messages", labels=labels
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out_total", "Total traffic of outgoing messages (bytes)", labels=labels
        )
        for group, by_topic in sorted(stats.groups_out.items()):
            for topic, entry in sorted(by_topic.items()):
                if _retry_or_dlq(topic):
                    continue
                row = [topic, group, is_system(topic, group), *values]
                messages_out.add_metric(row, entry[OUT_MSGS])
                bytes_out.add_metric(row, entry[OUT_BYTES])
        yield from (messages_out, bytes_out)

    def _consumers(self, const: dict[str, str]) -> Iterator[Metric]:
        broker = self.broker
        store = broker.message_store
        pulled = broker.stats.pulled
        now_ms = broker.clock_ms()
        labels = ["topic", "consumer_group", "is_retry", "is_system", *const]
        values = [*const.values()]
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "Consumer lag messages", labels=labels)
        latency = GaugeMetricFamily("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", labels=labels)
        inflight = GaugeMetricFamily("rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels=labels)
        queueing = GaugeMetricFamily(
            "rocketmq_consumer_queueing_latency",
            "Consumer queueing time (milliseconds): how long the oldest message not yet pulled has waited",
            labels=labels,
        )
        ready = GaugeMetricFamily("rocketmq_consumer_ready_messages", "Consumer ready messages", labels=labels)
        table: dict[str, dict[int, int]] = getattr(broker.offsets, "_table", {})
        for key, queues in sorted(table.items()):
            topic, _, group = key.partition(OFFSET_SEPARATOR)
            tc = broker.topics.get(topic)
            if tc is None:
                continue
            pulled_of = pulled.get(group, {})
            total_lag = total_inflight = total_ready = 0
            oldest = oldest_unpulled = 0
            for qid in range(tc.read_queue_nums):
                high = store.get_max_offset_in_queue(topic, qid)
                committed = max(queues.get(qid, 0), 0)
                behind = max(high - committed, 0)
                total_lag += behind
                next_pull = min(max(pulled_of.get((topic, qid), committed), committed), high)
                total_inflight += next_pull - committed
                total_ready += high - next_pull
                if behind:
                    stamp = store.get_message_store_timestamp(topic, qid, committed)
                    if stamp > 0 and (not oldest or stamp < oldest):
                        oldest = stamp
                if high > next_pull:
                    stamp = store.get_message_store_timestamp(topic, qid, next_pull)
                    if stamp > 0 and (not oldest_unpulled or stamp < oldest_unpulled):
                        oldest_unpulled = stamp
            row = [topic, group, _bool(topic.startswith(RETRY_PREFIX)), is_system(topic, group), *values]
            lag.add_metric(row, total_lag)
            latency.add_metric(row, max(now_ms - oldest, 0) if oldest else 0)
            inflight.add_metric(row, total_inflight)
            queueing.add_metric(row, max(now_ms - oldest_unpulled, 0) if oldest_unpulled else 0)
            ready.add_metric(row, total_ready)
        yield from (lag, latency, inflight, queueing, ready)

    def _connections(self, const: dict[str, str]) -> Iterator[Metric]:
        clients = self.broker.clients
        names = [*const]
        values = [*const.values()]
        producers: dict[tuple[str, str], int] = {}
        for group in clients.producer_groups():
            for ch in clients.producer_channels(group):
                key = (_language(ch.language), _version(ch.version))
                producers[key] = producers.get(key, 0) + 1
        family = GaugeMetricFamily(
            "rocketmq_producer_connections",
            "Producer connections",
            labels=["language", "version", "protocol_type", *names],
        )
        for (language, version), count in sorted(producers.items()):
            family.add_metric([language, version, "remoting", *values], count)
        yield family
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group in clients.consumer_groups():
            info = clients.consumer_group(group)
            if info is None:
                continue
            for ch in info.channels.values():
                row = (group, _language(ch.language), _version(ch.version), _consume_mode(info))
                consumers[row] = consumers.get(row, 0) + 1
        family = GaugeMetricFamily(
            "rocketmq_consumer_connections",
            "Consumer connections",
            labels=["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system", *names],
        )
        for row, count in sorted(consumers.items()):
            system = _bool(row[0].lower().startswith(SYSTEM_GROUP_PREFIX))
            family.add_metric([*row, "remoting", system, *values], count)
        yield family

    def _store(self, const: dict[str, str]) -> Iterator[Metric]:
        broker = self.broker
        store = broker.message_store
        names = [*const, "storage_type", "storage_medium"]
        values = [*const.values(), "local", "disk"]
        for name, doc, value in (
            (
                "rocketmq_storage_size",
                "Bytes the store's files take (CommitLog, consume queues, index), by the store's accounting",
                store.storage_bytes(),
            ),
            (
                "rocketmq_storage_flush_behind_bytes",
                "CommitLog bytes written but not flushed",
                max(store.max_phy_offset - store.flushed_offset, 0),
            ),
            (
                "rocketmq_storage_dispatch_behind_bytes",
                "CommitLog bytes not yet dispatched to consume queues and index",
                store.dispatch_behind,
            ),
            (
                "rocketmq_storage_dispatch_stopped",
                "1 when dispatch stopped at CommitLog bytes that are no record (see the broker log)",
                int(store.dispatcher.stalled is not None),
            ),
        ):
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            yield family
        reserve = GaugeMetricFamily(
            "rocketmq_storage_message_reserve_time",
            "Age of the oldest message the store holds (milliseconds)",
            labels=names,
        )
        earliest = store.get_earliest_message_time()
        if earliest > 0:
            reserve.add_metric(values, max(broker.clock_ms() - earliest, 0))
        yield reserve
        yield from self._disk(store, names, values)

    def _disk(self, store: Any, names: list[str], values: list[str]) -> Iterator[Metric]:
        """The levels of disk use (docs/operations.md, Disk space), as the store last measured
        them (at most a second ago while sends come, cleanResourceInterval otherwise)."""
        cfg = store.config
        ratio = store.last_disk_ratio
        used = GaugeMetricFamily(
            "rocketmq_storage_disk_used_ratio", "Used fraction of the CommitLog's disk, last measured", labels=names
        )
        used.add_metric(values, ratio)
        yield used
        level_names = [*names, "level"]
        threshold = GaugeMetricFamily(
            "rocketmq_storage_disk_level_ratio", "Used fraction above which a level acts", labels=level_names
        )
        exceeded = GaugeMetricFamily(
            "rocketmq_storage_disk_level_exceeded", "1 when disk use is above the level", labels=level_names
        )
        for level, percent in (
            ("clean_expired", cfg.disk_max_used_space_ratio),
            ("clean_forcibly", cfg.disk_space_clean_forcibly_ratio),
            ("refuse_writes", cfg.disk_space_warning_level_ratio),
        ):
            threshold.add_metric([*values, level], percent / 100)
            exceeded.add_metric([*values, level], 1 if ratio * 100 > percent else 0)
        yield from (threshold, exceeded)
        refused = GaugeMetricFamily(
            "rocketmq_storage_writes_refused",
            "1 while sends are refused (disk full, or a consume queue or the index cannot be written)",
            labels=names,
        )
        refused.add_metric(values, 0 if store.refusal is None else 1)
        yield refused
        stats = store.stats
        deleted = CounterMetricFamily(
            "rocketmq_storage_commitlog_files_deleted",
            "CommitLog files deleted by retention (expired=false: above diskSpaceCleanForciblyRatio)",
            labels=[*names, "expired"],
        )
        deleted.add_metric([*values, "true"], stats.commitlog_files_deleted - stats.commitlog_files_deleted_unexpired)
        deleted.add_metric([*values, "false"], stats.commitlog_files_deleted_unexpired)
        yield deleted

    def _events(self, const: dict[str, str]) -> Iterator[Metric]:
        """DLQ moves and transactions (BrokerMetricsManager.initLagAndDlqMetrics,
        initTransactionMetrics)."""
        stats = self.broker.stats
        names = [*const]
        values = [*const.values()]
        dlq = CounterMetricFamily(
            "rocketmq_send_to_dlq_messages",
            "Consumer send to DLQ messages",
            labels=["consumer_group", "topic", "is_system", *names],
        )
        for (group, topic), count in sorted(stats.dlq.items()):
            dlq.add_metric([group, topic, is_system(topic, group), *values], count)
        yield dlq
        for name, doc, table in (
            ("rocketmq_commit_messages", "Total number of commit messages", stats.commits),
            ("rocketmq_rollback_messages", "Total number of rollback messages", stats.rollbacks),
        ):
            family = CounterMetricFamily(name, doc, labels=["topic", *names])
            for topic, count in sorted(table.items()):
                family.add_metric([topic, *values], count)
            yield family
        finish = HistogramMetricFamily(
            "rocketmq_finish_message_latency",
            "Transaction finish latency (seconds from the half message's birth to its commit)",
            labels=["topic", *names],
        )
        bounds = tuple(float(b) for b in FINISH_LATENCY_BUCKETS)
        for topic, entry in sorted(stats.finish_latency.items()):
            finish.add_metric([topic, *values], cumulative(bounds, entry[2:]), entry[1])
        yield finish
        half = GaugeMetricFamily("rocketmq_half_messages", "Half messages of all topics", labels=["topic", *names])
        transactions = getattr(self.broker, "transactions", None)
        if transactions is not None:
            for topic, count in sorted(transactions.pending_by_topic().items()):
                half.add_metric([topic, *values], count)
        yield half

    def _timer(self, const: dict[str, str]) -> Iterator[Metric]:
        """Timer messages (DefaultStoreMetricsManager, exported when timerWheelEnable is on)."""
        broker = self.broker
        timers = getattr(broker, "timers", None)
        if not broker.config.timer_wheel_enable or timers is None:
            return
        stats = broker.stats
        names = [*const, "storage_type", "storage_medium"]
        values = [*const.values(), "local", "disk"]
        now = broker.clock_ms()
        enqueue_lag, enqueue_ms = timers.enqueue_behind(now)
        dequeue_lag, earliest_due = timers.due(now)
        for name, doc, value in (
            ("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", enqueue_lag),
            ("rocketmq_timer_enqueue_latency", "Timer enqueue latency (milliseconds)", enqueue_ms),
            ("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", dequeue_lag),
            (
                "rocketmq_timer_dequeue_latency",
                "Timer dequeue latency (milliseconds)",
                max(now - earliest_due, 0) if earliest_due else 0,
            ),
        ):
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            yield family
        timing = GaugeMetricFamily(
            "rocketmq_timing_messages", "Current message number in timing", labels=[*names, "topic"]
        )
        for topic, count in sorted(timers.timing.items()):
            timing.add_metric([*values, topic], count)
        yield timing
        for name, doc, table in (
            ("rocketmq_timer_enqueue", "Total number of timer enqueue", stats.timer_enqueued),
            ("rocketmq_timer_dequeue", "Total number of timer dequeue", stats.timer_dequeued),
        ):
            counter = CounterMetricFamily(name, doc, labels=[*names, "topic"])
            for topic, count in sorted(table.items()):
                counter.add_metric([*values, topic], count)
            yield counter
        snapshot = GaugeMetricFamily(
            "rocketmq_timer_message_snapshot",
            "Timer message distribution snapshot, only count timing messages in 24h.",
            labels=[*names, "timer_bound_s"],
        )
        below = timers.due(now)[0]
        for bound in TIMER_DIST:
            upto = timers.due(now + bound * 1000)[0]
            snapshot.add_metric([*values, str(bound)], upto - below)
            below = upto
        yield snapshot
        latency = HistogramMetricFamily(
            "rocketmq_delay_message_latency",
            "Timer message set latency distribution (seconds from storing to delivery time)",
            labels=[*names, "topic"],
        )
        bounds = tuple(float(b) for b in DELAY_LATENCY_BUCKETS)
        for topic, entry in sorted(stats.delay_latency.items()):
            latency.add_metric([*values, topic], cumulative(bounds, entry[2:]), entry[1])
        yield latency

    def _broker(self, const: dict[str, str]) -> Iterator[Metric]:
        broker = self.broker
        names = [*const]
        values = [*const.values()]
        for name, doc, value in (
            ("rocketmq_topic_number", "Active topic number", len(broker.topics)),
            (
                "rocketmq_consumer_group_number",
                "Active subscription group number",
                len(getattr(broker.subscriptions, "_table", {})),
            ),
            ("rocketmq_broker_permission", "Broker permission", broker.config.broker_permission),
            ("rocketmq_long_polling_parked", "Queues with pull requests parked (long polling)", len(broker.waiters)),
        ):
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            yield family
        watermark = GaugeMetricFamily(
            "rocketmq_processor_watermark", "Requests waiting for a processor slot", labels=["processor", *names]
        )
        for processor, waiting in sorted(processor_queues(broker).items()):
            watermark.add_metric([processor, *values], waiting)
        yield watermark


def _consume_mode(info: Any) -> str:
    """RocketMQ 5's label: push, pull or pop (CONSUME_PASSIVELY is a push consumer)."""
    return consume_type_name(str(info.consume_type)).lower()


def _language(language: Any) -> str:
    """LanguageCode.name().toLowerCase(): "java", "cpp", "python"..."""
    return str(getattr(language, "name", language)).lower()


def _version(version: Any) -> str:
    """MQVersion.getVersionDesc(version).toLowerCase(): "v4_9_8"."""
    try:
        return version_desc(int(version)).lower()
    except (TypeError, ValueError):
        return str(version).lower()


def broker_exporter(broker: BrokerController) -> MetricsExporter:
    """The exporter of a serving broker (its servers started): hooks the latency histogram
    into their dispatchers and binds metricsPromExporterHost (default brokerIP1) and
    metricsPromExporterPort."""
    latency = RpcLatency(trio.current_time)
    for server in getattr(broker, "_servers", ()):
        server.dispatcher.observe_with(latency.observe)
    registry = CollectorRegistry()
    registry.register(BrokerCollector(broker, latency))
    config = broker.config
    return MetricsExporter(
        registry, config.metrics_prom_exporter_host or config.broker_ip1, config.metrics_prom_exporter_port
    )
