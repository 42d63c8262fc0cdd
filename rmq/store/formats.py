"""Precompiled layouts of the store's own files (PROTOCOL.md 6); the record layout is in
``rmq.protocol.message``. ``rmq.protocol.schema`` declares the same formats with construct and
the tests check that both agree.
"""

from __future__ import annotations

import struct
import time

from rmq.protocol.message import BLANK_MAGIC_CODE

# consumequeue/<topic>/<queueId>/<offset>
CQ_ENTRY = struct.Struct(
    ">"
    "q"  # CommitLog offset of the record
    "i"  # record size
    "q"  # tags code: Java hash of TAGS, or delivery time in SCHEDULE_TOPIC_XXXX
)
CQ_ENTRY_SIZE = CQ_ENTRY.size  # 20
# Entry used to pad the head of a queue whose first file does not start at offset 0.
CQ_BLANK_ENTRY = CQ_ENTRY.pack(0, 0x7FFFFFFF, 0)

# index/<yyyyMMddHHmmssSSS>
INDEX_HEADER = struct.Struct(
    ">"
    "q"  # begin timestamp (store time of the first entry)
    "q"  # end timestamp
    "q"  # begin physical offset
    "q"  # end physical offset
    "i"  # hash slots in use
    "i"  # index count, starting at 1 (entry 0 is never used)
)
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
INDEX_SLOT = struct.Struct(">i")  # newest entry number of the slot, 0 = empty
INDEX_SLOT_SIZE = INDEX_SLOT.size  # 4
INDEX_ENTRY = struct.Struct(
    ">"
    "i"  # key hash: abs(Java hash of "topic#key"), MIN_VALUE -> 0
    "q"  # physical offset
    "i"  # seconds since the header's begin timestamp
    "i"  # previous entry in the slot's chain, 0 = end
)
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20

# checkpoint: RocketMQ 4.x uses bytes 0-23, 5.x adds 24-39. rmq also keeps, at 64, the
# CommitLog offsets covered by durable data (exact recovery without trusting the clock).
CHECKPOINT_FILE_SIZE = 4096
CHECKPOINT = struct.Struct(
    ">"
    "q"  # physic msg timestamp: store time of the last flushed CommitLog record
    "q"  # logics msg timestamp: same for consume queues
    "q"  # index msg timestamp
    "q"  # master flushed offset (5.x)
    "q"  # confirm phy offset (5.x)
)
CHECKPOINT_RMQ_OFFSET = 64
CHECKPOINT_RMQ_MAGIC = b"RMQCKPT1"
CHECKPOINT_RMQ = struct.Struct(
    ">"
    "8s"  # magic RMQCKPT1: the fields below are valid
    "q"  # physic offset: CommitLog bytes below it are flushed
    "q"  # logics offset: records below it have durable consume queue entries
    "q"  # index offset: records below it have durable index entries
)

# End-of-file blank: [remaining][BLANK_MAGIC_CODE], the rest of the file is unused.
BLANK = struct.Struct(">iI")
END_FILE_MIN_BLANK_LENGTH = BLANK.size  # 8
BLANK_MAGIC = BLANK_MAGIC_CODE


def offset_to_file_name(offset: int) -> str:
    """CommitLog and consume queue files are named by their start offset, 20 digits."""
    return f"{offset:020d}"


def file_name_to_offset(name: str) -> int | None:
    """The start offset encoded in a file name, or None when it is not one of ours."""
    if len(name) != 20 or not name.isdigit():
        return None
    return int(name)


def index_file_name(millis: int) -> str:
    """Index files are named by creation time, local time, ``yyyyMMddHHmmssSSS``."""
    t = time.localtime(millis // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{millis % 1000:03d}"
