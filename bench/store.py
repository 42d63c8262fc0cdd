"""Store benchmark: prints figures and ratios from one run, in a temporary directory.

    python bench/store.py [--quick]

1. Append throughput, 1 KiB messages, ASYNC_FLUSH (sync MessageStore, no syncs on the path).
2. SYNC_FLUSH with 64 concurrent appenders (AsyncMessageStore group commit) against the disk's
   own fsyncs per second measured in the same run: messages per sync round.
3. Read throughput through the consume queue (get_message, 32 per call).
4. Append throughput over 10 topics vs 10,000 topics x 4 queues, and the drop; dispatch
   (consume queue + index building) for both, for information.

Every loop is bounded by a count and a time limit.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from rmq.store import FlushDiskType, GetMessageStatus, MessageDraft, MessageStore, StoreConfig
from rmq.store.aio import AsyncMessageStore

BODY = os.urandom(1024)


def _config(root: Path, **over: object) -> StoreConfig:
    values: dict[str, object] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commitlog": 256 * 1024 * 1024,
        "mapped_file_size_consume_queue": 20 * 10_000,
    }
    values.update(over)
    return StoreConfig(**values)  # type: ignore[arg-type]


def _fresh(base: Path, name: str) -> Path:
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    return root


class Timer:
    """Wall-clock and CPU time of a block: the machine may be shared, CPU time says what the
    code itself costs."""

    def __enter__(self) -> Self:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0

    def line(self, n: int, nbytes: int | None = None) -> str:
        text = f"{n / self.wall:>10,.0f} msg/s  {self.cpu / n * 1e6:6.2f} us CPU/msg"
        if nbytes is not None:
            text += f"  {nbytes / self.wall / 2**20:7.1f} MiB/s"
        return text


def _append_loop(store: MessageStore, keys: list[tuple[str, int]], count: int, seconds: float) -> tuple[int, Timer]:
    # Model what a broker hands the store: per message a draft of a freshly decoded topic
    # string and the properties string from the request header.
    nkeys = len(keys)
    work = [((t + "#")[:-1], q) for t, q in (keys[n % nkeys] for n in range(1, count + 1))]
    put = store.put
    n = 0
    with Timer() as timer:
        deadline = time.perf_counter() + seconds
        for n, (topic, qid) in enumerate(work, 1):
            props = f"TAGS\x01TagA\x02KEYS\x01order\x02UNIQ_KEY\x017F0000010000{n:020X}"
            r = put(MessageDraft(topic, qid, BODY, properties=props, born_host=("10.0.0.1", 40000)))
            if not r.ok:
                raise RuntimeError(r)
            if not n & 1023 and time.perf_counter() > deadline:
                break
    return n, timer


def _dispatch(store: MessageStore, seconds: float) -> tuple[int, Timer]:
    done = 0
    with Timer() as timer:
        deadline = time.perf_counter() + seconds
        while store.dispatch_behind and time.perf_counter() < deadline:
            done += store.dispatch_pending(4096)
    return done, timer


def bench_async_append_and_read(base: Path, count: int, seconds: float) -> None:
    root = _fresh(base, "async")
    with MessageStore(_config(root)) as store:
        keys = [("BenchTopic", q) for q in range(4)]
        n, t = _append_loop(store, keys, count, seconds)
        print(f"append ASYNC_FLUSH 1 KiB : {t.line(n, n * len(BODY))}  ({n:,} msgs)")
        d, t = _dispatch(store, seconds * 2)
        print(f"dispatch (CQ + index)    : {t.line(d)}  (2 index keys per message)")
        with Timer() as t:
            store.flush()
        print(f"flush everything         : {t.wall:10.3f} s")
        read = nbytes = 0
        with Timer() as t:
            deadline = time.perf_counter() + seconds
            for _, qid in keys:
                offset = 0
                while time.perf_counter() < deadline:
                    g = store.get_message("BenchTopic", qid, offset, 32)
                    if g.status is not GetMessageStatus.FOUND:
                        break
                    read += len(g.records)
                    nbytes += g.buffer_total_size
                    offset = g.next_begin_offset
        print(f"read via consume queue   : {t.line(read, nbytes)}  ({read:,} msgs, 32 per call)")
    shutil.rmtree(root, ignore_errors=True)


def disk_fsyncs_per_second(base: Path, seconds: float, max_count: int) -> float:
    """The disk's own rate: append 1 KiB and fdatasync, as often as it allows."""
    path = base / "fsync.probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        deadline = start + seconds
        n = 0
        while n < max_count and time.perf_counter() < deadline:
            os.write(fd, BODY)
            os.fdatasync(fd)
            n += 1
        return n / (time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)


