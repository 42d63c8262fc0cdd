"""AsyncMessageStore: the Trio services around a synchronous MessageStore.

Appends run on the Trio thread (encoding into the mapped page cache is a memcpy). Everything
that waits on the disk runs in worker threads, one at a time per kind, through
``trio.to_thread.run_sync`` with a ``CapacityLimiter(1)``, except the CommitLog's syncs where
the kernel takes them (io_uring, else AIO): they are submitted from the loop and finish on an
eventfd (``KernelSync``), with no thread to hand the GIL to. Tasks (all in one nursery):

* CommitLog flusher. ASYNC_FLUSH: a sync every ``flush_interval_commitlog`` ms. SYNC_FLUSH:
  group commit. Appends that must wait join the open ``_Batch`` (a new one every
  ``BATCH_SPAN``) and get a ``PutWait``, which the round ends by callback: no task waits per
  append, and the broker answers from the callback. A round closes the batches before it
  captures the write position, so one sync covers every append in them, and appends made
  while a sync runs wait for the next round (or end with this one, if its sync covered them:
  each batch knows where its appends end). Through the kernel, an append that finds no round
  running submits one itself (``_start_round``; the sends of one read, once all of them
  wait: ``_kick_round``), so that the sync runs while the loop goes on
  with the rest of its read and the dispatch; the flusher reaps it, unless an append finds
  the round's completion in io_uring's ring first (``_end_round_if_synced``): the flusher
  hears only when the loop next polls, after every task of a pass that can take
  milliseconds. Where a round runs in a thread, the loop waits (``HANDOFF_WAIT`` at most) for
  it to start: a thread needs the GIL to reach its fdatasync, which a busy loop would
  otherwise keep until its next syscall, often a whole batch of requests later.
  A lone request (none waits, no round runs, and the loop has gone idle since the last round
  ended: ``_lone``) is synced on the loop at once instead, and its append returns the result
  itself, as under ASYNC_FLUSH: a request in flight alone would otherwise wait for the
  kernel's worker and then the loop to be woken. ``lone_sync_inline`` turns this off; slow
  lone syncs pause it.
* Batch watchdog: one timer per batch (not per append, which would cost a cancel scope each):
  a batch still waiting ``sync_flush_timeout`` after it opened is woken with FLUSH_DISK_TIMEOUT
  (the messages are stored and will become durable; only the wait ended).
* Logics flusher: every ``flush_interval_consume_queue`` ms syncs consume queues with enough
  pending pages (all of them every thorough interval) and the checkpoint; the index every
  ``flush_interval_index`` ms.
* Reput: woken by every append, builds consume queue and index entries and calls the
  ArrivalListener; yields to other tasks every ``REPUT_BATCH`` records. The plain sends of a
  pipelined read (``put_group_now``), and an append to a queue a reader waits on
  (``awaited``), dispatch their own records themselves when nothing older is pending: a
  reader does not wait for this task's turn, and those sends cost no task switch for it.
* Retention: every ``clean_resource_interval`` ms measures the disk and deletes files at the
  levels of disk use (MessageStore.run_retention); appends measure it once a second too.
* Replica watchdog (SYNC_MASTER): appends that must wait for a slave's ack queue a
  their ``PutWait`` in append order; ``replica_acked`` wakes every wait the ack covers (one ack
  covers many messages: the group commit of replication), and the watchdog wakes those still
  waiting ``sync_flush_timeout`` after their append with FLUSH_SLAVE_TIMEOUT.

Controller mode (RocketMQ 5's RIP-44): with ``dispatch_confirmed_only`` the reput stops at
the confirm offset (``replicated_offset``, raised by ``replica_acked`` or set by ``confirm``;
``confirm(None)`` when a lone master confirms its own appends), so consumers, parked pulls and
the arrival listener only ever see records every in-sync replica holds. Off, nothing on the
append path changes. ``truncate_to`` cuts the CommitLog while the tasks run: it holds appends,
waits until everything written is synced and no flush round is in flight, then cuts in one
step (``MessageStore.truncate_to``).

Leaving ``async with`` (or cancelling ``run``) dispatches and syncs what is left; it does not
close the MessageStore, which its opener owns.
"""

from __future__ import annotations

import abc
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

import trio

from rmq.later import Later
from rmq.protocol.message import MessageDraft

from .append import wants_wait
from .flush import FlushPlan
from .kernel_sync import KernelSync
from .mapped_file import MappedFile
from .message_store import MessageStore
from .results import PutMessageResult, PutMessageStatus

log = logging.getLogger("rmq.store.aio")

REPUT_BATCH = 1024  # records dispatched between checkpoints of the reput task
LONE_SLOW = 0.002  # lone rounds whose syncs take longer than this on average (seconds) stop ...
LONE_PAUSE = 1.0  # ... for this long: they go the way of the others
HANDOFF_WAIT = 0.0005  # at most this long the loop waits for the flush thread to start its sync
# An append joins the open batch only if it opened less than this long ago (seconds), so every
# append waits between sync_flush_timeout minus this and sync_flush_timeout.
BATCH_SPAN = 0.01


