"""Plain lists and tables: TopicList, GroupList and KVTable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import _fields as F


@dataclass(frozen=True, slots=True)
class TopicList:
    """Topic names a name server lists; with the address of a broker for the system topics."""

    topics: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.broker_addr is None else {"brokerAddr": self.broker_addr}
        out["topicList"] = list(self.topics)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> TopicList:
        obj = F.obj(obj, "TopicList")
        addr = obj.get("brokerAddr")
        return cls(
            tuple(F.strings(obj.get("topicList"), "topicList")), None if addr is None else F.text(addr, "brokerAddr")
        )


@dataclass(frozen=True, slots=True)
class GroupList:
    """Consumer groups (QUERY_TOPIC_CONSUME_BY_WHO)."""

    groups: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"groupList": list(self.groups)}

    @classmethod
    def from_json(cls, obj: Any) -> GroupList:
        return cls(tuple(F.strings(F.obj(obj, "GroupList").get("groupList"), "groupList")))


@dataclass(frozen=True, slots=True)
class KVTable:
    """Names and text values: a name server's KV namespace, a broker's runtime figures."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table}

    @classmethod
    def from_json(cls, obj: Any) -> KVTable:
        """Values that are numbers or booleans are read as their text."""
        table = F.table(F.obj(obj, "KVTable").get("table"), "table")
        return cls({F.text(k, "a table key"): F.text(v, f"table[{k}]") for k, v in table.items()})
