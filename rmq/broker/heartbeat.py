"""HeartbeatData and SubscriptionData as clients send them (PROTOCOL.md 4.2).

Accepts every dialect seen in the wild: Java and Go send enum names, the C++ client
sends enum ordinals, `subVersion` as a string, no `expressionType` and a codeSet of
`atoi(tag)` values. Tag hash codes are therefore always recomputed here from the
subscription string with Java's String.hashCode, never taken from the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq.protocol.errors import RemoteProtocolError
from rmq.protocol.properties import java_string_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

    @classmethod
    def build(
        cls, topic: str, sub_string: str | None, sub_version: int = 0, expression_type: str | None = None
    ) -> SubscriptionData:
        """FilterAPI.build: split a TAG expression on `||` and hash each tag."""
        expression_type = (expression_type or EXPRESSION_TAG).upper()
        if expression_type != EXPRESSION_TAG:
            return cls(topic, sub_string or "", sub_version=sub_version, expression_type=expression_type)
        if not sub_string or sub_string == SUB_ALL:
            return cls(topic, SUB_ALL, sub_version=sub_version)
        tags = tuple(t for t in (part.strip() for part in sub_string.split("||")) if t)
        codes = frozenset(java_string_hash(t) for t in tags)
        return cls(topic, sub_string, tags, codes, sub_version, EXPRESSION_TAG)

    @property
    def is_tag_type(self) -> bool:
        return self.expression_type == EXPRESSION_TAG

    @property
    def matches_all(self) -> bool:
        return self.class_filter_mode or (self.is_tag_type and self.sub_string == SUB_ALL)

    def matches_tags_code(self, tags_code: int) -> bool:
        """ExpressionMessageFilter.isMatchedByConsumeQueue for TAG subscriptions."""
        if self.matches_all or not self.is_tag_type:
            return True
        # the consume queue stores int64; Java compares its low 32 bits as a signed int
        low = tags_code & 0xFFFFFFFF
        return (low - 0x100000000 if low & 0x80000000 else low) in self.code_set

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> SubscriptionData:
        if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str):
            raise RemoteProtocolError(f"bad subscription {obj!r}: no topic")
        sub = cls.build(
            obj["topic"],
            _opt_str(obj.get("subString")),
            _int(obj.get("subVersion", 0), "subVersion"),
            _opt_str(obj.get("expressionType")),
        )
        if obj.get("classFilterMode") is True:
            sub = cls(sub.topic, sub.sub_string, sub.tags_set, sub.code_set, sub.sub_version, sub.expression_type, True)
        return sub


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    client_id: str
    consumers: tuple[ConsumerData, ...] = ()
    producer_groups: tuple[str, ...] = field(default=())


def parse_heartbeat(obj: Any) -> HeartbeatData:
    """A HEART_BEAT body (already JSON-parsed) → HeartbeatData; RemoteProtocolError if malformed."""
    if not isinstance(obj, dict):
        raise RemoteProtocolError("heartbeat body is not a JSON object")
    client_id = obj.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise RemoteProtocolError("heartbeat body has no clientID")
    consumers = []
    for item in _list(obj.get("consumerDataSet"), "consumerDataSet"):
        if not isinstance(item, dict) or not isinstance(item.get("groupName"), str):
            raise RemoteProtocolError(f"bad consumer data {item!r}")
        subs = tuple(
            SubscriptionData.from_json(s) for s in _list(item.get("subscriptionDataSet"), "subscriptionDataSet")
        )
        consumers.append(
            ConsumerData(
                item["groupName"],
                _enum(item.get("consumeType"), CONSUME_TYPES, "consumeType", "CONSUME_PASSIVELY"),
                _enum(item.get("messageModel"), MESSAGE_MODELS, "messageModel", "CLUSTERING"),
                _enum(item.get("consumeFromWhere"), CONSUME_FROM_WHERE, "consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
                subs,
                item.get("unitMode") is True,
            )
        )
    producers = []
    for item in _list(obj.get("producerDataSet"), "producerDataSet"):
        if not isinstance(item, dict) or not isinstance(item.get("groupName"), str):
            raise RemoteProtocolError(f"bad producer data {item!r}")
        producers.append(item["groupName"])
    return HeartbeatData(client_id, tuple(consumers), tuple(producers))


def _list(value: Any, what: str) -> list[Any]:
    """A JSON array (Java sends sets as arrays); absent or null is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RemoteProtocolError(f"bad {what}: expected a JSON array, got {value!r:.80}")
    return value


def _enum(value: Any, names: tuple[str, ...], what: str, default: str) -> str:
    """An enum given by name (Java, Go) or by ordinal (C++), as its name."""
    if value is None:
        return default
    if isinstance(value, str) and value in names:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    raise RemoteProtocolError(f"bad {what} {value!r}")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise RemoteProtocolError(f"bad {what} {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RemoteProtocolError(f"bad {what} {value!r}") from None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
