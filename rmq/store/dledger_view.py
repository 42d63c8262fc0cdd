"""The CommitLog of a DLedger group member: a view over its DLedger data files.

As in RocketMQ's DLedgerCommitLog there is no second copy of the messages: every 4.x record
sits in the body of a DLedger entry, its CommitLog offset is its position in the data files
(entry position + 48), and consume queues, the index and reads use those offsets. Between
records there are 48-byte entry headers and, at file ends, DLedger's blanks; dispatch steps
over them (``non_record_step``).

The leader writes records in place (``reserve``): the first record after a proposal opens an
entry, the records that follow join it until the proposer seals it (or it is full), so sends
that arrive together share one entry. Followers get whole entries from the leader through the
DLedgerLog. Nothing past the last committed entry is dispatched (``dispatch_limit``).
"""

from __future__ import annotations

from collections.abc import Callable

from rmq.protocol.dledger import BODY_OFFSET, MIN_BLANK, blank_size_at, entry_size_at, first_record_at

from .commitlog import CommitLog
from .dledger_log import DLedgerLog
from .errors import StoreError
from .mapped_file import MappedFile

MAX_ENTRY_BODY = 1024 * 1024  # records per entry are bounded so that one push stays small


class DLedgerView(CommitLog):
    """A CommitLog whose files are ``dlog``'s data files (shared, not copied).

    ``on_full`` is set by the member: called when the entry being filled cannot take the next
    record, it proposes that entry and returns True, or False when it cannot propose now.
    """

    synced_elsewhere = True  # the member syncs its log; the store's flusher leaves it alone
    in_dledger_entries = True

    def __init__(self, dlog: DLedgerLog, *, max_entry_body: int = MAX_ENTRY_BODY) -> None:
        self.dlog = dlog
        self.files = dlog.data
        self.file_size = dlog.data_file_size
        self.last_store_timestamp = 0
        self.max_entry_body = max_entry_body
        self.on_full: Callable[[], bool] | None = None
        self.dispatch_limit = dlog.entry_end(min(dlog.committed_index, dlog.end_index))

    def load(self) -> None:
        """The DLedgerLog opened (and recovered) the files already."""

    def reserve(self, size: int) -> tuple[MappedFile, int]:
        """Where the leader's next record goes, inside the entry being filled.

        Raises:
            OSError: a new data file cannot be created, or the entry is full and cannot be
                proposed now (a leadership transfer holds proposals back).
        """
        dlog = self.dlog
        try:
            spot = dlog.reserve_record(size, self.max_entry_body)
            if spot is None and self.on_full is not None and self.on_full():
                spot = dlog.reserve_record(size, self.max_entry_body)
            if spot is None:  # proposals held back: let the entry grow up to its file's end
                spot = dlog.reserve_record(size, None)
        except StoreError as exc:  # the record cannot fit any entry
            raise OSError(str(exc)) from exc
        if spot is None:
            raise OSError("the DLedger entry being filled is full and cannot be proposed now")
        return spot

    def recover(self, start: int, check_crc: bool) -> int:
        """The DLedgerLog recovered its files when it opened; records past the last committed
        entry stay (the group decides about them) but are not dispatched."""
        return self.files.max_offset

    def non_record_step(self, mf: MappedFile, pos: int) -> int | None:
        """Bytes to skip at ``pos``: an entry header, or a blank (see ``blank_size_at``)."""
        if pos + MIN_BLANK > mf.size:
            return mf.size - pos
        blank = blank_size_at(mf.mm, pos)
        if blank is not None:
            return blank
        return BODY_OFFSET if entry_size_at(mf.mm, pos) is not None else None

    def bad_record_step(self, mf: MappedFile, pos: int) -> int | None:
        """To the end of the DLedger entry holding ``pos``: one bad entry body (a bare
        member's APPEND, a damaged page) costs its own records, not the rest of the file."""
        span = self.dlog.entry_span_at(mf.start + pos)
        if span is None or span[0] + BODY_OFFSET > mf.start + pos:
            return None
        return min(span[1], mf.end) - (mf.start + pos)

    def first_store_timestamp(self, mf: MappedFile) -> int | None:
        """Store time of the first record in ``mf`` (entries without records skipped)."""
        at = first_record_at(mf.mm, mf.wrote)
        return None if at is None else self.store_timestamp_at(mf.start + at)

    def delete_expired(
        self, *, now: int, reserved_ms: int, force: bool, limit_offset: int, max_files: int, why: str = ""
    ) -> tuple[int, int]:
        deleted, forced = super().delete_expired(
            now=now, reserved_ms=reserved_ms, force=force, limit_offset=limit_offset, max_files=max_files, why=why
        )
        if deleted:
            self.dlog.forget_head()
        return deleted, forced

    def close(self) -> None:
        """Close the DLedgerLog (after the store's last dispatch), its committed index saved."""
        self.dlog.close()
