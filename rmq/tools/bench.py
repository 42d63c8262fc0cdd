"""`rmq bench producer|consumer`: RocketMQ's benchmark/producer.sh and consumer.sh.

    rmq bench producer -n 127.0.0.1:9876 -t BenchmarkTest -w 64 -s 1024 [-k] [--batch 32] [--duration 30]
    rmq bench consumer -n 127.0.0.1:9876 -t BenchmarkTest [--duration 30]

The producer runs `-w` senders on one Producer, each sending one message (or one batch
of `--batch` messages) and waiting for the answer before the next, so `-w` is the
number of requests in flight. Every `--interval` seconds it prints the send TPS
(messages per second), the maximum and average round-trip time of the requests in that
interval and the failures; at the end a summary over the whole run. When stdout is a
terminal the figures are a live `rich` table, otherwise plain lines.

The consumer prints the consume TPS and the born-to-consume and store-to-consume
latencies (wall clock, so producer, broker and consumer clocks should agree).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import random
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self, TextIO

import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, MQClientError, Producer, PushConsumer
from rmq.client.ids import wall_clock_ms

from .aclopts import acl_credentials, add_acl_arguments
from .tlsopts import add_tls_arguments, tls_option

DEFAULT_NAMESRV = "127.0.0.1:9876"


@dataclass
class Window:
    """Counters for one reporting interval (and, kept separately, for the whole run)."""

    messages: int = 0
    requests: int = 0
    failed: int = 0
    rt_total: float = 0.0  # seconds, over requests
    rt_max: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)  # consumer: second latency

    def record(self, messages: int, rt: float) -> None:
        self.messages += messages
        self.requests += 1
        self.rt_total += rt
        self.rt_max = max(self.rt_max, rt)

    def merge(self, other: Window) -> None:
        self.messages += other.messages
        self.requests += other.requests
        self.failed += other.failed
        self.rt_total += other.rt_total
        self.rt_max = max(self.rt_max, other.rt_max)
        for k, v in other.extra.items():
            if k.startswith("max"):
                self.extra[k] = max(self.extra.get(k, 0.0), v)
            else:
                self.extra[k] = self.extra.get(k, 0.0) + v

    @property
    def rt_avg_ms(self) -> float:
        return self.rt_total / self.requests * 1000 if self.requests else 0.0


class Reporter:
    """Prints a row per interval and a summary; a rich live table on a terminal."""

    def __init__(
        self, title: str, columns: list[str], row: Callable[[Window, float], list[str]], out: TextIO, live: bool
    ) -> None:
        self.title = title
        self.columns = columns
        self.row = row
        self.out = out
        self.rows: list[list[str]] = []
        self._live: Any = None
        if live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=out), auto_refresh=False, transient=False)

    def __enter__(self) -> Self:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def _table(self, summary: list[str] | None = None) -> Any:
        from rich.table import Table

        table = Table(title=self.title)
        table.add_column("time")
        for col in self.columns:
            table.add_column(col, justify="right")
        for r in self.rows[-20:]:
            table.add_row(*r)
        if summary is not None:
            table.add_row(*summary, style="bold")
        return table

    def interval(self, w: Window, seconds: float) -> None:
        now = datetime.datetime.now()
        values = self.row(w, seconds)
        if self._live is not None:
            self.rows.append([now.strftime("%H:%M:%S"), *values])
            self._live.update(self._table(), refresh=True)
        else:
            parts = " | ".join(f"{c}: {v}" for c, v in zip(self.columns, values, strict=True))
            stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            print(f"Current Time: {stamp} | {parts}", file=self.out, flush=True)

    def summary(self, w: Window, seconds: float) -> None:
        values = self.row(w, seconds)
        if self._live is not None:
            self._live.update(self._table(["total", *values]), refresh=True)
        else:
            parts = " | ".join(f"{c}: {v}" for c, v in zip(self.columns, values, strict=True))
            print(f"[Complete] {seconds:.1f} s | {parts}", file=self.out, flush=True)


def _namesrv(value: str | None) -> str:
    return value or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV


async def _stop_on_sigint(stop: trio.Event) -> None:
    """Ctrl-C ends the run with a summary instead of a traceback (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


async def _report_until(
    reporter: Reporter, windows: list[Window], interval: float, duration: float | None, stop: trio.Event
) -> Window:
    """Report every `interval` until `duration` passes or `stop` is set; returns the totals."""
    total = Window()
    start = trio.current_time()
    last = start
    end = start + duration if duration is not None else float("inf")
    while True:
        with trio.move_on_at(min(last + interval, end)):
            await stop.wait()
        now = trio.current_time()
        current, windows[0] = windows[0], Window()
        total.merge(current)
        if now - last > 0:
            reporter.interval(current, now - last)
        last = now
        if now >= end or stop.is_set():
            reporter.summary(total, now - start)
            return total


# -- producer -----------------------------------------------------------------------------


def _producer_row(w: Window, seconds: float) -> list[str]:
    return [
        f"{w.messages / seconds:.0f}",
        f"{w.rt_max * 1000:.1f}",
        f"{w.rt_avg_ms:.3f}",
        f"{w.failed}",
    ]


async def run_producer_bench(args: argparse.Namespace, out: TextIO, live: bool) -> Window:
    body = bytes(random.choices(b"abcdefghijklmnopqrstuvwxyz0123456789", k=args.size))
    windows = [Window()]
    counter = itertools.count()
    stop = trio.Event()

    def make() -> Message:
        n = next(counter)
        return Message(args.topic, body, tags=args.tag, keys=str(n) if args.keys else None)

    async def sender(producer: Producer) -> None:
        while not stop.is_set():
            t0 = trio.current_time()
            n = args.batch or 1
            try:
                if args.batch:
                    await producer.send_batch([make() for _ in range(args.batch)])
                else:
                    await producer.send(make())
            except MQClientError:
                windows[0].failed += n
                continue
            windows[0].record(n, trio.current_time() - t0)

    columns = ["Send TPS", "Max RT(ms)", "Average RT(ms)", "Send Failed"]
    title = (
        f"rmq bench producer: {args.topic}, {args.size} B, {args.workers} in flight"
        + (f", batches of {args.batch}" if args.batch else "")
        + ("" if args.auto_batch else ", auto batch off")
    )
    tls = tls_option(args)
    credentials = acl_credentials(args)
    async with Producer(
        args.group,
        _namesrv(args.namesrv),
        send_timeout=args.timeout,
        tls=tls,
        auto_batch=args.auto_batch,
        batch_max_bytes=args.batch_max_bytes,
        batch_in_flight=args.batch_in_flight,
        busy_poll_micros=args.busy_poll_micros,
        **credentials,
    ) as producer:
        await producer.fetch_publish_queues(args.topic)
        with Reporter(title, columns, _producer_row, out, live) as reporter:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_sigint, stop)
                for _ in range(args.workers):
                    nursery.start_soon(sender, producer)
                total = await _report_until(reporter, windows, args.interval, args.duration, stop)
                stop.set()
                nursery.cancel_scope.cancel()
    return total


