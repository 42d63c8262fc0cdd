"""Offset tables.

- ConsumerOffsetSerializeWrapper: a broker's committed offsets, `"topic@group"` → queue id →
  offset; its config/consumerOffset.json and GET_ALL_CONSUMER_OFFSET body. Queue ids are
  integer keys: write it with `legacy=True`, as RocketMQ's files have them unquoted.
- OffsetSerializeWrapper: a broadcasting consumer's own offsets file, queue → offset.
- ResetOffsetBody: offsets a broker set by time (INVOKE_BROKER_TO_RESET_OFFSET's answer and
  RESET_CONSUMER_CLIENT_OFFSET's body). C++ clients want it as an array of queues with an
  `offset` each; either form is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import body
from ..body import MessageQueue
from . import _fields as F


@dataclass(frozen=True, slots=True)
class ConsumerOffsetSerializeWrapper:
    """Committed offsets: "topic@group" → queue id → the next offset the group reads."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": self.offset_table}

    def pieces(self) -> Iterator[bytes]:
        """`body.dumps(self.to_json(), legacy=True)` in pieces, a topic@group each, each
        written with the offsets its table has when its turn comes."""
        yield b'{"offsetTable":'
        yield from body.dumps_members(self.offset_table.items(), legacy=True)
        yield b"}"

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerOffsetSerializeWrapper:
        table = F.table(F.obj(obj, "ConsumerOffsetSerializeWrapper").get("offsetTable"), "offsetTable")
        return cls(
            {
                F.text(key, "an offsetTable key"): {
                    F.integer(qid, f"{key} queue id"): F.integer(offset, f"{key} offset")
                    for qid, offset in F.obj(queues, str(key)).items()
                }
                for key, queues in table.items()
            }
        )


@dataclass(frozen=True, slots=True)
class OffsetSerializeWrapper:
    """A broadcasting consumer's offsets: queue → the next offset it reads."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": self.offset_table}

    @classmethod
    def from_json(cls, obj: Any) -> OffsetSerializeWrapper:
        """Keys that are not queues are left out, as Java's reader drops them."""
        table = F.table(F.obj(obj, "OffsetSerializeWrapper").get("offsetTable"), "offsetTable")
        return cls({k: F.integer(v, f"offset of {k}") for k, v in table.items() if isinstance(k, MessageQueue)})


@dataclass(frozen=True, slots=True)
class ResetOffsetBody:
    """The offsets a reset by time set: queue → offset."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": self.offset_table}

    def to_cpp_json(self) -> dict[str, Any]:
        """The form C++ clients read: `{"offsetTable":[{brokerName,queueId,topic,offset}]}`."""
        return {"offsetTable": [{**mq.to_json(), "offset": offset} for mq, offset in self.offset_table.items()]}

    @classmethod
    def from_json(cls, obj: Any) -> ResetOffsetBody:
        """Either form; map keys that are not queues are left out."""
        table = F.obj(obj, "ResetOffsetBody").get("offsetTable") or {}
        if isinstance(table, list):
            return cls(
                {
                    MessageQueue.from_json(item): F.integer(F.obj(item, "an offsetTable item").get("offset"), "offset")
                    for item in table
                }
            )
        table = F.obj(table, "offsetTable")
        return cls({k: F.integer(v, f"offset of {k}") for k, v in table.items() if isinstance(k, MessageQueue)})
