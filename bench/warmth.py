"""What a broker's per-message Python costs right after the process slept or ran other code.

    python bench/warmth.py [--rounds 3000] [--seconds 30]

Times the front half of a send as the broker does it (decode the SEND_MESSAGE_V2 frame, read
its header, decode the message properties and encode them again), with nothing else in the
process, under four conditions: back to back; right after sleeping 50 µs and 1 ms; right
after 300 µs of unrelated Python work. Prints the median and 90th percentile per condition
and their ratio to back to back.

Microbenchmarks time code whose caches and branch predictors are warm; a server between
messages is not. On the virtual machines we measure on, the same call costs two to three
times as much after a millisecond asleep: per-message figures from profiles of loaded
processes (bench/README.md, docs/dledger.md) are higher than a loop like this predicts, and
more so where processes sleep and wake often (one request in flight, a DLedger group's
followers). Each condition is bounded by `--rounds` and by `--seconds` overall.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.protocol import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.protocol.properties import decode_properties, encode_properties

CALLS = 5  # front halves timed together after each pause


def send_frame() -> bytes:
    """One SEND_MESSAGE_V2 as our producer writes it, 1 KiB body, length prefix removed."""
    props = encode_properties(
        {"UNIQ_KEY": "7F0000010B2A18B4AAC2771D4F6A0000", "WAIT": "true", "TAGS": "TagA", "KEYS": "order-1"}
    )
    header = SendMessageRequestHeader(
        producer_group="BenchGroup", topic="BenchTopic", queue_id=1, born_timestamp=1_795_000_000_000,
        properties=props,
    )  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), body=b"x" * 1024)
    return cmd.encode()[4:]


def front_half(frame: bytes) -> None:
    cmd = RemotingCommand.decode(frame)
    header = SendMessageRequestHeader.from_v2_ext(cmd.ext_fields)
    encode_properties(decode_properties(header.properties or ""))


def busy_python(micros: int) -> Callable[[], None]:
    table = {f"k{i}": i for i in range(512)}

    def run() -> None:
        end = time.perf_counter() + micros / 1e6
        total = 0
        while time.perf_counter() < end:
            for k, v in table.items():
                total += v if k[-1] != "7" else -v

    return run


def measure(pause: Callable[[], None] | None, frame: bytes, rounds: int, until: float) -> list[float]:
    clock = time.perf_counter_ns
    out: list[float] = []
    for _ in range(rounds):
        if time.monotonic() > until:
            break
        if pause is not None:
            pause()
        t = clock()
        for _ in range(CALLS):
            front_half(frame)
        out.append((clock() - t) / CALLS / 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3000, help="timed rounds per condition")
    parser.add_argument("--seconds", type=float, default=30.0, help="bound on the whole run")
    args = parser.parse_args()
    frame = send_frame()
    conditions: list[tuple[str, Callable[[], None] | None]] = [
        ("back to back", None),
        ("after sleeping 50 µs", lambda: time.sleep(50e-6)),
        ("after sleeping 1 ms", lambda: time.sleep(1e-3)),
        ("after 300 µs of other Python", busy_python(300)),
    ]
    until = time.monotonic() + args.seconds
    measure(None, frame, 1000, until)  # imports, first-call caches
    base = None
    print(f"front half of a send (decode frame, header, properties), µs per call, {CALLS} calls per round")
    print(f"{'condition':32s} {'rounds':>7s} {'p50':>7s} {'p90':>7s} {'x p50':>6s}")
    for name, pause in conditions:
        times = measure(pause, frame, args.rounds, until)
        if not times:
            print(f"{name:32s} (out of time)")
            continue
        p50 = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) >= 10 else max(times)
        base = base or p50
        print(f"{name:32s} {len(times):7d} {p50:7.2f} {p90:7.2f} {p50 / base:6.2f}")


if __name__ == "__main__":
    main()