def _producer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq bench producer", description="Measure send throughput and latency.")
    p.add_argument("-n", "--namesrv", help="name server address(es) (default $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="BenchmarkTest")
    p.add_argument("-g", "--group", default="benchmark_producer")
    p.add_argument("-w", "--workers", type=int, default=64, help="concurrent senders = requests in flight (64)")
    p.add_argument("-s", "--size", type=int, default=128, help="message body size in bytes (128)")
    p.add_argument("-k", "--keys", action="store_true", help="give each message a key")
    p.add_argument("--tag", default=None)
    p.add_argument("--batch", type=int, default=0, help="send batches of this many messages")
    p.add_argument(
        "--auto-batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the producer coalesces concurrent sends into batches (autoBatch; on, as by default)",
    )
    p.add_argument("--batch-max-bytes", type=int, default=32 * 1024, help="auto batch size limit (32768)")
    p.add_argument("--batch-in-flight", type=int, default=2, help="auto batches of a topic in flight at once (2)")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl-C)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between reports (5)")
    p.add_argument("--timeout", type=float, default=3.0, help="send timeout in seconds (3)")
    p.add_argument(
        "--busy-poll-micros", type=int, default=0, help="poll this many µs before sleeping (busy_poll_micros; 0: off)"
    )
    add_tls_arguments(p)
    add_acl_arguments(p)
    return p


