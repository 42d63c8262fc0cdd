"""What POP's processors share about the queues they pop, across the broker's ports.

- QueueLocks (QueueLockManager): one pop of a (topic, group, queue) at a time; a pop that
  finds the queue locked skips it, an orderly ack or change of invisible time waits for it.
- Parked: the pops (and, apart, the NOTIFICATION requests) waiting for a message, by the
  (topic, group, queue id) they asked for, -1 for every queue: POLLING_INFO counts them,
  POLLING_FULL bounds them. Arrivals wake them through the pull waiters (long_polling.py);
  `PopQueues.notify` wakes them when an orderly ack frees a queue
  (notifyMessageArriving(topic, queueId, group)).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

Key = tuple[str, str, int]  # (topic, consumer group, queue id)


class QueueLocks:
    def __init__(self) -> None:
        self._held: dict[Key, trio.Event | None] = {}  # an Event once someone waits

    def try_lock(self, key: Key) -> bool:
        if key in self._held:
            return False
        self._held[key] = None
        return True

    async def lock(self, key: Key) -> None:
        """Wait until the queue is free, then hold it."""
        while key in self._held:
            event = self._held[key]
            if event is None:
                event = self._held[key] = trio.Event()
            await event.wait()
        self._held[key] = None

    def unlock(self, key: Key) -> None:
        event = self._held.pop(key, None)
        if event is not None:
            event.set()

    def locked(self, key: Key) -> bool:
        return key in self._held


class Parked:
    """Waiting requests by the (topic, group, queue id) they asked for; each a wake-up."""

    def __init__(self) -> None:
        self._by_key: dict[Key, set[Callable[[], None]]] = {}
        self._count = 0

    def park(self, key: Key, wake: Callable[[], None]) -> None:
        self._by_key.setdefault(key, set()).add(wake)
        self._count += 1

    def unpark(self, key: Key, wake: Callable[[], None]) -> None:
        waiting = self._by_key.get(key)
        if waiting is not None and wake in waiting:
            waiting.discard(wake)
            self._count -= 1
            if not waiting:
                del self._by_key[key]

    def wake(self, topic: str, group: str, queue_id: int) -> None:
        """Wake the requests of the queue and those of every queue of the topic."""
        for key in ((topic, group, -1), (topic, group, queue_id)):
            for wake in list(self._by_key.get(key, ())):
                wake()

    def count(self, key: Key) -> int:
        return len(self._by_key.get(key, ()))

    def __len__(self) -> int:
        return self._count


class PopQueues:
    def __init__(self) -> None:
        self.locks = QueueLocks()
        self.pops = Parked()
        self.notifications = Parked()

    def notify(self, topic: str, group: str, queue_id: int) -> None:
        """The group may pop the queue now (an orderly batch was acked or expired)."""
        self.pops.wake(topic, group, queue_id)
        self.notifications.wake(topic, group, queue_id)
