"""MessageStore: the synchronous store facade (DefaultMessageStore's role).

Theory of operation
-------------------
* Appends (append.py): ``put`` / ``put_many`` take ``MessageDraft`` values and encode records
  straight into the CommitLog's mapped page cache; queue offsets come from an in-memory table
  per (topic, queue id). With SYNC_FLUSH they sync before returning; ``aio.AsyncMessageStore``
  groups many appends into one sync instead.
* ``dispatch_pending`` (reput, dispatch.py) reads new records back from the log and appends
  consume queue and index entries, then tells the ``ArrivalListener``. ``AsyncMessageStore``
  runs it as a task woken on every append; sync users (tests, Spark) call it themselves.
* Reads (read.py) look records up by queue offset, CommitLog offset, time or key.
* Durability is a separate step (flush.py): ``begin_flush`` (store thread) captures what to
  sync, ``run_flush`` (any thread) msyncs it, ``end_flush`` (store thread) records the result
  in the checkpoint. ``flush`` does all three.
* Opening: a ``lock`` file (flock) keeps out a second process; an ``abort`` file exists while
  the store is open, so finding one means the last run crashed. Recovery validates the
  CommitLog tail record by record (records.py: magic, length, offset, CRC), cuts it at the
  first bad record, drops consume queue entries pointing past that end, and replays dispatch
  from the checkpoint's logics offset (entries already present are kept), so nothing
  acknowledged is lost and nothing corrupt is served.
* Controller mode: ``truncate_to`` cuts the CommitLog back to a record boundary (a slave's
  consistent point with a new master, epochs.py), consume queues, index and checkpoint with
  it; ``stop_replica`` turns a slave's store into a master's. The confirm offset that bounds
  dispatch lives on the async front (aio.py).
* Disk space (space.py, RocketMQ's levels): retention deletes expired CommitLog files, above
  the levels sooner or unexpired ones too, and above the warning level appends are refused;
  so are they while the disk refuses a CommitLog, consume queue or index write. Nothing is
  written through a mapping into blocks the disk has not allocated (mapped_file.py): a full
  disk is an error, not a SIGBUS.

Not thread-safe: call everything from one thread, except ``run_flush``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Self

from rmq.protocol.message import MessageDraft, MessageExt

from .append import Appender, wants_wait
from .checkpoint import StoreCheckpoint
from .commitlog import CommitLog
from .config import FlushDiskType, StoreConfig
from .consume_queue import ConsumeQueueTable
from .dispatch import ArrivalListener, Dispatcher
from .errors import StoreError, StoreLockedError
from .flush import Flusher, FlushPlan
from .index import IndexService
from .mapped_file import MappedFile, MapPool, default_pool_capacity, sync_directory
from .read import Reader
from .recovery import replay_start, validation_start
from .results import (
    GetMessageResult,
    PutMessageResult,
    QueryMessageResult,
    RetentionResult,
    StoreStats,
)
from .space import DiskSpace, disk_used_ratio

log = logging.getLogger("rmq.store")


def _files_bytes(files: Iterable[MappedFile]) -> int:
    return sum(max(mf.allocated_to, mf.wrote) for mf in files)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default store clock."""
    return time.time_ns() // 1_000_000