async def _sync_flush_run(store: MessageStore, appenders: int, count: int, seconds: float) -> tuple[int, float, int]:
    done = 0
    async with AsyncMessageStore(store, retention=False) as astore:
        start = trio.current_time()
        deadline = start + seconds

        async def appender(a: int) -> None:
            nonlocal done
            while done < count and trio.current_time() < deadline:
                props = f"TAGS\x01TagA\x02UNIQ_KEY\x01{a:08X}{done:024X}"
                r = await astore.put(MessageDraft("SyncTopic", a % 4, BODY, properties=props))
                if not r.ok:
                    raise RuntimeError(r)
                done += 1

        async with trio.open_nursery() as nursery:
            for a in range(appenders):
                nursery.start_soon(appender, a)
        elapsed = trio.current_time() - start
        rounds = astore.flush_rounds
    return done, elapsed, rounds


def bench_sync_flush(base: Path, count: int, seconds: float) -> None:
    fsyncs = disk_fsyncs_per_second(base, min(seconds, 2.0), count)
    print(f"disk fdatasync rate      : {fsyncs:>10,.0f} fsync/s (1 KiB appends, same directory)")
    root = _fresh(base, "sync")
    with MessageStore(_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH)) as store:
        cpu0 = time.process_time()
        n, dt, rounds = trio.run(_sync_flush_run, store, 64, count, seconds)
        cpu = time.process_time() - cpu0
    rate = n / dt
    print(
        f"SYNC_FLUSH, 64 appenders : {rate:>10,.0f} msg/s  {cpu / n * 1e6:6.2f} us CPU/msg  {rounds:,} sync rounds"
        f"  {rounds / dt:,.0f} syncs/s  ({n:,} msgs, appended, synced and dispatched)"
    )
    print(f"  messages per sync: {n / max(rounds, 1):.1f};  msg/s over disk fsync/s: {rate / fsyncs:.1f}x")
    shutil.rmtree(root, ignore_errors=True)


def bench_topic_spread(base: Path, count: int, seconds: float, reps: int) -> None:
    """Append runs alternate between the two layouts, ``reps`` times, and the best counts, so
    that load from other processes does not decide the comparison. Dispatch and the first flush
    (which creates 40,000 queue directories and files) run afterwards, once per layout, so
    their disk work cannot slow the append runs."""
    rng = random.Random(7)
    layouts = {"10 topics x 4 queues": 10, "10,000 topics x 4 queues": 10_000}
    best: dict[str, tuple[float, float, int]] = {}
    last: dict[str, MessageStore] = {}
    try:
        for rep in range(reps):
            for label, topics in layouts.items():
                keys = [(f"Topic-{t:05d}", q) for t in range(topics) for q in range(4)]
                rng.shuffle(keys)
                if label in last:
                    _discard(last.pop(label))
                store = MessageStore(_config(_fresh(base, f"spread{topics}-{rep}")))
                n, t = _append_loop(store, keys, count, seconds)
                last[label] = store
                if label not in best or n / t.wall > best[label][0]:
                    best[label] = (n / t.wall, t.cpu / n * 1e6, n)
        for label, store in last.items():
            d, td = _dispatch(store, seconds * 4)
            with Timer() as tf:
                store.flush()
            rate, cpu, n = best[label]
            print(f"append {label:24s}: {rate:>10,.0f} msg/s  {cpu:6.2f} us CPU/msg  ({n:,} msgs, best of {reps})")
            print(
                f"  then dispatch {d / td.wall:>9,.0f} msg/s  {td.cpu / d * 1e6:6.2f} us CPU/msg;"
                f"  first flush {tf.wall:5.2f} s (creates the queue files)"
            )
    finally:
        for store in last.values():
            _discard(store)
    (few, few_cpu, _), (many, many_cpu, _) = best.values()
    print(
        f"  append drop from 10 to 10,000 topics: {(few - many) / few * 100:5.1f}% msg/s,"
        f" {(many_cpu - few_cpu) / few_cpu * 100:5.1f}% more CPU/msg (aim < 10%)"
    )


def _discard(store: MessageStore) -> None:
    """Drop a benchmark store without the work of a clean close (dispatch, flush)."""
    root = store.config.store_path_root_dir
    if hasattr(store, "appender"):  # a benchmark shortcut, not an API
        store.appender.closed = True
    else:  # a commit from before the appender (bench/dispatch_ab.py)
        store._closed = True
    store.queues.close()
    store.commitlog.close()
    store.checkpoint.close()
    if store.index is not None:
        store.index.close()
    store._release_lock()
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts and time limits")
    parser.add_argument("--dir", help="directory for the temporary store (default: system temp)")
    args = parser.parse_args()
    count, seconds, reps = (60_000, 1.5, 2) if args.quick else (300_000, 5.0, 3)
    with tempfile.TemporaryDirectory(prefix="rmq-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        print(
            f"rmq store benchmark ({'quick' if args.quick else 'full'}): Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} CPUs, up to {count:,} msgs / {seconds} s per loop, in {base}"
        )
        bench_async_append_and_read(base, count, seconds)
        bench_sync_flush(base, count // 4, seconds)
        bench_topic_spread(base, count, seconds, reps)


if __name__ == "__main__":
    main()
