"""What store operations return: statuses named as in RocketMQ, and small result records."""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field


class PutMessageStatus(enum.Enum):
    """Outcome of an append (PutMessageStatus.java). The first four mean "stored"."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, not yet durable within sync_flush_timeout
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # closed; disk full; a derived file cannot be written
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """True when the message is in the CommitLog (and will be consumable)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(slots=True)
class PutMessageResult:
    """Result of ``put`` / ``put_many``.

    For ``put_many``, ``msg_id`` is the comma-joined offset ids of all records, ``queue_offset``
    the first record's queue offset and ``wrote_bytes`` the total size.
    """

    status: PutMessageStatus
    remark: str = ""
    wrote_offset: int = -1  # CommitLog offset of the (first) record
    wrote_bytes: int = 0
    msg_id: str = ""  # offset message id(s)
    queue_offset: int = 0
    store_timestamp: int = 0
    msg_num: int = 0
    queue_offsets: Sequence[int] = ()  # put_many: each record's queue offset, in order

    @property
    def ok(self) -> bool:
        return self.status.stored

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the written bytes: what a sync flush must reach."""
        return self.wrote_offset + self.wrote_bytes


class GetMessageStatus(enum.Enum):
    """Outcome of a read by queue offset (GetMessageStatus.java); PROTOCOL.md 3.2 maps them to
    pull response codes."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """Records selected by ``get_message``: ``records[i]`` is the raw stored record (a pull
    body is ``b"".join(records)``), ``queue_offsets[i]`` its queue offset."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.records)

    @property
    def body(self) -> bytes:
        """The concatenated records, byte for byte as stored."""
        return b"".join(self.records)


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by key (newest first) plus the index's last update, which QUERY_MESSAGE
    returns in its response header."""

    records: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0

    @property
    def body(self) -> bytes:
        return b"".join(self.records)


# StoreStatsService's putMessageDistributeTime buckets: a put of v ms counts in the first
# bucket whose bound is above v (bisect_right), the last one being "10 s or more"
PUT_TIME_BOUNDS_MS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
PUT_TIME_NAMES = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)  # fmt: skip


@dataclass(slots=True)
class StoreStats:
    """Counters for runtime info (GET_BROKER_RUNTIME_INFO)."""

    put_message_entire_time_max: int = 0  # ms, the longest append
    put_message_distribute_time: list[int] = field(default_factory=lambda: [0] * len(PUT_TIME_NAMES))
    put_message_times_total: int = 0
    put_message_size_total: int = 0
    put_message_failed_times: int = 0
    commitlog_files_deleted: int = 0  # by retention, expired or not
    commitlog_files_deleted_unexpired: int = 0  # by retention above the force-clean level
    put_message_times_by_topic: dict[str, int] = field(default_factory=dict)
    get_message_times_total_found: int = 0
    get_message_times_total_miss: int = 0
    get_message_transferred_msg_count: int = 0
    dispatched_total: int = 0

    def record_put_time(self, elapsed_ms: int) -> None:
        """An append took `elapsed_ms` (StoreStatsService.setPutMessageEntireTimeMax)."""
        self.put_message_distribute_time[bisect_right(PUT_TIME_BOUNDS_MS, elapsed_ms)] += 1
        if elapsed_ms > self.put_message_entire_time_max:
            self.put_message_entire_time_max = elapsed_ms

    def put_distribute_text(self) -> str:
        """putMessageDistributeTime as Java prints it: "[<=0ms]:5 [0~10ms]:1 ... " """
        return "".join(f"{name}:{n} " for name, n in zip(PUT_TIME_NAMES, self.put_message_distribute_time, strict=True))

    def put_latency(self, fraction: float) -> float:
        """Milliseconds below which `fraction` of the appends took (putLatency99 / 999), to
        the bound of the putMessageDistributeTime bucket it falls in."""
        total = sum(self.put_message_distribute_time)
        if not total:
            return 0.0
        seen = 0
        bucket = 0
        while bucket < len(PUT_TIME_NAMES) - 1:
            seen += self.put_message_distribute_time[bucket]
            if seen >= total * fraction:
                break
            bucket += 1
        # bucket 0 holds 0 ms; bucket i ends at PUT_TIME_BOUNDS_MS[i]; the last one is open
        return 0.0 if bucket == 0 else float(PUT_TIME_BOUNDS_MS[min(bucket, len(PUT_TIME_BOUNDS_MS) - 1)])


@dataclass(slots=True)
class RetentionResult:
    """What one retention round deleted, and the disk use it measured."""

    commitlog_files_deleted: int = 0
    commitlog_files_unexpired: int = 0  # of those, files deleted before they expired
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    disk_used_ratio: float = 0.0
