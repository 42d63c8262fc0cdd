"""Read-only walks over a stopped member's store, for the checker: its log (DLedger entries
or CommitLog records) and its consume queues, straight from the files."""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rmq.protocol import javaprops
from rmq.protocol.dledger import BODY_OFFSET, MIN_BLANK, blank_size_at, decode_entry_header
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    decode_record,
    decode_record_meta,
)
from rmq.store import iter_commitlog
from rmq.store.formats import CQ_ENTRY, CQ_ENTRY_SIZE, file_name_to_offset, offset_to_file_name

_CQ_BLANK_SIZE = 0x7FFFFFFF  # a padding entry at the head of a queue


@dataclass(frozen=True)
class Entry:
    """One DLedger entry as its data file holds it, header and body."""

    index: int
    term: int
    pos: int
    raw: bytes

    def records(self) -> Iterator[tuple[int, bytes]]:
        """(CommitLog offset, record) for every 4.x record in the body (none in a no-op)."""
        at = BODY_OFFSET
        while at + 8 <= len(self.raw):
            length = int.from_bytes(self.raw[at : at + 4], "big", signed=True)
            if length < 8 or at + length > len(self.raw):
                return
            yield self.pos + at, self.raw[at : at + length]
            at += length


def dledger_dir(store: Path) -> Path:
    (member,) = store.glob("dledger-*")
    return member


def dledger_entries(store: Path) -> list[Entry]:
    """Every entry of the member's data files, in order, up to the first that is not valid
    where it stands (the unwritten or torn tail)."""
    data_dir = dledger_dir(store) / "data"
    entries: list[Entry] = []
    for name in sorted(n for n in os.listdir(data_dir) if file_name_to_offset(n) is not None):
        base = int(name)
        data = (data_dir / name).read_bytes()
        pos = 0
        while pos + MIN_BLANK <= len(data):
            blank = blank_size_at(data, pos)
            if blank is not None:
                pos += blank
                continue
            try:
                h = decode_entry_header(data, pos)
            except ProtocolError:
                return entries
            if h.pos != base + pos or pos + h.size > len(data):
                return entries
            if entries and h.index != entries[-1].index + 1:
                return entries
            entries.append(Entry(h.index, h.term, h.pos, data[pos : pos + h.size]))
            pos += h.size
    return entries


def dledger_committed(store: Path) -> int:
    """The committed index the member's checkpoint file holds (-1 without one)."""
    try:
        text = (dledger_dir(store) / "checkpoint").read_text()
    except OSError:
        return -1
    return int(dict(javaprops.parse(text)).get("committedIndex", "-1") or -1)


def commitlog_records(store: Path) -> list[tuple[int, bytes]]:
    directory = store / "commitlog"
    if not directory.is_dir():
        return []
    return list(iter_commitlog(str(directory)))


def commitlog_bytes(store: Path, start: int, end: int) -> bytes:
    """CommitLog bytes in [start, end) as the files hold them."""
    directory = store / "commitlog"
    out = bytearray()
    for name in sorted(n for n in os.listdir(directory) if file_name_to_offset(n) is not None):
        base = int(name)
        size = os.path.getsize(directory / name)
        if base + size <= start or base >= end:
            continue
        with open(directory / name, "rb") as f:
            f.seek(max(start, base) - base)
            out += f.read(min(end, base + size) - max(start, base))
    return bytes(out)


def span(records: list[tuple[int, bytes]]) -> tuple[int, int]:
    """[first offset, end offset) of a run of records; (0, 0) when there are none."""
    return (records[0][0], records[-1][0] + len(records[-1][1])) if records else (0, 0)


def attempts_in(records: Iterable[tuple[int, bytes]], prop: str) -> dict[str, list[int]]:
    """Where each record with property ``prop`` is stored: its value -> [CommitLog offsets]."""
    where: dict[str, list[int]] = collections.defaultdict(list)
    for offset, record in records:
        value = decode_record(record)[0].properties.get(prop)
        if value is not None:
            where[value].append(offset)
    return where


# -- agreement between members ---------------------------------------------------------------


def dledger_divergence(logs: dict[str, list[Entry]], committed: int, held_by_all: int | None = None) -> list[str]:
    """Members whose entries differ from the longest log's at an index both hold, that hold
    fewer entries than ``held_by_all`` (default ``committed``), or a ``committed`` index that
    no majority holds.

    ``held_by_all`` is what the group had committed while every member ran. Members stopped
    one after another: the ones still running may elect a leader whose first (no-op) entry
    they commit without the member already stopped, so such entries need only a majority.
    """
    problems = []
    longest = max(logs.values(), key=len)
    by_index = {e.index: e for e in longest}
    everyone = committed if held_by_all is None else held_by_all
    holders = sum(1 for log in logs.values() if log and log[-1].index >= committed)
    if holders <= len(logs) // 2:
        problems.append(f"only {holders} of {len(logs)} members hold the committed index {committed}")
    for name, log in logs.items():
        end = log[-1].index if log else -1
        if end < everyone:
            problems.append(f"{name} holds entries to {end}, the group committed to {everyone}")
        for e in log:
            other = by_index.get(e.index)
            if other is not None and other != e:
                problems.append(f"{name} differs from the longest log at index {e.index}: term {e.term} pos {e.pos}, "
                                f"there term {other.term} pos {other.pos}")  # fmt: skip
                break
    return problems


