"""What brokers tell of their clients, and the orderly consumers' locks.

- ConsumerConnection (GET_CONSUMER_CONNECTION_LIST) and ProducerConnection
  (GET_PRODUCER_CONNECTION_LIST), each with the Connections of a group
- ProducerTableInfo (GET_ALL_PRODUCER_INFO): every producer group's ProducerInfos
- GetConsumerListByGroupResponseBody (GET_CONSUMER_LIST_BY_GROUP): the group's client ids
- LockBatchRequestBody and UnlockBatchRequestBody (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ), and
  LockBatchResponseBody: the queues a client now holds
- CheckClientRequestBody (CHECK_CLIENT_CONFIG): can the broker filter with a subscription
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from ..body import MessageQueue
from ..errors import BodyError
from . import _fields as F
from .heartbeat import SubscriptionData


@dataclass(frozen=True, slots=True)
class Connection:
    """One client connection of a group; `language` is LanguageCode's name."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Connection:
        obj = F.obj(obj, "connection")
        return cls(
            F.text(obj.get("clientId", ""), "clientId"),
            F.text(obj.get("clientAddr", ""), "clientAddr"),
            F.text(obj.get("language", ""), "language"),
            F.integer(obj.get("version", 0), "version"),
        )


def _connections(obj: dict[str, Any]) -> tuple[Connection, ...]:
    return tuple(Connection.from_json(c) for c in F.array(obj.get("connectionSet"), "connectionSet"))


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """A consumer group's connections to one broker, what it subscribes (topic →
    SubscriptionData) and how it consumes (enum names; empty when a peer leaves them out)."""

    connections: tuple[Connection, ...] = ()
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "connectionSet": [c.to_json() for c in self.connections],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": {topic: sub.to_json() for topic, sub in self.subscriptions.items()},
        }

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerConnection:
        obj = F.obj(obj, "ConsumerConnection")
        table = F.table(obj.get("subscriptionTable"), "subscriptionTable")
        return cls(
            _connections(obj),
            {F.text(topic, "subscriptionTable"): SubscriptionData.from_json(sub) for topic, sub in table.items()},
            F.text(obj.get("consumeType") or "", "consumeType"),
            F.text(obj.get("messageModel") or "", "messageModel"),
            F.text(obj.get("consumeFromWhere") or "", "consumeFromWhere"),
        )


@dataclass(frozen=True, slots=True)
class ProducerConnection:
    """A producer group's connections to one broker."""

    connections: tuple[Connection, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connections]}

    @classmethod
    def from_json(cls, obj: Any) -> ProducerConnection:
        return cls(_connections(F.obj(obj, "ProducerConnection")))


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer connection as GET_ALL_PRODUCER_INFO tells it: `remote_ip` is Netty's
    remoteAddress() text ("/10.0.0.3:50001"), `last_update_timestamp` wall-clock ms."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "language": self.language,
            "lastUpdateTimestamp": self.last_update_timestamp,
            "remoteIP": self.remote_ip,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> ProducerInfo:
        obj = F.obj(obj, "ProducerInfo")
        return cls(
            F.text(obj.get("clientId", ""), "clientId"),
            F.text(obj.get("remoteIP", ""), "remoteIP"),
            F.text(obj.get("language", ""), "language"),
            F.integer(obj.get("version", 0), "version"),
            F.integer(obj.get("lastUpdateTimestamp", 0), "lastUpdateTimestamp"),
        )


@dataclass(frozen=True, slots=True)
class ProducerTableInfo:
    """Every producer group a broker knows, with its connections (group → ProducerInfos)."""

    data: dict[str, tuple[ProducerInfo, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"data": {group: [p.to_json() for p in infos] for group, infos in self.data.items()}}

    @classmethod
    def from_json(cls, obj: Any) -> ProducerTableInfo:
        table = F.table(F.obj(obj, "ProducerTableInfo").get("data"), "data")
        return cls(
            {
                F.text(group, "data"): tuple(ProducerInfo.from_json(p) for p in F.array(infos, group))
                for group, infos in table.items()
            }
        )


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupResponseBody:
    """The client ids of a consumer group's members, as the broker knows them."""

    consumer_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_ids)}

    @classmethod
    def from_json(cls, obj: Any) -> GetConsumerListByGroupResponseBody:
        ids = F.array(F.obj(obj, "consumer list").get("consumerIdList"), "consumerIdList")
        return cls(tuple(F.text(i, "consumerIdList") for i in ids))


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """A client's request to lock (LOCK_BATCH_MQ) or, as UnlockBatchRequestBody, to unlock
    queues of its group. Queues named twice count once."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()

    def to_json(self) -> dict[str, Any]:
        mqs = [mq.to_json() for mq in self.mq_set]
        return {"clientId": self.client_id, "consumerGroup": self.consumer_group, "mqSet": mqs}

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        if not isinstance(obj, dict):
            raise BodyError("the lock body is not a JSON object")
        group, client_id = obj.get("consumerGroup"), obj.get("clientId")
        if not isinstance(group, str) or not isinstance(client_id, str):
            raise BodyError("the lock body needs consumerGroup and clientId")
        queues: list[MessageQueue] = []
        for item in F.array(obj.get("mqSet") or [], "mqSet"):
            if not isinstance(item, (dict, MessageQueue)):
                raise BodyError(f"bad message queue {item!r:.80}")
            mq = MessageQueue.from_json(item)
            if mq not in queues:
                queues.append(mq)
        return cls(group, client_id, tuple(queues))


class UnlockBatchRequestBody(LockBatchRequestBody):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    """The queues of a LOCK_BATCH_MQ the client now holds (lockOKMQSet)."""

    locked: tuple[MessageQueue, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": [mq.to_json() for mq in self.locked]}

    @classmethod
    def from_json(cls, obj: Any) -> LockBatchResponseBody:
        items = F.array(F.obj(obj, "LockBatchResponseBody").get("lockOKMQSet"), "lockOKMQSet")
        return cls(tuple(MessageQueue.from_json(q) for q in items))


@dataclass(frozen=True, slots=True)
class CheckClientRequestBody:
    """A client asks whether the broker can filter with `subscription_data` (SQL92 needs
    enablePropertyFilter)."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"clientId": self.client_id, "group": self.group}
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data.to_json()
        return out

    @classmethod
    def from_json(cls, obj: Any) -> CheckClientRequestBody:
        """Anything but an object is a request without a subscription."""
        if not isinstance(obj, dict):
            return cls()
        sub = obj.get("subscriptionData")
        return cls(
            F.text(obj.get("clientId") or "", "clientId"),
            F.text(obj.get("group") or "", "group"),
            None if sub is None else SubscriptionData.from_json(sub),
        )
