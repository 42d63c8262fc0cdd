"""Reading: consume queue lookups, records by queue offset, CommitLog offset, time or key
(the read half of DefaultMessageStore). Nothing here writes; every answer describes what the
consume queues and the CommitLog hold at the call.
"""

from __future__ import annotations

from rmq.protocol import properties as P
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import MessageExt, decode_record, decode_record_meta

from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue, ConsumeQueueTable
from .formats import CQ_ENTRY, CQ_ENTRY_SIZE
from .index import IndexService
from .results import GetMessageResult, GetMessageStatus, QueryMessageResult, StoreStats

_BLANK_ENTRY_SIZE = 0x7FFFFFFF


def _int32(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class Reader:
    """Reads of a store's consume queues, CommitLog and index; the store facade delegates here."""

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        stats: StoreStats,
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self._stats = stats

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