class MessageStore:
    """A RocketMQ-compatible store in ``config.store_path_root_dir``; opened by the constructor.

    Args:
        config: settings; validated here.
        clock: returns wall-clock milliseconds; used for store timestamps, index file names and
            retention ages. Defaults to the system clock.
        disk_usage: ``f(path) -> fraction used`` of the filesystem holding the CommitLog.
        arrival_listener: told about each dispatched consume queue entry (see dispatch.py).
        commitlog: makes the CommitLog, once the store's lock is held; defaults to the files
            in ``config.commitlog_dir`` (a DLedger member passes a view of its log).

    Raises:
        StoreLockedError: another process has the store open.
        StoreError: the files on disk cannot be used with this configuration.
    """

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], int] | None = None,
        disk_usage: Callable[[str], float] | None = None,
        arrival_listener: ArrivalListener | None = None,
        commitlog: Callable[[], CommitLog] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.clock = clock or wall_clock_ms
        self._disk_usage = disk_usage or disk_used_ratio
        self._stats = StoreStats()
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        for d in (config.store_path_root_dir, config.commitlog_dir, config.consume_queue_dir):
            os.makedirs(d, exist_ok=True)
        self._lock_fd = self._acquire_lock()
        try:
            self._open(arrival_listener, commitlog)
        except BaseException:
            self._release_lock()
            raise

    # --- open / close ---------------------------------------------------------------------

    def _acquire_lock(self) -> int:
        fd = os.open(self.config.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # flock excludes every other opener, this process included. The POSIX record lock on
            # byte 0 is what a Java broker takes (FileChannel.tryLock), so it sees us too; that
            # one is best effort, as POSIX drops it when this process closes any descriptor of
            # the file.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except (BlockingIOError, PermissionError):
            os.close(fd)
            raise StoreLockedError(
                f"store directory {self.config.store_path_root_dir} is in use by another process "
                f"(lock held on {self.config.lock_path})"
            ) from None
        return fd

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _open(self, listener: ArrivalListener | None, make_commitlog: Callable[[], CommitLog] | None) -> None:
        cfg = self.config
        crashed = os.path.exists(cfg.abort_path)
        self.crashed = crashed  # the last run ended without close(): what it kept in memory is gone
        with open(cfg.abort_path, "a"):
            pass
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        if make_commitlog is not None:
            self.commitlog = make_commitlog()
        else:
            self.commitlog = CommitLog(
                cfg.commitlog_dir,
                cfg.mapped_file_size_commitlog,
                preallocate=cfg.warm_maped_file_enable,
                pwrite_appends=True,  # see MappedFile.expect_appends
            )
        self.commitlog.load()
        capacity = cfg.max_mapped_consume_queue_files or default_pool_capacity()
        self.pool = MapPool(capacity)
        self.queues = ConsumeQueueTable(
            cfg.consume_queue_dir, cfg.mapped_file_size_consume_queue, self.pool, preallocate=cfg.warm_maped_file_enable
        )
        self.queues.load()
        self.index: IndexService | None = None
        if cfg.message_index_enable:
            self.index = IndexService(cfg.index_dir, cfg.max_hash_slot_num, cfg.max_index_num, self.clock)
            self.index.load()

        indexed = self.index is not None
        start = validation_start(self.checkpoint, self.commitlog, crashed, indexed)
        end = self.commitlog.recover(start, cfg.check_crc_on_recover)
        for cq in self.queues.queues.values():
            cq.truncate_dirty(end)
        if self.index is not None:
            # Entries for records at or past ``end`` are stale (query_message re-checks what it
            # returns). Index again from the checkpoint: after a crash pages written after it
            # may not have reached the disk, and records the disk refused to index lie after
            # it; a record indexed twice is harmless.
            bound = end - 1
            if self.checkpoint.has_offsets:  # below it if the last run could not index some
                bound = min(bound, self.checkpoint.index_offset - 1)
            self.index.last_indexed = min(self.index.last_indexed, bound)
        if self.checkpoint.confirm_phy_offset > end:  # as RocketMQ's recovery corrects it
            self.checkpoint.confirm_phy_offset = end
        replay = replay_start(self.checkpoint, self.commitlog, self.queues, crashed, indexed, end)
        self.dispatcher = Dispatcher(self.commitlog, self.queues, self.index, cfg.delay_levels_ms(), replay)
        self._flusher = Flusher(cfg, self.commitlog, self.dispatcher, self.index, self.checkpoint)
        self.space = DiskSpace(
            cfg, self.clock, self._disk_usage, self.commitlog, self.queues, self.index, self.dispatcher, self._stats
        )
        self.appender = Appender(cfg, self.clock, self.commitlog, self.dispatcher, self.space, self._stats)
        self.reader = Reader(cfg, self.commitlog, self.queues, self.index, self._stats)
        if replay < end:
            log.info("replaying dispatch from %d to %d", replay, end)
        self.dispatcher.dispatch_pending(notify=False)
        min_phy = self.commitlog.min_offset
        for cq in self.queues.queues.values():
            cq.correct_min_offset(min_phy)
        self.reset_queue_offsets()
        self.dispatcher.listener = listener
        self.appender.replica_next = end
        self.appender.closed = False
        self.flush()
        self.check_disk()
        log.info(
            "store %s opened (%s), CommitLog %d..%d, %d queues",
            cfg.store_path_root_dir, "after a crash" if crashed else "clean",
            self.commitlog.min_offset, end, len(self.queues.queues),
        )  # fmt: skip

    def close(self) -> None:
        """Dispatch and sync everything, mark a clean shutdown and release the lock.
        Idempotent."""
        if self.appender.closed:
            return
        try:
            self.dispatcher.dispatch_pending(notify=False)
            self.flush()
        finally:
            self.appender.closed = True
            self.queues.close()
            if self.index is not None:
                self.index.close()
            self.commitlog.close()
            self.checkpoint.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.config.abort_path)
            self._release_lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self.appender.closed

    @property
    def arrival_listener(self) -> ArrivalListener | None:
        return self.dispatcher.listener

    @arrival_listener.setter
    def arrival_listener(self, listener: ArrivalListener | None) -> None:
        self.dispatcher.listener = listener

    # --- appends --------------------------------------------------------------------------

    def put(self, draft: MessageDraft) -> PutMessageResult:
        """Store one message: a record in the CommitLog's page cache, synced before this
        returns with SYNC_FLUSH unless the draft's wait is false (None: its WAIT property
        decides, absent = true).

        Assigns the queue offset (0, without advancing the queue, for transaction PREPARED and
        ROLLBACK records, which never reach a consume queue), the CommitLog offset, the store
        timestamp and the body CRC. Properties are stored as given (UNIQ_KEY included); IPv6
        hosts get their V6 sysFlag bits. A draft's ``tags_code`` replaces the consume queue
        tags code.

        Returns PUT_OK, or SERVICE_NOT_AVAILABLE (closed; disk full or a consume queue or the
        index the disk refuses, with a remark naming the cause), MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED, CREATE_MAPPED_FILE_FAILED or UNKNOWN_ERROR (an I/O error).
        """
        result = self.appender.put(draft)
        if result.ok and self._sync_flush and wants_wait(draft.wait, draft.properties):
            self.flush_commitlog()
        return result

    def put_many(self, drafts: Sequence[MessageDraft]) -> PutMessageResult:
        """Store several messages as consecutive records in one CommitLog file, all or none
        (a batch from ``append.batch_drafts``; a transaction's commit and its op record).

        Each record is checked as ``put`` checks it; drafts to one queue get consecutive queue
        offsets in their order. The result has the first record's CommitLog and queue offset,
        the total size, the comma-joined offset ids, and ``queue_offsets`` of every record.
        Synced as ``put`` when any draft wants to wait. Statuses as ``put``'s; an empty list,
        or drafts that do not fit one CommitLog file together, are MESSAGE_ILLEGAL.
        """
        result = self.appender.put_many(drafts)
        if result.ok and self._sync_flush and any(wants_wait(d.wait, d.properties) for d in drafts):
            self.flush_commitlog()
        return result

    @property
    def stats(self) -> StoreStats:
        """Counters for runtime info (the per-topic put counts are rebuilt on each call)."""
        s = self._stats
        s.put_message_times_by_topic = self.appender.put_counts()
        s.dispatched_total = self.dispatcher.dispatched_total
        return s

    @property
    def sync_flush(self) -> bool:
        return self._sync_flush

    def queue_offset_for_next(self, topic: str, queue_id: int) -> int:
        """Queue offset the next append to (topic, queue) will get."""
        return self.appender.queue_offset_for_next(topic, queue_id)

    def reset_queue_offsets(self) -> None:
        """Take every queue's next offset from its consume queue (once everything in the
        CommitLog is dispatched): a DLedger member about to lead a group."""
        self.appender.reset_queue_offsets((key, cq.max_offset) for key, cq in self.queues.queues.items())

    # --- replication (HA) -----------------------------------------------------------------

    def transfer_data(self, offset: int, max_bytes: int) -> bytes | None:
        """An HA master's next chunk: see ``CommitLog.transfer_data``."""
        return self.commitlog.transfer_data(offset, max_bytes)

    def is_record_start(self, offset: int) -> bool:
        return self.commitlog.is_record_start(offset)

    def append_replica(self, offset: int, data: bytes | memoryview) -> None:
        """Append a master's CommitLog bytes verbatim at ``offset`` (an HA slave's store).

        The normal dispatch then builds consume queues and the index from them. An empty
        store starts at ``offset`` (a file boundary), as a new RocketMQ slave starts at its
        master's last file.

        Raises:
            StoreError: the bytes do not continue this log; nothing was written.
            OSError: a new CommitLog file cannot be created.
        """
        self.appender.append_replica(offset, data)

    # --- truncation (controller mode) ----------------------------------------------------

    def check_truncate(self, offset: int) -> bool:
        """Whether ``truncate_to(offset)`` would cut anything (False: ``offset`` is the end).

        Raises:
            StoreError: as ``truncate_to`` refuses ``offset``.
        """
        cl = self.commitlog
        where = f"cannot truncate the CommitLog to {offset}"
        if self.appender.closed:
            raise StoreError(f"{where}: the store is closed")
        if cl.in_dledger_entries:
            raise StoreError(f"{where}: it lives in a DLedger log, which its DLedger member truncates")
        end = cl.max_offset
        if offset > end:
            raise StoreError(f"{where}: past its end {end}")
        if offset == end:
            return False
        if offset < cl.min_offset:
            raise StoreError(f"{where}: it begins at {cl.min_offset} (retention deleted what came before)")
        if not cl.is_record_start(offset):
            raise StoreError(f"{where}: no record begins there (it must be a record boundary)")
        return True

    def truncate_to(self, offset: int) -> None:
        """Cut the CommitLog at ``offset``, a record boundary at or below its end: a slave
        whose log went further than its new master's (controller mode's consistent point,
        ``epochs.consistent_point``; RocketMQ's truncateFiles). Nothing to do at the end.

        Everything past ``offset`` goes for good, synced before this returns: the CommitLog's
        bytes (whole files after it deleted), consume queue entries of those records, and what
        the index may claim (its entries past the cut are never served: ``query_message``
        re-checks each record, and records written later at the same offsets are indexed
        again). Dispatch, queue offsets, the replica position and the checkpoint go back to
        ``offset``: ``put`` as a master, or ``append_replica`` as a slave, goes on from there,
        writing what a store that never had the cut records would write.

        No flush round may be in flight (``AsyncMessageStore.truncate_to`` waits for them).

        Raises:
            StoreError: ``offset`` is past the end, before the first file, not a record
                boundary, or the CommitLog is a DLedger log's; nothing was changed.
            OSError: a file could not be synced or deleted.
        """
        if not self.check_truncate(offset):
            return
        cl = self.commitlog
        end = cl.max_offset
        d = self.dispatcher
        reput = d.reput_offset
        log.warning("truncating the CommitLog from %d to %d (%d bytes)", end, offset, end - offset)
        # The checkpoint first: whatever step a crash interrupts, recovery replays from here.
        ck = self.checkpoint
        ck.physic_offset = min(ck.physic_offset, offset)
        ck.logics_offset = min(ck.logics_offset, offset)
        ck.index_offset = min(ck.index_offset, offset)
        ck.confirm_phy_offset = min(ck.confirm_phy_offset, offset)
        cut_file = cl.files.find(min(offset, end - 1))
        first_ts = cl.first_store_timestamp(cut_file) if cut_file is not None else None
        if first_ts is not None:  # for a Java broker's recovery, which goes by these
            ts = first_ts - 1
            ck.physic_msg_timestamp = min(ck.physic_msg_timestamp, ts)
            ck.logics_msg_timestamp = min(ck.logics_msg_timestamp, ts)
            ck.index_msg_timestamp = min(ck.index_msg_timestamp, ts)
        ck.write()
        ck.sync()
        # Consume queues next (entries past the cut point at records that are gone), then the
        # CommitLog itself.
        cut_queues = 0
        directories: set[str] = set()
        for cq in self.queues.queues.values():
            files_before, file_end = len(cq.files.files), cq.file_end
            max_before = cq.max_offset
            cq.truncate_dirty(offset)
            if cq.max_offset == max_before:
                continue
            cut_queues += 1
            if cq.file_end < file_end and (last := cq.files.last()) is not None:
                last.sync_cut()
            if len(cq.files.files) < files_before:
                directories.add(cq.files.directory)
        for directory in directories:
            sync_directory(directory)
        cl.cut(offset)
        d.cut(offset)
        self._retake_queue_offsets()
        self.appender.replica_next = offset
        self.space.update_refusal()
        log.info("CommitLog truncated to %d: %d consume queues cut, dispatch from %d (was %d)",
                 offset, cut_queues, d.reput_offset, reput)  # fmt: skip

    def _retake_queue_offsets(self) -> None:
        """Queue offsets from the log as it is: what the consume queues hold, and the records
        not dispatched yet (confirmed-only dispatch may hold many back)."""
        self.reset_queue_offsets()
        reput = self.dispatcher.reput_offset
        if reput < self.commitlog.max_offset:
            self.appender.count_records(self.commitlog.records(reput))

    def stop_replica(self) -> None:
        """Stop following a master and take appends of one's own (controller mode: a slave
        elected master). A record the last chunk left incomplete is cut (``truncate_to``);
        dispatch follows the log's end again (up to the confirm offset, when dispatch waits
        for it); the queue offsets of the next appends follow the records the log holds."""
        whole = self.dispatcher.replica_end
        if whole is not None and whole < self.commitlog.max_offset:
            self.truncate_to(whole)
            return
        self.dispatcher.replica_end = None
        self.dispatcher.update_limit()
        self._retake_queue_offsets()

    # --- dispatch -------------------------------------------------------------------------

    def dispatch_pending(self, max_records: int | None = None) -> int:
        """Build consume queue and index entries for new records (reput); returns how many
        records were dispatched. Calls the arrival listener for each queue entry."""
        done = self.dispatcher.dispatch_pending(max_records)
        self.space.update_refusal()
        return done

    @property
    def dispatch_behind(self) -> int:
        """CommitLog bytes written but not dispatched yet."""
        return self.dispatcher.behind

    # --- flush ----------------------------------------------------------------------------

    def begin_flush(
        self,
        *,
        commitlog: bool = True,
        logics: bool = False,
        thorough: bool = False,
        max_queues: int | None = None,
        index: bool = True,
    ) -> FlushPlan:
        """Capture what a flush round must sync (store thread; see flush.py).

        ``logics`` also moves pending consume queue entries into their files and includes the
        queues with at least ``flush_consume_queue_least_pages`` pages unsynced (all of them
        with ``thorough``; at most ``max_queues``, which bounds the time spent here), the
        index files (with ``index``) and the checkpoint.
        """
        return self._flusher.begin(
            commitlog=commitlog, logics=logics, thorough=thorough, max_queues=max_queues, index=index
        )

    def run_flush(self, plan: FlushPlan) -> None:
        """Sync what ``plan`` names; safe to run in a worker thread."""
        self._flusher.run(plan)

    def end_flush(self, plan: FlushPlan) -> None:
        """Record a finished round (store thread): flushed positions and checkpoint values."""
        self._flusher.end(plan)
        self.space.update_refusal()

    def flush_commitlog(self) -> int:
        """Sync the CommitLog now; returns the durable offset."""
        plan = self.begin_flush(commitlog=True)
        self.run_flush(plan)
        self.end_flush(plan)
        return self.commitlog.files.flushed_where

    def flush(self) -> None:
        """Sync everything: CommitLog, every consume queue, index and checkpoint."""
        plan = self.begin_flush(commitlog=True, logics=True, thorough=True)
        self.run_flush(plan)
        self.end_flush(plan)
        self.checkpoint.sync()

    @property
    def flushed_offset(self) -> int:
        """CommitLog offset below which data is durable."""
        return self.commitlog.files.flushed_where

    # --- reads (read.py says what each returns) -------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        *,
        max_bytes: int | None = None,
        tags_codes: set[int] | frozenset[int] | None = None,
    ) -> GetMessageResult:
        """Up to ``max_count`` records of a queue from ``offset`` (``Reader.get_message``)."""
        return self.reader.get_message(topic, queue_id, offset, max_count, max_bytes=max_bytes, tags_codes=tags_codes)

    def read_consume_queue(
        self, topic: str, queue_id: int, offset: int, max_count: int = 32
    ) -> list[tuple[int, int, int, int]]:
        """Raw consume queue entries from ``offset`` (``Reader.read_consume_queue``)."""
        return self.reader.read_consume_queue(topic, queue_id, offset, max_count)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        return self.reader.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_min_offset_in_queue(topic, queue_id)

    def get_commitlog_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """CommitLog offset of the message at ``offset`` in the queue (0 when unknown)."""
        return self.reader.get_commitlog_offset_in_queue(topic, queue_id, offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at ``offset`` in the queue, -1 when unknown."""
        return self.reader.get_message_store_timestamp(topic, queue_id, offset)

    def storage_bytes(self) -> int:
        """Bytes the store's files take, from its own accounting (no file system walk): per
        CommitLog, consume-queue and index file, the part it allocated or wrote, the larger
        (mapped files are sparse until then)."""
        total = _files_bytes(self.commitlog.files.files)
        for cq in self.queues.queues.values():
            total += _files_bytes(cq.files.files)
        if self.index is not None:
            total += _files_bytes(f.mf for f in self.index.files)
        return total

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message in the queue, or in the whole store without a
        topic; -1 when there is none."""
        return self.reader.get_earliest_message_time(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset of the message stored at ``timestamp``, or the nearer neighbour
        (``Reader.get_offset_in_queue_by_time``)."""
        return self.reader.get_offset_in_queue_by_time(topic, queue_id, timestamp)

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        """The raw record at a CommitLog offset (VIEW_MESSAGE_BY_ID), or None."""
        return self.reader.select_one_message_by_offset(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """The decoded message at a CommitLog offset, or None when there is none."""
        return self.reader.look_message_by_offset(phy_offset)

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1
    ) -> QueryMessageResult:
        """Records of ``topic`` indexed under ``key``, newest first (``Reader.query_message``)."""
        return self.reader.query_message(topic, key, max_num, begin, end)

    def topics(self) -> dict[str, list[int]]:
        """Topics with consume queues, and their queue ids."""
        return self.reader.topics()

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    # --- topics, disk and retention (space.py) ----------------------------------------------

    def delete_topic(self, topic: str) -> int:
        """Remove the consume queues and queue offsets of ``topic`` (DELETE_TOPIC_IN_BROKER);
        its records stay in the CommitLog until retention. Returns the queues removed."""
        self.appender.topics.pop(topic, None)
        for cq in [cq for cq in self.dispatcher.dirty if cq.topic == topic]:
            self.dispatcher.dirty.discard(cq)
        return self.queues.remove_topic(topic)

    def check_disk(self) -> float:
        """Measure disk use (the CommitLog's disk, and the store root's if it is elsewhere):
        above ``disk_space_warning_level_ratio`` appends are refused (RocketMQ's disk-full
        flag), below it they are taken again; a refusal after the disk refused a CommitLog
        write is lifted too, so the next append tries again. Returns the used fraction."""
        return self.space.check()

    @property
    def refusal(self) -> str | None:
        """Why appends are refused right now (disk full; a consume queue or the index the
        disk refuses to write), or None."""
        return self.space.refusal

    @property
    def last_disk_ratio(self) -> float:
        """The last disk measurement (runtime info: commitLogDiskRatio)."""
        return self.space.last_ratio

    def run_retention(self, *, force: bool = False) -> RetentionResult:
        """One retention round (CleanCommitLogService + CleanConsumeQueueService).

        CommitLog files older than ``file_reserved_time`` (expired) are deleted when the local
        hour of the store clock is in ``delete_when``, when the disk is above
        ``disk_max_used_space_ratio``, or in the rounds a manual delete asked for
        (``delete_expired_manually``). Above ``disk_space_clean_forcibly_ratio`` (or the warning
        level) and with ``clean_file_forcibly_enable``, the oldest files go whether expired or
        not, as in RocketMQ; with ``force`` too (tests, tools). At most
        ``delete_files_batch_max`` files per round, never the newest file nor data not yet
        dispatched. Consume queue and index files pointing only below the new CommitLog start
        are deleted too.
        """
        return self.space.run_retention(force=force)

    def delete_expired_manually(self) -> RetentionResult:
        """DELETE_EXPIRED_COMMITLOG (RocketMQ's executeDeleteFilesManually): expired files are
        deleted now and in the next rounds (20 in all) whatever the hour; files not expired
        only as the disk levels say. Returns this round's result."""
        return self.space.delete_expired_manually()

    def commitlog_restarted(self, offset: int) -> None:
        """The CommitLog now begins at ``offset``, everything before it gone at once (a DLedger
        member whose log was rebuilt from its leader's first entry): dispatch goes on from
        there, and what pointed below it goes as retention would drop it."""
        self.dispatcher.reput_offset = offset
        self.space.drop_below(offset)


__all__ = [
    "MessageStore",
    "StoreError",
    "StoreLockedError",
    "disk_used_ratio",
    "wall_clock_ms",
    "wants_wait",
]
