"""The outbox between a connection's many senders and its one writer task, and the
small parking primitive the connection's tasks wait on.

Why not a trio memory channel: a channel send or receive costs several times a deque
append plus a direct reschedule, and the outbox is on the path of every request and
every response. The semantics are the channel's: bounded, FIFO, senders wait for room
(backpressure), one consumer, atomic with respect to cancellation.
"""

from __future__ import annotations

import collections
from typing import Any

import outcome
import trio


class Parked:
    """One task parked with `wait_task_rescheduled` until another task hands it a value.

    `wait()` parks the current task; `wake(value)` resumes it with `value` and returns
    True, or returns False if no task is parked (never parked, already woken, or its wait
    was cancelled). Cancelling `wait()` leaves nothing behind.
    """

    __slots__ = ("task",)

    def __init__(self) -> None:
        self.task: Any = None

    def _abort(self, _raise_cancel: Any) -> trio.lowlevel.Abort:
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def wait(self) -> Any:
        self.task = trio.lowlevel.current_task()
        return await trio.lowlevel.wait_task_rescheduled(self._abort)

    def wake(self, value: Any = None) -> bool:
        task = self.task
        if task is None:
            return False
        self.task = None
        trio.lowlevel.reschedule(task, outcome.Value(value))
        return True


class Outbox:
    """A bounded FIFO of encoded frames: many senders, one writer task.

    Args:
      size: frames held at most; `put` waits and `put_nowait` refuses beyond it.
      byte_limit: bytes held before `full` says so. Senders are not held back by bytes (a
        frame bigger than the limit must still go), but the connection's reader stops taking
        new requests while the outbox is full, so that a peer that does not read cannot make
        us hold its answers without bound.

    After `close()` every put succeeds at once and drops its frame (the connection is
    gone; callers check `closed` to report it), and waiting senders are released.
    """

    __slots__ = ("_byte_limit", "_bytes", "_drained", "_frames", "_room", "_size", "_writer", "closed", "held")

    def __init__(self, size: int, byte_limit: int = 1 << 62) -> None:
        if size < 1 or byte_limit < 1:
            raise ValueError("outbox size and byte limit must be >= 1")
        self._frames: collections.deque[bytes] = collections.deque()
        self._size = size
        self._byte_limit = byte_limit
        self._bytes = 0
        self._room = trio.lowlevel.ParkingLot()
        self._drained = trio.lowlevel.ParkingLot()
        self._writer = Parked()
        self.closed = False
        # While set, a put does not wake the writer: whoever set it (the connection's reader,
        # answering one read's requests) writes what queued itself, or wakes the writer
        # (`release`) when it clears it.
        self.held = False

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def nbytes(self) -> int:
        return self._bytes

    @property
    def full(self) -> bool:
        """At the frame or the byte bound."""
        return len(self._frames) >= self._size or self._bytes >= self._byte_limit

    async def wait_not_full(self) -> None:
        """Return once the outbox is below both bounds (or closed)."""
        while self.full and not self.closed:
            await self._drained.park()

    def put_nowait(self, frame: bytes, *, force: bool = False) -> bool:
        """Queue `frame` if there is room, or whatever the bound with `force` (True); False
        if full. Wakes the writer."""
        if self.closed:
            return True
        frames = self._frames
        if len(frames) >= self._size and not force:
            return False
        frames.append(frame)
        self._bytes += len(frame)
        if not self.held:
            self._writer.wake()
        return True

    def put_first(self, frame: bytes) -> None:
        """Queue `frame` ahead of all others, whatever the bound: the rest of a frame
        partly written already, which must go out before anything else. Wakes the writer."""
        if self.closed:
            return
        self._frames.appendleft(frame)
        self._bytes += len(frame)
        if not self.held:
            self._writer.wake()

    def release(self) -> None:
        """Clear `held`, and wake the writer for what is queued."""
        self.held = False
        if self._frames:
            self._writer.wake()

    async def put(self, frame: bytes) -> None:
        """Queue `frame`, waiting for room. Cancellation: queued whole or not at all.

        No checkpoint when there is room at once; callers checkpoint elsewhere.
        """
        while not self.put_nowait(frame):
            await self._room.park()

    async def wait_frames(self) -> None:
        """Writer only: return once at least one frame is queued."""
        while not self._frames:
            await self._writer.wait()

    def take(self, limit: int) -> list[bytes]:
        """Writer only: remove and return queued frames, at least one (if any) and no more
        than about `limit` bytes; frees their room for waiting senders."""
        frames = self._frames
        if not frames:
            return []
        batch = [frames.popleft()]
        size = len(batch[0])
        while frames and size < limit:
            frame = frames.popleft()
            batch.append(frame)
            size += len(frame)
        self._bytes -= size
        if self._room:
            self._room.unpark(count=len(batch))
        if self._drained and not self.full:
            self._drained.unpark_all()
        return batch

    def close(self) -> None:
        """Drop queued frames, accept (and drop) all further ones, release waiters."""
        self.closed = True
        self._frames.clear()
        self._bytes = 0
        self._room.unpark_all()
        self._drained.unpark_all()
