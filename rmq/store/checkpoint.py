"""The ``checkpoint`` file: how far each part of the store is known to be durable.

Bytes 0-23 are RocketMQ's three timestamps (4.x; 5.x adds two offsets at 24 and 32, kept as
read). rmq also writes, at byte 64 after a magic, the CommitLog offsets below which the
CommitLog, the consume queues and the index are durable, so recovery knows exactly where to
start without trusting clocks. Java brokers ignore those bytes; when they are absent (a store
last written by Java) recovery falls back to the timestamps.

Values are only ever written after the data they describe has been synced, so a stale
checkpoint makes recovery replay more, never less.
"""

from __future__ import annotations

import logging

from .formats import (
    CHECKPOINT,
    CHECKPOINT_FILE_SIZE,
    CHECKPOINT_RMQ,
    CHECKPOINT_RMQ_MAGIC,
    CHECKPOINT_RMQ_OFFSET,
)
from .mapped_file import MappedFile

log = logging.getLogger("rmq.store.checkpoint")
# RocketMQ subtracts this from the timestamps before choosing where to recover from.
_TIMESTAMP_SLACK_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        # written through its mapping: its block is allocated first (no SIGBUS on a full disk)
        self.mf = MappedFile(path, 0, CHECKPOINT_FILE_SIZE, preallocate=True)
        self.mf.wrote = CHECKPOINT_FILE_SIZE
        mm = self.mf.mm
        self.physic_msg_timestamp: int
        self.logics_msg_timestamp: int
        self.index_msg_timestamp: int
        self.master_flushed_offset: int
        self.confirm_phy_offset: int
        (
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        ) = CHECKPOINT.unpack_from(mm, 0)
        magic, physic, logics, index = CHECKPOINT_RMQ.unpack_from(mm, CHECKPOINT_RMQ_OFFSET)
        self.has_offsets = magic == CHECKPOINT_RMQ_MAGIC
        self.physic_offset = physic if self.has_offsets else 0
        self.logics_offset = logics if self.has_offsets else 0
        self.index_offset = index if self.has_offsets else 0

    def min_timestamp(self) -> int:
        """RocketMQ's recovery bound without the index: min(physic, logics) minus slack."""
        return min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _TIMESTAMP_SLACK_MS

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def write(self) -> None:
        """Put the current values into the mapping (``sync`` makes them durable). Skipped while
        the file's block cannot be allocated: an old checkpoint only makes recovery replay
        more."""
        try:
            self.mf.ensure_allocated()
        except OSError as exc:
            log.warning("cannot write the checkpoint: %s", exc)
            return
        mm = self.mf.mm
        CHECKPOINT.pack_into(
            mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
            self.master_flushed_offset, self.confirm_phy_offset,
        )  # fmt: skip
        CHECKPOINT_RMQ.pack_into(
            mm, CHECKPOINT_RMQ_OFFSET, CHECKPOINT_RMQ_MAGIC, self.physic_offset, self.logics_offset,
            self.index_offset,
        )  # fmt: skip
        self.has_offsets = True

    def sync(self) -> None:
        """Make the written values durable; safe from a worker thread."""
        self.mf.sync(CHECKPOINT_FILE_SIZE, begin=0)

    def close(self) -> None:
        self.mf.close()
