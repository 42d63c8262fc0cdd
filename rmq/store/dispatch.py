"""Reput: follow the CommitLog and build consume queue and index entries from it.

Appends only write the CommitLog; ``Dispatcher.dispatch_pending`` later reads each new record
from the log (as RocketMQ's ReputMessageService does), so the consume queues always describe
what the log really holds, and recovery rebuilds them with the same code. After a record is
dispatched the ``ArrivalListener`` hears about it; the broker's long polling implements it.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from typing import Any, Protocol

from rmq.protocol import properties as P
from rmq.protocol.constants import SCHEDULE_TOPIC
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    parse_record,
    peek_size_and_magic,
)

from .commitlog import CommitLog
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .formats import BLANK
from .index import IndexService

log = logging.getLogger("rmq.store.dispatch")

_NOT_DISPATCHED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
_MAX_PENDING = 256 * 1024  # bytes of consume queue entries held in memory per queue
_INDEX_AFTER = 256  # records whose index entries may wait for the end of a dispatch pass
_MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
# A v1 record's head with IPv4 hosts, only the fields a told record is checked by: size, magic,
# body CRC, queue id, (flag), queue offset, (CommitLog offset), sysFlag, (born time and host),
# store time. Fewer objects than HEAD_V4's whole tuple, none of them bytes.
TOLD_HEAD = struct.Struct(">iIIi4xq8xi16xq")  # as HEAD_V4: magic and CRC unsigned
_MAX_UNINDEXED = 65536  # records kept for another try when the index cannot be written


class ArrivalListener(Protocol):
    """Told about the consume queues that records landed in (MessageArrivingListener).

    Called synchronously on the store's thread at the end of a dispatch pass, once for each
    queue the pass added entries to, with that queue's newest record: ``logic_offset`` is the
    queue's new max offset (the record's queue offset + 1). It must not block. Not told of
    transaction PREPARED / ROLLBACK records, nor during recovery. A listener with a
    ``dispatched()`` method is also called once at the end of each dispatch pass that
    dispatched a record, after the queues (readers woken by the pass then see all it wrote).
    """

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: dict[str, str],
    ) -> None: ...


class Dispatcher:
    """Builds consume queue and index entries for CommitLog records from ``reput_offset`` on."""

    def __init__(
        self,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        delay_levels_ms: list[int],
        reput_offset: int,
    ) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.reput_offset = reput_offset
        self.last_timestamp = 0  # store time of the last dispatched record
        self.listener: ArrivalListener | None = None
        # Queues holding entries not yet synced; the flusher works through these.
        self.dirty: set[ConsumeQueue] = set()
        # Tags codes a caller chose at append time, by CommitLog offset (MessageDraft.tags_code).
        self.tags_overrides: dict[int, int] = {}
        # What the appender wrote at a CommitLog offset (Appender._tell_dispatch): the fields
        # TOLD_HEAD reads (size, magic, body CRC, queue id, queue offset, sysFlag, store time),
        # then topic, TAGS, KEYS, UNIQ_KEY. A record whose head still says so is dispatched
        # from these, not parsed back; any other (a replica's, one rewritten since) is parsed.
        self.appended: dict[int, tuple[Any, ...]] = {}
        self.dispatched_total = 0
        # Dispatch stops here when set: a DLedger member's CommitLog may hold a leader's
        # appends that a majority does not have yet, and consumers must not see those. A
        # DLedger CommitLog sets it itself; otherwise ``update_limit`` makes it the lower of
        # ``replica_end`` and ``confirmed``.
        self.limit: int | None = commitlog.dispatch_limit
        # An HA slave's: where its master's whole records end (a chunk may end inside one).
        self.replica_end: int | None = None
        # Controller mode: the confirm offset, below which every in-sync replica holds the log
        # (None: no such bound). Consumers never see a record a failover could cut.
        self.confirmed: int | None = None
        # Why dispatch cannot go past ``reput_offset`` (a record there is not one), or None.
        # Dispatch never skips bytes it cannot read: the records after them would reach no
        # consumer, though they may have been acknowledged.
        self.stalled: str | None = None
        self._tags_codes: dict[str, int] = {}
        # Records the index could not take (the disk refused), for another try; the lowest
        # CommitLog offset not indexed (the checkpoint's index offset stays at or below it),
        # and why the last try failed (None once the index takes records again).
        self.unindexed: list[tuple[str, int, int, int, str | None, str | None]] = []
        self.index_from: int | None = None
        self.index_error: str | None = None
        self.index_pinned = False  # index_from stays until a restart indexes again from it

    def update_limit(self) -> None:
        """``limit`` from ``replica_end`` and ``confirmed``: the lower of those set."""
        ends = [e for e in (self.replica_end, self.confirmed) if e is not None]
        self.limit = min(ends) if ends else None

    def cut(self, offset: int) -> None:
        """The CommitLog now ends at ``offset`` (MessageStore.truncate_to): dispatch goes on
        from there at the most, and nothing remembered about records past it stays."""
        if self.reput_offset >= offset:
            self.reput_offset = offset
            self.stalled = None  # a stall is at reput_offset: those bytes are gone
        if self.tags_overrides:
            self.tags_overrides = {o: code for o, code in self.tags_overrides.items() if o < offset}
        if self.appended:
            self.appended = {o: known for o, known in self.appended.items() if o < offset}
        self.unindexed = [r for r in self.unindexed if r[1] < offset]
        if self.index_from is not None and self.index_from >= offset:
            self.index_from = None
            self.index_pinned = False
        if self.index is not None:
            self.index.last_indexed = min(self.index.last_indexed, offset - 1)
        self.replica_end = None
        if self.confirmed is not None:
            self.confirmed = min(self.confirmed, offset)
        self.update_limit()

    @property
    def behind(self) -> int:
        """Bytes of CommitLog not dispatched yet."""
        end = self.commitlog.max_offset if self.limit is None else min(self.limit, self.commitlog.max_offset)
        return max(0, end - self.reput_offset)

    def tags_code(self, tags: str | None) -> int:
        """Java hash of a TAGS value (0 without tags); cached, tags repeat a lot."""
        if not tags:
            return 0
        code = self._tags_codes.get(tags)
        if code is None:
            if len(self._tags_codes) > 65536:
                self._tags_codes.clear()
            code = self._tags_codes[tags] = P.java_string_hash(tags)
        return code

    def _schedule_tags_code(self, props: dict[str, str], store_timestamp: int, default: int) -> int:
        # SCHEDULE_TOPIC_XXXX entries carry the delivery time instead of a tag hash.
        try:
            level = int(props.get(P.DELAY, "0"))
        except ValueError:
            return default
        if level <= 0 or not self.delay_levels_ms:
            return default
        level = min(level, len(self.delay_levels_ms))
        return store_timestamp + self.delay_levels_ms[level - 1]

    def dispatch_pending(self, max_records: int | None = None, *, notify: bool = True) -> int:
        """Dispatch records up to the CommitLog's write position (or ``max_records`` of them).

        Returns how many records were dispatched. With ``notify`` the listener is called for
        each consume queue entry.
        """
        cl = self.commitlog
        files = cl.files
        end = cl.max_offset if self.limit is None else min(self.limit, cl.max_offset)
        qtable = self.queues.queues
        index = self.index
        listener = self.listener if notify else None
        overrides = self.tags_overrides
        dirty = self.dirty
        decode_props = P.decode_properties
        appended = self.appended
        read_told = TOLD_HEAD.unpack_from
        tags_codes = self._tags_codes
        limit = max_records if max_records is not None else -1
        done = 0
        offset = self.reput_offset
        indexing: list[tuple[str, int, int, int, str | None, str | None]] = []
        # The newest record of each queue this pass adds to (logic offset, tags code, store
        # time, properties): the listener hears once per queue, not once per record.
        # (The properties are read only for these: a record dispatched from what its append
        # told has the place to read them from instead, its file's mapping and position.)
        arrived: dict[ConsumeQueue, tuple[int, int, int, dict[str, str] | tuple[Any, int]]] = {}
        while offset < end and done != limit:
            mf = files.find(offset)
            if mf is None:
                if offset < files.min_offset:  # retention removed what we had not reached
                    log.warning("reput offset %d below CommitLog min %d", offset, files.min_offset)
                    offset = self.reput_offset = files.min_offset
                    continue
                break
            # Walk the records of this file without looking it up again.
            mm, base, file_end = mf.mm, mf.start, mf.end
            stop = min(end, file_end)
            while offset < stop and done != limit:
                pos = offset - base
                if offset + BLANK.size > end:
                    break  # not even a header yet: a replica's chunk ended here
                known = appended.pop(offset, None) if appended else None
                if known is not None and offset + TOLD_HEAD.size <= file_end and read_told(mm, pos) == known[:7]:
                    size, magic = known[0], known[1]
                else:  # told nothing, or rewritten since (a replica's bytes after a cut): parsed
                    known = None
                    size, magic = peek_size_and_magic(mm, pos)
                if magic in _MESSAGE_MAGICS and end < offset + size <= file_end:
                    # A record still arriving (a replica's chunk ended inside it): not yet. Parsing
                    # it now would read the zeros past the chunk as its properties.
                    break
                if known is not None:
                    _, _, _, queue_id, queue_offset, sys_flag, store_ts, topic, tags, keys, uniq_key = known
                    props: dict[str, str] | None = None
                else:
                    try:
                        fields, _, _, topic, props_at, rec_end = parse_record(mm, pos)
                    except ProtocolError as exc:
                        step = cl.non_record_step(mf, pos)  # a blank (or a DLedger entry header)
                        if step is None:
                            # A DLedger entry that holds no record of ours (a bare member's APPEND)
                            # is skipped whole; anything else stops dispatch here, loudly.
                            step = cl.bad_record_step(mf, pos)
                            if step is None:
                                self._stall(offset, str(exc))
                                break
                            log.warning("no CommitLog record at %d (%s); skipping the rest of its DLedger "
                                        "entry, %d bytes", offset, exc, step)  # fmt: skip
                        offset = self.reput_offset = offset + step
                        if offset >= file_end:
                            break
                        continue
                    size, queue_id, queue_offset, sys_flag, store_ts = (
                        fields[0],
                        fields[3],
                        fields[5],
                        fields[7],
                        fields[10],
                    )
                    props = decode_props(str(mm[props_at:rec_end], "utf-8", "replace")) if rec_end > props_at else {}
                    tags, keys, uniq_key = props.get(P.TAGS), props.get(P.KEYS), props.get(P.UNIQ_KEY)
                tran = sys_flag & TRANSACTION_TYPE_MASK
                tags_code = 0
                override = overrides.pop(offset, None) if overrides else None
                queued = tran not in _NOT_DISPATCHED
                if queued:
                    if override is not None:
                        tags_code = override
                    else:
                        cached = tags_codes.get(tags) if tags else 0
                        tags_code = cached if cached is not None else self.tags_code(tags)
                        if topic == SCHEDULE_TOPIC:
                            if props is None:
                                props = self._props_at(mm, pos)
                            tags_code = self._schedule_tags_code(props, store_ts, tags_code)
                    cq = qtable.get((topic, queue_id))
                    if cq is None:
                        cq = self.queues.get_or_create(topic, queue_id)
                    cq.put(queue_offset, offset, size, tags_code)
                    dirty.add(cq)
                    if len(cq.pending) > _MAX_PENDING and cq not in self.queues.failures:
                        # bound memory when flushes fall behind; durability unchanged. A queue
                        # the disk refused waits for the flush rounds, which retry it
                        with contextlib.suppress(OSError):  # logged by the queue
                            cq.drain()
                    if listener is not None:
                        arrived[cq] = (queue_offset + 1, tags_code, store_ts, props if props is not None else (mm, pos))
                if index is not None:
                    indexing.append((topic, offset, store_ts, sys_flag, keys, uniq_key))
                    if len(indexing) >= _INDEX_AFTER:  # a long pass (a replay) keeps a bounded list
                        self._index(indexing)
                offset = self.reput_offset = offset + size
                self.last_timestamp = store_ts
                done += 1
            if offset < stop:
                break  # stopped inside the file: a record not complete yet, or a stall
        if done and self.stalled is not None:
            self.stalled = None  # moved on (the bytes were rewritten: a replica resent them)
        self.dispatched_total += done
        try:
            if done and listener is not None:
                for cq, (logic_offset, tags_code, store_ts, held) in arrived.items():
                    # dispatched from what its append told: its properties read now
                    newest = self._props_at(*held) if isinstance(held, tuple) else held
                    listener.arriving(cq.topic, cq.queue_id, logic_offset, tags_code, store_ts, newest)
                after = getattr(listener, "dispatched", None)
                if after is not None:
                    after()
        finally:
            # The index comes after the listener: a pull that these records woke is answered
            # first (S4's latency; no request runs before this call returns, so a query by key
            # still finds them)
            if indexing:
                self._index(indexing)
        return done

    @staticmethod
    def _props_at(mm: Any, pos: int) -> dict[str, str]:
        """The properties of the record at ``pos`` (one dispatch already read)."""
        _, _, _, _, props_at, rec_end = parse_record(mm, pos)
        return P.decode_properties(str(mm[props_at:rec_end], "utf-8", "replace")) if rec_end > props_at else {}

    def _stall(self, offset: int, reason: str) -> None:
        reason = f"no valid CommitLog record at offset {offset}: {reason}"
        if self.stalled != reason:
            log.error("DISPATCH STOPPED: %s. Consumers see nothing stored from there on until the "
                      "record is repaired; the CommitLog is left as it is.", reason)  # fmt: skip
        self.stalled = reason

    def _index(self, records: list[tuple[str, int, int, int, str | None, str | None]]) -> None:
        """Index `records` (topic, offset, store timestamp, sysFlag, KEYS, UNIQ_KEY) and empty the
        list. Records the disk refuses wait in ``unindexed`` for the next try (``retry_index``);
        the checkpoint stays before the first of them (``index_from``)."""
        todo = self.unindexed + records if self.unindexed else records
        try:
            self.index.build_all(todo)  # type: ignore[union-attr]
        except OSError as exc:  # the records stay unindexed for now; queues matter more
            if self.index_error is None:
                log.error("cannot index the records from %d on: %s", todo[0][1], exc)
            self.index_error = f"the index cannot be written: {exc}"
            last = self.index.last_indexed  # type: ignore[union-attr]
            left = [r for r in todo if r[1] > last]
            if left and (self.index_from is None or left[0][1] < self.index_from):
                self.index_from = left[0][1]
            # beyond the bound they wait for a restart, which indexes again from index_from
            self.unindexed = left[:_MAX_UNINDEXED]
            self.index_pinned = self.index_pinned or len(left) > _MAX_UNINDEXED
        else:
            if self.index_error is not None:
                log.info("the index is written again")
            self.index_error = None
            self.unindexed = []
            if not self.index_pinned:
                self.index_from = None
        records.clear()

    def retry_index(self) -> None:
        """Index again the records the disk refused (a flush round calls this)."""
        if self.unindexed and self.index is not None:
            self._index([])