# -- consumer -----------------------------------------------------------------------------


def _consumer_row(w: Window, seconds: float) -> list[str]:
    s2c_avg = w.extra.get("s2c_total", 0.0) / w.messages if w.messages else 0.0
    return [
        f"{w.messages / seconds:.0f}",
        f"{w.rt_avg_ms:.3f}",
        f"{s2c_avg:.3f}",
        f"{w.rt_max * 1000:.0f}",
        f"{w.extra.get('max_s2c', 0.0):.0f}",
    ]


async def run_consumer_bench(args: argparse.Namespace, out: TextIO, live: bool) -> Window:
    windows = [Window()]
    stop = trio.Event()

    def handle(msg: MessageExt) -> None:
        now = wall_clock_ms()
        w = windows[0]
        w.record(1, max(now - msg.born_timestamp, 0) / 1000)
        s2c = float(max(now - msg.store_timestamp, 0))
        w.extra["s2c_total"] = w.extra.get("s2c_total", 0.0) + s2c
        if s2c > w.extra.get("max_s2c", 0.0):
            w.extra["max_s2c"] = s2c

    start = ConsumeFromWhere.FIRST_OFFSET if args.start == "first" else ConsumeFromWhere.LAST_OFFSET
    consumer = PushConsumer(
        args.group,
        _namesrv(args.namesrv),
        handler=handle,
        consume_from_where=start,
        consume_concurrency=args.threads,
        tls=tls_option(args),
        **acl_credentials(args),
    )
    consumer.subscribe(args.topic, args.expression)
    columns = ["Consume TPS", "Average(B2C) RT(ms)", "Average(S2C) RT(ms)", "MAX(B2C) RT(ms)", "MAX(S2C) RT(ms)"]
    async with consumer, trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_sigint, stop)
        with Reporter(
            f"rmq bench consumer: {args.topic} as {args.group}", columns, _consumer_row, out, live
        ) as reporter:
            total = await _report_until(reporter, windows, args.interval, args.duration, stop)
        nursery.cancel_scope.cancel()
    return total


def _consumer_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq bench consumer", description="Measure consume throughput and latency.")
    p.add_argument("-n", "--namesrv", help="name server address(es) (default $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="BenchmarkTest")
    p.add_argument("-g", "--group", default=f"benchmark_consumer_{random.randrange(10000)}")
    p.add_argument("-e", "--expression", default="*", help="tag expression (*)")
    p.add_argument("--threads", type=int, default=20, help="concurrent handler calls (20)")
    p.add_argument("--from", dest="start", choices=("first", "last"), default="last")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl-C)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between reports (5)")
    add_tls_arguments(p)
    add_acl_arguments(p)
    return p


# -- entry points ---------------------------------------------------------------------------


def _run(fn: Callable[..., Any], args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        trio.run(fn, args, out, out.isatty())
    except KeyboardInterrupt:
        return 130
    except MQClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def producer_main(argv: Sequence[str] | None = None) -> int:
    args = _producer_parser().parse_args(argv)
    if args.workers < 1 or args.size < 1 or args.batch < 0:
        print("error: -w and -s must be >= 1, --batch >= 0", file=sys.stderr)
        return 2
    return _run(run_producer_bench, args)


def consumer_main(argv: Sequence[str] | None = None) -> int:
    return _run(run_consumer_bench, _consumer_parser().parse_args(argv))