class _Wakeup:
    """Something appends wait for: `fire` calls each waiter's callback, once."""

    __slots__ = ("_callbacks", "fired", "timed_out")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []
        self.fired = False
        self.timed_out = False

    def when_fired(self, callback: Callable[[], None]) -> None:
        if self.fired:
            callback()
        else:
            self._callbacks.append(callback)

    def fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


class _Batch(_Wakeup):
    """Appends waiting for the same CommitLog sync round."""

    __slots__ = ("deadline", "done", "end")

    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline
        self.done = False  # a round covering the batch has finished
        self.end = 0  # the CommitLog offset past the last append that joined


class _Round:
    """A CommitLog sync round submitted to the kernel and not reaped yet."""

    __slots__ = ("plan", "syncs")

    def __init__(self, syncs: Submitted, plan: FlushPlan) -> None:
        self.syncs = syncs
        self.plan = plan


class _Confirm:
    """Controller mode's dispatch: stop at the confirm offset (``only``), which is the log's
    end while every append confirms itself (``itself``) and replicated_offset otherwise."""

    __slots__ = ("itself", "only")

    def __init__(self) -> None:
        self.only = False
        self.itself = False


class _Lone:
    """Lone rounds, synced on the loop (AsyncMessageStore._lone)."""

    __slots__ = ("after", "cost", "error", "idled")

    def __init__(self) -> None:
        self.idled = True  # the loop had nothing to do since the last round ended
        self.after = 0.0  # none before then (trio time): they were slow
        self.cost = 0.0  # seconds the sync of one took, a moving average
        self.error: OSError | None = None  # one failed: the flusher raises it


class _IdleMark(trio.abc.Instrument):
    """Marks the loop idle when it is about to wait for I/O with nothing to run (a wait with
    a timeout: Trio waits without one while tasks are runnable)."""

    def __init__(self, lone: _Lone) -> None:
        self._lone = lone

    def before_io_wait(self, timeout: float) -> None:
        if timeout > 0:
            self._lone.idled = True


class _Flights:
    """Flush rounds in a worker thread, which truncate_to waits out (a kernel round is
    AsyncMessageStore._round)."""

    __slots__ = ("commitlog", "logics", "logics_done")

    def __init__(self) -> None:
        self.commitlog = False
        self.logics = False
        self.logics_done = trio.Event()


class PutWait(Later):
    """An append's answer once its flush and its slave (or group) wait are over: a `Later`
    settled with the PutMessageResult by the task that ended the last of them (the flusher,
    an ack, a watchdog). A replica wait queues the PutWait itself (``end``, ``deadline``,
    ``timed_out``, ``fire``) in append order: one object per waiting append."""

    __slots__ = (
        "_astore", "_batch", "_disk_timeout", "_flush_pending", "_refused", "_replica_pending", "_slave_timeout",
        "deadline", "end", "result", "timed_out",
    )  # fmt: skip

    def __init__(
        self,
        astore: AsyncMessageStore,
        result: PutMessageResult,
        batch: _Batch | None,
        replica_deadline: float | None,
        refused: str | None,
    ) -> None:
        super().__init__()
        self._astore = astore
        self.result = result
        self._refused = refused
        self._batch = batch
        self.end = result.end_offset
        self.deadline = replica_deadline if replica_deadline is not None else 0.0
        self.timed_out = False  # set by the replica watchdog before it fires us
        self._replica_pending = replica_deadline is not None
        self._flush_pending = batch is not None
        self._disk_timeout = self._slave_timeout = False
        if batch is not None:
            batch.when_fired(self._flushed)
        elif not self._replica_pending:
            self._finish()

    def _flushed(self) -> None:
        self._flush_pending = False
        batch = self._batch
        self._disk_timeout = batch is not None and batch.timed_out and self._astore.flushed_offset < self.end
        if not self._replica_pending:
            self._finish()

    def fire(self) -> None:
        """The replica wait is over: acked, timed out (``timed_out``) or failed."""
        if not self._replica_pending:
            return
        self._replica_pending = False
        self._slave_timeout = self.timed_out and self._astore.replicated_offset < self.end
        if not self._flush_pending:
            self._finish()

    def _finish(self) -> None:
        # The waits' verdicts in RocketMQ's order: the disk's, the slave's refusal, the
        # slave's timeout, each later one winning.
        result, astore = self.result, self._astore
        if self._disk_timeout:
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            result.remark = f"not synced within sync_flush_timeout={astore.store.config.sync_flush_timeout} ms"
        if self._refused is not None:
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            result.remark = self._refused
        if self._slave_timeout:
            result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
            result.remark = (
                f"no slave acked offset {self.end} within syncFlushTimeout={astore.store.config.sync_flush_timeout} ms"
            )
        self.settle(result)


