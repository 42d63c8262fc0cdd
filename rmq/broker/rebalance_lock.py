"""Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

One client of a group may hold a queue; the lock lapses 60 s after its holder last
renewed it (`rocketmq.broker.rebalance.lockMaxLiveTime`), so a crashed consumer cannot
keep a queue forever. Clients renew every 20 s. Time comes from `clock` (Trio's clock
in the broker), so tests drive expiry with autojump_clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rmq.protocol.body import MessageQueue

LOCK_MAX_LIVE_TIME = 60.0  # seconds


class RebalanceLockManager:
    def __init__(self, clock: Callable[[], float], max_live_time: float = LOCK_MAX_LIVE_TIME) -> None:
        self._clock = clock
        self._max_live = max_live_time
        # group → queue → (client id, time of last lock or renewal)
        self._locks: dict[str, dict[MessageQueue, tuple[str, float]]] = {}

    def try_lock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """Lock or renew each queue that is free, expired or already ours; return those."""
        now = self._clock()
        table = self._locks.setdefault(group, {})
        locked = set()
        for mq in queues:
            holder = table.get(mq)
            if holder is None or holder[0] == client_id or now - holder[1] > self._max_live:
                table[mq] = (client_id, now)
                locked.add(mq)
        return locked

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        """Release the queues this client holds; others' locks are left alone."""
        table = self._locks.get(group)
        if not table:
            return
        for mq in queues:
            holder = table.get(mq)
            if holder is not None and holder[0] == client_id:
                del table[mq]
        if not table:
            del self._locks[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        holder = self._locks.get(group, {}).get(mq)
        return holder is not None and holder[0] == client_id and self._clock() - holder[1] <= self._max_live
