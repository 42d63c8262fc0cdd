"""What the broker sustains when the client is not Python: the official C++ client
(PyPI `rocketmq` 0.4.4, librocketmq 1.2.3, as in tests/interop) sending to a running broker.

    python -m rmq namesrv -p 9876 &
    python -m rmq broker -n 127.0.0.1:9876 --store /tmp/bench-store &
    python -m rmq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t BenchCpp -w 1 -r 1
    python bench/cpp_producer.py -n 127.0.0.1:9876 -t BenchCpp -w 1  --seconds 10
    python bench/cpp_producer.py -n 127.0.0.1:9876 -t BenchCpp -w 64 --seconds 10

`-w 1` sends with SendMessageSync, one at a time; `-w N` runs N threads sending with
SendMessageSync (ctypes drops the GIL during the call), so N requests are in flight; with
`--async`, N SendMessageAsync requests in flight instead (this client's async path is slow:
it measured ~4,000 msg/s whatever the broker). Prints msg/s and the latency
percentiles. The C++ client writes its log under $HOME/logs: HOME is pointed at a
temporary directory for the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--namesrv", default="127.0.0.1:9876")
    ap.add_argument("-t", "--topic", default="BenchCpp")
    ap.add_argument("-s", "--size", type=int, default=1024, help="body bytes")
    ap.add_argument("-w", "--window", type=int, default=1, help="1 = sync sends; N = N async sends in flight")
    ap.add_argument("--async", dest="use_async", action="store_true", help="SendMessageAsync for -w N")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--max-count", type=int, default=2_000_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmq-cpp-bench-") as home:
        os.environ["HOME"] = home  # before the import: the library reads it when loaded
        from rocketmq import client

        producer = client.Producer("bench_cpp_producer", timeout=10000)
        producer.set_namesrv_addr(args.namesrv)
        producer.start()
        try:
            body = os.urandom(args.size)
            for _ in range(10):  # the route first: 64 threads asking at once get "No route info"
                producer.send_sync(_message(client, args.topic, body))
            run = _sync if args.window == 1 else _window if args.use_async else _threads
            count, elapsed, lat = run(client, producer, args, body)
        finally:
            producer.shutdown()
    lat.sort()
    pct = {p: lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1000 if lat else float("nan") for p in (50, 99)}
    print(
        f"C++ client, window {args.window}: {count / elapsed:,.0f} msg/s "
        f"({count} in {elapsed:.1f} s), p50 {pct[50]:.2f} ms, p99 {pct[99]:.2f} ms"
    )
    if ERRORS:
        print(f"{len(ERRORS)} sends failed in the client, e.g.: {ERRORS[0]}")
    return 0


ERRORS: list[str] = []


def _message(client, topic: str, body: bytes):  # type: ignore[no-untyped-def]
    msg = client.Message(topic)
    msg.set_body(body)
    return msg


def _sync(client, producer, args, body, limit=None):  # type: ignore[no-untyped-def]
    lat: list[float] = []
    start = time.monotonic()
    end = start + args.seconds
    count = 0
    limit = args.max_count if limit is None else limit
    while count < limit and time.monotonic() < end:
        t = time.monotonic()
        try:
            result = producer.send_sync(_message(client, args.topic, body))
        except Exception as exc:  # noqa: BLE001 - ProducerSendSyncFailed
            # librocketmq 1.2.3 sometimes finds no route while threads share one producer
            ERRORS.append(str(exc))
            continue
        if result.status.name != "OK":
            raise RuntimeError(f"send status {result.status}")
        lat.append(time.monotonic() - t)
        count += 1
    return count, time.monotonic() - start, lat


def _threads(client, producer, args, body):  # type: ignore[no-untyped-def]
    results = []

    def one() -> None:
        results.append(_sync(client, producer, args, body, args.max_count // args.window))

    threads = [threading.Thread(target=one) for _ in range(args.window)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(results) != len(threads):
        raise RuntimeError("a sender thread failed")
    lat = [x for r in results for x in r[2]]
    return sum(r[0] for r in results), time.monotonic() - start, lat


def _window(client, producer, args, body):  # type: ignore[no-untyped-def]
    slots = threading.Semaphore(args.window)
    lat: list[float] = []
    failures: list[BaseException] = []
    start = time.monotonic()
    end = start + args.seconds
    issued = 0
    while issued < args.max_count and time.monotonic() < end and not failures:
        if not slots.acquire(timeout=10):
            raise RuntimeError("no answer for 10 s")
        t = time.monotonic()

        def ok(_result, t: float = t) -> None:  # type: ignore[no-untyped-def]
            lat.append(time.monotonic() - t)
            slots.release()

        def failed(exc: BaseException) -> None:
            failures.append(exc)
            slots.release()

        producer.send_async(_message(client, args.topic, body), ok, failed)
        issued += 1
    for _ in range(args.window):  # wait for what is still in flight
        slots.acquire(timeout=10)
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed: {failures[0]}")
    return len(lat), time.monotonic() - start, lat


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
