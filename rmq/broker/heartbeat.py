"""HeartbeatData and SubscriptionData as clients send them (PROTOCOL.md 4.2).

Accepts every dialect seen in the wild: Java and Go send enum names, the C++ client
sends enum ordinals, `subVersion` as a string, no `expressionType` and a codeSet of
`atoi(tag)` values. Tag hash codes are therefore always recomputed here from the
subscription string with Java's String.hashCode, never taken from the client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from rmq.protocol import body
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
    consumers = tuple(parse_consumer(item) for item in _list(obj.get("consumerDataSet"), "consumerDataSet"))
    producers = tuple(parse_producer(item) for item in _list(obj.get("producerDataSet"), "producerDataSet"))
    return HeartbeatData(_client_id(obj.get("clientID")), consumers, producers)


def read_heartbeat(data: bytes) -> Generator[None, None, HeartbeatData]:
    """Parse a HEART_BEAT body in steps: yields after each consumer or producer, returns the
    HeartbeatData (StopIteration.value). A caller that may pause at a yield keeps a
    heartbeat naming thousands of groups from holding the event loop in one piece.
    RemoteProtocolError if malformed.

    A body that is plain JSON is decoded one array item at a time; any other (fastjson's
    dialect) is decoded whole, then parsed in the same steps.
    """
    try:
        return (yield from _read(_plain_members(data)))
    except _NotPlain:
        obj = body.loads(data)
        if not isinstance(obj, dict):
            raise RemoteProtocolError("heartbeat body is not a JSON object") from None
        return (yield from _read(_members_of(obj)))


def _read(members: Iterator[tuple[str, Any]]) -> Generator[None, None, HeartbeatData]:
    other: dict[str, Any] = {}
    consumers: list[ConsumerData] = []
    producers: list[str] = []
    for key, value in members:
        if key == "consumerDataSet[]":
            consumers.append(parse_consumer(value))
            yield
        elif key == "producerDataSet[]":
            producers.append(parse_producer(value))
            yield
        else:
            other[key] = value
    for key in _ARRAYS:
        _list(other.get(key), key)  # not an array: null (none) or an error
    return HeartbeatData(_client_id(other.get("clientID")), tuple(consumers), tuple(producers))


class _NotPlain(Exception):
    """The body is not one plain JSON object with each key once."""


_ARRAYS = ("consumerDataSet", "producerDataSet")
_WS = re.compile(r"[ \t\n\r]*")
_raw_decode = json.JSONDecoder().raw_decode


def _members_of(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(key, value) for each member of `obj`; the items of its arrays one at a time, as
    ("consumerDataSet[]", item)."""
    for key, value in obj.items():
        if key in _ARRAYS and isinstance(value, list):
            for item in value:
                yield key + "[]", item
        else:
            yield key, value


def _plain_members(data: bytes) -> Iterator[tuple[str, Any]]:
    """_members_of(the object `data` holds), decoded as it goes. _NotPlain when `data` is not
    one plain JSON object with each key once (then body.loads, which reads fastjson's
    dialect too, has the last word)."""
    try:
        yield from _decode_members(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise _NotPlain from None


def _decode_members(data: bytes) -> Iterator[tuple[str, Any]]:
    text = data.decode("utf-8")
    scrub = body.has_surrogate_escape(text)
    seen: set[str] = set()

    def value_at(pos: int) -> tuple[Any, int]:
        value, end = _raw_decode(text, pos)
        return (body.scrub_surrogates(value) if scrub else value), _skip(text, end)

    pos = _skip(text, 0)
    if text[pos : pos + 1] != "{":
        raise ValueError("not an object")
    pos = _skip(text, pos + 1)
    while text[pos : pos + 1] != "}":
        key, pos = value_at(pos)
        if not isinstance(key, str) or key in seen or text[pos : pos + 1] != ":":
            raise ValueError("not a member")
        seen.add(key)
        pos = _skip(text, pos + 1)
        if key in _ARRAYS and text[pos : pos + 1] == "[":
            pos = _skip(text, pos + 1)
            while text[pos : pos + 1] != "]":
                item, pos = value_at(pos)
                yield key + "[]", item
                if text[pos : pos + 1] == ",":
                    pos = _skip(text, pos + 1)
                elif text[pos : pos + 1] != "]":
                    raise ValueError("bad array")
            pos = _skip(text, pos + 1)
        else:
            value, pos = value_at(pos)
            yield key, value
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
        elif text[pos : pos + 1] != "}":
            raise ValueError("bad object")
    if _skip(text, pos + 1) != len(text):
        raise ValueError("trailing characters")


def _skip(text: str, pos: int) -> int:
    """The position of the first non-blank character at or after `pos`."""
    return _WS.match(text, pos).end()  # type: ignore[union-attr]  # the pattern matches anywhere


def parse_consumer(item: Any) -> ConsumerData:
    """One item of consumerDataSet; RemoteProtocolError if malformed."""
    if not isinstance(item, dict) or not isinstance(item.get("groupName"), str):
        raise RemoteProtocolError(f"bad consumer data {item!r:.200}")
    subs = tuple(SubscriptionData.from_json(s) for s in _list(item.get("subscriptionDataSet"), "subscriptionDataSet"))
    return ConsumerData(
        item["groupName"],
        _enum(item.get("consumeType"), CONSUME_TYPES, "consumeType", "CONSUME_PASSIVELY"),
        _enum(item.get("messageModel"), MESSAGE_MODELS, "messageModel", "CLUSTERING"),
        _enum(item.get("consumeFromWhere"), CONSUME_FROM_WHERE, "consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
        subs,
        item.get("unitMode") is True,
    )


def parse_producer(item: Any) -> str:
    """One item of producerDataSet → the producer group; RemoteProtocolError if malformed."""
    if not isinstance(item, dict) or not isinstance(item.get("groupName"), str):
        raise RemoteProtocolError(f"bad producer data {item!r:.200}")
    return str(item["groupName"])


def _client_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RemoteProtocolError("heartbeat body has no clientID")
    return value


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
