"""Long seeded fault schedules against broker groups of real processes, with the checker.

    python bench/nemesis.py --seeds 4 --minutes 5 --cluster both [--start 0] [--cpp] [--async-master]

Each seed is one run of tests/faults/run.py: a DLedger group of three (``dledger``) or a
master and a slave (``ha``, SYNC_MASTER unless --async-master), a proxy on every link
between members and on each one's link to the name server, our producer sending (and with
--cpp the official C++ client, in waves), and the nemesis applying the seed's faults for
``--minutes``; then everything is healed and checked (tests/faults/checker.py says what).

Prints a row per run: faults by kind, SEND_OKs, lost and duplicated attempts, log
divergence and consume queue problems found, failover times (from a leader fault to a
long-lived producer's first SEND_OK from another member; for ``ha``, from a master fault
to its next SEND_OK), the longest time from a heal to the next SEND_OK, the longest the
name server named as master a member that did not lead, and the checks that failed. A
failing run keeps its directory (member logs, nemesis.log, history.jsonl) and prints the
command that replays it; passing runs are removed unless --keep.
``--cluster controller`` runs a controller-mode group (three brokers, three controllers).
``--kinds kill,pause`` limits the faults drawn, to hunt one defect.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults.checker import Report
from tests.faults.nemesis import KINDS
from tests.faults.run import Scenario, run

SHORT = {
    "partition": "part",
    "one_way": "1way",
    "pause": "stop",
    "kill": "kill",
    "reset": "rst",
    "slow": "slow",
    "late_registration": "late",
}


def row(r: Report, seconds: float) -> str:
    kinds = " ".join(f"{SHORT.get(k, k)}{n}" for k, n in sorted(r.faults.items()))
    times = [f.seconds for f in r.failovers if f.seconds is not None]
    fo = (
        f"{min(times):.1f}/{statistics.median(times):.1f}/{max(times):.1f} ({len(times)}/{len(r.failovers)})"
        if times
        else f"- (0/{len(r.failovers)})"
    )
    recovered = [x for x in r.recoveries if x is not None]
    rec = f"{max(recovered, default=0):.1f}" + (
        f" ({len(r.recoveries) - len(recovered)} none)" if len(recovered) < len(r.recoveries) else ""
    )
    failed = ",".join(r.failed_checks()) or "ok"
    return (
        f"{r.seed:>5} {r.cluster:<8} {kinds:<44} {r.acked:>7} {r.lost_count:>5} {r.duplicate_count:>4} "
        f"{len(r.divergence):>4} {len(r.queues):>4} {fo:<24} {rec:<10} {r.wrong_route:>5.1f} {seconds:>6.0f}  {failed}"
    )


HEADER = (
    f"{'seed':>5} {'cluster':<8} {'faults':<44} {'SEND_OK':>7} {'lost':>5} {'dup':>4} {'div':>4} {'cq':>4} "
    f"{'failover min/med/max (n)':<24} {'heal->ok':<10} {'route':>5} {'secs':>6}  checks"
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="the first seed")
    p.add_argument("--minutes", type=float, default=5.0, help="length of each fault schedule")
    p.add_argument("--seconds", type=float, default=None, help="the same in seconds (overrides --minutes)")
    p.add_argument("--cluster", choices=("dledger", "ha", "controller", "both"), default="both")
    p.add_argument("--cpp", action="store_true", help="the official C++ client sends too")
    p.add_argument("--async-master", action="store_true", help="ha: ASYNC_MASTER instead of SYNC_MASTER")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"faults to draw from (default all: {','.join(KINDS)})")
    p.add_argument("--keep", action="store_true", help="keep every run's directory")
    p.add_argument("--dir", type=Path, default=None, help="where run directories go (default: a temporary one)")
    p.add_argument("--verbose", action="store_true", help="print the nemesis log as it happens")
    args = p.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not set(kinds) <= set(KINDS):
        p.error(f"--kinds: unknown {sorted(set(kinds) - set(KINDS))}")
    clusters = ("dledger", "ha") if args.cluster == "both" else (args.cluster,)
    base = args.dir or Path(tempfile.mkdtemp(prefix="nemesis-"))
    print(f"runs under {base}; load average {open('/proc/loadavg').read().split()[:3]}", flush=True)
    print(HEADER, flush=True)
    failures: list[tuple[Scenario, Report, Path]] = []
    crashed: list[tuple[Scenario, Path]] = []
    for seed in range(args.start, args.start + args.seeds):
        for cluster in clusters:
            s = Scenario(
                cluster,
                seed,
                seconds=args.seconds or args.minutes * 60,
                role="ASYNC_MASTER" if args.async_master else "SYNC_MASTER",
                cpp=args.cpp,
                kinds=kinds,
            )
            root = base / f"{cluster}-{seed}"
            t = time.monotonic()
            try:
                report = trio.run(lambda s=s, root=root: run(s, root, echo=args.verbose))
            except Exception as exc:  # noqa: BLE001 - one run's crash is its row, the rest still run
                print(f"{seed:>5} {cluster:<8} did not run to its end: {exc!r:.300}", flush=True)
                crashed.append((s, root))
                continue
            print(row(report, time.monotonic() - t), flush=True)
            if report.problems:
                failures.append((s, report, root))
            elif not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    for s, report, root in failures:
        print(f"\n--- {s.cluster} seed {s.seed} failed ({root}); replay: {s.replay()}")
        print(report.summary())
    for s, root in crashed:
        print(f"\n--- {s.cluster} seed {s.seed} did not run to its end ({root}); replay: {s.replay()}")
    return 1 if failures or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
