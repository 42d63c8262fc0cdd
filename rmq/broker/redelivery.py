"""What the delay-level and timer services share: exactly-once re-puts across a crash.

Both services move a message out of a system topic (SCHEDULE_TOPIC_XXXX,
rmq_sys_wheel_timer) into its real topic and remember how far they got in a JSON file.
The file is written after the re-put, every second or so, so a crash can leave
re-puts the file does not count. To make those impossible to deliver twice, every
re-put message carries a marker property naming its source entry, and the file keeps a
CommitLog watermark: every re-put the file does not count lies at or above it. On
start, `scan_markers` reads the CommitLog from the watermark to its end and the
service counts what it finds. The scan covers only what was written since the last
write of the file.

The trade: a marker property on delivered messages (Java keeps REAL_TOPIC and REAL_QID
on them anyway) and a bounded scan at start, for no duplicates after a crash; without
it, delivery would be at-least-once.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from rmq.protocol import properties as P
from rmq.protocol.message import redraft
from rmq.store import MessageStore

from .jsonfile import write_atomic

if TYPE_CHECKING:
    from rmq.protocol.message import MessageExt
    from rmq.store.results import PutMessageResult

    from .parts import BrokerParts

log = logging.getLogger("rmq.broker.redelivery")

PERSIST_INTERVAL = 1.0  # seconds between writes of a progress file that changed

# CommitLog bytes a restart may have to scan past the file's watermark before the file is
# rewritten anyway, even with no new deliveries.
RESCAN_BUDGET = 16 * 1024 * 1024


class Watermark:
    """The lowest CommitLog offset a re-put not yet counted can occupy.

    A service calls `delivering(key)` around each re-put and counts it (in memory) before
    leaving the block; `current()` taken at any moment is then a safe scan start for the
    progress counted at that moment.
    """

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._inflight: dict[Hashable, int] = {}

    @contextmanager
    def delivering(self, key: Hashable) -> Iterator[None]:
        self._inflight[key] = self._store.max_phy_offset
        try:
            yield
        finally:
            del self._inflight[key]

    def current(self) -> int:
        return min(self._store.max_phy_offset, min(self._inflight.values(), default=2**63))


def scan_markers(store: MessageStore, start: int, key: str, skip_topic: str) -> list[str]:
    """Values of property `key` on records from CommitLog offset `start` to the end,
    ignoring records of `skip_topic` (the system topic, whose copies may carry stale
    markers)."""
    commitlog = store.commitlog
    needle = key + P.NAME_VALUE_SEPARATOR
    found: list[str] = []
    for meta in commitlog.records(max(start, commitlog.min_offset)):
        if needle in meta.properties and meta.topic != skip_topic:
            value = P.decode_properties(meta.properties).get(key)
            if value:
                found.append(value)
    return found


async def put_to_real_destination(
    broker: BrokerParts, msg: MessageExt, real_topic: str, props: dict[str, str]
) -> PutMessageResult:
    """Re-put a parked message into `real_topic` / its REAL_QID with `props`, keeping body,
    flags, born time and host and reconsume count; the store host becomes this broker."""
    try:
        real_qid = int(props.get(P.REAL_QID, "0"))
    except ValueError:
        real_qid = 0
    draft = redraft(
        msg, topic=real_topic, queue_id=real_qid, properties=props, store_host=broker.store_host, wait=False
    )
    return await broker.store.put(draft)


class ProgressFile(abc.ABC):
    """The persistence both services share: a JSON progress file written atomically.

    A subclass sets `broker`, `path`, `dirty`, `_watermark` and `_persisted_mark` and
    implements `encode()`; the file is rewritten when something changed or the watermark moved
    far.
    """

    broker: BrokerParts
    path: Path
    dirty: bool
    _watermark: Watermark | None
    _persisted_mark: int
    _changed: trio.Event  # set when progress changed or the watermark fell far behind

    @abc.abstractmethod
    def encode(self) -> bytes:
        """The file's content: each service knows its own shape."""

    def dispatched(self) -> None:
        """After a dispatch pass (the store's ArrivalListener; not per message, it runs for
        every record stored): the log grew far past the last write, so write again."""
        if self.broker.message_store.max_phy_offset - self._persisted_mark >= RESCAN_BUDGET:
            self._changed.set()

    def take_snapshot(self) -> bytes | None:
        """The file's content if it should be written now, else None."""
        if self._watermark is None:
            return None
        mark = self._watermark.current()
        if not self.dirty and mark - self._persisted_mark < RESCAN_BUDGET:
            return None
        self.dirty = False
        self._persisted_mark = mark
        return self.encode()

    def persist(self) -> None:
        if self._watermark is not None:
            write_atomic(self.path, self.encode())
            self.dirty = False

    async def _persist_loop(self) -> None:
        """Write the file at most every PERSIST_INTERVAL while it changes; idle brokers do not tick."""
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            await trio.sleep(PERSIST_INTERVAL)
            data = self.take_snapshot()
            if data is not None:
                try:
                    await trio.to_thread.run_sync(write_atomic, self.path, data)
                except OSError as exc:
                    self.dirty = True
                    log.error("cannot write %s: %s", self.path, exc)
