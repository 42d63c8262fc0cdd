"""Read CommitLog files of a broker's store directly: plan splits, then scan one split.

Theory of operation
-------------------
A store directory holds `commitlog/<20-digit start offset>` segments (PROTOCOL.md 6).
Records are variable-length and carry no sync marker, so a reader can only start at a
known record boundary. The driver cuts each segment into byte ranges of about
`split_size` and moves every cut point to a true record start taken from the
ConsumeQueue (its 20-byte entries hold the CommitLog offset of dispatched records): the
first entry at or after the cut, in any queue, that falls before the next cut and whose
record header checks out (magic, size, and the record's own physical-offset field equal
to where it sits). A cut with no such entry is dropped and its range merges into the
previous one, so a store without ConsumeQueue files, or a tail the dispatcher has not
reached yet, is simply read from the segment start. Planning costs a few binary searches
per cut and never reads the CommitLog beyond one header per candidate.

A split [start, end) yields every record that starts inside it, walking record to record
from `start` with the store's record reader (rmq.store.records, as recovery reads them). It
stops at the end-of-file blank, or at the first record that is not valid (zeros, bad magic,
a size running past the file, a CRC mismatch, a physical-offset field that disagrees with
the position): that is where a file still being written, or left by a crashed broker, ends.
Records in a range after such a stop are not read by that split; a later split that starts
on a ConsumeQueue-attested record still reads its own range (only mid-file damage, never a
torn tail, can make that matter).

A DLedger group member (enableDLegerCommitLog) keeps its records in the bodies of DLedger
entries under `dledger-<selfId>/data/`, each record's CommitLog offset being its position
there, as RocketMQ's DLedgerCommitLog does; the scan steps over the 48-byte entry headers and
stops at DLedger's end-of-file blank (a file starting with an entry or a blank is read so),
and consume queues point into those files as usual.

Time pruning assumes store timestamps do not go back across segments, as RocketMQ's own
time lookups do: a segment is skipped when it starts at or after `until`, or when the
next segment starts before `since`. Every record is still checked against the bounds.
"""

from __future__ import annotations

import itertools
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmq.protocol.dledger import blank_size_at, entry_size_at, first_record_at
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import MessageExt, decode_record, decode_record_meta
from rmq.store.formats import CQ_ENTRY as _CQ_ENTRY
from rmq.store.formats import file_name_to_offset
from rmq.store.records import FileRecords, has_dledger_framing

DEFAULT_SPLIT_SIZE = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Segment:
    path: str
    base: int  # CommitLog offset of the file's first byte (its name)
    size: int  # file length in bytes


@dataclass(frozen=True, slots=True)
class Split:
    """Records starting in [start, end) of one segment; offsets are absolute CommitLog offsets."""

    path: str
    base: int
    start: int
    end: int


def commitlog_dir(store_dir: str | os.PathLike[str]) -> Path:
    """`<store>/commitlog`; a DLedger member's `<store>/dledger-<selfId>/data` when that is
    where its records are; or the directory itself when it already holds segments."""
    root = Path(store_dir)
    plain = root / "commitlog"
    members = sorted(d / "data" for d in root.glob("dledger-*") if (d / "data").is_dir())
    if members and not _has_segments(plain):
        return members[0]
    if plain.is_dir():
        return plain
    if _has_segments(root):
        return root
    raise FileNotFoundError(f"no CommitLog under {root} (expected {plain})")


def _has_segments(directory: Path) -> bool:
    return directory.is_dir() and any(_is_segment_name(p.name) for p in directory.iterdir())


def _is_segment_name(name: str) -> bool:
    return file_name_to_offset(name) is not None


def list_segments(store_dir: str | os.PathLike[str]) -> list[Segment]:
    """The CommitLog segments of a store, in offset order; empty files are left out."""
    cl = commitlog_dir(store_dir)
    out = []
    for p in cl.iterdir():
        if _is_segment_name(p.name) and p.is_file():
            size = p.stat().st_size
            if size:
                out.append(Segment(str(p), int(p.name), size))
    return sorted(out, key=lambda s: s.base)


def _open(path: str) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def first_store_timestamp(seg: Segment) -> int | None:
    """Store time of the segment's first record, or None if it holds none yet."""
    with _open(seg.path) as mm:
        # DLedger data: the first record is in the first entry that holds one
        dledger = entry_size_at(mm, 0) is not None or blank_size_at(mm, 0) is not None
        pos = first_record_at(mm, len(mm)) if dledger else 0
        if pos is None:
            return None
        try:
            return decode_record_meta(mm, pos).store_timestamp
        except ProtocolError:
            return None


