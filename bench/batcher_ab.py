"""The producer's auto batcher of this checkout against another commit's, in one process.

    python bench/batcher_ab.py                        # this tree against HEAD
    python bench/batcher_ab.py --against HEAD~2 --runs 8 --senders 64

Each build's `AutoBatcher` takes `--messages` 1 KiB sends from `--senders` tasks, with a
stand-in for the wire that answers every batch after one scheduler pass: what is timed is the
batcher (waiting, leading, waking its senders) and the message objects, not a broker. The
two builds alternate run by run (the other commit's `rmq` exported as `rmq_base`, as
`dispatch_ab.py` does), so the machine's drift falls on both. Prints the CPU time per send of
each, per run, and the median ratio (this tree / the other).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dispatch_ab import export_base  # noqa: E402

BODY = os.urandom(1024)


def cpu_per_send(package: str, messages: int, senders: int) -> float:
    batcher = importlib.import_module(package + ".client.batcher")
    client_message = importlib.import_module(package + ".client.message")
    protocol_message = importlib.import_module(package + ".protocol.message")
    queue = client_message.MessageQueue("T", "b", 0)
    ok = client_message.SendStatus.SEND_OK

    async def send_batch(msgs: Any, timeout: float) -> Any:
        await trio.lowlevel.checkpoint()
        ids = ",".join(m.properties["UNIQ_KEY"] for m in msgs)
        return client_message.SendResult(ok, ids, ids, queue, 0)

    async def main() -> None:
        auto = batcher.AutoBatcher(send_batch, 32 * 1024, 2, 32)
        left = messages

        async def sender(n: int) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                msg = protocol_message.Message("T", BODY)
                msg.properties["UNIQ_KEY"] = f"{n:08d}{left:024d}"
                await auto.send(msg, 3.0)

        async with trio.open_nursery() as nursery:
            for n in range(senders):
                nursery.start_soon(sender, n)

    start = time.process_time()
    trio.run(main)
    return (time.process_time() - start) / messages * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD", help="the commit to compare with (default HEAD)")
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--senders", type=int, default=64)
    ap.add_argument("--runs", type=int, default=8)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rmq-batcher-ab-"))
    try:
        export_base(args.against, base)
        sys.path.insert(0, str(base))
        print(f"auto batcher, {args.messages:,} sends from {args.senders} tasks, this tree against {args.against}")
        this: list[float] = []
        other: list[float] = []
        for run in range(args.runs):
            order = [("rmq", this), ("rmq_base", other)]
            for package, into in order if run % 2 == 0 else order[::-1]:
                into.append(cpu_per_send(package, args.messages, args.senders))
            print(f"run {run + 1}: this {this[-1]:6.2f} us/send, {args.against} {other[-1]:6.2f}")
        ratio = statistics.median(this) / statistics.median(other)
        print(f"median ratio {ratio:.3f}  (load {os.getloadavg()[0]:.2f})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
