"""Queue statistics an admin asks a broker for: TopicStatsTable (GET_TOPIC_STATS_INFO),
ConsumeStats (GET_CONSUME_STATS) and ConsumeStatsList (GET_BROKER_CONSUME_STATS).

Their tables are keyed by MessageQueue, which fastjson writes as an object key
(`{{"brokerName":..,"queueId":..,"topic":..}:{..}}`); `rmq.protocol.body` reads and writes that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..body import MessageQueue
from . import _fields as F


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue's offsets and the store time of its last message."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> TopicOffset:
        obj = F.obj(obj, "topicOffset")
        return cls(
            F.integer(obj.get("minOffset", 0), "minOffset"),
            F.integer(obj.get("maxOffset", 0), "maxOffset"),
            F.integer(obj.get("lastUpdateTimestamp", 0), "lastUpdateTimestamp"),
        )


@dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """A topic's queues on one broker (offsetTable)."""

    offsets: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {mq: offset.to_json() for mq, offset in self.offsets.items()}}

    @classmethod
    def from_json(cls, obj: Any) -> TopicStatsTable:
        table = F.table(F.obj(obj, "TopicStatsTable").get("offsetTable"), "offsetTable")
        return cls({MessageQueue.from_json(mq): TopicOffset.from_json(offset) for mq, offset in table.items()})


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue of a consumer group: the broker's max offset, the group's, and the store
    time of the group's last consumed message."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json(cls, obj: Any) -> OffsetWrapper:
        obj = F.obj(obj, "offsetWrapper")
        return cls(
            F.integer(obj.get("brokerOffset", 0), "brokerOffset"),
            F.integer(obj.get("consumerOffset", 0), "consumerOffset"),
            F.integer(obj.get("lastTimestamp", 0), "lastTimestamp"),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A consumer group's progress on one broker (offsetTable) and its pulls per second."""

    offsets: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @property
    def diff_total(self) -> int:
        return sum(o.diff for o in self.offsets.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeTps": self.consume_tps,
            "offsetTable": {mq: offset.to_json() for mq, offset in self.offsets.items()},
        }

    @classmethod
    def from_json(cls, obj: Any) -> ConsumeStats:
        obj = F.obj(obj, "ConsumeStats")
        table = F.table(obj.get("offsetTable"), "offsetTable")
        return cls(
            {MessageQueue.from_json(mq): OffsetWrapper.from_json(offset) for mq, offset in table.items()},
            F.number(obj.get("consumeTps") or 0.0, "consumeTps"),
        )


@dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """Every group's ConsumeStats on one broker, a list of stats (one per topic) per group,
    and the sum of their lags."""

    broker_addr: str
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    total_diff: int = 0

    def to_json(self) -> dict[str, Any]:
        groups = [
            {group: [s.to_json() for s in stats] for group, stats in item.items()} for item in self.consume_stats_list
        ]
        return {"brokerAddr": self.broker_addr, "consumeStatsList": groups, "totalDiff": self.total_diff}

    @classmethod
    def from_json(cls, obj: Any) -> ConsumeStatsList:
        obj = F.obj(obj, "ConsumeStatsList")
        groups = [
            {
                str(group): [ConsumeStats.from_json(s) for s in F.array(stats, "consumeStatsList")]
                for group, stats in F.obj(item, "consumeStatsList").items()
            }
            for item in F.array(obj.get("consumeStatsList"), "consumeStatsList")
        ]
        return cls(
            F.text(obj.get("brokerAddr") or "", "brokerAddr"),
            groups,
            F.integer(obj.get("totalDiff", 0), "totalDiff"),
        )
