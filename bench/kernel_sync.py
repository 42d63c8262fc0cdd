"""How long an fdatasync takes to come back through each way the store can submit it, while
the submitting loop sleeps and while it stays busy.

A broker's event loop submits a SYNC_FLUSH round and goes on with its work. Through Linux AIO
the kernel worker that runs the sync is queued on the submitting CPU and waits for the busy
loop to give it up; an io_uring's worker is a thread of the process that can run on another
CPU. Each round here appends ``--size`` bytes to a mapped file, submits one fdatasync and
either sleeps on the eventfd or runs Python until the eventfd is readable.

    python bench/kernel_sync.py --size 30000 --rounds 400
"""

from __future__ import annotations

import argparse
import mmap
import os
import select
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmq.store.kernel_sync import AioSync, KernelSync, UringSync  # noqa: E402


def one_way(ks: KernelSync, directory: str, size: int, rounds: int, busy: bool) -> list[float]:
    path = os.path.join(directory, "log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    total = size * rounds + mmap.PAGESIZE
    os.ftruncate(fd, total)
    mm = mmap.mmap(fd, total)
    mm.madvise(mmap.MADV_RANDOM)  # as a SYNC_FLUSH CommitLog maps its unwritten part
    record = b"x" * size
    times = []
    try:
        for i in range(rounds):
            mm[i * size : (i + 1) * size] = record
            start = time.perf_counter()
            ks.submit([fd], i)
            if busy:
                spin = 0
                while not select.select([ks.eventfd], [], [], 0)[0]:
                    for _ in range(200):
                        spin += 1
            else:
                select.select([ks.eventfd], [], [])
            got = ks.reap()
            times.append(time.perf_counter() - start)
            if got != [(i, 0)]:
                raise SystemExit(f"round {i}: {got}")
    finally:
        mm.close()
        os.close(fd)
        os.unlink(path)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=30_000, help="bytes appended per round (default 30000)")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temporary one)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.size} bytes")
    print(f"{'way':<10} {'loop':<6} {'p50 ms':>7} {'p90 ms':>7}")
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for way in (UringSync, AioSync):
            for busy in (False, True):
                ks = way.open()
                if ks is None:
                    print(f"{way.name:<10} not available here")
                    break
                try:
                    times = sorted(one_way(ks, directory, args.size, args.rounds, busy))
                finally:
                    ks.close()
                p50, p90 = times[len(times) // 2], times[len(times) * 9 // 10]
                print(f"{way.name:<10} {'busy' if busy else 'sleeps':<6} {p50 * 1e3:7.2f} {p90 * 1e3:7.2f}")


if __name__ == "__main__":
    main()
