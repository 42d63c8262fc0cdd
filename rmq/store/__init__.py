"""The message store: CommitLog, consume queues and index files, byte-compatible with
RocketMQ 4.x. Synchronous; ``rmq.store.aio`` adds the Trio services (imported explicitly, so
importing this package never imports trio)."""

from rmq.protocol.constants import SCHEDULE_TOPIC as SCHEDULE_TOPIC
from rmq.protocol.message import MessageDraft as MessageDraft
from rmq.protocol.message import redraft as redraft

from .append import IllegalBatch as IllegalBatch
from .append import batch_drafts as batch_drafts
from .config import FlushDiskType as FlushDiskType
from .config import StoreConfig as StoreConfig
from .dispatch import ArrivalListener as ArrivalListener
from .errors import StoreError as StoreError
from .errors import StoreLockedError as StoreLockedError
from .flush import FlushPlan as FlushPlan
from .message_store import MessageStore as MessageStore
from .message_store import wall_clock_ms as wall_clock_ms
from .records import FileRecords as FileRecords
from .records import iter_commitlog as iter_commitlog
from .results import GetMessageResult as GetMessageResult
from .results import GetMessageStatus as GetMessageStatus
from .results import PutMessageResult as PutMessageResult
from .results import PutMessageStatus as PutMessageStatus
from .results import QueryMessageResult as QueryMessageResult
from .results import RetentionResult as RetentionResult
from .results import StoreStats as StoreStats
from .space import disk_used_ratio as disk_used_ratio

__all__ = [
    "SCHEDULE_TOPIC",
    "ArrivalListener",
    "FileRecords",
    "FlushDiskType",
    "FlushPlan",
    "GetMessageResult",
    "GetMessageStatus",
    "IllegalBatch",
    "MessageDraft",
    "MessageStore",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "RetentionResult",
    "StoreConfig",
    "StoreError",
    "StoreLockedError",
    "StoreStats",
    "batch_drafts",
    "disk_used_ratio",
    "iter_commitlog",
    "redraft",
    "wall_clock_ms",
]
