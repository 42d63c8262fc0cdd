"""Queue allocation strategies: which of a topic's queues a consumer of a group takes.

Pure functions over sorted lists, as RocketMQ's `AllocateMessageQueueStrategy`
implementations: every consumer of a group runs the same function over the same inputs
(all queues of the topic, all client ids of the group, from GET_CONSUMER_LIST_BY_GROUP)
and takes its own share, so no coordinator is needed. Queues sort by (topic, brokerName,
queueId), client ids by string order (PROTOCOL.md 7).

A strategy is any callable `(group, current_cid, mq_all, cid_all) -> list[MessageQueue]`
with a `name`; a consumer whose id is not among `cid_all` gets nothing (it will be
listed after its next heartbeat).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from .message import MessageQueue

__all__ = [
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateByConfig",
    "AllocateStrategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
]


class AllocateStrategy(Protocol):
    name: str

    def __call__(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]: ...


def _prepare(
    current_cid: str, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> tuple[list[MessageQueue], list[str], int] | None:
    mqs = sorted(set(mq_all))
    cids = sorted(set(cid_all))
    if not current_cid or not mqs or current_cid not in cids:
        return None
    return mqs, cids, cids.index(current_cid)


class AllocateAveragely:
    """AllocateMessageQueueAveragely: contiguous blocks, the first `n % c` clients one more."""

    name = "AVG"

    def __call__(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        prepared = _prepare(current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids, index = prepared
        n, c = len(mqs), len(cids)
        mod = n % c
        if n <= c:
            average = 1
        elif mod > 0 and index < mod:
            average = n // c + 1
        else:
            average = n // c
        start = index * average if (mod > 0 and index < mod) else index * average + mod
        size = min(average, n - start)
        return [mqs[(start + i) % n] for i in range(max(size, 0))]


class AllocateAveragelyByCircle:
    """AllocateMessageQueueAveragelyByCircle: queue i goes to client i % c."""

    name = "AVG_BY_CIRCLE"

    def __call__(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        prepared = _prepare(current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids, index = prepared
        return mqs[index :: len(cids)]


allocate_averagely = AllocateAveragely()
allocate_averagely_by_circle = AllocateAveragelyByCircle()


class AllocateByConfig:
    """AllocateMessageQueueByConfig: always the configured queues, whoever else is there."""

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = sorted(set(queues))

    def __call__(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.queues)

    def __repr__(self) -> str:
        return f"<allocate strategy CONFIG {self.queues}>"
