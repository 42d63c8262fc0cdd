"""Delay levels: SCHEDULE_TOPIC_XXXX and its delivery tasks (ScheduleMessageService).

A message with DELAY=L (L > 0, clamped to the last level) is stored in
SCHEDULE_TOPIC_XXXX queue L-1 with REAL_TOPIC / REAL_QID remembering where it goes; the
store writes its delivery time (store time + the level's delay) as the consume-queue
tags code (PROTOCOL.md 6.1). `routing.route_delay` does that rewrite for every path that puts
messages: sends, CONSUMER_SEND_MSG_BACK retries, transaction commits.

One task per level follows its queue in order. Delay is the same for every message of a
level, so delivery times grow along the queue: the task sleeps on a Trio deadline until
the head is due, re-puts it into its real topic (topic and queue restored, DELAY
dropped, UNIQ_KEY and the rest kept, as RocketMQ does) and moves on; with nothing left it
waits for the store to announce the next arrival in its queue. A delivery that fails
(store refusing writes) is retried after RETRY_AFTER_ERROR seconds.

Progress is `config/delayOffset.json`, `{"offsetTable":{level:next offset}}` with
fastjson's unquoted keys, written atomically about once a second when it changed and at
shutdown, plus a CommitLog watermark that makes re-puts exactly-once across a crash (see
redelivery.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from rmq.protocol import body as json_body
from rmq.protocol import properties as P
from rmq.protocol.constants import SCHEDULE_TOPIC

from .jsonfile import read_json
from .redelivery import ProgressFile, Watermark, put_to_real_destination, scan_markers
from .routing import SCHEDULE_DELIVERED_FROM as DELIVERED_FROM

if TYPE_CHECKING:
    from .parts import BrokerParts

log = logging.getLogger("rmq.broker.schedule")

READ_BATCH = 64  # consume-queue entries read per look
RETRY_AFTER_ERROR = 10.0  # seconds (DELAY_FOR_A_PERIOD)


class ScheduleService(ProgressFile):
    """Delivery of delayed messages; `load()` once the store is open, then run `run`."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self.levels_ms = broker.config.delay_levels_ms
        self.path = broker.config.config_dir / "delayOffset.json"
        self.offsets: dict[int, int] = {}  # level → next queue offset to deliver
        self.delivered = 0
        self.dirty = False
        self._persisted_mark = 0
        self._changed = trio.Event()  # set when progress changed or the watermark fell far behind
        self._events: dict[int, trio.Event] = {}
        self._watermark: Watermark | None = None

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    # -- state ------------------------------------------------------------------------

    def load(self) -> None:
        """Read delayOffset.json and count re-puts made after it was last written.

        Raises ValueError when the file and its backup are both unreadable.
        """
        store = self.broker.message_store
        self._watermark = Watermark(store)
        state = read_json(self.path, _decode)
        if state is not None:
            self.offsets, mark = state
            if mark < 0:  # written by a broker that keeps no watermark
                mark = store.max_phy_offset
        else:  # no file: scan everything, unless nothing was ever delayed
            delayed = any(store.get_max_offset_in_queue(SCHEDULE_TOPIC, q) for q in range(self.max_level))
            mark = store.min_phy_offset if delayed else store.max_phy_offset
        recovered = 0
        for value in scan_markers(store, mark, DELIVERED_FROM, SCHEDULE_TOPIC):
            level, _, offset = value.partition(":")
            if level.isdigit() and offset.isdigit():
                lv, off = int(level), int(offset)
                if off + 1 > self.offsets.get(lv, 0):
                    self.offsets[lv] = off + 1
                    recovered += 1
        if recovered:
            log.info("delay levels: %d deliveries made after the last progress write counted", recovered)
        self._persisted_mark = mark
        self.dirty = True
        self._changed.set()

    def encode(self) -> bytes:
        """delayOffset.json as written (and as GET_ALL_DELAY_OFFSET returns it)."""
        assert self._watermark is not None
        table = dict(sorted(self.offsets.items()))
        return json_body.dumps({"commitLogOffset": self._watermark.current(), "offsetTable": table}, legacy=True)

    def sync_from_master(self, raw: bytes) -> None:
        """A slave takes its master's delivery progress (GET_ALL_DELAY_OFFSET body); it is
        written to delayOffset.json at the next persist. Raises ValueError if malformed."""
        try:
            offsets, _ = _decode(json_body.loads(raw))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad delay offsets from master: {exc}") from None
        if offsets != self.offsets:
            self.offsets = offsets
            self.dirty = True

    # -- store arrivals ----------------------------------------------------------------

    def arriving(self, topic: str, queue_id: int, *_: Any) -> None:
        if topic == SCHEDULE_TOPIC:
            event = self._events.pop(queue_id + 1, None)
            if event is not None:
                event.set()

    # -- tasks ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for level in range(1, self.max_level + 1):
                nursery.start_soon(self._deliver_level, level)
            nursery.start_soon(self._persist_loop)
            task_status.started()

    async def _deliver_level(self, level: int) -> None:
        broker = self.broker
        store = broker.message_store
        queue_id = level - 1
        delay_ms = self.levels_ms[level - 1]
        while True:
            offset = self.offsets.get(level, 0)
            entries = store.read_consume_queue(SCHEDULE_TOPIC, queue_id, offset, READ_BATCH)
            if not entries:
                low = store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
                high = store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
                if offset < low or offset > high:  # retention removed entries, or a new store
                    self._advance(level, low if offset < low else high)
                    continue
                if offset < high:  # a hole in the queue's files
                    log.warning("delay level %d: no consume-queue entry at %d, skipped", level, offset)
                    self._advance(level, offset + 1)
                    continue
                # No await between the read above and this: an arrival cannot be missed.
                await self._events.setdefault(level, trio.Event()).wait()
                continue
            for queue_offset, phy, _size, deliver_ms in entries:
                now = broker.clock_ms()
                # A clock set back must not hold a message longer than its level's delay.
                due = min(deliver_ms, now + delay_ms)
                if due > now:
                    await broker.sleep_wall((due - now) / 1000)
                    break
                if not await self._deliver(level, queue_offset, phy):
                    await trio.sleep(RETRY_AFTER_ERROR)
                    break

    def _advance(self, level: int, offset: int) -> None:
        self.offsets[level] = offset
        self.dirty = True
        self._changed.set()

    async def _deliver(self, level: int, queue_offset: int, phy: int) -> bool:
        """Re-put one message into its real topic; False if the store refused (retry later)."""
        broker = self.broker
        msg = broker.message_store.look_message_by_offset(phy)
        real_topic = msg.properties.get(P.REAL_TOPIC) if msg is not None else None
        if msg is None or not real_topic:
            log.error("delay level %d offset %d: no message to deliver at %d, skipped", level, queue_offset, phy)
            self._advance(level, queue_offset + 1)
            return True
        props = dict(msg.properties)
        props.pop(P.DELAY, None)
        props[DELIVERED_FROM] = f"{level}:{queue_offset}"
        assert self._watermark is not None
        with self._watermark.delivering(level):
            result = await put_to_real_destination(broker, msg, real_topic, props)
            if not result.ok:
                log.warning(
                    "delay level %d: cannot deliver to %s (%s), retrying in %.0f s",
                    level,
                    real_topic,
                    result.status.value,
                    RETRY_AFTER_ERROR,
                )
                return False
            self._advance(level, queue_offset + 1)
        self.delivered += 1
        return True


def _decode(obj: Any) -> tuple[dict[int, int], int]:
    table = {int(level): int(offset) for level, offset in (obj.get("offsetTable") or {}).items()}
    return table, int(obj.get("commitLogOffset", -1))
