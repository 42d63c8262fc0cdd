"""ProcessQueue: the messages of one assigned queue between pull and commit.

A push consumer keeps one per queue it owns (RocketMQ's ProcessQueue). The pull loop
`put`s what it pulled and records where pulling stands (`pulled_to`); the consume side
takes messages out and reports them done. The offset it may commit is the smallest
offset still held (a message pulled but not yet consumed must be redelivered after a
crash), or, when nothing is held, where pulling stands: messages the client-side tag
check dropped count as done, so a queue whose last messages were filtered out does
not wait for the next pull to commit past them. The counts and byte size drive flow control: the pull loop pauses while
a queue holds more than `pullThresholdForQueue` messages or bytes.

Orderly consumption takes messages from the front (`take`), in offset order, and either
`commit`s them or gives them back to the front (`give_back`) to be retried in place.

Plain state, no I/O: the consumer's tasks call it between checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmq.protocol.message import MessageExt


class ProcessQueue:
    """See the module docstring.

    Attributes:
      dropped: the queue was taken away (rebalance, offset reset): results are ignored.
      locked, lock_time: orderly only, the broker lock and when it was last confirmed.
      last_pull_time, last_consume_time: Trio clock times, for housekeeping.
    """

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}  # offset → message, ascending
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.pulled_to = -1  # next offset to pull: everything before it was held or filtered out
        self.dropped = False
        self.locked = False
        self.lock_time = float("-inf")
        self.last_pull_time = 0.0
        self.last_consume_time = 0.0

    def __repr__(self) -> str:
        dropped = " dropped" if self.dropped else ""
        return f"<ProcessQueue {self.msg_count} msgs {self.msg_size} B max={self.queue_offset_max}{dropped}>"

    def put(self, msgs: Iterable[MessageExt]) -> int:
        """Hold newly pulled messages (ascending offsets); returns how many were new."""
        added = 0
        table = self._msgs
        for msg in msgs:
            offset = msg.queue_offset
            if offset in table or offset in self._consuming:
                continue
            table[offset] = msg
            added += 1
            self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)
        self.msg_count += added
        return added

    @property
    def held(self) -> int:
        """Messages waiting to be consumed (orderly: not counting those being consumed)."""
        return len(self._msgs)

    def max_span(self) -> int:
        """Offset distance between the oldest and newest message held."""
        if not self._msgs:
            return 0
        first = next(iter(self._msgs))
        return self.queue_offset_max - first

    def commit_offset(self) -> int:
        """The offset to commit now: the oldest held, else where pulling stands (messages
        skipped by the tag filter included); -1 if nothing was pulled yet."""
        if self._consuming:
            return min(self._consuming)
        if self._msgs:
            return next(iter(self._msgs))
        return max(self.queue_offset_max + 1 if self.queue_offset_max >= 0 else -1, self.pulled_to)

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages (concurrent mode); returns the offset to commit."""
        table = self._msgs
        for msg in msgs:
            gone = table.pop(msg.queue_offset, None)
            if gone is not None:
                self.msg_count -= 1
                self.msg_size -= len(gone.body)
        return self.commit_offset()

    # -- orderly ------------------------------------------------------------------------

    def take(self, n: int) -> list[MessageExt]:
        """Move up to `n` messages from the front into the consuming set, in order."""
        out: list[MessageExt] = []
        table = self._msgs
        while table and len(out) < n:
            offset = next(iter(table))
            msg = table.pop(offset)
            self._consuming[offset] = msg
            out.append(msg)
        return out

    def commit(self) -> int:
        """The taken messages were consumed: forget them; returns the offset to commit."""
        for msg in self._consuming.values():
            self.msg_count -= 1
            self.msg_size -= len(msg.body)
        self._consuming.clear()
        return self.commit_offset()

    def give_back(self, msgs: Iterable[MessageExt]) -> None:
        """Return taken messages to the front, to be consumed again in order."""
        back = {}
        for msg in msgs:
            if self._consuming.pop(msg.queue_offset, None) is not None:
                back[msg.queue_offset] = msg
        if back:
            merged = sorted({**back, **self._msgs}.items())
            self._msgs = dict(merged)

    def clear(self) -> None:
        """Drop everything held (offset reset, queue taken away)."""
        self._msgs.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
