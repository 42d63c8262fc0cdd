"""MessageStore: the synchronous store facade (DefaultMessageStore's role).

Theory of operation
-------------------
* ``put_message`` / ``put_messages`` encode records straight into the CommitLog's mapped
  page cache and return; queue offsets come from an in-memory table per (topic, queue id).
* ``dispatch_pending`` (reput) reads new records back from the log and appends consume queue
  and index entries, then tells the ``ArrivalListener``. ``aio.AsyncMessageStore`` runs it as a
  task woken on every append; sync users (tests, Spark) call it themselves.
* Durability is a separate step (flush.py): ``begin_flush`` (store thread) captures what to
  sync, ``run_flush`` (any thread) msyncs it, ``end_flush`` (store thread) records the result
  in the checkpoint. ``flush`` does all three. With SYNC_FLUSH the sync ``put_message`` syncs
  before returning; the async store groups many appends into one sync instead.
* Opening: a ``lock`` file (flock) keeps out a second process; an ``abort`` file exists while
  the store is open, so finding one means the last run crashed. Recovery validates the
  CommitLog tail record by record (magic, length, offset, CRC), cuts it at the first bad
  record, drops consume queue entries pointing past that end, and replays dispatch from the
  checkpoint's logics offset (entries already present are kept), so nothing acknowledged is
  lost and nothing corrupt is served.
* Disk space (RocketMQ's levels): above ``disk_max_used_space_ratio`` retention deletes
  expired CommitLog files at once, not only at ``delete_when``; above
  ``disk_space_clean_forcibly_ratio`` (with ``clean_file_forcibly_enable``) also files not
  expired; above ``disk_space_warning_level_ratio`` appends are refused. Appends measure the
  disk at most once a second themselves, and a CommitLog write the disk refuses (ENOSPC)
  refuses appends until the next measurement; so does a consume queue or index write that
  fails (their entries wait in memory). Nothing is written through a mapping into blocks
  the disk has not allocated (mapped_file.py): a full disk is an error, not a SIGBUS.

Not thread-safe: call everything from one thread, except ``run_flush``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Self

from rmq.protocol import properties as P
from rmq.protocol.errors import LocalProtocolError, ProtocolError
from rmq.protocol.message import (
    BORNHOST_V6_FLAG,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    STOREHOST_V6_FLAG,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    BatchItem,
    Message,
    MessageExt,
    decode_record,
    decode_record_meta,
    encode_host,
    is_ipv6_host,
    pack_record_into,
    record_size,
    record_tail,
)

from .checkpoint import StoreCheckpoint
from .commitlog import CommitLog
from .config import FlushDiskType, StoreConfig
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .dispatch import ArrivalListener, Dispatcher
from .errors import StoreError, StoreLockedError
from .flush import Flusher, FlushPlan
from .formats import CQ_ENTRY, CQ_ENTRY_SIZE
from .index import IndexService
from .mapped_file import MappedFile, MapPool, default_pool_capacity
from .recovery import replay_start, validation_start
from .results import (
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    RetentionResult,
    StoreStats,
)

log = logging.getLogger("rmq.store")

_BLANK_ENTRY_SIZE = 0x7FFFFFFF
_DISK_CHECK_MS = 1000  # appends measure the disk at most this often
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_MANUAL_DELETE_ROUNDS = 20  # retention rounds a manual delete covers (RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES)
_V4_RECORD_HEAD = record_size(0, 0, 0, 0)  # 91: a record without body, topic, properties
_V6_EXTRA = 12  # per IPv6 host


class _TopicState:
    __slots__ = ("encoded", "offsets", "puts")

    def __init__(self, encoded: bytes) -> None:
        self.encoded = encoded  # UTF-8 topic name, as written into records
        self.offsets: dict[int, int] = {}  # queue id -> next queue offset
        self.puts = 0


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default store clock."""
    return time.time_ns() // 1_000_000


def disk_used_ratio(path: str) -> float:
    """Fraction (0..1) of the filesystem holding ``path`` that is in use: the default
    disk-usage probe."""
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) / usage.total if usage.total else 0.0