async def sync_files(ks: KernelSync, files: Sequence[tuple[MappedFile, int]], tag: int, what: str) -> bool:
    """fdatasync each (file, position) of ``files`` (``what`` names them in messages) through
    ``ks``, wait for them all, then record each file durable up to its position. Closed files
    (deleted meanwhile) are skipped. ``tag`` tells this call's completions from those of a
    cancelled earlier one. False when the kernel refused: ``ks`` is closed (it waits for the
    syncs a partial submit started) and the caller syncs in a thread from now on.

    Raises:
        OSError: a sync failed.
    """
    syncs = submit_syncs(ks, files, tag, what)
    if syncs is None:
        return False
    while syncs.left:
        await trio.lowlevel.wait_readable(ks.eventfd)
        syncs.take()
    syncs.finish()
    return True


class Submitted:
    """The syncs `submit_syncs` started under one tag: how many are not reaped yet, and the
    first errno one failed with."""

    __slots__ = ("error", "files", "ks", "left", "tag", "what")

    def __init__(self, ks: KernelSync, tag: int, files: list[tuple[MappedFile, int]], what: str) -> None:
        self.ks = ks
        self.tag = tag
        self.files = files  # (file, position)
        self.what = what  # names the files in messages
        self.left = len(files)
        self.error = 0

    def take(self) -> None:
        """Reap what the kernel finished, counting this tag's completions."""
        for tag, result in self.ks.reap():
            if tag == self.tag:
                self.left -= 1
                self.error = self.error or -result

    def finish(self) -> None:
        """Once none is left: record the files durable up to their positions.

        Raises:
            OSError: a sync failed.
        """
        if self.error:
            raise OSError(self.error, f"fdatasync of {self.what} failed: {os.strerror(self.error)}")
        for mf, upto in self.files:
            mf.synced(upto)


def submit_syncs(ks: KernelSync, files: Iterable[tuple[MappedFile, int]], tag: int, what: str) -> Submitted | None:
    """The first half of `sync_files`: submit, without waiting (closed files are skipped).
    None when the kernel refused (``ks`` is closed then)."""
    opened = [(mf, upto, fd) for mf, upto in files if (fd := mf.sync_descriptor()) >= 0]
    if opened:
        try:
            ks.submit([fd for _, _, fd in opened], tag)
        except OSError as exc:
            log.info("the kernel does not sync %s through %s (%s): syncs run in a thread", what, ks.name, exc)
            ks.close()
            return None
    return Submitted(ks, tag, [(mf, upto) for mf, upto, _ in opened], what)


class Replication(abc.ABC):
    """The HA master service as the store sees it (rmq.broker.ha.master.HAService)."""

    @abc.abstractmethod
    def appended(self) -> None:
        """New CommitLog bytes: push them to the slaves. Called on every append; cheap."""

    @abc.abstractmethod
    def unavailable(self, end_offset: int) -> str | None:
        """Why no slave can ack ``end_offset`` soon (none connected, or too far behind), or
        None when a SYNC_MASTER wait makes sense."""


# Consume queues drained per logics round: a queue's first drain creates its directory and
# file, so with tens of thousands of new queues one round must not hold the Trio thread long.
FLUSH_QUEUES_PER_ROUND = 256


