"""Typed store configuration (MessageStoreConfig.java defaults), built once at the edge."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"  # a flusher syncs every flush_interval_commitlog ms
    SYNC_FLUSH = "SYNC_FLUSH"  # an append waits for its bytes to be synced (group commit)


@dataclass(slots=True)
class StoreConfig:
    """Store settings. Times are milliseconds unless the name says hours.

    Field names are the snake_case form of RocketMQ's ``MessageStoreConfig`` keys;
    ``from_properties`` accepts the camelCase keys of a ``broker.conf``.
    """

    store_path_root_dir: str = field(default_factory=lambda: str(Path.home() / "store"))
    store_path_commitlog: str | None = None  # default <root>/commitlog
    mapped_file_size_commitlog: int = 1 * GiB
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commitlog: int = 500
    flush_interval_consume_queue: int = 1000
    # A consume queue is synced once this many 4 KiB pages are pending, or every thorough
    # interval; recovery replays the rest from the CommitLog.
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    # Index files are synced this often (ms), not every consume queue round. A sync writes back
    # every hash slot page touched since the last one (random 4 KiB pages all over the file),
    # and write-back protects those pages again, so the next key put in each faults. RocketMQ
    # syncs an index file only once it is full; after a crash rmq indexes again from its last
    # sync, at most this long of records.
    flush_interval_index: int = 10_000
    sync_flush_timeout: int = 5000
    clean_resource_interval: int = 10_000
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"  # hours of day (local time), ";"-separated
    # RocketMQ's three levels of disk use (percent; CleanCommitLogService): above the first,
    # expired files are deleted at once, not only at delete_when; above the second, with
    # clean_file_forcibly_enable, the oldest files go whether expired or not; above the third
    # appends are refused (SERVICE_NOT_AVAILABLE) until use is below it again.
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    clean_file_forcibly_enable: bool = True
    delete_files_batch_max: int = 10  # CommitLog files deleted per retention run
    # Allocate the blocks of CommitLog and consume queue files when they are made
    # (posix_fallocate; RocketMQ's warmMapedFileEnable warms its CommitLog files): a full disk
    # then fails at the file's creation, not in the middle of it, and the files are not
    # fragmented. On ext4 every sync must also convert the reserved extents, roughly doubling
    # CommitLog sync latency. Off, the files stay sparse and are written with pwrite, where a
    # full disk is an error too. Index and checkpoint files, written through their mappings,
    # are always allocated when made (a store into an unallocated mapped block is a SIGBUS).
    warm_maped_file_enable: bool = False
    # rmq's own. SYNC_FLUSH: the sync of a request in flight alone (the loop idle since the
    # last sync) runs on the event loop, a blocking fdatasync, rather than in the kernel's or a
    # thread's hands: answered about 0.1 ms sooner here. A disk that stalls stalls the loop with
    # it for that sync; lone syncs averaging over 2 ms stop for a second at a time.
    lone_sync_inline: bool = True
    max_message_size: int = 4 * MiB
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64  # cap on query_message results
    max_transfer_bytes_on_message_in_memory: int = 256 * KiB
    max_transfer_count_on_message_in_memory: int = 32
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    # Consume queue files kept memory-mapped at once (each holds a descriptor); 0 = derived
    # from the process's open-file limit.
    max_mapped_consume_queue_files: int = 0

    @property
    def commitlog_dir(self) -> str:
        return self.store_path_commitlog or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")

    def delay_levels_ms(self) -> list[int]:
        """Delay of each level in ms; index 0 is level 1.

        Raises:
            ValueError: a level that is not a number followed by s, m, h or d.
        """
        out = []
        for item in self.message_delay_level.split():
            m = re.fullmatch(r"(\d+)([smhd])", item)
            if not m:
                raise ValueError(f"bad messageDelayLevel item {item!r}")
            out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
        return out

    def delete_hours(self) -> set[int]:
        """The hours of day named by ``delete_when``."""
        return {int(h) for h in self.delete_when.split(";") if h.strip().isdigit()}

    def validate(self) -> None:
        """Check values that would corrupt files or wedge the store.

        Raises:
            ValueError: naming the setting.
        """
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError("mapped_file_size_consume_queue must be a multiple of 20")
        if self.mapped_file_size_commitlog < 4096:
            raise ValueError("mapped_file_size_commitlog must be at least 4096")
        if not 0 < self.disk_max_used_space_ratio <= 100:
            raise ValueError("disk_max_used_space_ratio must be in 1..100")
        if not 0 < self.disk_space_clean_forcibly_ratio <= 100:
            raise ValueError("disk_space_clean_forcibly_ratio must be in 1..100")
        if not 0 < self.disk_space_warning_level_ratio <= 100:
            raise ValueError("disk_space_warning_level_ratio must be in 1..100")
        if self.max_hash_slot_num <= 0 or self.max_index_num <= 1:
            raise ValueError("max_hash_slot_num and max_index_num must be positive")
        self.delay_levels_ms()

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: object) -> StoreConfig:
        """Build from ``broker.conf``-style camelCase keys; unknown keys are ignored.

        Raises:
            ValueError: a value that does not parse as its field's type.
        """
        by_java = {_camel(f.name): f for f in dataclasses.fields(cls)}
        by_java["storePathCommitLog"] = by_java.pop("storePathCommitlog")
        by_java["mappedFileSizeCommitLog"] = by_java.pop("mappedFileSizeCommitlog")
        by_java["flushIntervalCommitLog"] = by_java.pop("flushIntervalCommitlog")
        by_java["checkCRCOnRecover"] = by_java.pop("checkCrcOnRecover")
        kwargs: dict[str, object] = {}
        for key, raw in props.items():
            f = by_java.get(key)
            if f is None:
                continue
            kwargs[f.name] = _coerce(f, raw.strip())
        kwargs.update(overrides)
        return cls(**kwargs)  # type: ignore[arg-type]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _coerce(f: dataclasses.Field, raw: str) -> object:  # type: ignore[type-arg]
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    if "FlushDiskType" in t:
        return FlushDiskType(raw)
    if t.startswith("bool"):
        return raw.lower() == "true"
    if t.startswith("int"):
        return int(raw)
    return raw
