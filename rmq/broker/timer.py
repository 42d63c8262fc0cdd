"""Timer messages (RocketMQ 5): delivery at a given millisecond, up to timerMaxDelaySec ahead.

A message names its delivery time with TIMER_DELIVER_MS (or `__STARTDELIVERTIME`, as
Aliyun clients send it: both absolute ms), or relative to its arrival with
TIMER_DELAY_SEC / TIMER_DELAY_MS. `route_timer` stores a future one in the system topic
rmq_sys_wheel_timer (queue 0) with REAL_TOPIC / REAL_QID and TIMER_OUT_MS = the
absolute delivery time; a time already past is delivered at once (stored normally); a
time further ahead than timerMaxDelaySec is refused.

Theory of operation: one task reads the timer queue in order into an in-memory heap
ordered by delivery time, sleeps on a Trio deadline until the earliest is due, and re-puts
it into its real topic. Entries leave the queue out of order, so progress is the lowest
offset not yet delivered (`low`) plus the set of offsets above it that were (`done`),
written to `config/timerProgress.json` about once a second; a restart rebuilds the heap
from `low` to the queue's end, leaving out `done`. Re-puts carry a marker and the file
a CommitLog watermark, so a crash cannot deliver twice (redelivery.py).

`done` would grow without bound while one far-off timer holds `low` down; when it passes
ROLL_THRESHOLD the entry at `low` is rolled: re-appended to the end of the queue with a
ROLLED_FROM marker (which a rebuild honours) and counted as done.
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import TYPE_CHECKING, Any

import trio

from rmq.protocol import body as json_body
from rmq.protocol import properties as P
from rmq.protocol.constants import TIMER_TOPIC
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import redraft

from .jsonfile import read_json
from .redelivery import ProgressFile, Watermark, put_to_real_destination, scan_markers
from .routing import TIMER_DELIVERED_FROM as DELIVERED_FROM
from .routing import TIMER_OUT_MS

if TYPE_CHECKING:
    from .parts import BrokerParts

log = logging.getLogger("rmq.broker.timer")

ROLLED_FROM = "__TIMER_ROLLED_FROM"  # on a rolled copy: the offset it replaces
ROLL_THRESHOLD = 8192  # delivered offsets above `low` before the entry at `low` is rolled
READ_BATCH = 256  # timer-queue entries read between checkpoints
RETRY_AFTER_ERROR = 10.0  # seconds


class TimerService(ProgressFile):
    """Delivery of timer messages; `load()` once the store is open, then run `run`."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self.path = broker.config.config_dir / "timerProgress.json"
        self.ingested = 0  # next timer-queue offset to read
        self.pending: dict[int, tuple[int, int, str]] = {}  # offset → (delivery ms, CommitLog offset, real topic)
        self.timing: dict[str, int] = {}  # real topic → messages pending (rocketmq_timing_messages)
        self.done: set[int] = set()  # delivered or rolled offsets (those below `low` are dropped lazily)
        self.delivered = 0
        self.rolled = 0
        self.dirty = False
        self._heap: list[tuple[int, int]] = []  # (delivery ms, offset), stale ones skipped
        self._offsets: list[int] = []  # pending offsets, for `low`; stale ones skipped
        self._arrived = trio.Event()
        self._persisted_mark = 0
        self._changed = trio.Event()  # set when progress changed or the watermark fell far behind
        self._watermark: Watermark | None = None

    # -- state ------------------------------------------------------------------------

    @property
    def low(self) -> int:
        """Lowest timer-queue offset not yet delivered."""
        offsets = self._offsets
        while offsets and offsets[0] not in self.pending:
            heapq.heappop(offsets)
        return offsets[0] if offsets else self.ingested

    def load(self) -> None:
        """Rebuild from timerProgress.json, the deliveries after it, and the queue itself.

        Raises ValueError when the file and its backup are both unreadable.
        """
        store = self.broker.message_store
        self._watermark = Watermark(store)
        state = read_json(self.path, _decode)
        if state is not None:
            self.ingested, self.done, mark = state
        else:
            self.ingested = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
            queued = store.get_max_offset_in_queue(TIMER_TOPIC, 0) > self.ingested
            mark = store.min_phy_offset if queued else store.max_phy_offset
        for value in scan_markers(store, mark, DELIVERED_FROM, TIMER_TOPIC):
            if value.isdigit():
                self.done.add(int(value))
        while self._ingest_batch():
            pass
        self._persisted_mark = mark
        self.dirty = True
        self._changed.set()
        if self.pending:
            log.info("timer: %d timer messages waiting", len(self.pending))

    def encode(self) -> bytes:
        assert self._watermark is not None
        low = self.low
        self.done = {o for o in self.done if o > low}
        return json_body.dumps(
            {
                "commitLogOffset": self._watermark.current(),
                "offset": low,
                "done": _ranges(self.done),
            }
        )

    # -- reading the timer queue --------------------------------------------------------

    def _ingest_batch(self) -> bool:
        """Read up to READ_BATCH new entries into the heap; False when there were none."""
        store = self.broker.message_store
        entries = store.read_consume_queue(TIMER_TOPIC, 0, self.ingested, READ_BATCH)
        if not entries:
            low = store.get_min_offset_in_queue(TIMER_TOPIC, 0)
            high = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
            if self.ingested < low or self.ingested > high:
                self.ingested = low if self.ingested < low else high
                return True
            if self.ingested < high:  # a hole in the queue's files
                self.ingested += 1
                return True
            return False
        for offset, phy, _size, tags_code in entries:
            self.ingested = offset + 1
            if offset in self.done:
                continue
            try:
                meta = store.commitlog.meta_at(phy)
            except ProtocolError:
                meta = None
            props = P.decode_properties(meta.properties) if meta is not None else {}
            rolled = props.get(ROLLED_FROM, "")
            if rolled.isdigit():  # this copy replaces an earlier entry
                self.done.add(int(rolled))
                self._drop(int(rolled))
            try:
                when = int(props[TIMER_OUT_MS])
            except (KeyError, ValueError):
                when = tags_code
            topic = props.get(P.REAL_TOPIC, "")
            self.pending[offset] = (when, phy, topic)
            self.timing[topic] = self.timing.get(topic, 0) + 1
            if not rolled and meta is not None:
                self.broker.stats.count_timer_enqueue(topic, (when - meta.store_timestamp) // 1000)
            heapq.heappush(self._heap, (when, offset))
            heapq.heappush(self._offsets, offset)
        return True

    def _drop(self, offset: int) -> None:
        entry = self.pending.pop(offset, None)
        if entry is not None:
            left = self.timing.get(entry[2], 0) - 1
            if left > 0:
                self.timing[entry[2]] = left
            else:
                self.timing.pop(entry[2], None)

    # -- what the metrics read ----------------------------------------------------------

    def due(self, until_ms: int) -> tuple[int, int]:
        """(messages pending and due at `until_ms`, the earliest delivery time among them or
        0): walks the heap's entries at or before `until_ms` only."""
        heap, pending = self._heap, self.pending
        count, earliest = 0, 0
        stack = [0] if heap else []
        while stack:
            i = stack.pop()
            when, offset = heap[i]
            if when > until_ms:
                continue  # and so is everything below it
            entry = pending.get(offset)
            if entry is not None and entry[0] == when:
                count += 1
                earliest = when if not earliest else min(earliest, when)
            stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(heap))
        return count, earliest

    def enqueue_behind(self, now_ms: int) -> tuple[int, int]:
        """(timer-queue entries not yet read, milliseconds since the oldest of them was stored)."""
        store = self.broker.message_store
        behind = max(store.get_max_offset_in_queue(TIMER_TOPIC, 0) - self.ingested, 0)
        if not behind:
            return 0, 0
        stamp = store.get_message_store_timestamp(TIMER_TOPIC, 0, self.ingested)
        return behind, max(now_ms - stamp, 0) if stamp > 0 else 0

    # -- store arrivals ----------------------------------------------------------------

    def arriving(self, topic: str, *_: Any) -> None:
        if topic == TIMER_TOPIC:
            self._arrived.set()

    # -- tasks ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._persist_loop)
            task_status.started()
            await self._deliver_loop()

    def wake(self) -> None:
        """Re-check what is due now (the broker's clock jumped)."""
        arrived = getattr(self, "_arrived", None)
        if arrived is not None:
            arrived.set()

    async def _deliver_loop(self) -> None:
        clock = self.broker.clock_ms
        heap = self._heap
        while True:
            # Arrivals from here on set this event, so none is missed while we work.
            self._arrived = arrived = trio.Event()
            while self._ingest_batch():
                await trio.lowlevel.checkpoint()
            failed = False
            while heap and heap[0][0] <= clock():
                when, offset = heapq.heappop(heap)
                entry = self.pending.get(offset)
                if entry is None or entry[0] != when:
                    continue  # delivered or rolled already
                if not await self._deliver(offset, entry[1]):
                    heapq.heappush(heap, (when, offset))
                    failed = True
                    break
            if len(self.done) > ROLL_THRESHOLD:
                await self._roll()
            if failed:
                await trio.sleep(RETRY_AFTER_ERROR)
                continue
            wait = (heap[0][0] - clock()) / 1000 if heap else math.inf
            with trio.move_on_after(max(wait, 0)):
                await arrived.wait()

    async def _deliver(self, offset: int, phy: int) -> bool:
        """Re-put one timer message into its real topic; False if the store refused."""
        broker = self.broker
        msg = broker.message_store.look_message_by_offset(phy)
        real_topic = msg.properties.get(P.REAL_TOPIC) if msg is not None else None
        if msg is None or not real_topic:
            log.error("timer offset %d: no message to deliver at %d, skipped", offset, phy)
            self._finish(offset)
            return True
        props = dict(msg.properties)
        props.pop(TIMER_OUT_MS, None)
        props.pop(ROLLED_FROM, None)
        props[DELIVERED_FROM] = str(offset)
        assert self._watermark is not None
        with self._watermark.delivering(TIMER_TOPIC):
            result = await put_to_real_destination(broker, msg, real_topic, props)
            if not result.ok:
                log.warning(
                    "timer: cannot deliver to %s (%s), retrying in %.0f s",
                    real_topic,
                    result.status.value,
                    RETRY_AFTER_ERROR,
                )
                return False
            self._finish(offset)
        self.delivered += 1
        broker.stats.count_timer_dequeue(real_topic)
        return True

    def _finish(self, offset: int) -> None:
        self._drop(offset)
        self.done.add(offset)
        self.dirty = True
        self._changed.set()

    async def _roll(self) -> None:
        """Move the entries holding `low` down to the end of the queue (see the module
        docstring), until few enough delivered offsets sit above `low`."""
        broker = self.broker
        while True:
            low = self.low
            self.done = {o for o in self.done if o > low}
            if len(self.done) <= ROLL_THRESHOLD or low not in self.pending:
                return
            _when, phy, _topic = self.pending[low]
            msg = broker.message_store.look_message_by_offset(phy)
            if msg is None:
                self._finish(low)
                continue
            props = dict(msg.properties)
            props[ROLLED_FROM] = str(low)
            draft = redraft(
                msg, topic=TIMER_TOPIC, queue_id=0, properties=props, store_host=broker.store_host, wait=False
            )
            result = await broker.store.put(draft)
            if not result.ok:
                return
            self._finish(low)
            self.rolled += 1


def _ranges(offsets: set[int]) -> list[list[int]]:
    """Sorted offsets as inclusive [first, last] runs."""
    out: list[list[int]] = []
    for o in sorted(offsets):
        if out and out[-1][1] == o - 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return out


def _decode(obj: Any) -> tuple[int, set[int], int]:
    done = {o for first, last in obj.get("done") or () for o in range(int(first), int(last) + 1)}
    return int(obj.get("offset", 0)), done, int(obj.get("commitLogOffset", 0))
