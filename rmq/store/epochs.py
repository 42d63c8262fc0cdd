"""The epoch file of controller mode (RocketMQ's EpochFileCache over a CheckpointFile).

Each entry says a master epoch began at a CommitLog offset; an epoch ends where the next
begins (the last one at the log's end). Two logs agree up to the end of the newest epoch
they both have with the same start (``consistent_point``).

File: ``count\\ncrc32\\nepoch-start\\n...``, the CRC32 over the entry lines, written to a
temp file then renamed, the previous version kept as ``.bak`` and read when the file is
missing or damaged, as RocketMQ's CheckpointFile.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def encode(entries: list[EpochEntry]) -> str:
    lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    return f"{len(entries)}\n{zlib.crc32(lines.encode()) & 0xFFFFFFFF}\n{lines}"


def decode(text: str) -> list[EpochEntry]:
    """ValueError when ``text`` is no whole epoch file."""
    head, _, rest = text.partition("\n")
    crc, _, lines = rest.partition("\n")
    count = int(head)
    got = zlib.crc32(lines.encode()) & 0xFFFFFFFF
    # Java writes crc32 as a signed int
    if int(crc) & 0xFFFFFFFF != got:
        raise ValueError("epoch file CRC does not match")
    entries = []
    for line in lines.splitlines():
        epoch, _, start = line.partition("-")
        entries.append(EpochEntry(int(epoch), int(start)))
    if len(entries) != count:
        raise ValueError(f"epoch file says {count} entries, holds {len(entries)}")
    return entries


def consistent_point(
    local: list[tuple[int, int]], local_end: int, master: list[tuple[int, int]], master_end: int
) -> int:
    """The offset up to which two logs agree (RocketMQ's findConsistentPoint), from their
    (epoch, start) entries and ends: the newest epoch both have with the same start, cut at
    the nearer of its two ends. -1 when they share none."""

    def ends(entries: list[tuple[int, int]], end: int) -> dict[int, tuple[int, int]]:
        return {e: (s, entries[i + 1][1] if i + 1 < len(entries) else end) for i, (e, s) in enumerate(entries)}

    mine, theirs = ends(local, local_end), ends(master, master_end)
    for epoch in sorted(mine, reverse=True):
        if epoch in theirs and theirs[epoch][0] == mine[epoch][0]:
            return min(mine[epoch][1], theirs[epoch][1])
    return -1


class EpochCache:
    """The entries of ``path``, loaded at once; every change is written before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        for p in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                return decode(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
        return []

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(encode(self._entries))
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else -1

    def append(self, epoch: int, start_offset: int) -> None:
        """ValueError unless both epoch and start are after the last entry's."""
        if self._entries:
            last = self._entries[-1]
            if epoch <= last.epoch or start_offset < last.start_offset:
                raise ValueError(f"epoch {epoch} at {start_offset} does not follow {last.epoch} at {last.start_offset}")
            if start_offset == last.start_offset:  # the last epoch wrote nothing: it gives way
                self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._save()

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Drop the epochs that begin at or past ``offset`` (a log cut there holds none of them)."""
        kept = [e for e in self._entries if e.start_offset < offset]
        if kept != self._entries:
            self._entries = kept
            self._save()
