"""Metrics benchmark: what the counters cost a send and a pull, in microseconds.

    python bench/metrics.py [--count 200000] [--sends 3000] [--rounds 3]

(a) The hot-path calls alone, per request, in a tight loop: the counter the broker kept
    before the metrics (`put_total += n`), then BrokerStats.count_in (a send),
    BrokerStats.count_out (a pull) and RpcLatency.observe (every answered request, with
    the trio.current_time() it reads).
(b) End to end: a broker in this process (store in a temporary directory), one
    RemotingClient sending --sends SEND_MESSAGE_V2 requests one at a time, with
    metricsExporterType DISABLE and PROM, interleaved over --rounds rounds. The counters
    of (a) are kept either way (GET_BROKER_RUNTIME_INFO reads them); PROM adds the
    latency hook and the exporter task. Expect a difference within a round trip's noise.
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

from rmq import metrics
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.broker.stats import BrokerStats
from rmq.metrics.latency import RpcLatency
from rmq.protocol import RemotingCommand, RequestCode
from rmq.remoting import RemotingClient


def per_call_us(count: int) -> dict[str, float]:
    stats = BrokerStats(time.monotonic)
    out = {}
    start = time.perf_counter()
    for _ in range(count):
        stats.put_total += 1
    out["put_total += 1 (before)"] = (time.perf_counter() - start) / count * 1e6
    start = time.perf_counter()
    for _ in range(count):
        stats.count_in("BenchTopic", 1, 1024)
    out["count_in (send)"] = (time.perf_counter() - start) / count * 1e6
    start = time.perf_counter()
    for i in range(count):
        stats.count_out("bench-group", "BenchTopic", i & 7, 32, 32 * 1024, i)
    out["count_out (pull)"] = (time.perf_counter() - start) / count * 1e6

    class Response:
        code = 0

    response = Response()

    async def observe_loop() -> float:
        latency = RpcLatency(trio.current_time)
        now = trio.current_time()
        begin = time.perf_counter()
        for _ in range(count):
            latency.observe(310, response, now)
        return (time.perf_counter() - begin) / count * 1e6

    out["RpcLatency.observe (each request)"] = trio.run(observe_loop)
    return out


async def sends_us(root: Path, exporter: str, sends: int) -> float:
    config = BrokerConfig.from_properties(
        {
            "brokerName": "bench",
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "listenPort": "0",
            "storePathRootDir": str(root),
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "metricsExporterType": exporter,
            "metricsPromExporterPort": "0",
        },
        environ={},
    )
    body = b"x" * 1024
    ext = {"a": "bench-producer", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    async with BrokerController(config) as broker, RemotingClient() as client:
        for _ in range(100):  # warm up: topic creation, connection
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)
            response = await client.invoke(broker.address, request, 5)
            if response.code != 0:
                raise SystemExit(f"send failed: {response.code} {response.remark}")
        start = time.perf_counter()
        for _ in range(sends):
            await client.invoke(broker.address, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body), 5)
        return (time.perf_counter() - start) / sends * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200_000, help="calls per hot-path figure")
    parser.add_argument("--sends", type=int, default=3000, help="sends per end-to-end round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    metrics.install()  # the PROM rounds' brokers serve their exporter
    print("hot-path calls, µs per call:")
    for name, us in per_call_us(args.count).items():
        print(f"  {name:36s} {us:7.3f}")
    figures: dict[str, list[float]] = {"DISABLE": [], "PROM": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            for exporter in figures:
                root = Path(tmp) / f"{exporter}-{round_no}"
                figures[exporter].append(trio.run(sends_us, root, exporter, args.sends))
    print(f"sync sends of 1 KiB, µs per send (median of {args.rounds} rounds of {args.sends}):")
    for exporter, values in figures.items():
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"  metricsExporterType={exporter:8s} {statistics.median(values):8.1f}   rounds: {rounds}")
    delta = statistics.median(figures["PROM"]) - statistics.median(figures["DISABLE"])
    print(f"  difference                         {delta:+8.1f}")


if __name__ == "__main__":
    main()
