"""A log synced every few KiB, written through its mapping or with pwrite: what each sync writes.

    python bench/sync_pages.py [--record 1100] [--every 32768] [--syncs 3000] [--seconds 20]

Appends records to a fresh 1 GiB log file through the store's own MappedFileQueue, once
written through the mapping (readahead), as files of small entries are, and once with a
pwrite per record, as the CommitLog's appends are (``pwrite_appends``; before 2026-11-29 a
SYNC_FLUSH log mapped its unwritten part page by page instead, MADV_RANDOM), with an
fdatasync after every ``--every`` bytes, as SYNC_FLUSH's group commit does. Prints per sync
its time and the bytes the kernel writes for it (``write_bytes`` of /proc/self/io, counted
as pages get dirty), and the CPU per record of the appends alone.

On kernels whose page cache holds large folios for ext4 (Linux 6.x), readahead maps the log in
folios of up to 2 MiB and each sync rewrites the whole folio being filled: bytes written per
sync grow to about 2 MiB while the run goes on. Linux only; each loop is bounded by its count
and by ``--seconds``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.store.mapped_file_queue import MappedFileQueue

FILE_SIZE = 1 << 30


def written_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def run(base: str, *, pwrite_appends: bool, record: int, every: int, syncs: int, seconds: float) -> None:
    directory = os.path.join(base, "pwrite" if pwrite_appends else "readahead")
    queue = MappedFileQueue(directory, FILE_SIZE, pwrite_appends=pwrite_appends)
    mf = queue.create()
    data = os.urandom(record)
    fd = mf.sync_descriptor()
    deadline = time.monotonic() + seconds
    w0, t0, c0 = written_bytes(), time.perf_counter(), time.process_time()
    pos = done = 0
    sync_time = 0.0
    cpu_appends = 0.0
    rounds = []  # bytes the kernel counts written per round (when a page or folio gets dirty)
    while done < syncs and time.monotonic() < deadline and pos + every + record < FILE_SIZE:
        a0, b0 = time.process_time(), written_bytes()
        stop = pos + every
        while pos < stop:
            mf.write(pos, data)
            pos += record
        cpu_appends += time.process_time() - a0
        s0 = time.perf_counter()
        os.fdatasync(fd)
        sync_time += time.perf_counter() - s0
        rounds.append(written_bytes() - b0)
        done += 1
    wall, cpu, wrote = time.perf_counter() - t0, time.process_time() - c0, written_bytes() - w0
    queue.close()
    shutil.rmtree(directory, ignore_errors=True)
    quarter = max(1, len(rounds) // 4)
    parts = [rounds[i : i + quarter] for i in range(0, len(rounds), quarter)][:4]
    per_quarter = [sum(p) / len(p) / 1024 for p in parts]
    name = "pwrite (CommitLog)" if pwrite_appends else "through the mapping"
    print(
        f"{name:27} {done:6,} syncs  {sync_time / done * 1e6:7,.0f} µs/sync  "
        f"written {wrote / max(pos, 1):5.1f} x data  KiB/sync by quarter {' '.join(f'{q:,.0f}' for q in per_quarter)}  "
        f"appends {cpu_appends / (pos / record) * 1e6:.2f} µs CPU/record  ({wall:.1f} s, {cpu:.1f} s CPU)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=int, default=1100, help="bytes per record (1100: a 1 KiB message)")
    parser.add_argument("--every", type=int, default=32 * 1024, help="bytes appended between syncs")
    parser.add_argument("--syncs", type=int, default=3000, help="syncs per mapping")
    parser.add_argument("--seconds", type=float, default=20.0, help="time limit per mapping")
    parser.add_argument("--dir", help="where the log goes (default: a temporary directory; use the store's disk)")
    args = parser.parse_args()
    if not os.path.exists("/proc/self/io"):
        sys.exit("Linux only: needs /proc/self/io")
    base = tempfile.mkdtemp(prefix="rmq-sync-pages-", dir=args.dir)
    try:
        print(f"{args.record} B records, fdatasync every {args.every:,} B, up to {args.syncs:,} syncs, in {base}")
        for pwrite_appends in (False, True, False, True):
            run(
                base,
                pwrite_appends=pwrite_appends,
                record=args.record,
                every=args.every,
                syncs=args.syncs,
                seconds=args.seconds,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
