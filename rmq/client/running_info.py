"""What a push consumer answers when an admin asks about it through a broker.

GET_CONSUMER_RUNNING_INFO (307) gets RocketMQ's ConsumerRunningInfo: `properties`
(config and start time), `subscriptionSet`, `mqTable` (ProcessQueueInfo of each owned
queue) and `statusTable` (ConsumeStatus per topic: pull and consume RT and TPS).
Field names are RocketMQ 4.9's; what is read of the consumer is `RunningConsumer`.
CONSUME_MESSAGE_DIRECTLY (309) is answered by PushConsumer.consume_directly.

ConsumeCounters is the one piece on the consume path: plain integer and float adds per
topic; rates are worked out when someone asks, over the time since the previous ask.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from .config import ConsumerConfig
from .ids import wall_clock_ms
from .message import MessageQueue
from .offset_store import OffsetStore
from .process_queue import ProcessQueue
from .subscription import Subscription

CLIENT_VERSION = "V4_9_8"
MIB = 1024 * 1024


@dataclass(slots=True)
class _Counts:
    pulls: int = 0
    pulled: int = 0
    pull_rt: float = 0.0  # seconds, summed over pulls
    ok: int = 0
    failed: int = 0
    consume_rt: float = 0.0  # seconds, summed over handler calls


class ConsumeCounters:
    """Per-topic pull and consume counters of one consumer."""

    def __init__(self) -> None:
        self._now: dict[str, _Counts] = {}
        self._then: dict[str, _Counts] = {}
        self._then_at = time.monotonic()

    def _of(self, topic: str) -> _Counts:
        c = self._now.get(topic)
        if c is None:
            c = self._now[topic] = _Counts()
        return c

    def pulled(self, topic: str, count: int, seconds: float) -> None:
        c = self._of(topic)
        c.pulls += 1
        c.pulled += count
        c.pull_rt += seconds

    def consumed(self, topic: str, ok: bool, seconds: float) -> None:
        c = self._of(topic)
        if ok:
            c.ok += 1
        else:
            c.failed += 1
        c.consume_rt += seconds

    def status_table(self) -> dict[str, dict[str, Any]]:
        """ConsumeStatus per topic over the time since the previous call (or the start)."""
        now = time.monotonic()
        span = max(now - self._then_at, 1e-3)
        table = {}
        for topic, c in sorted(self._now.items()):
            p = self._then.get(topic, _Counts())
            pulls, calls = c.pulls - p.pulls, (c.ok + c.failed) - (p.ok + p.failed)
            table[topic] = {
                "consumeFailedMsgs": c.failed,
                "consumeFailedTPS": (c.failed - p.failed) / span,
                "consumeOKTPS": (c.ok - p.ok) / span,
                "consumeRT": (c.consume_rt - p.consume_rt) * 1000 / calls if calls else 0.0,
                "pullRT": (c.pull_rt - p.pull_rt) * 1000 / pulls if pulls else 0.0,
                "pullTPS": (c.pulled - p.pulled) / span,
            }
        self._then = {t: _Counts(*_fields(c)) for t, c in self._now.items()}
        self._then_at = now
        return table


def _fields(c: _Counts) -> tuple[Any, ...]:
    return (c.pulls, c.pulled, c.pull_rt, c.ok, c.failed, c.consume_rt)


def _wall_ms(trio_time: float) -> int:
    """A Trio clock reading as epoch milliseconds (0 for never)."""
    if trio_time <= 0:
        return 0
    return wall_clock_ms() - int((trio.current_time() - trio_time) * 1000)


class QueueState(Protocol):
    @property
    def pq(self) -> ProcessQueue: ...


class RunningConsumer(Protocol):
    """What running info reads of a push consumer."""

    group: str
    config: ConsumerConfig
    consume_type: str
    orderly: bool
    start_timestamp: int
    offsets: OffsetStore
    counters: ConsumeCounters

    @property
    def queue_states(self) -> Mapping[MessageQueue, QueueState]: ...

    @property
    def subscriptions(self) -> Mapping[str, Subscription]: ...


def push_running_info(consumer: RunningConsumer, namesrv: Sequence[str]) -> dict[str, Any]:
    """ConsumerRunningInfo of a running push consumer, as a JSON-ready dict."""
    cfg = consumer.config
    properties = {
        "PROP_CLIENT_VERSION": CLIENT_VERSION,
        "PROP_CONSUME_TYPE": consumer.consume_type,
        "PROP_CONSUMEORDERLY": "true" if consumer.orderly else "false",
        "PROP_CONSUMER_START_TIMESTAMP": str(consumer.start_timestamp),
        "PROP_NAMESERVER_ADDR": ";".join(namesrv),
        "PROP_THREADPOOL_CORE_SIZE": str(cfg.consume_concurrency),
        "consumerGroup": consumer.group,
        "messageModel": cfg.message_model.value,
        "consumeFromWhere": cfg.consume_from_where.value,
        "pullBatchSize": str(cfg.pull_batch_size),
        "pullThresholdForQueue": str(cfg.pull_threshold_for_queue),
    }
    offsets = consumer.offsets.snapshot()
    mq_table: dict[MessageQueue, Any] = {}
    for mq, state in sorted(consumer.queue_states.items()):
        pq = state.pq
        held = pq.msg_count > 0
        mq_table[mq] = {
            "cachedMsgCount": pq.msg_count,
            "cachedMsgMaxOffset": pq.queue_offset_max if held else 0,
            "cachedMsgMinOffset": pq.commit_offset() if held else 0,
            "cachedMsgSizeInMiB": pq.msg_size // MIB,
            "commitOffset": offsets.get(mq, -1),
            "droped": pq.dropped,
            "lastConsumeTimestamp": _wall_ms(pq.last_consume_time),
            "lastLockTimestamp": _wall_ms(pq.lock_time) if pq.lock_time > float("-inf") else 0,
            "lastPullTimestamp": _wall_ms(pq.last_pull_time),
            "locked": pq.locked,
            "transactionMsgCount": 0,
            "transactionMsgMaxOffset": 0,
            "transactionMsgMinOffset": 0,
            "tryUnlockTimes": 0,
        }
    return {
        "jstack": "",
        "mqTable": mq_table,
        "properties": properties,
        "statusTable": consumer.counters.status_table(),
        "subscriptionSet": [s.to_json() for s in consumer.subscriptions.values()],
    }