def prefix_divergence(master: Path, slave: Path) -> list[str]:
    """How the slave's CommitLog fails to be a byte-identical prefix of the master's (from
    the slave's first record on: a new slave starts at the master's last file)."""
    (m_start, m_end), (s_start, s_end) = span(commitlog_records(master)), span(commitlog_records(slave))
    problems = []
    if s_end > m_end:
        problems.append(f"the slave's CommitLog ends at {s_end}, past the master's {m_end}")
    start, end = max(m_start, s_start), min(m_end, s_end)
    if end > start and commitlog_bytes(slave, start, end) != commitlog_bytes(master, start, end):
        problems.append(f"the slave's CommitLog differs from the master's in [{start}, {end})")
    return problems


# -- consume queues ------------------------------------------------------------------------


class QueueFiles:
    """One consume queue's files: entry n at byte n * 20 of the logical queue."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        names = sorted(n for n in os.listdir(directory) if file_name_to_offset(n) is not None)
        self.file_size = os.path.getsize(directory / names[0]) if names else 0
        self._cache: dict[int, bytes] = {}

    def entry(self, n: int) -> tuple[int, int, int] | None:
        """(CommitLog offset, size, tags code) of entry ``n``; None when it is not written."""
        if not self.file_size:
            return None
        byte = n * CQ_ENTRY_SIZE
        base = byte - byte % self.file_size
        data = self._cache.get(base)
        if data is None:
            try:
                data = (self.directory / offset_to_file_name(base)).read_bytes()
            except OSError:
                data = b""
            self._cache[base] = data
        rel = byte - base
        if rel + CQ_ENTRY_SIZE > len(data):
            return None
        phy, size, tags = CQ_ENTRY.unpack_from(data, rel)
        return None if size == 0 else (phy, size, tags)

    def written(self) -> Iterator[tuple[int, tuple[int, int, int]]]:
        """(n, entry) for every entry up to the first unwritten one, blanks left out."""
        n = 0
        while (e := self.entry(n)) is not None:
            if e[1] != _CQ_BLANK_SIZE:
                yield n, e
            n += 1


def queue_problems(store: Path, records: Iterable[tuple[int, bytes]], *, upto: int | None, label: str) -> list[str]:
    """What is wrong with the consume queues of ``store`` against ``records`` (its log): a
    record below CommitLog offset ``upto`` (None: any) without the entry its queue offset
    names, or with one that points elsewhere; and an entry that points at no record of the
    log, or at one of another queue or queue offset."""
    problems: list[str] = []
    queues: dict[tuple[str, int], QueueFiles] = {}
    by_offset: dict[int, tuple[str, int, int, int]] = {}
    root = store / "consumequeue"

    def files(topic: str, queue_id: int) -> QueueFiles | None:
        key = (topic, queue_id)
        if key not in queues:
            directory = root / topic / str(queue_id)
            if not directory.is_dir():
                return None
            queues[key] = QueueFiles(directory)
        return queues[key]

    missing = 0
    for offset, record in records:
        meta = decode_record_meta(record)
        if meta.sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            continue
        by_offset[offset] = (meta.topic, meta.queue_id, meta.queue_offset, meta.size)
        if upto is not None and offset >= upto:
            continue
        q = files(meta.topic, meta.queue_id)
        entry = q.entry(meta.queue_offset) if q is not None else None
        if entry is None or entry[:2] != (offset, meta.size):
            missing += 1
            if missing <= 5:
                problems.append(
                    f"{label}: record at {offset} ({meta.topic}/{meta.queue_id} #{meta.queue_offset}) has "
                    f"{'no consume queue entry' if entry is None else f'entry {entry[:2]}'}"
                )
    if missing > 5:
        problems.append(f"{label}: {missing} records in all without their consume queue entry")
    if not root.is_dir():
        return problems
    stray = 0
    for topic_dir in sorted(root.iterdir()):
        for queue_dir in sorted(topic_dir.iterdir()):
            q = files(topic_dir.name, int(queue_dir.name))
            assert q is not None
            for n, (phy, size, _) in q.written():
                if by_offset.get(phy) != (topic_dir.name, int(queue_dir.name), n, size):
                    stray += 1
                    if stray <= 5:
                        problems.append(f"{label}: {topic_dir.name}/{queue_dir.name} #{n} points at {phy} ({size} B), "
                                        f"which holds {by_offset.get(phy)}")  # fmt: skip
    if stray > 5:
        problems.append(f"{label}: {stray} consume queue entries in all point at no record of theirs")
    return problems
