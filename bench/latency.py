"""End-to-end latency at a fixed rate (the harness's S4 shape), without the peer harness.

    python bench/latency.py                          # 1,000 msg/s for 10 s, 1 KiB, ASYNC_FLUSH
    python bench/latency.py --rate 1000 --seconds 10 --size 1024 --repeat 3
    python bench/latency.py --flush SYNC_FLUSH
    python bench/latency.py --busy-poll-micros 300   # the harness's -poll variants
    python bench/latency.py --broker-busy-poll-micros 1500   # the broker alone polls
    python bench/latency.py --consumer-busy-poll-micros 2000 # the consumer alone polls
    python bench/latency.py --push                   # a PushConsumer's handler takes them

A name server and a broker run as their own processes (`python -m rmq namesrv` / `broker`, a
fresh store in a temporary directory, one topic, of one queue unless `--queues`). A consumer process polls the
topic with our `PullConsumer`; a producer process sends `--rate` messages a second with our
`Producer`, one at a time, each body carrying CLOCK_MONOTONIC (shared by the processes) at
the moment before its send. The consumer takes each message's latency when `poll` hands it
over. Prints p50 / p90 / p99 / max in ms over the messages after `--warmup` seconds, with the
machine's load; `--repeat N` runs N times over fresh processes.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ha import broker, free_port, spawn, stop_all
from rmq.client import ConsumeFromWhere, Message, MessageExt, MQAdmin, Producer, PullConsumer, PushConsumer
from rmq.client.admin import TopicConfig

TOPIC = "BenchLatency"
PRELOAD_TOPIC = "BenchLatencyPreload"
FIRST_WAIT = 120.0  # seconds the consumer waits for the first message (the producer starts later)
STAMP = struct.Struct(">q")


async def produce(namesrv: str, rate: float, count: int, size: int, busy_poll: int) -> None:
    pad = b"x" * (size - STAMP.size)
    async with Producer("bench_latency_producer", namesrv, send_timeout=30.0, busy_poll_micros=busy_poll) as producer:
        start = trio.current_time()
        for i in range(count):
            await trio.sleep_until(start + i / rate)
            await producer.send(Message(TOPIC, STAMP.pack(time.monotonic_ns()) + pad))


async def preload(namesrv: str, count: int, size: int) -> None:
    """`count` messages into another topic as fast as batches of 64 go (S3's shape, before S4)."""
    body = b"x" * size
    async with Producer("bench_latency_preload", namesrv, send_timeout=30.0) as producer:
        for start in range(0, count, 64):
            await producer.send_batch([Message(PRELOAD_TOPIC, body) for _ in range(min(64, count - start))])


async def consume(namesrv: str, count: int, idle: float, busy_poll: int) -> None:
    """Prints "ready" once polling, then the latencies (ms, in arrival order) as JSON."""
    latencies: list[float] = []
    consumer = PullConsumer(
        "bench_latency_consumer",
        namesrv,
        consume_from_where=ConsumeFromWhere.LAST_OFFSET,
        busy_poll_micros=busy_poll,
    )
    consumer.subscribe(TOPIC)
    async with consumer as running:
        print("ready", flush=True)
        while len(latencies) < count:
            msgs = await running.poll(idle if latencies else FIRST_WAIT)
            now = time.monotonic_ns()
            if not msgs:
                break
            latencies.extend((now - STAMP.unpack_from(m.body)[0]) / 1e6 for m in msgs)
    print(json.dumps(latencies), flush=True)


async def consume_pushed(namesrv: str, count: int, idle: float, busy_poll: int) -> None:
    """`consume` with a PushConsumer: each latency is taken when the handler is called."""
    latencies: list[float] = []
    done = trio.Event()
    last = [trio.current_time()]

    def handler(msg: MessageExt) -> None:
        latencies.append((time.monotonic_ns() - STAMP.unpack_from(msg.body)[0]) / 1e6)
        last[0] = trio.current_time()
        if len(latencies) >= count:
            done.set()

    consumer = PushConsumer(
        "bench_latency_consumer",
        namesrv,
        handler=handler,
        consume_from_where=ConsumeFromWhere.LAST_OFFSET,
        busy_poll_micros=busy_poll,
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        print("ready", flush=True)
        while not done.is_set():
            waited_from = last[0]
            with trio.move_on_at(waited_from + (idle if latencies else FIRST_WAIT)):
                await done.wait()
            if last[0] == waited_from:  # nothing came in the wait
                break
    print(json.dumps(latencies), flush=True)


def role(args: list[str], script: str = __file__) -> subprocess.Popen[str]:
    """`script` (this one unless given) run as a process of its own with `args`."""
    return subprocess.Popen([sys.executable, script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def once(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="rmq-bench-latency-") as tmp:
        work = Path(tmp)
        ns_port, port = free_port(), free_port(3)
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        try:
            poll = ["--busy-poll-micros", str(args.busy_poll_micros)]
            broker_poll = args.broker_busy_poll_micros
            if broker_poll is None:
                broker_poll = args.busy_poll_micros
            extra = f"busyPollMicros={broker_poll}\n"
            procs.append(broker(work, ns, "bench-latency", "ASYNC_MASTER", port, args.flush, extra))
            trio.run(create_topic, ns, f"127.0.0.1:{port}", TOPIC, args.queues)
            if args.preload:
                trio.run(create_topic, ns, f"127.0.0.1:{port}", PRELOAD_TOPIC, 1)
            count = int(args.rate * args.seconds)
            push = ["--push"] if args.push else []
            consumer_poll = args.consumer_busy_poll_micros
            if consumer_poll is None:
                consumer_poll = args.busy_poll_micros
            consuming = ["--count", str(count), "--busy-poll-micros", str(consumer_poll), *push]
            consumer = role(["--role", "consume", "-n", ns, *consuming])
            procs.insert(0, consumer)  # stopped first should anything fail
            assert consumer.stdout is not None
            if consumer.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the consumer did not start: {consumer.communicate()[1][-2000:]}")
            time.sleep(1.0)  # its first pull parked at the broker
            if args.preload:
                trio.run(preload, ns, args.preload, args.size)
            sending = ["--count", str(count), "--rate", str(args.rate), "--size", str(args.size)]
            producer = role(["--role", "produce", "-n", ns, *sending, *poll])
            procs.insert(0, producer)
            _, err = producer.communicate(timeout=args.seconds * 3 + 60)
            if producer.returncode:
                raise RuntimeError(f"the producer failed: {err[-2000:]}")
            out, err = consumer.communicate(timeout=60)
            if consumer.returncode:
                raise RuntimeError(f"the consumer failed: {err[-2000:]}")
        finally:
            stop_all(procs)
    latencies = json.loads(out.strip().splitlines()[-1])
    kept = sorted(latencies[int(args.rate * args.warmup) :])
    if not kept:
        raise RuntimeError(f"no message arrived after the warm-up ({len(latencies)} in all)")

    def pct(q: float) -> float:
        return kept[min(len(kept) - 1, int(len(kept) * q))]

    quantiles = {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": kept[-1]}
    return {"sent": count, "received": len(latencies), **quantiles}


async def create_topic(ns: str, broker: str, topic: str, queues: int) -> None:
    async with MQAdmin(ns, timeout=10) as admin:
        await admin.create_topic(broker, TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues))
        with trio.fail_after(30):  # until the name server has the route
            while True:
                try:
                    await admin.topic_route(topic)
                    return
                except Exception:  # noqa: BLE001 - not registered yet
                    await trio.sleep(0.1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0, help="messages a second (default 1000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the producer sends (default 10)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes, at least 8 (default 1024)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of messages left out (default 1)")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--queues", type=int, default=1, help="queues of the topic (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs over fresh processes (default 1)")
    parser.add_argument(
        "--busy-poll-micros", type=int, default=0, help="busy polling of broker and clients, µs (default 0: off)"
    )
    parser.add_argument(
        "--broker-busy-poll-micros", type=int, help="the broker's busy polling alone, µs (default: --busy-poll-micros)"
    )
    parser.add_argument(
        "--consumer-busy-poll-micros",
        type=int,
        help="the consumer's busy polling alone, µs (default: --busy-poll-micros)",
    )
    parser.add_argument(
        "--preload",
        type=int,
        default=0,
        help="messages sent in batches to another topic just before (the harness's S3 comes before S4)",
    )
    parser.add_argument("--push", action="store_true", help="consume with a PushConsumer (default: PullConsumer)")
    parser.add_argument("--role", choices=("produce", "consume"), help=argparse.SUPPRESS)
    parser.add_argument("-n", dest="namesrv", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size < STAMP.size or args.rate <= 0 or args.seconds <= 0 or args.repeat < 1:
        parser.error("--size must be at least 8, --rate, --seconds and --repeat positive")
    if args.role == "produce":
        trio.run(produce, args.namesrv, args.rate, args.count, args.size, args.busy_poll_micros)
        return 0
    if args.role == "consume":
        trio.run(consume_pushed if args.push else consume, args.namesrv, args.count, 5.0, args.busy_poll_micros)
        return 0
    polling = ", PushConsumer" if args.push else ""
    polling += f", busy polling {args.busy_poll_micros} µs" if args.busy_poll_micros else ""
    if args.broker_busy_poll_micros is not None:
        polling += f", broker busy polling {args.broker_busy_poll_micros} µs"
    if args.consumer_busy_poll_micros is not None:
        polling += f", consumer busy polling {args.consumer_busy_poll_micros} µs"
    if args.preload:
        polling += f", after {args.preload:,} messages preloaded"
    print(
        f"{args.rate:g} msg/s for {args.seconds:g} s, {args.size} B, {args.flush}{polling}, "
        f"first {args.warmup:g} s left out"
    )
    print(f"{'run':>3} {'load':>5} {'sent':>7} {'recv':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for k in range(args.repeat):
        load = os.getloadavg()[0]
        r = once(args)
        print(
            f"{k + 1:>3} {load:>5.2f} {r['sent']:>7,} {r['received']:>7,} {r['p50']:>7.3f} {r['p90']:>7.3f} "
            f"{r['p99']:>7.3f} {r['max']:>7.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
