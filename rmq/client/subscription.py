"""Tag subscriptions: what a consumer asks for and how it re-checks what it gets.

RocketMQ's FilterAPI.buildSubscriptionData: the expression "TagA || TagB" is split on
`||` and trimmed; `*` (or empty) means every tag. The broker filters on the tags'
Java hash codes only (the consume queue stores hashes), so two tags with one hash both
pass; the client re-checks the tag itself (PullAPIWrapper.processPullResult).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq.protocol.bodies.heartbeat import SubscriptionData
from rmq.protocol.constants import SUB_ALL
from rmq.protocol.properties import java_string_hash


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic's subscription; build with `Subscription.parse`."""

    topic: str
    expression: str = SUB_ALL
    tags: frozenset[str] = field(default_factory=frozenset)
    codes: frozenset[int] = field(default_factory=frozenset)
    sub_version: int = 0

    @classmethod
    def parse(cls, topic: str, expression: str | None, sub_version: int = 0) -> Subscription:
        expr = (expression or "").strip()
        if not expr or expr == SUB_ALL:
            return cls(topic, SUB_ALL, frozenset(), frozenset(), sub_version)
        tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
        if not tags:
            return cls(topic, SUB_ALL, frozenset(), frozenset(), sub_version)
        return cls(topic, expr, tags, frozenset(java_string_hash(t) for t in tags), sub_version)

    @property
    def is_all(self) -> bool:
        return not self.tags

    def matches(self, tag: str | None) -> bool:
        """The client-side re-check of a pulled message's tag."""
        return not self.tags or (tag is not None and tag in self.tags)

    def data(self) -> SubscriptionData:
        """The SubscriptionData heartbeats carry (PROTOCOL.md 4.2), tags in name order."""
        return SubscriptionData(self.topic, self.expression, tuple(sorted(self.tags)), self.codes, self.sub_version)

    def to_json(self) -> dict[str, Any]:
        return self.data().to_json()
