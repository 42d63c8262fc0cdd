"""BrokerCollector: the broker's metrics, read from its own state when scraped.

Counters come from BrokerStats (bumped once per send and pull request) and RpcLatency
(once per answered request); gauges (lag, connections, storage, long polls) are computed
here, at scrape time, so the request paths pay nothing for them. Every series carries
RocketMQ's constant labels cluster, node_type="broker" and node_id (the broker name).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rmq.broker.stats import (
    IN_BUCKETS,
    IN_BYTES,
    IN_MSGS,
    MESSAGE_SIZE_BUCKETS,
    OUT_BYTES,
    OUT_MSGS,
    processor_queues,
)
from rmq.protocol.bodies.heartbeat import consume_type_name

from .exporter import MetricsExporter
from .latency import RpcLatency, cumulative
from .remoting import connection_metrics

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController

OFFSET_SEPARATOR = "@"  # consumer offsets are keyed "topic@group"


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
        yield from self._broker(const)

    def _traffic(self, const: dict[str, str]) -> Iterator[Metric]:
        stats = self.broker.stats
        names = [*const]
        values = [*const.values()]
        messages_in = CounterMetricFamily(
            "rocketmq_messages_in_total", "Total number of incoming messages", labels=["topic", *names]
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in_total", "Total traffic of incoming messages (bytes)", labels=["topic", *names]
        )
        sizes = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size", labels=["topic", *names])
        for topic, entry in sorted(stats.topics_in.items()):
            messages_in.add_metric([topic, *values], entry[IN_MSGS])
            bytes_in.add_metric([topic, *values], entry[IN_BYTES])
            buckets = cumulative(tuple(float(b) for b in MESSAGE_SIZE_BUCKETS), entry[IN_BUCKETS:])
            sizes.add_metric([topic, *values], buckets, entry[IN_BYTES])
        yield from (messages_in, bytes_in, sizes)
        labels = ["topic", "consumer_group", *names]
        messages_out = CounterMetricFamily(
            "rocketmq_messages_out_total", "Total number of outgoing messages", labels=labels
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out_total", "Total traffic of outgoing messages (bytes)", labels=labels
        )
        for group, by_topic in sorted(stats.groups_out.items()):
            for topic, entry in sorted(by_topic.items()):
                messages_out.add_metric([topic, group, *values], entry[OUT_MSGS])
                bytes_out.add_metric([topic, group, *values], entry[OUT_BYTES])
        yield from (messages_out, bytes_out)

    def _consumers(self, const: dict[str, str]) -> Iterator[Metric]:
        broker = self.broker
        store = broker.message_store
        pulled = broker.stats.pulled
        now_ms = broker.clock_ms()
        labels = ["topic", "consumer_group", *const]
        values = [*const.values()]
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "Consumer lag messages", labels=labels)
        latency = GaugeMetricFamily("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", labels=labels)
        inflight = GaugeMetricFamily("rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels=labels)
        ready = GaugeMetricFamily("rocketmq_consumer_ready_messages", "Consumer ready messages", labels=labels)
        table: dict[str, dict[int, int]] = getattr(broker.offsets, "_table", {})
        for key, queues in sorted(table.items()):
            topic, _, group = key.partition(OFFSET_SEPARATOR)
            tc = broker.topics.get(topic)
            if tc is None:
                continue
            pulled_of = pulled.get(group, {})
            total_lag = total_inflight = total_ready = 0
            oldest = 0
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
            row = [topic, group, *values]
            lag.add_metric(row, total_lag)
            latency.add_metric(row, max(now_ms - oldest, 0) if oldest else 0)
            inflight.add_metric(row, total_inflight)
            ready.add_metric(row, total_ready)
        yield from (lag, latency, inflight, ready)

    def _connections(self, const: dict[str, str]) -> Iterator[Metric]:
        clients = self.broker.clients
        names = [*const]
        values = [*const.values()]
        producers: dict[tuple[str, str], int] = {}
        for group in clients.producer_groups():
            for ch in clients.producer_channels(group):
                key = (str(ch.language), str(ch.version))
                producers[key] = producers.get(key, 0) + 1
        family = GaugeMetricFamily(
            "rocketmq_producer_connections", "Producer connections", labels=["language", "version", *names]
        )
        for (language, version), count in sorted(producers.items()):
            family.add_metric([language, version, *values], count)
        yield family
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group in clients.consumer_groups():
            info = clients.consumer_group(group)
            if info is None:
                continue
            for ch in info.channels.values():
                row = (group, str(ch.language), str(ch.version), _consume_mode(info))
                consumers[row] = consumers.get(row, 0) + 1
        family = GaugeMetricFamily(
            "rocketmq_consumer_connections",
            "Consumer connections",
            labels=["consumer_group", "language", "version", "consume_mode", *names],
        )
        for row, count in sorted(consumers.items()):
            family.add_metric([*row, *values], count)
        yield family

    def _store(self, const: dict[str, str]) -> Iterator[Metric]:
        broker = self.broker
        store = broker.message_store
        names = [*const, "storage_type", "storage_medium"]
        values = [*const.values(), "local", "disk"]
        for name, doc, value in (
            (
                "rocketmq_storage_size",
                "Disk space the store uses (bytes)",
                _disk_usage(broker.config.store_path_root_dir),
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


def _disk_usage(root: Path) -> int:
    """Bytes allocated on disk under `root` (mapped files are sparse until written)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


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
