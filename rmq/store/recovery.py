"""Where recovery starts: CommitLog validation and dispatch replay (PROTOCOL.md 6.3).

With rmq's checkpoint offsets the answer is exact. For a store last written by a Java broker
(timestamps only) RocketMQ's rules apply: after a crash, the newest file whose first record is
not newer than the checkpoint times; after a clean shutdown, the third-newest file.
"""

from __future__ import annotations

from .checkpoint import StoreCheckpoint
from .commitlog import CommitLog
from .consume_queue import ConsumeQueueTable


def validation_start(checkpoint: StoreCheckpoint, commitlog: CommitLog, crashed: bool, index_enabled: bool) -> int:
    """Offset from which CommitLog records are re-checked (a file start)."""
    files = commitlog.files.files
    if not files:
        return 0
    if checkpoint.has_offsets:
        # The file holding the last record known synced: re-checking it also catches a tail
        # that was damaged after it was synced.
        at = min(max(checkpoint.physic_offset - 1, files[0].start), files[-1].start)
        return at - (at - files[0].start) % commitlog.file_size
    if crashed:
        bound = checkpoint.min_timestamp_index() if index_enabled else checkpoint.min_timestamp()
        return commitlog.file_start_before(bound)
    return files[max(0, len(files) - 3)].start


def replay_start(
    checkpoint: StoreCheckpoint,
    commitlog: CommitLog,
    queues: ConsumeQueueTable,
    crashed: bool,
    index_enabled: bool,
    end: int,
) -> int:
    """Lowest offset whose consume queue or index entries may be missing on disk."""
    low = commitlog.min_offset
    if checkpoint.has_offsets:
        start = checkpoint.logics_offset
        if index_enabled:
            start = min(start, checkpoint.index_offset)
    elif crashed:
        start = validation_start(checkpoint, commitlog, crashed, index_enabled)
    else:
        start = max((cq.max_phy_end for cq in queues.queues.values()), default=low)
    return min(max(start, low), end)
