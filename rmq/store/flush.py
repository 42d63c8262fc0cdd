"""Flush rounds: what to sync, syncing it, and recording the result in the checkpoint.

A round has three steps so that only the middle one waits on the disk:

1. ``Flusher.begin`` (store thread) captures targets: the CommitLog write position, consume
   queues with enough unsynced entries (their pending tails are moved into the files first),
   dirty index files (in the rounds that include them), and the offsets the checkpoint may
   claim once all that is durable.
2. ``Flusher.run`` (any thread) msyncs / fsyncs; many consume queue files go in one syncfs.
3. ``Flusher.end`` (store thread) advances flushed positions and writes the checkpoint values
   into its mapping; the next round's ``run`` syncs them. The checkpoint therefore never claims
   more than the disk holds, and a stale one only makes recovery replay more.

Consume queues and the index are derived from the CommitLog: a write or sync of theirs that
the disk refuses is logged, not raised, and the checkpoint stays before what it did not make
durable (recovery rebuilds that from the CommitLog); the entries are written again by later
rounds. A failed CommitLog sync raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .checkpoint import StoreCheckpoint
from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue
from .dispatch import Dispatcher
from .formats import CQ_ENTRY_SIZE
from .index import IndexService
from .mapped_file import MappedFile, sync_files

log = logging.getLogger("rmq.store.flush")

_PAGE = 4096


@dataclass(slots=True)
class FlushPlan:
    """What one flush round syncs, captured on the store thread by ``Flusher.begin``."""

    syncs: list[tuple[MappedFile, int, int | None]] = field(default_factory=list)  # (file, upto, begin)
    queue_syncs: list[tuple[MappedFile, int]] = field(default_factory=list)  # consume queue files
    index_syncs: list[MappedFile] = field(default_factory=list)
    queues: list[tuple[ConsumeQueue, int]] = field(default_factory=list)  # (queue, entries covered)
    queues_left: int = 0  # dirty queues this round did not sync
    commitlog_offset: int | None = None  # CommitLog offset the round makes durable
    commitlog_timestamp: int = 0
    logics_offset: int | None = None
    logics_timestamp: int = 0
    index_offset: int | None = None
    index_timestamp: int = 0
    sync_checkpoint: bool = False
    queues_failed: OSError | None = None  # set by ``run``: the consume queue syncs failed
    index_failed: OSError | None = None  # set by ``run``: an index sync failed


class Flusher:
    """Plans and records flush rounds over one store's files."""

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        dispatcher: Dispatcher,
        index: IndexService | None,
        checkpoint: StoreCheckpoint,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.dispatcher = dispatcher
        self.index = index
        self.checkpoint = checkpoint

    def begin(
        self, *, commitlog: bool, logics: bool, thorough: bool, max_queues: int | None, index: bool = True
    ) -> FlushPlan:
        plan = FlushPlan()
        cl = self.commitlog
        if commitlog:
            target = cl.max_offset
            plan.commitlog_offset = target
            plan.commitlog_timestamp = cl.last_store_timestamp
            if target > cl.files.flushed_where and not cl.synced_elsewhere:
                plan.syncs.extend((mf, upto, None) for mf, upto in cl.files.sync_plan(target))
        if logics:
            self._plan_logics(plan, thorough, max_queues, index)
        return plan

    def _plan_logics(self, plan: FlushPlan, thorough: bool, max_queues: int | None, index: bool) -> None:
        d = self.dispatcher
        if d.unindexed:
            d.retry_index()
        reput, ts = d.reput_offset, d.last_timestamp
        least = self.config.flush_consume_queue_least_pages * _PAGE
        # The checkpoint may claim every record below reput, except those whose queue entry
        # stays unsynced this round.
        logics_offset = reput
        budget = len(d.dirty) if max_queues is None else max_queues
        for cq in list(d.dirty):
            # Every round moves pending entries into the files, so readers of the files (tools,
            # Spark) lag by about one interval; a queue is synced only with enough pages unsynced.
            sync = thorough or cq.unsynced_bytes() >= least
            if budget > 0 and (sync or cq.pending):
                budget -= 1
                try:
                    cq.drain()
                except OSError:  # no space, or no descriptor for a new file; logged by the queue
                    sync = False
                if sync:
                    plan.queue_syncs.extend(cq.files.sync_plan(cq.file_end * CQ_ENTRY_SIZE))
                    plan.queues.append((cq, cq.max_offset))
                    continue
            plan.queues_left += 1
            if cq.first_unsynced_phy >= 0:
                logics_offset = min(logics_offset, cq.first_unsynced_phy)
        plan.logics_offset = logics_offset
        if logics_offset == reput:
            plan.logics_timestamp = ts
        else:
            plan.logics_timestamp = (self.commitlog.store_timestamp_at(logics_offset) or 1) - 1
        if self.index is not None and index:  # else the checkpoint's index offset stays
            for f in self.index.dirty_files():
                f.dirty = False
                plan.index_syncs.append(f.mf)
            if d.index_from is None or d.index_from >= reput:
                plan.index_offset, plan.index_timestamp = reput, ts
            else:  # records the disk refused to index: not past the first of them
                plan.index_offset = d.index_from
                plan.index_timestamp = (self.commitlog.store_timestamp_at(d.index_from) or 1) - 1
        plan.sync_checkpoint = True

    def run(self, plan: FlushPlan) -> None:
        if plan.sync_checkpoint:
            try:
                self.checkpoint.sync()
            except OSError as exc:  # stale values on disk only make recovery replay more
                log.error("cannot sync the checkpoint: %s", exc)
        for mf, upto, begin in plan.syncs:
            mf.sync(upto, begin=begin)
        for mf in plan.index_syncs:
            try:
                mf.sync(mf.size, begin=0)
            except OSError as exc:
                plan.index_failed = exc
        if plan.queue_syncs:
            try:
                sync_files(self.config.consume_queue_dir, plan.queue_syncs)
            except OSError as exc:
                plan.queues_failed = exc

    def end(self, plan: FlushPlan) -> None:
        ck = self.checkpoint
        if plan.commitlog_offset is not None:
            files = self.commitlog.files
            files.flushed_where = max(files.flushed_where, plan.commitlog_offset)
            ck.physic_offset = plan.commitlog_offset
            if plan.commitlog_timestamp:
                ck.physic_msg_timestamp = plan.commitlog_timestamp
        if plan.queues_failed is not None:
            # None of them counts as synced, and each writes again what the sync was for
            log.error("consume queue sync failed: %s", plan.queues_failed)
            for cq, _ in plan.queues:
                cq.rewrite_unsynced()
        else:
            for cq, upto in plan.queues:
                if cq.files.files or cq.max_offset:
                    cq.mark_synced(upto)
                if cq.synced_offset >= cq.max_offset:
                    self.dispatcher.dirty.discard(cq)
            if plan.logics_offset is not None:
                ck.logics_offset = plan.logics_offset
                if plan.logics_timestamp:
                    ck.logics_msg_timestamp = plan.logics_timestamp
        if plan.index_failed is not None:
            # Pages of a failed sync may be lost even if a later one succeeds: the checkpoint
            # stays where it is until a restart indexes again from there.
            log.error("index sync failed: %s", plan.index_failed)
            d = self.dispatcher
            d.index_from = ck.index_offset if d.index_from is None else min(d.index_from, ck.index_offset)
            d.index_pinned = True
            failed = set(plan.index_syncs)
            for f in self.index.files if self.index is not None else ():
                f.dirty = f.dirty or f.mf in failed
        elif plan.index_offset is not None:
            ck.index_offset = plan.index_offset
            if plan.index_timestamp:
                ck.index_msg_timestamp = plan.index_timestamp
        ck.write()