class AsyncMessageStore:
    """Trio front of ``store``.

    Args:
        store: an open MessageStore; only this object's tasks may flush it meanwhile.
        flush_fn: runs a FlushPlan in a worker thread; defaults to ``store.run_flush``. Tests
            inject a slow one.
        retention: run the retention task.

    Use ``async with AsyncMessageStore(store) as astore:`` or ``await nursery.start(astore.run)``.
    Reads need no waiting: call ``astore.store.get_message(...)`` and friends directly.
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        flush_fn: Callable[[FlushPlan], None] | None = None,
        retention: bool = True,
    ) -> None:
        self.store = store
        self._append = store.appender.put  # the send path's append, looked up once
        self._flush_fn = flush_fn or store.run_flush
        self._retention = retention
        self._commitlog_limiter = trio.CapacityLimiter(1)
        self._kernel_sync: KernelSync | None = None  # opened by run() where the kernel takes syncs
        self._sync_tag = 0
        self._lone_rounds = _Lone()
        self._logics_limiter = trio.CapacityLimiter(1)
        self._flush_wanted = trio.Event()
        self._round_done = trio.Event()
        self._open_batch: _Batch | None = None  # appends join it until a round closes it
        self._batches: deque[_Batch] = deque()  # not yet done, oldest first
        self._batch_opened = trio.Event()
        self._flushed = store.flushed_offset
        self._round: _Round | None = None  # a kernel sync round running
        self._reput_wanted = trio.Event()
        self._reput_done: trio.Event | None = None  # made by a wait_dispatched, set by a pass's end
        self._running = False
        self.flush_rounds = 0  # CommitLog sync rounds run: group commit makes this << appends
        # Set by the broker: whether a reader waits on (topic, queue id) now (a parked pull).
        # An append there is dispatched at once, in the appending task, so that the reader is
        # answered one scheduler pass sooner; appends nobody waits for are dispatched by the
        # reput task, many at a time.
        self.awaited: Callable[[str, int], bool] | None = None
        # Set by a master broker; with sync_replication (SYNC_MASTER), appends that want to
        # wait also wait for a slave's ack.
        self.replication: Replication | None = None
        self.sync_replication = False
        self.replicated_offset = 0  # the highest CommitLog offset a slave has acked
        # DLedger: every append waits for its group's commit, whatever its WAIT property says
        self.replica_wait_always = False
        self._replica_waits: deque[PutWait] = deque()
        self._replica_wait_added = trio.Event()
        # Controller mode: whether dispatch waits for the confirm offset, and the flush rounds
        # truncate_to waits out. (Few attributes: past 30 an instance's attributes no longer
        # live inline, and every attribute load of the send path costs more.)
        self._confirm = _Confirm()
        self._flights = _Flights()

    # --- lifetime -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the store's tasks until cancelled, then dispatch and sync what is left."""
        if self._flush_fn == self.store.run_flush:  # not a test's stand-in
            self._kernel_sync = KernelSync.open()
        idle = _IdleMark(self._lone_rounds) if self.store.sync_flush and self.store.config.lone_sync_inline else None
        if idle is not None:
            trio.lowlevel.add_instrument(idle)
        else:
            self._lone_rounds.after = float("inf")  # none
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._commitlog_flusher)
                nursery.start_soon(self._batch_watchdog)
                nursery.start_soon(self._logics_flusher)
                nursery.start_soon(self._reput_loop)
                nursery.start_soon(self._replica_watchdog)
                if self._retention:
                    nursery.start_soon(self._retention_loop)
                self._running = True
                task_status.started()
        finally:
            self._running = False
            with trio.CancelScope(shield=True):
                try:
                    await self._final_flush()
                finally:
                    if self._kernel_sync is not None:
                        self._kernel_sync.close()
                        self._kernel_sync = None
                    if idle is not None:
                        trio.lowlevel.remove_instrument(idle)

    async def __aenter__(self) -> Self:
        self._cm = self._lifetime()
        return await self._cm.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._cm.__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def _lifetime(self) -> AsyncIterator[Self]:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.run)
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()

    async def _final_flush(self) -> None:
        store = self.store
        if store.closed:
            return
        store.dispatcher.dispatch_pending(notify=False)
        plan = store.begin_flush(commitlog=True, logics=True, thorough=True)
        await trio.to_thread.run_sync(self._flush_fn, plan, limiter=self._commitlog_limiter)
        store.end_flush(plan)
        await trio.to_thread.run_sync(store.checkpoint.sync, limiter=self._logics_limiter)
        self._flushed = store.flushed_offset
        self._open_batch = None
        self._round = None  # a kernel round still running covers nothing this flush did not
        self._finish_batches(len(self._batches))  # appends still waiting: all durable now
        done, self._round_done = self._round_done, trio.Event()
        done.set()

    # --- appends --------------------------------------------------------------------------

    async def put(self, draft: MessageDraft) -> PutMessageResult:
        """Store one message (see ``MessageStore.put``) with the flush policy.

        With SYNC_FLUSH and the draft's wait (None: its WAIT property; absent = true) this
        waits for the group commit, up to ``sync_flush_timeout``, then answers
        FLUSH_DISK_TIMEOUT. Cancelled while waiting: the message is stored all the same; only
        the wait ends.

        Raises:
            RuntimeError: the store's tasks are not running (SYNC_FLUSH waits need them).
        """
        rest = self.put_now(draft)
        return rest if isinstance(rest, PutMessageResult) else await rest

    async def put_many(self, drafts: Sequence[MessageDraft]) -> PutMessageResult:
        """Store several messages in one piece (see ``MessageStore.put_many``) with the flush
        policy of ``put``: they wait when any of them wants to."""
        rest = self.put_many_now(drafts)
        return rest if isinstance(rest, PutMessageResult) else await rest

    def put_now(self, draft: MessageDraft) -> PutMessageResult | PutWait:
        """`put` without a checkpoint before the append: appends and joins the flush (or
        slave) wait now, so callers keep their order. Returns the PutMessageResult when there
        is nothing to wait for, else an awaitable giving it."""
        result = self._append(draft)
        return self._register(result, wants_wait(draft.wait, draft.properties), draft.topic, draft.queue_id)

    def put_many_now(self, drafts: Sequence[MessageDraft]) -> PutMessageResult | PutWait:
        """`put_many` as `put_now` does it; a reader parked on the first draft's queue is
        answered at once, as `awaited` says."""
        result = self.store.appender.put_many(drafts)
        if not result.ok:
            return result
        waits = any(wants_wait(d.wait, d.properties) for d in drafts)
        return self._register(result, waits, drafts[0].topic, drafts[0].queue_id)

    def put_group_now(self, drafts: Sequence[MessageDraft]) -> list[PutMessageResult | PutWait]:
        """`put_now` for sends that came together (one read of a connection), in their order:
        their records written in one piece (``Appender.put_group``), then each one's result or
        wait as `put_now` gives it, and one dispatch for all. That of a pipeline's sends (more
        than one) is done here when nothing older waits for dispatch: the reput task would
        make the same pass over the same records, one task switch later. A lone send is
        answered first and dispatched by the reput task after, as `put_now` does, unless a
        reader waits on its queue (``awaited``): one request in flight waits for its answer."""
        results = self.store.appender.put_group(drafts)
        wrote = 0
        for result in results:
            if result.ok:
                wrote += result.wrote_bytes
        if wrote:
            awaited = self.awaited
            d = drafts[0]
            self._dispatch_after(wrote, len(drafts) > 1 or (awaited is not None and awaited(d.topic, d.queue_id)))
        out = [
            self._waits(result, wants_wait(d.wait, d.properties), kick=len(drafts) == 1) if result.ok else result
            for d, result in zip(drafts, results, strict=True)
        ]
        # One round for the group, started once all of it waits: a round started by the
        # group's first wait would close its batch and leave the rest in a batch of their own.
        if len(drafts) > 1:
            self._kick_round()
        return out

    def _register(self, result: PutMessageResult, waits: bool, topic: str, queue_id: int) -> PutMessageResult | PutWait:
        """What follows an append, up to the waits: the result, or an awaitable of it.
        ``waits``: the append wants its sync (and slave); (topic, queue_id): its queue."""
        if not result.ok:
            return result
        awaited = self.awaited
        self._dispatch_after(result.wrote_bytes, awaited is not None and awaited(topic, queue_id))
        return self._waits(result, waits)

    def _dispatch_after(self, wrote: int, awaited: bool) -> None:
        """New records of ``wrote`` bytes: dispatched now when a reader waits on their queue
        (``awaited``), else by the reput task."""
        if awaited and self.store.dispatch_behind <= wrote:
            # nothing older waits for dispatch: these records alone, now (bounded work); then
            # tell wait_dispatched what the reput task would have
            self.store.dispatch_pending()
            self._dispatched()
        else:
            self._reput_wanted.set()

    def _dispatched(self) -> None:
        """A dispatch pass ended: wake `wait_dispatched` (its event is made when one waits)."""
        done = self._reput_done
        if done is not None:
            self._reput_done = None
            done.set()

    def _waits(self, result: PutMessageResult, waits: bool, kick: bool = True) -> PutMessageResult | PutWait:
        """An append's result, or a PutWait for its sync (SYNC_FLUSH) and slave (SYNC_MASTER).
        ``kick``: start a sync round now if none runs (the caller does it otherwise)."""
        replica_deadline: float | None = None
        refused: str | None = None  # why SYNC_MASTER cannot wait for a slave
        replication = self.replication
        if replication is not None:
            replication.appended()
            if (waits or self.replica_wait_always) and self.sync_replication:
                end = result.end_offset
                refused = replication.unavailable(end)
                if refused is None and self.replicated_offset < end:
                    replica_deadline = trio.current_time() + self.store.config.sync_flush_timeout / 1000
        batch: _Batch | None = None
        if self.store.sync_flush and waits:
            if not self._running:
                raise RuntimeError("AsyncMessageStore is not running")
            if not (kick and not self._batches and self._lone() and self._sync_lone()):
                batch = self._open_batch
                now = trio.current_time()
                timeout = self.store.config.sync_flush_timeout / 1000
                if batch is None or now + timeout - batch.deadline > BATCH_SPAN:
                    batch = self._open_batch = _Batch(now + timeout)
                    self._batches.append(batch)
                    self._batch_opened.set()
                batch.end = result.end_offset
                if kick:
                    self._kick_round()
        if batch is None and replica_deadline is None:
            if refused is not None:
                result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
                result.remark = refused
            return result
        put = PutWait(self, result, batch, replica_deadline, refused)
        if replica_deadline is not None:
            self._replica_waits.append(put)
            self._replica_wait_added.set()
        return put

    def _kick_round(self) -> None:
        """Appends wait in the open batch: submit a round for them now where the kernel takes
        syncs and none runs, and tell the flusher."""
        if self._open_batch is None:
            return
        if self._kernel_sync is not None and (self._round is None or self._end_round_if_synced()):
            self._start_round()
        self._flush_wanted.set()

    def _lone(self) -> bool:
        """Whether a request that wants its sync (the caller asks when no other does) is in
        flight alone: no round runs and the loop has gone idle since the last round ended.
        It is synced on the loop at once (``_sync_lone``, ``lone_sync_inline``) and answered
        as an ASYNC_FLUSH append is: it pays the disk's flush and little more, where the
        kernel's worker and then the loop would each be woken on the way (one send in
        flight: 0.17 against 0.27 ms from the append to the sync's end here). Under load
        the loop does not go idle between rounds, and the kernel syncs while it goes on
        reading: the sends of a pass share one round, rather than each blocking the loop for
        its own. Not while lone syncs are slow (``LONE_SLOW``)."""
        lone = self._lone_rounds
        return lone.idled and self._round is None and not self._flights.commitlog and trio.current_time() >= lone.after

    def _sync_lone(self) -> bool:
        """Sync the CommitLog on the loop's thread (see ``_lone``); True once done. A failed
        sync is raised by the flusher, as a round in its thread would be: the store stops."""
        lone = self._lone_rounds
        plan = self.store.begin_flush(commitlog=True)
        if plan.syncs:
            self.flush_rounds += 1
            began = time.perf_counter()
            try:
                self._flush_fn(plan)
            except OSError as exc:
                lone.error, lone.after = exc, float("inf")
                self._flush_wanted.set()
                return False
            lone.cost += (time.perf_counter() - began - lone.cost) / 8
            if lone.cost > LONE_SLOW:
                lone.cost, lone.after = 0.0, trio.current_time() + LONE_PAUSE
        self._end_round(plan)
        return True

    def append_replica(self, offset: int, data: bytes | memoryview) -> None:
        """An HA slave's append of its master's bytes (see ``MessageStore.append_replica``);
        the reput task then dispatches them."""
        self.store.append_replica(offset, data)
        if data:
            self._reput_wanted.set()

    def replica_acked(self, offset: int) -> None:
        """A slave has everything below ``offset``: wake the appends that waited for it. With
        ``dispatch_confirmed_only`` (and not ``confirm(None)``) it is the confirm offset too:
        dispatch goes on up to it."""
        if offset <= self.replicated_offset:
            return
        self.replicated_offset = offset
        waits = self._replica_waits
        while waits and waits[0].end <= offset:
            waits.popleft().fire()
        confirm = self._confirm
        if confirm.only and not confirm.itself:
            self._follow_confirmed()

    # --- controller mode: confirm offset, truncation -----------------------------------------

    @property
    def dispatch_confirmed_only(self) -> bool:
        """Controller mode: dispatch only records below the confirm offset (the offset every
        in-sync replica holds: ``confirmed_offset``), so that consumers, long-polling pulls and
        the arrival listener never see a record a failover could truncate. Off by default
        (dispatch follows the log's end, at no cost to appends). Not for a DLedger CommitLog,
        whose commits bound dispatch themselves."""
        return self._confirm.only

    @dispatch_confirmed_only.setter
    def dispatch_confirmed_only(self, on: bool) -> None:
        if on and self.store.commitlog.in_dledger_entries:
            raise ValueError("a DLedger CommitLog's dispatch follows its commits, not a confirm offset")
        self._confirm.only = on
        if on:
            # from what the checkpoint last recorded, as RocketMQ starts
            self.replica_acked(self.store.checkpoint.confirm_phy_offset)
            self._follow_confirmed()
        else:
            self.store.dispatcher.confirmed = None
            self.store.dispatcher.update_limit()
            self._reput_wanted.set()

    @property
    def confirmed_offset(self) -> int:
        """The confirm offset: below it every in-sync replica holds the CommitLog (the log's
        end while appends confirm themselves, ``confirm(None)``)."""
        end = self.store.max_phy_offset
        return end if self._confirm.itself else min(self.replicated_offset, end)

    def confirm(self, offset: int | None) -> None:
        """Set the confirm offset directly: every in-sync replica holds the CommitLog below
        ``offset`` (a slave: what its master says it is; a master: what its in-sync slaves
        hold, as ``replica_acked`` raises it). It only rises, and it wakes the appends waiting
        for replicas below it as an ack does. None: every append is confirmed once written (a
        master alone in its SyncStateSet), until a number is set again."""
        self._confirm.itself = offset is None
        if offset is not None:
            self.replica_acked(offset)
        if self._confirm.only:
            self._follow_confirmed()

    def _follow_confirmed(self) -> None:
        """Dispatch up to the confirm offset now, recorded in the checkpoint."""
        d = self.store.dispatcher
        if self._confirm.itself:
            d.confirmed = None
        else:
            d.confirmed = self.replicated_offset
            self.store.checkpoint.confirm_phy_offset = self.replicated_offset
        d.update_limit()
        self._reput_wanted.set()

    async def truncate_to(self, offset: int) -> None:
        """``MessageStore.truncate_to`` while the store's tasks run: appends are refused
        (SERVICE_NOT_AVAILABLE; replica appends raise StoreError) until it is done; it waits
        until everything written is synced, so that the appends waiting for their sync are
        answered, and until no flush round is in flight (one begun before the cut would record
        positions past it), then cuts in one step. Appends waiting for a replica past the cut
        end with FLUSH_SLAVE_TIMEOUT; the flushed, replicated and confirm offsets go back to
        ``offset`` at the most; dispatch goes on from there.

        Raises:
            StoreError: as ``MessageStore.truncate_to`` (checked first, then again at the cut).
            OSError: a file could not be synced or deleted.
        """
        store = self.store
        if not store.check_truncate(offset):
            return
        if self._running:
            space = store.space
            space.hold(f"the CommitLog is being truncated to {offset}")
            try:
                await self._quiesce()
                self._cut(offset)
            finally:
                space.release()
        else:
            self._cut(offset)

    async def _quiesce(self) -> None:
        """Return once everything written is synced and no flush round is in flight (the
        caller then changes the files in the same scheduler step)."""
        while True:
            end = self.store.max_phy_offset
            if self._flushed < end:
                await self.wait_flushed(end)
            elif self._round is not None or self._flights.commitlog:
                await self._round_done.wait()
            elif self._flights.logics:
                await self._flights.logics_done.wait()
            else:
                return

    def _cut(self, offset: int) -> None:
        self.store.truncate_to(offset)
        self._flushed = min(self._flushed, offset)
        waits = self._replica_waits
        doomed = []
        while waits and waits[-1].end > offset:
            doomed.append(waits.pop())
        self.replicated_offset = min(self.replicated_offset, offset)
        for w in reversed(doomed):  # their records are gone: not replicated, ever
            w.timed_out = True
            w.fire()
        if self._confirm.only:
            self._follow_confirmed()
        self._reput_wanted.set()
        self._dispatched()  # wait_dispatched looks again: its target may be gone

    def wake_reput(self) -> None:
        """Records became dispatchable (a DLedger commit raised the dispatch limit)."""
        self._reput_wanted.set()

    def fail_replica_waits(self) -> None:
        """No slave left (the last one disconnected): end every wait now as timed out rather
        than let senders hang until the deadline."""
        while self._replica_waits:
            w = self._replica_waits.popleft()
            w.timed_out = True
            w.fire()

    def _finish_batches(self, count: int) -> None:
        for _ in range(count):
            batch = self._batches.popleft()
            batch.done = True
            batch.fire()

    async def wait_flushed(self, offset: int) -> None:
        """Wait until CommitLog bytes below ``offset`` are durable, asking for sync rounds.
        Cancelling it changes nothing but the wait."""
        while self._flushed < offset:
            self._flush_wanted.set()
            await self._round_done.wait()

    async def wait_dispatched(self, offset: int | None = None) -> None:
        """Wait until records below ``offset`` (default: everything written so far) are in
        their consume queues, or dispatch has stopped at bytes that are no record."""
        store = self.store
        target = store.max_phy_offset if offset is None else offset
        while store.dispatcher.reput_offset < target and store.dispatch_behind > 0:
            if store.dispatcher.stalled is not None:
                return  # nothing past the bad bytes is dispatched (see Dispatcher.stalled)
            self._reput_wanted.set()
            if self._reput_done is None:
                self._reput_done = trio.Event()
            await self._reput_done.wait()

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    # --- tasks ----------------------------------------------------------------------------

    async def _commitlog_flusher(self) -> None:
        store = self.store
        interval = store.config.flush_interval_commitlog / 1000
        while True:
            if self._round is None:
                if not self._batches:  # else appends wait, whose wake this may have missed
                    with trio.move_on_after(interval):
                        await self._flush_wanted.wait()
                self._flush_wanted = trio.Event()
                if self._lone_rounds.error is not None:
                    raise self._lone_rounds.error
                if self._round is None and not self._start_round():
                    # Nothing to sync, or no kernel to take it: a round in a thread.
                    self._open_batch = None
                    plan = store.begin_flush(commitlog=True)
                    if plan.syncs:
                        self.flush_rounds += 1
                        self._flights.commitlog = True
                        try:
                            await self._sync_in_thread(plan)
                        finally:
                            self._flights.commitlog = False
                    self._end_round(plan)
                    continue
            while (rnd := self._round) is not None:
                await trio.lowlevel.wait_readable(rnd.syncs.ks.eventfd)
                self._end_round_if_synced(reap=True)
                if rnd.syncs.error:
                    rnd.syncs.finish()  # raises

    def _start_round(self) -> bool:
        """Submit a sync of everything appended so far to the kernel, closing the open batch;
        False when there is nothing to sync or no kernel takes it (it refused: from now on
        the flusher's thread syncs)."""
        ks = self._kernel_sync
        if ks is None:
            return False
        plan = self.store.begin_flush(commitlog=True)
        tag = self._sync_tag = self._sync_tag + 1
        syncs = submit_syncs(ks, [(mf, upto) for mf, upto, _ in plan.syncs], tag, "the CommitLog")
        if syncs is None:
            self._kernel_sync = None
            return False
        if not syncs.left:
            return False
        # Every append in the open batch is in the log now, so this round covers them all.
        self._open_batch = None
        self.flush_rounds += 1
        self._round = _Round(syncs, plan)
        return True

    def _end_round_if_synced(self, reap: bool = False) -> bool:
        """End the kernel round if its syncs are done; True if it ended. An append asks (the
        ring shows a completion without a syscall) because the flusher hears only once the
        loop polls, after every task its pass runs; ``reap`` (the flusher) reaps whatever
        the ring shows. A failed sync leaves the round to the flusher, which raises."""
        rnd = self._round
        if rnd is None:
            return False
        syncs = rnd.syncs
        if syncs.error or not (reap or syncs.ks.completed()):
            return False
        syncs.take()
        if syncs.error:
            if not reap:
                syncs.ks.wake()  # the flusher raises
            return False
        if syncs.left:
            return False
        self._round = None
        syncs.finish()
        self._end_round(rnd.plan)
        if not reap:
            syncs.ks.wake()  # the flusher waits on the eventfd this reap drained
        return True

    def _end_round(self, plan: FlushPlan) -> None:
        self.store.end_flush(plan)
        assert plan.commitlog_offset is not None
        self._flushed = max(self._flushed, plan.commitlog_offset)
        # The batches it closed, and those opened while it ran whose appends it covered too
        batches, flushed = self._batches, self._flushed
        while batches and batches[0].end <= flushed:
            if batches[0] is self._open_batch:
                self._open_batch = None
            self._finish_batches(1)
        self._lone_rounds.idled = False
        done, self._round_done = self._round_done, trio.Event()
        done.set()

    async def _sync_in_thread(self, plan: FlushPlan) -> None:
        """Run the commit log's sync in a worker thread, and let the thread start it before the
        loop goes on: a thread needs the GIL to reach its fdatasync, and a busy loop holds it
        until its next syscall, often after a whole batch of requests."""
        async with self._commitlog_limiter:
            token = trio.lowlevel.current_trio_token()
            task = trio.lowlevel.current_task()
            started = threading.Event()
            flush = self._flush_fn

            def job() -> None:
                started.set()
                flush(plan)

            def deliver(result: Any) -> None:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)

            trio.lowlevel.start_thread_soon(job, deliver)
            started.wait(HANDOFF_WAIT)
            await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

    async def _batch_watchdog(self) -> None:
        while True:
            # The oldest batch not timed out yet; deadlines grow with the order of the queue.
            batch = next((b for b in self._batches if not b.timed_out), None)
            if batch is None:
                self._batch_opened = trio.Event()
                await self._batch_opened.wait()
                continue
            await trio.sleep_until(batch.deadline)
            if not batch.done:
                batch.timed_out = True
                batch.fire()  # stays queued: the round that syncs it still finishes it

    async def _replica_watchdog(self) -> None:
        waits = self._replica_waits
        while True:
            if not waits:
                self._replica_wait_added = trio.Event()
                await self._replica_wait_added.wait()
                continue
            head = waits[0]
            await trio.sleep_until(head.deadline)
            # Deadlines grow along the queue: every wait due by now is at its front.
            now = trio.current_time()
            while waits and waits[0].deadline <= now:
                w = waits.popleft()
                w.timed_out = True
                w.fire()

    async def _logics_flusher(self) -> None:
        store = self.store
        cfg = store.config
        interval = cfg.flush_interval_consume_queue / 1000
        thorough_every = cfg.flush_consume_queue_thorough_interval / 1000
        index_every = cfg.flush_interval_index / 1000
        last_thorough = last_index = trio.current_time()
        thorough = False
        while True:
            await trio.sleep(interval)
            now = trio.current_time()
            if now - last_thorough >= thorough_every:
                thorough = True  # stays on until a round has covered every dirty queue
                last_thorough = now
            index = thorough or now - last_index >= index_every
            if index:
                last_index = now
            plan = store.begin_flush(
                commitlog=False, logics=True, thorough=thorough, max_queues=FLUSH_QUEUES_PER_ROUND, index=index
            )
            flights = self._flights
            flights.logics = True
            try:
                await trio.to_thread.run_sync(self._flush_fn, plan, limiter=self._logics_limiter)
                store.end_flush(plan)
            finally:
                flights.logics = False
                done, flights.logics_done = flights.logics_done, trio.Event()
                done.set()
            if plan.queues_left == 0:
                thorough = False

    async def _reput_loop(self) -> None:
        store = self.store
        while True:
            await self._reput_wanted.wait()
            self._reput_wanted = trio.Event()
            while store.dispatch_pending(REPUT_BATCH) == REPUT_BATCH:
                await trio.lowlevel.checkpoint()
            self._dispatched()

    async def _retention_loop(self) -> None:
        store = self.store
        while True:
            await trio.sleep(store.config.clean_resource_interval / 1000)
            result = store.run_retention()
            if result.commitlog_files_deleted:
                log.info(
                    "retention deleted %d CommitLog (%d not expired), %d consume queue, %d index files",
                    result.commitlog_files_deleted, result.commitlog_files_unexpired,
                    result.consume_queue_files_deleted, result.index_files_deleted,
                )  # fmt: skip
