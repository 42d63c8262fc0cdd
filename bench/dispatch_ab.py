"""Dispatch (consume queue + index) of this checkout against another commit, in one process.

    python bench/dispatch_ab.py                       # this tree against HEAD
    python bench/dispatch_ab.py --against HEAD~3 --runs 5 --pass-size 32 --listener

On a machine whose speed drifts 10-30 % within minutes, two runs of a benchmark one after the
other cannot tell a 5 % change from the drift. Here both builds run side by side: the other
commit's `rmq` package is exported (`git archive`) under the name `rmq_base`, each build
appends the same records to a store of its own, and then the two dispatch in alternating
passes of `--pass-size` records, so a slow spell of the machine falls on both alike. Prints
the CPU time per record of each and their ratio (this tree / the other), per run and the
median. Records are 1 KiB with TAGS, KEYS and UNIQ_KEY, as `store.py` writes them;
`--listener` adds an arrival listener shaped like the broker's (three listeners behind one).
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.store import _discard  # noqa: E402

BODY = os.urandom(1024)
_IMPORT = re.compile(r"\b(from|import) rmq\b")


def export_base(rev: str, into: Path) -> None:
    """`rmq` at `rev` as the package `rmq_base` under `into`."""
    archive = subprocess.run(["git", "archive", rev, "rmq"], check=True, capture_output=True, cwd=ROOT).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into)
    pkg = into / "rmq_base"
    (into / "rmq").rename(pkg)
    for path in pkg.rglob("*.py"):
        text = path.read_text()
        path.write_text(_IMPORT.sub(r"\1 rmq_base", text).replace('"rmq.', '"rmq_base.'))


class _Parked:
    """Long polling's shape: pulls parked by queue."""

    def __init__(self) -> None:
        self.parked: dict[tuple[str, int], list[Any]] = {}

    def arriving(self, topic: str, queue_id: int, *_: Any) -> None:
        self.parked.pop((topic, queue_id), None)

    def dispatched(self) -> None:
        pass


class _TopicWatch:
    """The delay and timer services' shape: they look at the topic."""

    def arriving(self, topic: str, *_: Any) -> None:
        if topic == "SCHEDULE_TOPIC_XXXX":
            pass


class _Fanout:
    """The broker's listener: one in front of three."""

    def __init__(self) -> None:
        self.listeners = [_Parked(), _TopicWatch(), _TopicWatch()]

    def arriving(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.arriving(*args)

    def dispatched(self) -> None:
        self.listeners[0].dispatched()


def filled_store(package: str, root: Path, records: int, listener: bool) -> Any:
    store_mod = importlib.import_module(package + ".store")
    config = store_mod.StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=256 * 1024 * 1024,
        mapped_file_size_consume_queue=20 * 10_000,
    )
    store = store_mod.MessageStore(config)
    store.__enter__()
    for n in range(1, records + 1):
        props = f"TAGS\x01TagA\x02KEYS\x01order\x02UNIQ_KEY\x017F0000010000{n:020X}"
        fields = {"properties": props, "born_host": ("10.0.0.1", 40000)}
        if hasattr(store, "put"):
            result = store.put(store_mod.MessageDraft("BenchTopic", n % 4, BODY, **fields))
        else:  # a commit from before MessageDraft
            result = store.append_message("BenchTopic", n % 4, BODY, **fields)
        if not result.ok:
            raise RuntimeError(result)
    if listener:
        store.arrival_listener = _Fanout()
    return store


def one_run(base: Path, records: int, pass_size: int, listener: bool) -> tuple[float, float]:
    """CPU µs per record of (this tree, the other)."""
    work = Path(tempfile.mkdtemp(dir=base))
    try:
        stores = {"this": filled_store("rmq", work / "this", records, listener)}
        stores["base"] = filled_store("rmq_base", work / "base", records, listener)
        cpu = dict.fromkeys(stores, 0.0)
        done = dict.fromkeys(stores, 0)
        turn = 0
        deadline = time.monotonic() + 120
        while any(s.dispatch_behind for s in stores.values()) and time.monotonic() < deadline:
            for name in ("this", "base") if turn % 2 == 0 else ("base", "this"):
                t0 = time.process_time()
                done[name] += stores[name].dispatch_pending(pass_size)
                cpu[name] += time.process_time() - t0
            turn += 1
        for store in stores.values():
            _discard(store)
        return cpu["this"] / done["this"] * 1e6, cpu["base"] / done["base"] * 1e6
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_pairs(against: str, runs: int, unit: str, one: Callable[[Path], tuple[float, float]]) -> None:
    """Export `against` as `rmq_base`, then print `runs` results of `one(work dir)` (CPU per
    `unit` of this tree and of the other) with their ratio, and the median ratio."""
    base = Path(tempfile.mkdtemp(prefix="rmq-ab-"))
    try:
        export_base(against, base)
        sys.path.insert(0, str(base))
        ratios = []
        for run in range(1, runs + 1):
            this, other = one(base)
            ratios.append(this / other)
            print(f"run {run}: this {this:6.2f} us/{unit}, {against} {other:6.2f}, ratio {this / other:.3f}")
        print(f"median ratio {statistics.median(ratios):.3f}  (load {os.getloadavg()[0]:.2f})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD", help="the commit to compare with (default HEAD)")
    ap.add_argument("--records", type=int, default=40_000)
    ap.add_argument("--pass-size", type=int, default=32, help="records per dispatch pass")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--listener", action="store_true", help="with an arrival listener shaped like the broker's")
    args = ap.parse_args()
    print(f"dispatch, {args.records:,} records, passes of {args.pass_size}, this tree against {args.against}")
    run_pairs(
        args.against, args.runs, "record", lambda base: one_run(base, args.records, args.pass_size, args.listener)
    )


if __name__ == "__main__":
    main()
