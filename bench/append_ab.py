"""A send's store work (append, then dispatch) of this checkout against another commit.

    python bench/append_ab.py                         # batches, this tree against HEAD
    python bench/append_ab.py --against HEAD~1 --runs 5 --batch 30
    python bench/append_ab.py --single                # plain sends, one message each

What the broker does with a SEND_BATCH_MESSAGE once its body is decoded: the items (as
`decode_batch_items` gives them: properties still encoded, the way our producer's auto batch
and Java's MessageBatch send them: UNIQ_KEY and WAIT) are appended with the batch's own
properties (CLUSTER, as the send processor adds it), and the dispatch pass that follows builds
their consume queue and index entries. With `--single`, what it does with a plain send: one
message with the fields a send carries (its properties as the decoded dict the processor
builds) through AsyncMessageStore's append without a checkpoint, a dispatch pass every 32.
Each build appends through its own API: drafts, or the keywords of commits before them.

As in `dispatch_ab.py`, the other commit's `rmq` is exported as `rmq_base` and both builds run
in one process in alternating rounds, each on a store of its own, so that the machine's drift
falls on both alike. Prints the CPU time per message of each and their ratio (this tree / the
other), per run and the median.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dispatch_ab import filled_store, run_pairs  # noqa: E402
from bench.store import _discard  # noqa: E402

BODY = os.urandom(1024)
_BUILDS = (("this", "rmq"), ("base", "rmq_base"))
_EXTRA = {"CLUSTER": "DefaultCluster"}
_BORN = ("10.0.0.1", 40000)
_STORE_HOST = ("10.0.0.2", 10911)
_PASS = 32  # plain sends between dispatch passes


def _batches(package: str, count: int, size: int) -> list[list[Any]]:
    item = importlib.import_module(package + ".protocol.message").BatchItem
    return [
        [item(0, BODY, f"UNIQ_KEY\x01AC11000100002A9F0000{b:06X}{i:06X}\x02WAIT\x01true".encode()) for i in range(size)]
        for b in range(count)
    ]


def _batch_append(package: str, store: Any) -> Callable[[int, list[Any]], Any]:
    """append(queue id, items): one batch through the build's own API."""
    if not hasattr(store, "put_many"):  # a commit from before MessageDraft
        return lambda queue_id, items: store.append_messages(
            "BenchTopic", queue_id, items, extra_properties=_EXTRA, born_host=_BORN
        )
    mod = importlib.import_module(package + ".store")

    def append(queue_id: int, items: list[Any]) -> Any:
        head = mod.MessageDraft("BenchTopic", queue_id, b"", properties=_EXTRA, born_host=_BORN)
        return store.put_many(mod.batch_drafts(head, items))

    return append


def _send(package: str, store: Any) -> Callable[[int], Any]:
    """send(n): one plain send's append through the build's AsyncMessageStore."""
    astore = importlib.import_module(package + ".store.aio").AsyncMessageStore(store, retention=False)
    draft = getattr(importlib.import_module(package + ".store"), "MessageDraft", None)

    def props(n: int) -> dict[str, str]:
        return {"TAGS": "TagA", "UNIQ_KEY": f"7F0000010000{n:020X}", "CLUSTER": "DefaultCluster"}

    if draft is None:  # a commit from before MessageDraft
        return lambda n: astore.put_message_now(
            "BenchTopic", n % 4, BODY, flag=0, properties=props(n), sys_flag=0, born_timestamp=1_700_000_000_000,
            born_host=_BORN, store_host=_STORE_HOST, reconsume_times=0, wait=True,
        )  # fmt: skip
    return lambda n: astore.put_now(
        draft(
            "BenchTopic", n % 4, BODY, flag=0, properties=props(n), sys_flag=0, born_timestamp=1_700_000_000_000,
            born_host=_BORN, store_host=_STORE_HOST, reconsume_times=0, wait=True,
        )
    )  # fmt: skip


def one_run(base: Path, rounds: int, size: int, single: bool) -> tuple[float, float]:
    """CPU µs per message of (this tree, the other): ``rounds`` batches of ``size``, or with
    ``single`` as many plain sends in rounds of ``size``."""
    work = Path(tempfile.mkdtemp(dir=base))
    try:
        stores = {name: filled_store(package, work / name, 0, False) for name, package in _BUILDS}
        batch = {name: _batch_append(package, stores[name]) for name, package in _BUILDS}
        send = {name: _send(package, stores[name]) for name, package in _BUILDS}
        items = {name: _batches(package, 0 if single else rounds, size) for name, package in _BUILDS}
        cpu = dict.fromkeys(stores, 0.0)
        done = dict.fromkeys(stores, 0)
        deadline = time.monotonic() + 120
        for n in range(rounds):
            if time.monotonic() > deadline:
                break
            for name in ("this", "base") if n % 2 == 0 else ("base", "this"):
                store = stores[name]
                t0 = time.process_time()
                if single:
                    for m in range(n * size, (n + 1) * size):
                        result = send[name](m)
                        if not m % _PASS:
                            store.dispatch_pending()
                else:
                    result = batch[name](n % 4, items[name][n])
                store.dispatch_pending()
                cpu[name] += time.process_time() - t0
                if not result.ok:
                    raise RuntimeError(result)
                done[name] += size
        for store in stores.values():
            _discard(store)
        return cpu["this"] / done["this"] * 1e6, cpu["base"] / done["base"] * 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD", help="the commit to compare with (default HEAD)")
    ap.add_argument("--batches", type=int, default=2_000, help="batches (rounds) appended by each build per run")
    ap.add_argument("--batch", type=int, default=30, help="messages per batch (30 of 1 KiB fill 32 KiB)")
    ap.add_argument("--single", action="store_true", help="plain sends of one message, not batches")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    what = f"rounds of {args.batch} plain sends" if args.single else f"batches of {args.batch}"
    print(f"append + dispatch, {args.batches:,} {what}, this tree against {args.against}")
    run_pairs(args.against, args.runs, "message", lambda base: one_run(base, args.batches, args.batch, args.single))


if __name__ == "__main__":
    main()
