"""A batch send's store work (append, then dispatch) of this checkout against another commit.

    python bench/append_ab.py                         # this tree against HEAD
    python bench/append_ab.py --against HEAD~1 --runs 5 --batch 30

What the broker does with a SEND_BATCH_MESSAGE once its body is decoded: the items (as
`decode_batch_items` gives them: properties still encoded, the way our producer's auto batch
and Java's MessageBatch send them: UNIQ_KEY and WAIT) are appended with the batch's own
properties (CLUSTER, as the send processor adds it), and the dispatch pass that follows builds
their consume queue and index entries. As in `dispatch_ab.py`, the other commit's `rmq` is
exported as `rmq_base` and both builds run in one process in alternating rounds, each on a
store of its own, so that the machine's drift falls on both alike. Prints the CPU time per
message of each and their ratio (this tree / the other), per run and the median.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dispatch_ab import filled_store, run_pairs  # noqa: E402
from bench.store import _discard  # noqa: E402

BODY = os.urandom(1024)
_BUILDS = (("this", "rmq"), ("base", "rmq_base"))


def _batches(package: str, count: int, size: int) -> list[list[Any]]:
    item = importlib.import_module(package + ".protocol.message").BatchItem
    return [
        [item(0, BODY, f"UNIQ_KEY\x01AC11000100002A9F0000{b:06X}{i:06X}\x02WAIT\x01true".encode()) for i in range(size)]
        for b in range(count)
    ]


def one_run(base: Path, batches: int, size: int) -> tuple[float, float]:
    """CPU µs per message of (this tree, the other)."""
    work = Path(tempfile.mkdtemp(dir=base))
    try:
        stores = {name: filled_store(package, work / name, 0, False) for name, package in _BUILDS}
        items = {name: _batches(package, batches, size) for name, package in _BUILDS}
        cpu = dict.fromkeys(stores, 0.0)
        done = dict.fromkeys(stores, 0)
        extra = {"CLUSTER": "DefaultCluster"}
        deadline = time.monotonic() + 120
        for n in range(batches):
            if time.monotonic() > deadline:
                break
            for name in ("this", "base") if n % 2 == 0 else ("base", "this"):
                store, batch = stores[name], items[name][n]
                t0 = time.process_time()
                result = store.append_messages(
                    "BenchTopic", n % 4, batch, extra_properties=extra, born_host=("10.0.0.1", 40000)
                )
                store.dispatch_pending()
                cpu[name] += time.process_time() - t0
                if not result.ok:
                    raise RuntimeError(result)
                done[name] += len(batch)
        for store in stores.values():
            _discard(store)
        return cpu["this"] / done["this"] * 1e6, cpu["base"] / done["base"] * 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD", help="the commit to compare with (default HEAD)")
    ap.add_argument("--batches", type=int, default=2_000, help="batches appended by each build per run")
    ap.add_argument("--batch", type=int, default=30, help="messages per batch (30 of 1 KiB fill 32 KiB)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"append + dispatch, {args.batches:,} batches of {args.batch}, this tree against {args.against}")
    run_pairs(args.against, args.runs, "message", lambda base: one_run(base, args.batches, args.batch))


if __name__ == "__main__":
    main()
