"""Seeded fault-injection runs of a controller group, as many as asked.

    python bench/controller_sim.py --seeds 10000 [--start 0] [--nodes 3|5|3,5]

Each seed is one deterministic run of tests/controller/sim.py: a controller group of 3 or 5
Raft members under crashes, power failures, partitions, lost, late and duplicated messages,
with broker groups whose brokers die (their connections closing or not), come back and lose
their links to members, checked on
every apply (a new master from the SyncStateSet unless unclean elections are on, epochs that
only rise, one master per group and epoch, the same state on every member at the same log
index) and after healing. Prints the runs, the time taken, what was injected, the masters
elected and the requests refused (by answer code), and every failing seed with the command
that replays it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.protocol import code_name
from tests.controller.sim import run_seed
from tests.raft.sim import InvariantViolated


def sweep(seeds: range, n: int, totals: collections.Counter[str]) -> list[str]:
    failures = []
    for seed in seeds:
        try:
            sim = run_seed(seed, n)
        except InvariantViolated as exc:
            failures.append(str(exc))
            continue
        except Exception as exc:  # a crash of the controller's code is a failure too, with its seed
            failures.append(f"seed {seed} ({n} nodes): {type(exc).__name__}: {exc} -- replay: CONTROLLER_SEED={seed}")
            continue
        totals.update(sim.stats)
        totals["closes"] += sim.closes
        # (group, master epoch) -> master, as applied: the elections that were committed
        totals["masters committed"] += sum(1 for (_, epoch), m in sim.masters.items() if epoch and m is not None)
        totals.update({f"request {k}": v for k, v in sim.requests.items()})
    return failures


def report(n: int, runs: int, seconds: float, totals: collections.Counter[str], failures: list[str]) -> None:
    print(f"{n} members: {runs:,} runs in {seconds:.1f} s ({runs / seconds:,.0f} runs/s), {len(failures)} failed")
    print(
        f"  injected: {totals['crashes']:,} crashes, {totals['partitions']:,} partitions, "
        f"{totals['dropped']:,} dropped and {totals['duplicated']:,} duplicated messages, "
        f"{totals['closes']:,} dead brokers' connections closed"
    )
    print(f"  raft: {totals['elections']:,} leaders elected, {totals['commits']:,} commits")
    requests = {k.removeprefix("request "): v for k, v in totals.items() if k.startswith("request ")}
    masters = requests.get("elect:0", 0) + requests.get("reelect:0", 0)
    print(
        f"  elections answered by a leader: {masters:,} ({requests.get('reelect:0', 0):,} by the controller when "
        f"a master went silent, {requests.get('elect:0', 0):,} asked by a broker); "
        f"{totals['masters committed']:,} new masters committed"
    )
    refused = collections.Counter[str]()
    for key, count in requests.items():
        kind, _, code = key.partition(":")
        if code != "0":
            refused[f"{kind} {code_name(int(code), response=True)}"] += count
    print(f"  refused: {sum(refused.values()):,} requests")
    for key, count in refused.most_common():
        print(f"    {key}: {count:,}")
    accepted = {k: v for k, v in requests.items() if k.endswith(":0")}
    print("  accepted: " + ", ".join(f"{k.removesuffix(':0')} {v:,}" for k, v in sorted(accepted.items())))
    for f in failures[:20]:
        print(f"  FAILED {f}")
    if len(failures) > 20:
        print(f"  ... and {len(failures) - 20} more")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10_000, help="runs per group size")
    p.add_argument("--start", type=int, default=0, help="the first seed")
    p.add_argument("--nodes", default="3", help="controller members: 3, 5 or 3,5")
    args = p.parse_args()
    failed = 0
    for n in (int(x) for x in args.nodes.split(",")):
        totals = collections.Counter[str]()
        t = time.monotonic()
        failures = sweep(range(args.start, args.start + args.seeds), n, totals)
        report(n, args.seeds, time.monotonic() - t, totals, failures)
        failed += len(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