def _int32(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


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
        self._closed = True
        self._refusal: str | None = None  # why puts are refused, when they are (_update_refusal)
        self._disk_refusal: str | None = None  # the disk is above the warning level (check_disk)
        self._write_refusal: str | None = None  # the disk refused a CommitLog write (until check_disk)
        self._disk_checked_at = 0  # store clock of the last measurement
        self._manual_rounds = 0  # retention rounds left that a manual delete asked for
        self.last_disk_ratio = 0.0  # last measurement (runtime info: commitLogDiskRatio)
        # Per topic: encoded name, next queue offset per queue id, put count. One lookup per
        # append however many topics there are.
        self._topics: dict[str, _TopicState] = {}
        self._hosts: dict[tuple[str, int], tuple[bytes, int]] = {}
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        for d in (config.store_path_root_dir, config.commitlog_dir, config.consume_queue_dir):
            os.makedirs(d, exist_ok=True)
        self._lock_fd = self._acquire_lock()
        try:
            self._open(arrival_listener, commitlog)
        except BaseException:
            self._release_lock()
            raise
        self._closed = False

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
        replay = replay_start(self.checkpoint, self.commitlog, self.queues, crashed, indexed, end)
        self.dispatcher = Dispatcher(self.commitlog, self.queues, self.index, cfg.delay_levels_ms(), replay)
        self._flusher = Flusher(cfg, self.commitlog, self.dispatcher, self.index, self.checkpoint)
        if replay < end:
            log.info("replaying dispatch from %d to %d", replay, end)
        self.dispatcher.dispatch_pending(notify=False)
        min_phy = self.commitlog.min_offset
        for (topic, queue_id), cq in self.queues.queues.items():
            cq.correct_min_offset(min_phy)
            state = self._topic(topic)
            if state is not None:
                state.offsets[queue_id] = cq.max_offset
        self.dispatcher.listener = listener
        self._replica_next = end  # where an HA slave expects the next record header
        self._closed = False
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
        if self._closed:
            return
        try:
            self.dispatcher.dispatch_pending(notify=False)
            self.flush()
        finally:
            self._closed = True
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
        return self._closed

    @property
    def arrival_listener(self) -> ArrivalListener | None:
        return self.dispatcher.listener

    @arrival_listener.setter
    def arrival_listener(self, listener: ArrivalListener | None) -> None:
        self.dispatcher.listener = listener

    # --- appends --------------------------------------------------------------------------

    def _refuse(self, status: PutMessageStatus, remark: str) -> PutMessageResult:
        self._stats.put_message_failed_times += 1
        return PutMessageResult(status, remark)

    def _host(self, host: tuple[str, int]) -> tuple[bytes, bool]:
        """Encoded host, and whether it is IPv6 (needs its V6 sysFlag bit). The bit is the
        caller's to choose: one host may be a born host and a store host."""
        cached = self._hosts.get(host)
        if cached is None:
            if len(self._hosts) > 4096:  # bounded: born hosts come from many clients
                self._hosts.clear()
            v6 = is_ipv6_host(host[0])
            cached = self._hosts[host] = (encode_host(host, v6), v6)
        return cached

    def _topic(self, topic: str) -> _TopicState | None:
        state = self._topics.get(topic)
        if state is None:
            encoded = topic.encode("utf-8")
            if not 0 < len(encoded) <= MAX_TOPIC_LENGTH:
                return None
            state = self._topics[topic] = _TopicState(encoded)
        return state

    def append_message(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        *,
        flag: int = 0,
        properties: Mapping[str, str] | str | None = None,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        store_host: tuple[str, int] = ("127.0.0.1", 10911),
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        tags_code: int | None = None,
    ) -> PutMessageResult:
        """Write one record into the CommitLog's page cache; never syncs.

        Assigns the queue offset (0, without advancing the queue, for transaction PREPARED and
        ROLLBACK records, which never reach a consume queue), the CommitLog offset, the store
        timestamp and the body CRC. ``properties`` may be a dict or an already encoded string;
        it is stored as given (UNIQ_KEY included). IPv6 hosts get their V6 sysFlag bit.
        ``tags_code`` replaces the consume queue tags code (the TAGS hash, or in
        SCHEDULE_TOPIC_XXXX the delivery time computed from DELAY); recovery replay recomputes
        it from the record.

        Returns PUT_OK, or SERVICE_NOT_AVAILABLE (closed; disk full or a consume queue or the
        index the disk refuses, with a remark naming the cause), MESSAGE_ILLEGAL,
        PROPERTIES_SIZE_EXCEEDED, CREATE_MAPPED_FILE_FAILED or UNKNOWN_ERROR (an I/O error).
        """
        store_ts = self.clock()
        if not -_DISK_CHECK_MS < store_ts - self._disk_checked_at < _DISK_CHECK_MS and not self._closed:
            self.check_disk()
        if self._refusal is not None or self._closed:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, self._refusal or "store is closed")
        state = self._topics.get(topic) or self._topic(topic)
        if state is None:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"topic length must be 1..{MAX_TOPIC_LENGTH} bytes")
        topic_b = state.encoded
        if len(body) > self.config.max_message_size:
            return self._refuse(
                PutMessageStatus.MESSAGE_ILLEGAL,
                f"message body of {len(body)} bytes exceeds max_message_size {self.config.max_message_size}",
            )
        if queue_id < 0:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"bad queue id {queue_id}")
        if properties is None:
            props_b = b""
        elif isinstance(properties, str):
            props_b = properties.encode("utf-8")
        else:
            props_b = P.encode_properties(properties).encode("utf-8")
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            return self._refuse(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH}",
            )
        try:
            born_b, born_v6 = self._host(born_host)
            store_b, store_v6 = self._host(store_host)
        except LocalProtocolError as exc:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
        # the V6 bits describe the hosts we write, whatever the sender's sysFlag said
        sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        if born_v6:
            sys_flag |= BORNHOST_V6_FLAG
        if store_v6:
            sys_flag |= STOREHOST_V6_FLAG
        tail = record_tail(topic_b, props_b)
        size = _V4_RECORD_HEAD - 3 + len(body) + len(tail)
        if sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG):
            size += (_V6_EXTRA if born_v6 else 0) + (_V6_EXTRA if store_v6 else 0)
        if size > self.config.mapped_file_size_commitlog - 8:
            return self._refuse(
                PutMessageStatus.MESSAGE_ILLEGAL, f"record of {size} bytes does not fit a CommitLog file"
            )
        tran = sys_flag & TRANSACTION_TYPE_MASK
        offsets = state.offsets
        not_queued = tran in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
        queue_offset = 0 if not_queued else offsets.get(queue_id, 0)
        try:
            mf, pos = self.commitlog.reserve(size)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, "cannot create a CommitLog file")
        phy = mf.start + pos
        built = None if mf.mapped_writes else bytearray(size)
        pack_record_into(
            mf.mm if built is None else built, pos if built is None else 0, size, zlib.crc32(body) & 0x7FFFFFFF,
            queue_id, flag, queue_offset, phy, sys_flag, born_timestamp, born_b, store_ts, store_b, reconsume_times,
            prepared_transaction_offset, body, tail,
        )  # fmt: skip
        if built is not None and (refused := self._write_built(mf, pos, built)) is not None:
            return refused
        mf.wrote = pos + size
        self.commitlog.last_store_timestamp = store_ts
        if not not_queued:
            offsets[queue_id] = queue_offset + 1
        if tags_code is not None:
            self.dispatcher.tags_overrides[phy] = tags_code
        state.puts += 1
        stats = self._stats
        stats.put_message_times_total += 1
        stats.put_message_size_total += size
        return PutMessageResult(
            PutMessageStatus.PUT_OK, "", phy, size,
            (store_b + phy.to_bytes(8, "big")).hex().upper(), queue_offset, store_ts, 1,
        )  # fmt: skip

    def append_messages(
        self,
        topic: str,
        queue_id: int,
        messages: Iterable[Message | BatchItem],
        *,
        extra_properties: Mapping[str, str] | None = None,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        store_host: tuple[str, int] = ("127.0.0.1", 10911),
        reconsume_times: int = 0,
    ) -> PutMessageResult:
        """Write a batch (``decode_batch_items`` or ``decode_batch_body``) as consecutive
        records in one CommitLog file with consecutive queue offsets; never syncs.

        Each record gets its own body CRC and keeps its own properties (UNIQ_KEY, KEYS, TAGS);
        ``extra_properties`` (batch-level ones such as WAIT, and CLUSTER) are added to each,
        overriding. A BatchItem's properties are stored as they came, the extra ones appended,
        unless they may name DELAY or an extra property. Transactional batches and items with
        a DELAY level are MESSAGE_ILLEGAL, as in RocketMQ; otherwise statuses are those of
        ``append_message``.
        """
        store_ts = self.clock()
        if not -_DISK_CHECK_MS < store_ts - self._disk_checked_at < _DISK_CHECK_MS and not self._closed:
            self.check_disk()
        if self._refusal is not None or self._closed:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, self._refusal or "store is closed")
        items = list(messages)
        if not items:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "empty batch")
        if sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        state = self._topics.get(topic) or self._topic(topic)
        if state is None:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"topic length must be 1..{MAX_TOPIC_LENGTH} bytes")
        topic_b = state.encoded
        if queue_id < 0:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, f"bad queue id {queue_id}")
        try:
            born_b, born_v6 = self._host(born_host)
            store_b, store_v6 = self._host(store_host)
        except LocalProtocolError as exc:
            return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
        # the V6 bits describe the hosts we write, whatever the sender's sysFlag said
        sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        if born_v6:
            sys_flag |= BORNHOST_V6_FLAG
        if store_v6:
            sys_flag |= STOREHOST_V6_FLAG
        head = record_size(sys_flag, 0, 0, 0) - 3
        encoded: list[tuple[Message | BatchItem, bytes, int]] = []
        total = 0
        extra_b = P.encode_properties(extra_properties).encode("utf-8") if extra_properties else b""
        # encoded properties are kept, the batch's appended, unless they may name DELAY or a
        # batch property (then decoded, checked and merged as a Message's are)
        watched = P.property_marks((P.DELAY, *extra_properties) if extra_properties else (P.DELAY,))
        # one scan of all items first: in the common batch none names a watched property
        some_watched = P.may_any_have((m.properties for m in items if isinstance(m, BatchItem)), watched)
        for m in items:
            if isinstance(m, BatchItem) and not (some_watched and P.may_have(m.properties, watched)):
                raw = m.properties
                # a separator between the two unless the item's own ends with one (the C++
                # client's do), as RocketMQ's batch encoder does
                props_b = raw + b"\x02" + extra_b if raw and extra_b and raw[-1] != 2 else raw + extra_b
            else:
                props = dict(m.properties) if isinstance(m, Message) else P.decode_properties(m.properties)
                if extra_properties:
                    props.update(extra_properties)
                delay = props.get(P.DELAY, "0")
                if delay.strip().lstrip("-").isdigit() and int(delay) > 0:
                    return self._refuse(PutMessageStatus.MESSAGE_ILLEGAL, "batch messages cannot be delayed")
                props_b = P.encode_properties(props).encode("utf-8")
            if len(m.body) > self.config.max_message_size:
                return self._refuse(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    f"message body of {len(m.body)} bytes exceeds max_message_size {self.config.max_message_size}",
                )
            if len(props_b) > MAX_PROPERTIES_LENGTH:
                return self._refuse(
                    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH}",
                )
            tail = record_tail(topic_b, props_b)
            size = head + len(m.body) + len(tail)
            encoded.append((m, tail, size))
            total += size
        if total > self.config.mapped_file_size_commitlog - 8:
            return self._refuse(
                PutMessageStatus.MESSAGE_ILLEGAL, f"batch of {total} bytes does not fit a CommitLog file"
            )
        first_queue_offset = queue_offset = state.offsets.get(queue_id, 0)
        try:
            mf, pos = self.commitlog.reserve(total)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, "cannot create a CommitLog file")
        first_pos = pos
        first_phy = mf.start + pos
        built = None if mf.mapped_writes else bytearray(total)  # the whole batch: one pwrite
        target, base = (mf.mm, 0) if built is None else (built, first_pos)
        ids = []
        for m, tail, size in encoded:
            phy = mf.start + pos
            body = bytes(m.body)
            pack_record_into(
                target, pos - base, size, zlib.crc32(body) & 0x7FFFFFFF, queue_id, m.flag, queue_offset, phy,
                sys_flag, born_timestamp, born_b, store_ts, store_b, reconsume_times, 0, body, tail,
            )  # fmt: skip
            ids.append((store_b + phy.to_bytes(8, "big")).hex().upper())
            pos += size
            queue_offset += 1
        if built is not None and (refused := self._write_built(mf, first_pos, built)) is not None:
            return refused
        mf.wrote = pos
        self.commitlog.last_store_timestamp = store_ts
        state.offsets[queue_id] = queue_offset
        state.puts += len(encoded)
        stats = self._stats
        stats.put_message_times_total += len(encoded)
        stats.put_message_size_total += total
        return PutMessageResult(
            PutMessageStatus.PUT_OK, "", first_phy, total, ",".join(ids), first_queue_offset,
            store_ts, len(encoded),
        )  # fmt: skip

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
        if self._closed:
            raise StoreError("store is closed")
        if not data:
            return
        empty = not self.commitlog.files.files
        self._replica_next, whole = self.commitlog.append_replica(offset, data, self._replica_next)
        if empty:
            self.dispatcher.reput_offset = offset
        # A chunk may end inside a record: dispatch stops at the last whole one.
        self.dispatcher.limit = whole
        self._stats.put_message_size_total += len(data)

    def reset_queue_offsets(self) -> None:
        """Take every queue's next offset from its consume queue (once everything in the
        CommitLog is dispatched): a DLedger member about to lead a group."""
        for state in self._topics.values():
            state.offsets.clear()
        for (topic, queue_id), cq in self.queues.queues.items():
            known = self._topic(topic)
            if known is not None:
                known.offsets[queue_id] = cq.max_offset

    def put_message(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        *,
        flag: int = 0,
        properties: Mapping[str, str] | str | None = None,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        store_host: tuple[str, int] = ("127.0.0.1", 10911),
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        tags_code: int | None = None,
        wait: bool | None = None,
    ) -> PutMessageResult:
        """``append_message`` plus the flush policy: with SYNC_FLUSH, sync the CommitLog before
        returning unless ``wait`` is false (None: the WAIT property decides, absent = true)."""
        result = self.append_message(
            topic, queue_id, body, flag=flag, properties=properties, sys_flag=sys_flag,
            born_timestamp=born_timestamp, born_host=born_host, store_host=store_host,
            reconsume_times=reconsume_times, prepared_transaction_offset=prepared_transaction_offset,
            tags_code=tags_code,
        )  # fmt: skip
        if result.ok and self._sync_flush and wants_wait(wait, properties):
            self.flush_commitlog()
        return result

    def _write_built(self, mf: MappedFile, pos: int, built: bytearray) -> PutMessageResult | None:
        """Write records built for a file not written through its mapping (``mf.mapped_writes``
        false, see MappedFile.expect_appends); a refusal when the kernel refuses the write:
        nothing counts as written, and the next append writes there again."""
        try:
            mf.pwrite(pos, built)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.UNKNOWN_ERROR, "cannot write the CommitLog")
        return None

    def _write_failed(self, exc: OSError, status: PutMessageStatus, what: str) -> PutMessageResult:
        """The disk refused a CommitLog write or file. No space (ENOSPC, EDQUOT): appends are
        refused with SERVICE_NOT_AVAILABLE until the next disk measurement (a second at most)
        lets one try again. Any other error fails this append only, with ``status``."""
        if exc.errno not in _NO_SPACE:
            return self._refuse(status, f"{what}: {exc}")
        if self._write_refusal is None:
            log.error("%s: %s; refusing writes", what, exc)
        self._write_refusal = f"disk full: {what}: {exc}; writes are refused until there is space"
        self._update_refusal()
        return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, self._write_refusal)

    def put_messages(
        self,
        topic: str,
        queue_id: int,
        messages: Iterable[Message | BatchItem],
        *,
        extra_properties: Mapping[str, str] | None = None,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        store_host: tuple[str, int] = ("127.0.0.1", 10911),
        reconsume_times: int = 0,
        wait: bool | None = None,
    ) -> PutMessageResult:
        """``append_messages`` plus the flush policy of ``put_message`` (``extra_properties``
        carry the batch's WAIT)."""
        result = self.append_messages(
            topic, queue_id, messages, extra_properties=extra_properties, sys_flag=sys_flag,
            born_timestamp=born_timestamp, born_host=born_host, store_host=store_host,
            reconsume_times=reconsume_times,
        )  # fmt: skip
        if result.ok and self._sync_flush and wants_wait(wait, extra_properties):
            self.flush_commitlog()
        return result

    @property
    def stats(self) -> StoreStats:
        """Counters for runtime info (the per-topic put counts are rebuilt on each call)."""
        s = self._stats
        s.put_message_times_by_topic = {t: st.puts for t, st in self._topics.items() if st.puts}
        s.dispatched_total = self.dispatcher.dispatched_total
        return s

    @property
    def sync_flush(self) -> bool:
        return self._sync_flush

    def queue_offset_for_next(self, topic: str, queue_id: int) -> int:
        """Queue offset the next append to (topic, queue) will get."""
        state = self._topics.get(topic)
        return state.offsets.get(queue_id, 0) if state is not None else 0

    # --- dispatch -------------------------------------------------------------------------

    def dispatch_pending(self, max_records: int | None = None) -> int:
        """Build consume queue and index entries for new records (reput); returns how many
        records were dispatched. Calls the arrival listener for each queue entry."""
        done = self.dispatcher.dispatch_pending(max_records)
        self._update_refusal()
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
        self._update_refusal()

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

    # --- reads ----------------------------------------------------------------------------

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
        """Read up to ``max_count`` records of a queue from ``offset`` (DefaultMessageStore.getMessage).

        Entries whose tags code is not in ``tags_codes`` are skipped (None matches all). At
        least one record is returned when any matches; then the batch stops at ``max_count``,
        ``max_transfer_count_on_message_in_memory`` or ``max_bytes`` (default
        ``max_transfer_bytes_on_message_in_memory``). One call scans at most
        max(800, max_count) entries and never crosses a consume queue file. Statuses and
        ``next_begin_offset`` follow PROTOCOL.md 3.2.
        """
        cfg = self.config
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            self._stats.get_message_times_total_miss += 1
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if hi == 0:
            status, nxt = GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0
        elif offset < lo:
            status, nxt = GetMessageStatus.OFFSET_TOO_SMALL, lo
        elif offset == hi:
            status, nxt = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
        elif offset > hi:
            status, nxt = GetMessageStatus.OFFSET_OVERFLOW_BADLY, hi
        else:
            raw = cq.entries(offset, max(16000 // CQ_ENTRY_SIZE, max_count))
            if raw is None:
                status, nxt = GetMessageStatus.OFFSET_FOUND_NULL, cq.next_file_offset(offset)
            else:
                limit = max_bytes or cfg.max_transfer_bytes_on_message_in_memory
                return self._collect(cq, offset, raw, max_count, limit, tags_codes)
        self._stats.get_message_times_total_miss += 1
        return GetMessageResult(status, nxt, lo, hi)

    def _collect(
        self,
        cq: ConsumeQueue,
        offset: int,
        raw: bytes,
        max_count: int,
        max_bytes: int,
        tags_codes: set[int] | frozenset[int] | None,
    ) -> GetMessageResult:
        cl = self.commitlog
        count_cap = min(max_count, self.config.max_transfer_count_on_message_in_memory)
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        records: list[bytes] = []
        offsets: list[int] = []
        total = 0
        scanned = 0
        skip_below = -1  # after a missing record, skip entries in the same (deleted) file
        for phy, size, tags in CQ_ENTRY.iter_unpack(raw):
            if records and (len(records) >= count_cap or total + size > max_bytes):
                break
            scanned += 1
            if phy < skip_below:
                continue
            if size == _BLANK_ENTRY_SIZE or size <= 0:
                continue
            if tags_codes is not None and tags not in tags_codes and _int32(tags) not in tags_codes:
                continue
            rec = cl.read(phy, size)
            if rec is None:
                if not records:
                    status = GetMessageStatus.MESSAGE_WAS_REMOVING
                skip_below = phy - phy % cl.file_size + cl.file_size
                continue
            records.append(rec)
            offsets.append(offset + scanned - 1)
            total += size
            status = GetMessageStatus.FOUND
            skip_below = -1
        stats = self._stats
        if records:
            stats.get_message_times_total_found += 1
            stats.get_message_transferred_msg_count += len(records)
        else:
            stats.get_message_times_total_miss += 1
        return GetMessageResult(status, offset + scanned, cq.min_offset, cq.max_offset, records, offsets, total)

    def read_consume_queue(
        self, topic: str, queue_id: int, offset: int, max_count: int = 32
    ) -> list[tuple[int, int, int, int]]:
        """Raw consume queue entries from ``offset``: (queue offset, CommitLog offset, size,
        tags code), at most ``max_count``, not crossing a file. For services that need the
        tags code itself, e.g. delivery times in SCHEDULE_TOPIC_XXXX; padding entries are
        skipped."""
        cq = self.queues.get(topic, queue_id)
        raw = cq.entries(max(offset, cq.min_offset), max_count) if cq is not None else None
        if not raw or cq is None:
            return []
        start = max(offset, cq.min_offset)
        return [
            (start + i, phy, size, tags)
            for i, (phy, size, tags) in enumerate(CQ_ENTRY.iter_unpack(raw))
            if size != _BLANK_ENTRY_SIZE
        ]

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for an unknown queue)."""
        cq = self.queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_commitlog_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """CommitLog offset of the message at ``offset`` in the queue (0 when unknown)."""
        cq = self.queues.get(topic, queue_id)
        e = cq.entry(offset) if cq is not None else None
        return e[0] if e is not None else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at ``offset`` in the queue, -1 when unknown."""
        cq = self.queues.get(topic, queue_id)
        e = cq.entry(offset) if cq is not None else None
        if e is None or e[1] == _BLANK_ENTRY_SIZE:
            return -1
        ts = self.commitlog.store_timestamp_at(e[0])
        return ts if ts is not None else -1

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message in the queue, or in the whole store without a
        topic; -1 when there is none."""
        if topic is not None:
            cq = self.queues.get(topic, queue_id)
            if cq is None or cq.min_offset >= cq.max_offset:
                return -1
            return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)
        files = self.commitlog.files.files
        ts = self.commitlog.first_store_timestamp(files[0]) if files else None
        return ts if ts is not None else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset of the message stored at ``timestamp`` (binary search on store time);
        without an exact hit, the nearer of the two neighbours (the earlier one on a tie);
        the first message when all are later, the last when all are earlier."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        if lo >= hi:
            return lo
        first_lo = lo

        def ts_at(i: int) -> int:
            t = self.get_message_store_timestamp(topic, queue_id, i)
            return t if t >= 0 else -(2**63)

        while lo < hi:  # first offset stored at or after timestamp
            mid = (lo + hi) // 2
            if ts_at(mid) < timestamp:
                lo = mid + 1
            else:
                hi = mid
        if lo < cq.max_offset and ts_at(lo) == timestamp:
            return lo
        if lo == first_lo:
            return lo
        if lo == cq.max_offset:
            return lo - 1
        left, right = ts_at(lo - 1), ts_at(lo)
        return lo if abs(timestamp - left) > abs(right - timestamp) else lo - 1

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        """The raw record at a CommitLog offset (VIEW_MESSAGE_BY_ID), or None."""
        if size is None:
            return self.commitlog.record_at(phy_offset)
        return self.commitlog.read(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """The decoded message at a CommitLog offset, or None when there is none."""
        rec = self.commitlog.record_at(phy_offset)
        if rec is None:
            return None
        try:
            return decode_record(rec)[0]
        except ProtocolError:
            return None

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1
    ) -> QueryMessageResult:
        """Records of ``topic`` indexed under ``key`` (a KEYS item or the UNIQ_KEY) and stored
        within ``[begin, end]`` ms, newest first, at most min(max_num, max_msgs_num_batch).

        Unlike RocketMQ's store, records whose key does not really match (hash collisions, or
        stale entries after recovery) are dropped here.
        """
        if self.index is None:
            return QueryMessageResult()
        max_num = min(max_num, self.config.max_msgs_num_batch)
        offsets, last_ts, last_phy = self.index.query(topic, key, max_num, begin, end)
        out = QueryMessageResult(index_last_update_timestamp=last_ts, index_last_update_phy_offset=last_phy)
        seen: set[int] = set()
        for off in offsets:
            if off in seen or off >= self.commitlog.max_offset:
                continue
            seen.add(off)
            rec = self.commitlog.record_at(off)
            if rec is None:
                continue
            try:
                meta = decode_record_meta(rec)
            except ProtocolError:
                continue
            if meta.commitlog_offset != off or meta.topic != topic:
                continue
            props = P.decode_properties(meta.properties)
            if props.get(P.UNIQ_KEY) != key and key not in P.split_keys(props.get(P.KEYS)):
                continue
            out.records.append(rec)
        return out

    def topics(self) -> dict[str, list[int]]:
        """Topics with consume queues, and their queue ids."""
        out: dict[str, list[int]] = {}
        for topic, qid in self.queues.queues:
            out.setdefault(topic, []).append(qid)
        for qids in out.values():
            qids.sort()
        return out

    @property
    def min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    # --- topics, disk and retention ---------------------------------------------------------

    def delete_topic(self, topic: str) -> int:
        """Remove the consume queues and queue offsets of ``topic`` (DELETE_TOPIC_IN_BROKER);
        its records stay in the CommitLog until retention. Returns the queues removed."""
        self._topics.pop(topic, None)
        for cq in [cq for cq in self.dispatcher.dirty if cq.topic == topic]:
            self.dispatcher.dirty.discard(cq)
        return self.queues.remove_topic(topic)

    def check_disk(self) -> float:
        """Measure disk use (the CommitLog's disk, and the store root's if it is elsewhere):
        above ``disk_space_warning_level_ratio`` appends are refused (RocketMQ's disk-full
        flag), below it they are taken again; a refusal after the disk refused a CommitLog
        write is lifted too, so the next append tries again. Returns the used fraction."""
        cfg = self.config
        self._disk_checked_at = self.clock()
        where = cfg.commitlog_dir
        ratio = self._disk_usage(where)
        if cfg.store_path_commitlog and (root := self._disk_usage(cfg.store_path_root_dir)) > ratio:
            where, ratio = cfg.store_path_root_dir, root
        self.last_disk_ratio = ratio
        limit = cfg.disk_space_warning_level_ratio
        used = ratio * 100
        if used > limit:
            if self._disk_refusal is None:
                log.warning("disk %.1f%% used, above diskSpaceWarningLevelRatio=%d%%: refusing writes", used, limit)
            self._disk_refusal = (
                f"disk full: {ratio:.1%} of the disk holding {where} is used, above "
                f"diskSpaceWarningLevelRatio={limit}%; writes are refused until it is below"
            )
        elif self._disk_refusal is not None:
            log.info("disk %.1f%% used: accepting writes again", used)
            self._disk_refusal = None
        if self._write_refusal is not None and self._disk_refusal is None:
            log.info("disk %.1f%% used: trying CommitLog writes again", used)
            self._write_refusal = None
        self._update_refusal()
        return ratio

    @property
    def refusal(self) -> str | None:
        """Why appends are refused right now (disk full; a consume queue or the index the
        disk refuses to write), or None."""
        return self._refusal

    def _update_refusal(self) -> None:
        """Appends are refused while the disk is full, and while a consume queue or the index
        cannot be written (RocketMQ's logics and index errors): the entries wait in memory,
        and the CommitLog must not run further ahead of them."""
        why = self._disk_refusal or self._write_refusal
        if why is None:
            failures = self.queues.failures
            derived = next(iter(failures.values())) if failures else self.dispatcher.index_error
            if derived is not None:
                why = f"{derived}; writes are refused until it can"
        self._refusal = why

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
        cfg = self.config
        now = self.clock()
        ratio = self.check_disk()
        used = ratio * 100
        result = RetentionResult(disk_used_ratio=ratio)
        critical = used > cfg.disk_space_clean_forcibly_ratio or used > cfg.disk_space_warning_level_ratio
        above = critical or used > cfg.disk_max_used_space_ratio
        time_up = time.localtime(now // 1000).tm_hour in cfg.delete_hours()
        manual = self._manual_rounds > 0
        if manual:
            self._manual_rounds -= 1
        if not (time_up or above or manual or force):
            return result
        forcibly = force or (critical and cfg.clean_file_forcibly_enable)
        why = (
            "asked to"
            if force
            else f"disk {used:.1f}% used, above diskSpaceCleanForciblyRatio={cfg.disk_space_clean_forcibly_ratio}%"
        )
        deleted, unexpired = self.commitlog.delete_expired(
            now=now,
            reserved_ms=cfg.file_reserved_time * 3_600_000,
            force=forcibly,
            limit_offset=self.dispatcher.reput_offset,
            max_files=cfg.delete_files_batch_max,
            why=why,
        )
        result.commitlog_files_deleted, result.commitlog_files_unexpired = deleted, unexpired
        self._stats.commitlog_files_deleted += deleted
        self._stats.commitlog_files_deleted_unexpired += unexpired
        result.consume_queue_files_deleted, result.index_files_deleted = self._drop_below(self.commitlog.min_offset)
        if deleted:
            self.check_disk()
        elif above:
            log.warning(
                "disk %.1f%% used, above diskMaxUsedSpaceRatio=%d%%, and no CommitLog file could be deleted%s",
                used, cfg.disk_max_used_space_ratio,
                "" if forcibly else " (none has expired; cleanFileForciblyEnable or a higher level deletes others)",
            )  # fmt: skip
        return result

    def delete_expired_manually(self) -> RetentionResult:
        """DELETE_EXPIRED_COMMITLOG (RocketMQ's executeDeleteFilesManually): expired files are
        deleted now and in the next rounds (20 in all) whatever the hour; files not expired
        only as the disk levels say. Returns this round's result."""
        self._manual_rounds = _MANUAL_DELETE_ROUNDS
        return self.run_retention()

    def _drop_below(self, min_phy: int) -> tuple[int, int]:
        """Delete consume queue and index files (and move queue heads) pointing only below
        ``min_phy``; returns how many consume queue and index files went."""
        queues = sum(cq.delete_expired(min_phy) for cq in list(self.queues.queues.values()))
        return queues, self.index.delete_expired(min_phy) if self.index is not None else 0

    def commitlog_restarted(self, offset: int) -> None:
        """The CommitLog now begins at ``offset``, everything before it gone at once (a DLedger
        member whose log was rebuilt from its leader's first entry): dispatch goes on from
        there, and what pointed below it goes as retention would drop it."""
        self.dispatcher.reput_offset = offset
        self._drop_below(offset)


def wants_wait(wait: bool | None, props: Mapping[str, str] | str | None) -> bool:
    """Whether an append waits for its sync: ``wait`` if given, else the WAIT property
    (absent means true)."""
    if wait is not None:
        return wait
    if props is None:
        return True
    if isinstance(props, str):
        return f"{P.WAIT}{P.NAME_VALUE_SEPARATOR}false" not in props
    return props.get(P.WAIT) != "false"


__all__ = [
    "MessageStore",
    "StoreError",
    "StoreLockedError",
    "disk_used_ratio",
    "wall_clock_ms",
    "wants_wait",
]
