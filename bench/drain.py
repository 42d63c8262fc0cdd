"""Draining a backlog (the harness's S5 shape), without the peer harness.

    python bench/drain.py                        # 100,000 messages of 1 KiB, ASYNC_FLUSH
    python bench/drain.py --count 50000 --repeat 3
    python bench/drain.py --busy-poll-micros 300  # the consumer's and the broker's loops poll
    python bench/drain.py --push                 # a PushConsumer whose handler counts

A name server and a broker run as their own processes (`python -m rmq namesrv` / `broker`, a
fresh store in a temporary directory, one topic of one queue). This process fills the topic
with `--count` messages (a `Producer` with auto batch), then a consumer process drains it with
our `PullConsumer` from the first offset, as the harness's S5 does: the clock starts before
its first `poll` and stops when the last message is handed over (`--push`: when the handler
has seen the last one). Prints messages a second, the consumer's and the broker's CPU per
message, and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ha import free_port, spawn, stop_all
from bench.latency import TOPIC, create_topic, role
from rmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PullConsumer, PushConsumer


async def fill(namesrv: str, count: int, size: int) -> None:
    body = b"x" * size
    async with Producer("bench_drain_producer", namesrv, send_timeout=30.0, auto_batch=True) as producer:
        sent = 0

        async def sender() -> None:
            nonlocal sent
            while sent < count:
                sent += 1
                await producer.send(Message(TOPIC, body))

        async with trio.open_nursery() as nursery:
            for _ in range(64):
                nursery.start_soon(sender)


async def consume_push(namesrv: str, count: int, busy_poll_micros: int) -> None:
    """As `consume`, with a PushConsumer whose handler counts."""
    got = 0
    done = trio.Event()

    def handler(msg: MessageExt) -> None:
        nonlocal got
        got += 1
        if got >= count:
            done.set()

    consumer = PushConsumer(
        "bench_drain_push_consumer",
        namesrv,
        handler=handler,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        busy_poll_micros=busy_poll_micros,
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        cpu, start = time.process_time(), time.perf_counter()
        with trio.move_on_after(300):
            await done.wait()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(got, elapsed, cpu, flush=True)


async def consume(namesrv: str, count: int, busy_poll_micros: int) -> None:
    """Prints the seconds taken and the CPU seconds used for `count` messages."""
    consumer = PullConsumer(
        "bench_drain_consumer",
        namesrv,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        busy_poll_micros=busy_poll_micros,
    )
    consumer.subscribe(TOPIC)
    got = 0
    async with consumer as running:
        cpu, start = time.process_time(), time.perf_counter()
        while got < count:
            msgs = await running.poll(5.0)
            if not msgs:
                break
            got += len(msgs)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(got, elapsed, cpu, flush=True)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def once(args: argparse.Namespace) -> tuple[int, float, float, float | None]:
    with tempfile.TemporaryDirectory(prefix="rmq-bench-drain-") as tmp:
        work = Path(tmp)
        ns_port, port = free_port(), free_port(3)
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        try:
            conf = work / "broker.conf"
            conf.write_text(
                f"brokerName=bench-drain\nnamesrvAddr={ns}\nbrokerIP1=127.0.0.1\nlistenPort={port}\n"
                f"storePathRootDir={work / 'store'}\nbusyPollMicros={args.busy_poll_micros}\n"
            )
            broker = spawn(["broker", "-c", str(conf)], work / "broker.log")
            procs.append(broker)
            trio.run(create_topic, ns, f"127.0.0.1:{port}", 1)
            trio.run(fill, ns, args.count, args.size)
            time.sleep(0.5)  # the broker's dispatch and index behind the last sends
            broker_cpu = cpu_seconds(broker.pid) if sys.platform == "linux" else None
            kind = "consume-push" if args.push else "consume"
            polling = ["--busy-poll-micros", str(args.busy_poll_micros)]
            consumer = role(["--role", kind, "-n", ns, "--count", str(args.count), *polling], __file__)
            procs.insert(0, consumer)
            out, err = consumer.communicate(timeout=300)
            if consumer.returncode:
                raise RuntimeError(f"the consumer failed: {err[-2000:]}")
            if broker_cpu is not None:
                broker_cpu = cpu_seconds(broker.pid) - broker_cpu
        finally:
            stop_all(procs)
    got, elapsed, cpu = out.split()
    return int(got), float(elapsed), float(cpu), broker_cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="messages to drain (default 100,000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--busy-poll-micros", type=int, default=0, help="the broker's and consumer's (default 0: off)")
    parser.add_argument("--repeat", type=int, default=1, help="runs over fresh processes (default 1)")
    parser.add_argument("--push", action="store_true", help="drain with a PushConsumer (a handler that counts)")
    parser.add_argument("--role", choices=("consume", "consume-push"), help=argparse.SUPPRESS)
    parser.add_argument("-n", dest="namesrv", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.count < 1 or args.size < 1 or args.repeat < 1 or args.busy_poll_micros < 0:
        parser.error("--count, --size and --repeat must be positive, --busy-poll-micros not negative")
    if args.role is not None:
        drain = consume_push if args.role == "consume-push" else consume
        trio.run(drain, args.namesrv, args.count, args.busy_poll_micros)
        return 0
    who = "PushConsumer" if args.push else "PullConsumer"
    print(f"{who} drains {args.count:,} messages of {args.size} B, one queue, busy polling {args.busy_poll_micros} µs")
    print(f"{'run':>3} {'load':>5} {'recv':>8} {'msg/s':>8} {'consumer µs/msg':>16} {'broker µs/msg':>14}")
    for k in range(args.repeat):
        load = os.getloadavg()[0]
        got, elapsed, cpu, broker_cpu = once(args)
        broker_text = "-" if broker_cpu is None else f"{broker_cpu * 1e6 / max(got, 1):.1f}"
        print(
            f"{k + 1:>3} {load:>5.2f} {got:>8,} {got / elapsed:>8,.0f} {cpu * 1e6 / max(got, 1):>16.1f} "
            f"{broker_text:>14}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
