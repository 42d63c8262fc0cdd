"""Orderly POP's in-flight batches (ConsumerOrderInfoManager), in config/consumerOrderInfo.json.

An orderly pop (order=true) of a queue records what it returned as the queue's OrderInfo
for the group instead of a revive checkpoint, and leaves the group's offset where the batch
starts. Until each message of the batch is acked or its invisible time is over, the next
pop of the queue by the group is blocked (`check_block`); acks move the offset to the first
unacked message (`commit_and_next`); a pop after the invisible time gets the unacked
messages again, each counted once more (`update`). The table is written as RocketMQ writes
it (`{"table":{"topic@group":{queueId:OrderInfo}}}`), within 5 s of a change, so a restart
keeps the batches in flight and their counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from rmq.protocol import body
from rmq.protocol.bodies.pop import ConsumerOrderInfoWrapper, OrderInfo

from .jsonfile import CoalescingWriter, read_json

log = logging.getLogger("rmq.broker.order_info")

SEPARATOR = "@"
WRITE_DELAY = 5.0  # seconds, as the consumer offsets (RocketMQ persists both on one timer)
CLEAN_AFTER_MS = 24 * 3600_000  # a queue not popped this long is forgotten (CLEAN_SPAN_FROM_LAST)


def _key(topic: str, group: str) -> str:
    return f"{topic}{SEPARATOR}{group}"


class ConsumerOrderInfoManager:
    def __init__(self, config_dir: Path, *, now_ms: Callable[[], int]) -> None:
        self.path = config_dir / "consumerOrderInfo.json"
        self._now_ms = now_ms
        self._table: dict[str, dict[int, OrderInfo]] = {}
        self.writer = CoalescingWriter(self.path, self._snapshot, delay=WRITE_DELAY)

    # -- persistence ----------------------------------------------------------------------

    def load(self) -> None:
        loaded = read_json(self.path, ConsumerOrderInfoWrapper.from_json)
        if loaded is not None:
            self._table = loaded.table

    def encode(self) -> bytes:
        return body.dumps(ConsumerOrderInfoWrapper(self._table).to_json(), legacy=True)

    def persist(self) -> None:
        """Write the file now, on this thread (shutdown). Raises OSError."""
        self.writer.flush()

    def _snapshot(self) -> Iterator[bytes]:
        return ConsumerOrderInfoWrapper({k: dict(v) for k, v in self._table.items()}).pieces()

    # -- batches --------------------------------------------------------------------------

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self._table.get(_key(topic, group), {}).get(queue_id)

    def _put(self, topic: str, group: str, queue_id: int, info: OrderInfo) -> None:
        self._table.setdefault(_key(topic, group), {})[queue_id] = info
        self.writer.changed()

    def update(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
    ) -> tuple[dict[int, int], int]:
        """Record a pop's batch of the queue; (the count of each message popped before,
        the least count of the batch: 0 when a message is new)."""
        info = OrderInfo(pop_time, tuple(offsets), invisible_time, last_consume=self._now_ms(), attempt_id=attempt_id)
        previous = self.get(topic, group, queue_id)
        if previous is not None:
            info = info.counted_after(previous)
        self._put(topic, group, queue_id, info)
        counts = dict(info.consumed or {})
        least = min(counts.values()) if counts and len(counts) == len(info.queue_offsets) else 0
        return counts, least

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time, self._now_ms())

    def lock_free_time(self, topic: str, group: str, queue_id: int) -> int | None:
        """When the queue's batch stops blocking the group (clock ms), None when unknown."""
        info = self.get(topic, group, queue_id)
        return None if info is None else info.lock_free_time(self._now_ms())

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        queues = self._table.get(_key(topic, group))
        if queues is not None and queues.pop(queue_id, None) is not None:
            self.writer.changed()

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """Mark the message at `offset` of the batch popped at `pop_time` acked; the group's
        offset now (the first unacked message), -1 when the batch has no such message, -2 when
        the ack is of an older batch (nothing to commit)."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if not info.queue_offsets:
            return -1
        if pop_time != info.pop_time:
            log.warning(
                "orderly ack of %s@%s queue %d offset %d: popped at %d, not %d",
                topic,
                group,
                queue_id,
                offset,
                info.pop_time,
                pop_time,
            )
            return -2
        acked = info.with_commit(offset)
        if acked is None:
            return -1
        self._put(topic, group, queue_id, acked)
        return acked.next_offset()

    def update_next_visible_time(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, at: int
    ) -> None:
        """A change of one message's invisible time: it blocks the queue until `at`."""
        info = self.get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time:
            log.warning(
                "orderly change of invisible time of %s@%s queue %d: no batch popped at %d",
                topic,
                group,
                queue_id,
                pop_time,
            )
            return
        self._put(topic, group, queue_id, info.with_next_visible(offset, at))

    def clean(self, read_queue_nums: Callable[[str], int | None], has_group: Callable[[str], bool]) -> None:
        """Forget the batches of deleted topics, groups and queues, and of queues not popped
        for a day (autoClean)."""
        now = self._now_ms()
        for key in list(self._table):
            topic, _, group = key.partition(SEPARATOR)
            queues = self._table[key]
            nums = read_queue_nums(topic)
            if nums is None or not has_group(group) or not queues:
                del self._table[key]
                self.writer.changed()
                continue
            for queue_id in [q for q, info in queues.items() if q >= nums or now - info.last_consume > CLEAN_AFTER_MS]:
                del queues[queue_id]
                self.writer.changed()

    def __len__(self) -> int:
        return sum(len(q) for q in self._table.values())
