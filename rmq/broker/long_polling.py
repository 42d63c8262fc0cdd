"""Long polling: pulls that found nothing wait here until a message arrives for their queue.

RocketMQ parks such pulls in PullRequestHoldService and re-checks them every 5 s and on
arrival. Here a parked pull is a task waiting on a trio.Event per (topic, queue id);
the store's dispatch task calls `arriving` (synchronously, on the Trio thread) after it
writes a consume-queue entry, which pops and sets the event.

No wake-up can be lost: the pull reads the queue and calls `watch` with no await in
between (both are synchronous), so no arrival can fall between the read and the
registration; one that comes after finds the event and sets it.
"""

from __future__ import annotations

import trio


class PullWaiters:
    """(topic, queue id) → the Event the parked pulls on that queue wait for.

    Implements the store's ArrivalListener.
    """

    def __init__(self) -> None:
        self._events: dict[tuple[str, int], trio.Event] = {}
        self._closed = False

    def watch(self, topic: str, queue_id: int) -> trio.Event:
        """The Event set by the next arrival on this queue (already set after `wake_all`)."""
        if self._closed:
            event = trio.Event()
            event.set()
            return event
        return self._events.setdefault((topic, queue_id), trio.Event())

    def awaited(self, topic: str, queue_id: int) -> bool:
        """Whether a pull is parked on this queue (the store then dispatches an append there
        at once rather than in its reput task)."""
        return (topic, queue_id) in self._events

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: dict[str, str],
    ) -> None:
        """A message was dispatched to (topic, queue_id): wake everything parked there."""
        event = self._events.pop((topic, queue_id), None)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        """Wake every parked pull and stop parking new ones (at shutdown, so pulls answer
        now instead of holding the shutdown up)."""
        self._closed = True
        events, self._events = self._events, {}
        for event in events.values():
            event.set()

    def __len__(self) -> int:
        """Queues with a watcher that no arrival has woken yet (for statistics and tests)."""
        return len(self._events)
