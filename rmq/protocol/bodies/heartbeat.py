"""HEART_BEAT's body: HeartbeatData with its ConsumerData, ProducerData and SubscriptionData
(PROTOCOL.md 4.2).

`from_json` accepts every dialect seen in the wild: Java and Go send enum names, the C++
client sends enum ordinals, `subVersion` as a string, no `expressionType` and a codeSet of
`atoi(tag)` values. Tag hash codes are therefore always recomputed from the subscription
string with Java's String.hashCode, never taken from the client. `read_heartbeat` reads a
body in steps, so a server can pause between its groups.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from .. import body
from ..constants import EXPRESSION_TAG, SUB_ALL
from ..errors import BodyError
from ..properties import java_string_hash
from . import _fields as F

# The enums' names by ordinal (ConsumeType, MessageModel, ConsumeFromWhere).
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")  # ConsumeType, in ordinal order
# ConsumeType.getTypeCN(): what listings and metrics call each kind of consumer
CONSUME_TYPE_NAMES = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH", "CONSUME_POP": "POP"}


def consume_type_name(consume_type: str) -> str:
    """PULL, PUSH or POP for a heartbeat's consumeType (an unknown one as it is)."""
    return CONSUME_TYPE_NAMES.get(consume_type, consume_type)


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
    """A consumer's subscription to one topic: a TAG expression with its tags and their hash
    codes, or another expression type (SQL92) the broker evaluates."""

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
        """Rebuilt from topic, subString, subVersion and expressionType, as FilterAPI builds it."""
        if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str):
            raise BodyError(f"bad subscription {obj!r:.200}: no topic")
        sub_string, expression_type = obj.get("subString"), obj.get("expressionType")
        sub = cls.build(
            obj["topic"],
            None if sub_string is None else F.text(sub_string, "subString"),
            F.integer(obj.get("subVersion", 0), "subVersion"),
            None if expression_type is None else F.text(expression_type, "expressionType"),
        )
        if obj.get("classFilterMode") is True:
            sub = cls(sub.topic, sub.sub_string, sub.tags_set, sub.code_set, sub.sub_version, sub.expression_type, True)
        return sub


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """A consumer group as one client runs it. The enums are given by name."""

    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "groupName": self.group_name,
            "messageModel": self.message_model,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerData:
        """One item of consumerDataSet: enums by name (Java, Go) or ordinal (C++)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("groupName"), str):
            raise BodyError(f"bad consumer data {obj!r:.200}")
        subs = F.array(obj.get("subscriptionDataSet"), "subscriptionDataSet")
        return cls(
            obj["groupName"],
            _enum(obj.get("consumeType"), CONSUME_TYPES, "consumeType", "CONSUME_PASSIVELY"),
            _enum(obj.get("messageModel"), MESSAGE_MODELS, "messageModel", "CLUSTERING"),
            _enum(obj.get("consumeFromWhere"), CONSUME_FROM_WHERE, "consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
            tuple(SubscriptionData.from_json(s) for s in subs),
            obj.get("unitMode") is True,
        )


@dataclass(frozen=True, slots=True)
class ProducerData:
    """A producer group one client runs."""

    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Any) -> ProducerData:
        if not isinstance(obj, dict) or not isinstance(obj.get("groupName"), str):
            raise BodyError(f"bad producer data {obj!r:.200}")
        return cls(obj["groupName"])


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """HEART_BEAT's body: a client's consumer and producer groups."""

    client_id: str
    consumers: tuple[ConsumerData, ...] = ()
    producers: tuple[ProducerData, ...] = ()

    @property
    def producer_groups(self) -> tuple[str, ...]:
        return tuple(p.group_name for p in self.producers)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumers],
            "producerDataSet": [p.to_json() for p in self.producers],
        }

    @classmethod
    def from_json(cls, obj: Any) -> HeartbeatData:
        """The whole body at once (`read_heartbeat` reads it in steps)."""
        steps = _read(_members_of(F.obj(obj, "the heartbeat body")))
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]


def read_heartbeat(data: bytes) -> Generator[None, None, HeartbeatData]:
    """Parse a HEART_BEAT body in steps: yields after each consumer or producer, returns the
    HeartbeatData (StopIteration.value). A caller that may pause at a yield keeps a
    heartbeat naming thousands of groups from holding the event loop in one piece.
    BodyError if malformed.

    A body that is plain JSON is decoded one array item at a time; any other (fastjson's
    dialect) is decoded whole, then parsed in the same steps.
    """
    try:
        return (yield from _read(_plain_members(data)))
    except _NotPlain:
        obj = F.obj(body.loads(data), "the heartbeat body")
        return (yield from _read(_members_of(obj)))


def _read(members: Iterator[tuple[str, Any]]) -> Generator[None, None, HeartbeatData]:
    other: dict[str, Any] = {}
    consumers: list[ConsumerData] = []
    producers: list[ProducerData] = []
    for key, value in members:
        if key == "consumerDataSet[]":
            consumers.append(ConsumerData.from_json(value))
            yield
        elif key == "producerDataSet[]":
            producers.append(ProducerData.from_json(value))
            yield
        else:
            other[key] = value
    for key in _ARRAYS:
        F.array(other.get(key), key)  # not an array: null (none) or an error
    client_id = other.get("clientID")
    if not isinstance(client_id, str) or not client_id:
        raise BodyError("heartbeat body has no clientID")
    return HeartbeatData(client_id, tuple(consumers), tuple(producers))


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


def _enum(value: Any, names: tuple[str, ...], what: str, default: str) -> str:
    """An enum given by name (Java, Go) or by ordinal (C++), as its name."""
    if value is None:
        return default
    if isinstance(value, str) and value in names:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    raise BodyError(f"bad {what} {value!r:.80}")
