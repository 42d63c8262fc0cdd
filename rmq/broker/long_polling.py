"""Long polling: pulls that found nothing wait here until a message arrives for their queue.

RocketMQ parks such pulls in PullRequestHoldService and re-checks them every 5 s and on
arrival. Here a parked pull is a callback per (topic, queue id), with no task of its own.
The store's dispatch calls `arriving` (synchronously, on the Trio thread) after it writes a
consume-queue entry, which moves the queue's callbacks to a ready list, and `dispatched`
once its pass is over, which runs them: each pull reads its queue again and is answered in
the task that dispatched. An append to a queue a pull waits on is dispatched by the sending
task itself (``AsyncMessageStore.awaited``), so the consumer's answer is written before the
producer's. Running the callbacks after the pass rather than at its first record lets a
pull take everything the pass wrote. `run` ends parked pulls at their deadline.

No wake-up can be lost: the pull reads the queue and calls `park` with no await in between
(both are synchronous), so no arrival can fall between the read and the registration.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable

import trio

log = logging.getLogger("rmq.broker.long_polling")


class _Parked:
    __slots__ = ("callback", "deadline", "key")

    def __init__(self, callback: Callable[[], None] | None, deadline: float, key: tuple[str, int] | None) -> None:
        self.callback = callback  # None once called
        self.deadline = deadline
        self.key = key


class PullWaiters:
    """(topic, queue id) → the pulls parked on that queue, until an arrival or their deadline.

    Implements the store's ArrivalListener.
    """

    def __init__(self) -> None:
        self._parked: dict[tuple[str, int], list[_Parked]] = {}
        self._ready: list[_Parked] = []
        self._deadlines: list[tuple[float, int, _Parked]] = []  # a heap
        self._order = itertools.count()
        self._earlier = trio.Event()  # a deadline came before the one `run` sleeps until
        self._closed = False

    def park(self, topic: str, queue_id: int | None, timeout: float, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, when a message arrives on the queue or ``timeout``
        seconds pass (``queue_id`` None: only then), or at `wake_all`; at once when closed.
        Called from the Trio thread; the callback runs there, in another task."""
        if self._closed:
            callback()
            return
        key = None if queue_id is None else (topic, queue_id)
        parked = _Parked(callback, trio.current_time() + max(0.0, timeout), key)
        if key is not None:
            self._parked.setdefault(key, []).append(parked)
        deadlines = self._deadlines
        if not deadlines or parked.deadline < deadlines[0][0]:
            self._earlier.set()
        heapq.heappush(deadlines, (parked.deadline, next(self._order), parked))

    def awaited(self, topic: str, queue_id: int) -> bool:
        """Whether a pull is parked on this queue (the store then dispatches an append there
        at once rather than in its reput task)."""
        return (topic, queue_id) in self._parked

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: dict[str, str],
    ) -> None:
        """A message was dispatched to (topic, queue_id): its pulls run at `dispatched`."""
        parked = self._parked.pop((topic, queue_id), None)
        if parked is not None:
            self._ready.extend(parked)

    def dispatched(self) -> None:
        """The dispatch pass is over: answer the pulls its arrivals woke."""
        while self._ready:
            ready, self._ready = self._ready, []
            for parked in ready:
                _call(parked)

    async def run(self) -> None:
        """End parked pulls at their deadlines (one timer for all of them)."""
        deadlines = self._deadlines
        while True:
            self._earlier = trio.Event()
            if not deadlines:
                await self._earlier.wait()
                continue
            with trio.move_on_at(deadlines[0][0]):
                await self._earlier.wait()
                continue
            now = trio.current_time()
            while deadlines and deadlines[0][0] <= now:
                parked = heapq.heappop(deadlines)[2]
                if parked.callback is None:
                    continue  # answered on arrival already
                waiting = self._parked.get(parked.key) if parked.key is not None else None
                if waiting is not None:
                    waiting.remove(parked)
                    if not waiting:
                        del self._parked[parked.key]  # type: ignore[arg-type]
                _call(parked)

    def wake_all(self) -> None:
        """Answer every parked pull now and stop parking new ones (at shutdown, so pulls
        answer now instead of holding the shutdown up)."""
        self._closed = True
        parked, self._parked = self._parked, {}
        self._ready.extend(p for waiting in parked.values() for p in waiting)
        self._ready.extend(p for _, _, p in self._deadlines if p.key is None)
        self._deadlines.clear()
        self.dispatched()

    @property
    def closed(self) -> bool:
        """Whether `wake_all` ran: the broker is stopping and parks nothing more."""
        return self._closed

    def __len__(self) -> int:
        """Queues with a parked pull that no arrival has woken yet (for statistics and tests)."""
        return len(self._parked)


def _call(parked: _Parked) -> None:
    callback, parked.callback = parked.callback, None
    if callback is not None:
        try:
            callback()
        except Exception:  # the dispatching task must go on
            log.exception("a parked pull failed")
