"""Bursts of concurrent sends to a SYNC_FLUSH broker: how long each burst takes to be answered.

    python bench/sync_bursts.py                    # 100 bursts of 64 sends of 1 KiB, 10 ms apart
    python bench/sync_bursts.py --bursts 200 --burst 32 --conf flushIntervalCommitLog=5000

A name server and a SYNC_FLUSH broker run as their own processes (a fresh store in a
temporary directory, one topic of one queue); this process's `Producer` sends `--burst`
messages at once (one task each), waits for every answer, pauses `--gap` ms, and does it
again. Most of a burst lands in one read of the broker, so its sends wait for the same group
commit. Prints the median, 90th percentile and slowest burst, and how many took longer than
100 ms: before 2026-12-03 a burst's tail could wait for the next ASYNC-style flush interval
(`flushIntervalCommitLog`, 500 ms) rather than for its own sync round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ha import broker, free_port, spawn, stop_all  # noqa: E402
from bench.latency import create_topic  # noqa: E402
from rmq.client import Message, Producer  # noqa: E402

TOPIC = "BenchBursts"


async def bursts(namesrv: str, args: argparse.Namespace) -> list[float]:
    body = b"x" * args.size
    took: list[float] = []
    async with Producer("bench_bursts_producer", namesrv) as producer:
        for _ in range(50):  # the route, the connection, warm code
            await producer.send(Message(TOPIC, body))
        for _ in range(args.bursts):
            start = time.perf_counter()
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for _ in range(args.burst):
                        nursery.start_soon(producer.send, Message(TOPIC, body))
            took.append((time.perf_counter() - start) * 1000)
            await trio.sleep(args.gap / 1000)
    return took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bursts", type=int, default=100, help="bursts (default 100)")
    p.add_argument("--burst", type=int, default=64, help="sends in a burst (default 64)")
    p.add_argument("--gap", type=float, default=10.0, help="ms between bursts (default 10)")
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmq-bench-bursts-") as tmp:
        work = Path(tmp)
        ns_port, port = free_port(), free_port(3)
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        try:
            extra = "".join(f"{line}\n" for line in args.conf)
            procs.append(broker(work, ns, "bench-bursts", "ASYNC_MASTER", port, "SYNC_FLUSH", extra))
            trio.run(create_topic, ns, f"127.0.0.1:{port}", TOPIC, 1)
            took = trio.run(bursts, ns, args)
        finally:
            stop_all(procs)
    took.sort()
    slow = sum(t > 100 for t in took)
    print(
        f"{len(took)} bursts of {args.burst} sends of {args.size} B (SYNC_FLUSH), ms per burst: "
        f"median {statistics.median(took):.1f}, p90 {took[int(len(took) * 0.9)]:.1f}, slowest {took[-1]:.1f}; "
        f"over 100 ms: {slow}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
