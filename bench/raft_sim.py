"""Seeded fault-injection runs of the Raft core, as many as asked.

    python bench/raft_sim.py --seeds 10000 --nodes 3,5 [--start 0]

Each seed is one deterministic run of tests/raft/sim.py (crashes, power failures, partitions
including one-way ones, dropped, delayed, duplicated and reordered messages, slow disks, clock
drift, then healing). Prints runs per second, what was injected and committed, and every
failing seed with the command that replays it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.raft.sim import Sim, sweep


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10_000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--nodes", default="3,5")
    args = p.parse_args()
    failed = 0
    for n in (int(x) for x in args.nodes.split(",")):
        totals: collections.Counter[str] = collections.Counter()

        def seen(sim: Sim, totals: collections.Counter[str] = totals) -> None:
            totals.update(sim.stats)
            totals["acked"] += len(sim.acked)

        t = time.monotonic()
        failures = sweep(range(args.start, args.start + args.seeds), n, seen)
        seconds = time.monotonic() - t
        failed += len(failures)
        print(
            f"{n} members: {args.seeds:,} runs in {seconds:.1f} s ({args.seeds / seconds:,.0f} runs/s), "
            f"{len(failures)} failed"
        )
        print(
            f"  injected: {totals['crashes']:,} crashes, {totals['partitions']:,} partitions, "
            f"{totals['dropped']:,} dropped and {totals['duplicated']:,} duplicated messages"
        )
        print(f"  retention: {totals['retentions']:,} log heads deleted, {totals['rebuilds']:,} follower logs rebuilt")
        print(f"  observed: {totals['elections']:,} elections won, {totals['acked']:,} acknowledged proposals checked")
        for f in failures[:20]:
            print(f"  FAILED {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
