"""Disk space: RocketMQ's three levels of disk use, the refusals of appends, and retention.

Above ``disk_max_used_space_ratio`` retention deletes expired CommitLog files at once, not only
at ``delete_when``; above ``disk_space_clean_forcibly_ratio`` (with ``clean_file_forcibly_enable``)
also files not expired; above ``disk_space_warning_level_ratio`` appends are refused. Appends
measure the disk at most once a second (``CHECK_MS``); a CommitLog write the disk refuses
refuses appends until the next measurement; so does a consume queue or index write that fails
(their entries wait in memory).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable

from .commitlog import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueueTable
from .dispatch import Dispatcher
from .index import IndexService
from .results import RetentionResult, StoreStats

log = logging.getLogger("rmq.store")

CHECK_MS = 1000  # appends measure the disk at most this often
_MANUAL_DELETE_ROUNDS = 20  # retention rounds a manual delete covers (RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES)


def disk_used_ratio(path: str) -> float:
    """Fraction (0..1) of the filesystem holding ``path`` that is in use: the default
    disk-usage probe."""
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) / usage.total if usage.total else 0.0


class DiskSpace:
    """The store's disk: why appends are refused (``refusal``), and retention rounds."""

    def __init__(
        self,
        config: StoreConfig,
        clock: Callable[[], int],
        disk_usage: Callable[[str], float],
        commitlog: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService | None,
        dispatcher: Dispatcher,
        stats: StoreStats,
    ) -> None:
        self.config = config
        self.clock = clock
        self._disk_usage = disk_usage
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.dispatcher = dispatcher
        self._stats = stats
        self.refusal: str | None = None  # why appends are refused, when they are (update_refusal)
        self._disk_refusal: str | None = None  # the disk is above the warning level (check)
        self._write_refusal: str | None = None  # the disk refused a CommitLog write (until check)
        self.checked_at = 0  # store clock of the last measurement
        self._manual_rounds = 0  # retention rounds left that a manual delete asked for
        self.last_ratio = 0.0  # last measurement (runtime info: commitLogDiskRatio)
        self.held: str | None = None  # why appends wait for a change of the files (hold)

    def check(self) -> float:
        """Measure disk use (the CommitLog's disk, and the store root's if it is elsewhere):
        above ``disk_space_warning_level_ratio`` appends are refused (RocketMQ's disk-full
        flag), below it they are taken again; a refusal after the disk refused a CommitLog
        write is lifted too, so the next append tries again. Returns the used fraction."""
        cfg = self.config
        self.checked_at = self.clock()
        where = cfg.commitlog_dir
        ratio = self._disk_usage(where)
        if cfg.store_path_commitlog and (root := self._disk_usage(cfg.store_path_root_dir)) > ratio:
            where, ratio = cfg.store_path_root_dir, root
        self.last_ratio = ratio
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
        self.update_refusal()
        return ratio

    def refuse_writes(self, what: str, exc: OSError) -> str:
        """The disk had no space for a CommitLog write or file: appends are refused until the
        next measurement (a second at most) lets one try again. Returns why."""
        if self._write_refusal is None:
            log.error("%s: %s; refusing writes", what, exc)
        self._write_refusal = f"disk full: {what}: {exc}; writes are refused until there is space"
        self.update_refusal()
        return self._write_refusal

    def update_refusal(self) -> None:
        """Appends are refused while the disk is full, and while a consume queue or the index
        cannot be written (RocketMQ's logics and index errors): the entries wait in memory,
        and the CommitLog must not run further ahead of them."""
        why = self.held or self._disk_refusal or self._write_refusal
        if why is None:
            failures = self.queues.failures
            derived = next(iter(failures.values())) if failures else self.dispatcher.index_error
            if derived is not None:
                why = f"{derived}; writes are refused until it can"
        self.refusal = why

    def hold(self, why: str) -> None:
        """Refuse appends (SERVICE_NOT_AVAILABLE, ``why``) and replica appends (StoreError)
        until ``release``: the files are about to change under them (a truncation)."""
        self.held = why
        self.update_refusal()

    def release(self) -> None:
        self.held = None
        self.update_refusal()

    def run_retention(self, *, force: bool = False) -> RetentionResult:
        """One retention round: see ``MessageStore.run_retention``."""
        cfg = self.config
        now = self.clock()
        ratio = self.check()
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
        result.consume_queue_files_deleted, result.index_files_deleted = self.drop_below(self.commitlog.min_offset)
        if deleted:
            self.check()
        elif above:
            log.warning(
                "disk %.1f%% used, above diskMaxUsedSpaceRatio=%d%%, and no CommitLog file could be deleted%s",
                used, cfg.disk_max_used_space_ratio,
                "" if forcibly else " (none has expired; cleanFileForciblyEnable or a higher level deletes others)",
            )  # fmt: skip
        return result

    def delete_expired_manually(self) -> RetentionResult:
        """Expired files go now and in the next rounds (20 in all) whatever the hour; see
        ``MessageStore.delete_expired_manually``."""
        self._manual_rounds = _MANUAL_DELETE_ROUNDS
        return self.run_retention()

    def drop_below(self, min_phy: int) -> tuple[int, int]:
        """Delete consume queue and index files (and move queue heads) pointing only below
        ``min_phy``; returns how many consume queue and index files went."""
        queues = sum(cq.delete_expired(min_phy) for cq in list(self.queues.queues.values()))
        return queues, self.index.delete_expired(min_phy) if self.index is not None else 0
