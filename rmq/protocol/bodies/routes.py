"""Routes: TopicRouteData with its QueueData and BrokerData, and ClusterInfo.

A name server answers GET_ROUTEINFO_BY_TOPIC with a TopicRouteData and
GET_BROKER_CLUSTER_INFO with a ClusterInfo. Broker ids are map keys, which fastjson writes
unquoted (`{0:"host:port"}`); `body.dumps(..., legacy=True)` does the same and `body.loads`
reads both forms. `topicSynFlag` is QueueData's field name before RocketMQ 4.9.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from ..constants import MASTER_ID
from . import _fields as F


@dataclass(frozen=True, slots=True)
class QueueData:
    """A topic's queues on one broker group."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any) -> QueueData:
        """BodyError without a brokerName; absent numbers are 0."""
        obj = F.obj(obj, "queueData")
        flag = obj.get("topicSysFlag", obj.get("topicSynFlag", 0))
        return cls(
            F.text(obj.get("brokerName"), "queueData.brokerName"),
            F.integer(obj.get("readQueueNums", 0), "queueData.readQueueNums"),
            F.integer(obj.get("writeQueueNums", 0), "queueData.writeQueueNums"),
            F.integer(obj.get("perm", 0), "queueData.perm"),
            F.integer(flag, "queueData.topicSysFlag"),
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group: its cluster and its members' addresses by broker id (brokerAddrs)."""

    broker_name: str
    cluster: str
    addrs: dict[int, str]

    @property
    def master_addr(self) -> str | None:
        return self.addrs.get(MASTER_ID)

    def any_addr(self) -> str | None:
        """The master if present, else some slave (for reads and queries)."""
        if MASTER_ID in self.addrs:
            return self.addrs[MASTER_ID]
        return next(iter(self.addrs.values()), None)

    def to_json(self) -> dict[str, Any]:
        # integer keys, by id: body.dumps writes them unquoted (legacy) or quoted
        return {
            "brokerAddrs": dict(sorted(self.addrs.items())),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: Any, name: str | None = None) -> BrokerData:
        """`name` (its ClusterInfo key) stands in for a missing brokerName; quoted and
        unquoted ids alike."""
        obj = F.obj(obj, "brokerData")
        addrs = F.table(obj.get("brokerAddrs"), "brokerData.brokerAddrs")
        return cls(
            F.text(obj.get("brokerName", name), "brokerData.brokerName"),
            F.text(obj.get("cluster") or "", "brokerData.cluster"),
            {F.integer(k, "a brokerAddrs id"): F.text(v, "a brokerAddrs address") for k, v in addrs.items()},
        )


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """A topic's route: its queues on each broker group and those groups' addresses.

    `order_topic_conf` ("brokerName:queues;...") is set for ordered topics when the name
    server has orderMessageEnable; `filter_server_table` is RocketMQ 4.x's filter servers
    by broker address."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        out["queueDatas"] = [q.to_json() for q in self.queue_datas]
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        obj = F.obj(obj, "TopicRouteData")
        conf = obj.get("orderTopicConf")
        filters = F.table(obj.get("filterServerTable"), "filterServerTable")
        return cls(
            tuple(QueueData.from_json(q) for q in F.array(obj.get("queueDatas"), "queueDatas")),
            tuple(BrokerData.from_json(b) for b in F.array(obj.get("brokerDatas"), "brokerDatas")),
            F.text(conf, "orderTopicConf") if conf else None,
            {F.text(k, "a filterServerTable address"): F.strings(v, "filterServerTable") for k, v in filters.items()},
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Every broker group the name server knows (brokerAddrTable) and each cluster's group
    names (clusterAddrTable)."""

    brokers: dict[str, BrokerData]
    clusters: dict[str, list[str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: data.to_json() for name, data in self.brokers.items()},
            "clusterAddrTable": self.clusters,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        obj = F.obj(obj, "ClusterInfo")
        brokers = F.table(obj.get("brokerAddrTable"), "brokerAddrTable")
        clusters = F.table(obj.get("clusterAddrTable"), "clusterAddrTable")
        return cls(
            {F.text(k, "a brokerAddrTable name"): BrokerData.from_json(v, str(k)) for k, v in brokers.items()},
            {F.text(k, "a clusterAddrTable name"): F.strings(v, "clusterAddrTable") for k, v in clusters.items()},
        )