class ConsumeQueueIndex:
    """Record boundaries from a store's ConsumeQueue files, for moving split points."""

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        root = Path(store_dir) / "consumequeue"
        self._queues: list[list[Path]] = []
        if root.is_dir():
            for topic in sorted(root.iterdir()):
                for queue in sorted(topic.iterdir()) if topic.is_dir() else ():
                    files = sorted(p for p in queue.iterdir() if _is_segment_name(p.name))
                    if files:
                        self._queues.append(files)
        self._ranges: dict[Path, tuple[int, int, int]] = {}  # file → (entries, first, last offset)

    def _range(self, path: Path) -> tuple[int, int, int]:
        cached = self._ranges.get(path)
        if cached is None:
            cached = (0, 0, -1)
            if path.stat().st_size >= _CQ_ENTRY.size:
                with _open(str(path)) as data:
                    n = _written_entries(data)
                    if n:
                        first = _CQ_ENTRY.unpack_from(data, 0)[0]
                        cached = (n, first, _CQ_ENTRY.unpack_from(data, (n - 1) * _CQ_ENTRY.size)[0])
            self._ranges[path] = cached
        return cached

    def boundary(self, lo: int, hi: int, seg: Segment, mm: mmap.mmap) -> int | None:
        """A verified record start in [lo, hi) of `seg`, or None."""
        for files in self._queues:
            for path in files:
                n, first, last = self._range(path)
                if n == 0 or last < lo:
                    continue
                if first >= hi:
                    break
                cand = _first_at_or_after(path, n, lo)
                if cand is not None and cand < hi and _is_record_at(mm, seg, cand):
                    return cand
                break
        return None


def _written_entries(data: mmap.mmap) -> int:
    """Entries before the zero-filled tail of a preallocated ConsumeQueue file."""
    lo, hi = 0, len(data) // _CQ_ENTRY.size
    while lo < hi:  # first entry whose size field is 0
        mid = (lo + hi) // 2
        if _CQ_ENTRY.unpack_from(data, mid * _CQ_ENTRY.size)[1] != 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _first_at_or_after(path: Path, n: int, target: int) -> int | None:
    with _open(str(path)) as data:
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if _CQ_ENTRY.unpack_from(data, mid * _CQ_ENTRY.size)[0] < target:
                lo = mid + 1
            else:
                hi = mid
        return _CQ_ENTRY.unpack_from(data, lo * _CQ_ENTRY.size)[0] if lo < n else None


def _is_record_at(mm: mmap.mmap, seg: Segment, offset: int) -> bool:
    first = next(iter(FileRecords(mm, seg.base, offset, dledger=has_dledger_framing(mm))), None)
    return first is not None and first.commitlog_offset == offset


def plan_splits(
    store_dir: str | os.PathLike[str],
    split_size: int = DEFAULT_SPLIT_SIZE,
    since_ms: int | None = None,
    until_ms: int | None = None,
) -> list[Split]:
    """Cut the store's segments into record-aligned splits (see the module docstring)."""
    if split_size <= 0:
        raise ValueError(f"split size must be positive, got {split_size}")
    segments = list_segments(store_dir)
    firsts = [first_store_timestamp(s) for s in segments] if since_ms is not None or until_ms is not None else []
    cq = ConsumeQueueIndex(store_dir)
    splits: list[Split] = []
    for i, seg in enumerate(segments):
        if firsts:
            first = firsts[i]
            nxt = firsts[i + 1] if i + 1 < len(firsts) else None
            if first is None or (until_ms is not None and first >= until_ms):
                continue
            if since_ms is not None and nxt is not None and nxt < since_ms:
                continue
        bounds = [seg.base]
        end = seg.base + seg.size
        with _open(seg.path) as mm:
            cut = seg.base + split_size
            while cut < end:
                b = cq.boundary(cut, min(cut + split_size, end), seg, mm)
                if b is not None and b > bounds[-1]:
                    bounds.append(b)
                cut += split_size
        bounds.append(end)
        splits.extend(Split(seg.path, seg.base, a, b) for a, b in itertools.pairwise(bounds))
    return splits


def scan_split(
    split: Split,
    *,
    topics: frozenset[str] | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    check_crc: bool = True,
) -> Iterator[MessageExt]:
    """Valid records starting in the split, filtered by topic and [since, until) store time."""
    with _open(split.path) as mm:
        records = FileRecords(
            mm, split.base, split.start, end=split.end, dledger=has_dledger_framing(mm), check_crc=check_crc
        )
        if topics is None and since_ms is None and until_ms is None:
            yield from records.messages()
            return
        for meta in records:
            ts = meta.store_timestamp
            if (
                (topics is not None and meta.topic not in topics)
                or (since_ms is not None and ts < since_ms)
                or (until_ms is not None and ts >= until_ms)
            ):
                continue
            yield decode_record(mm, meta.commitlog_offset - split.base)[0]
