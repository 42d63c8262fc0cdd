"""Controller-mode group benchmark: three brokers in controller mode (allAckInSyncStateSet on
and off) vs a lone broker and vs a DLedger group of three, and failover time.

    python bench/controller.py                        # 10 s each, 1 KiB bodies, window 64, 20 kills
    python bench/controller.py --duration 10 --window 64 --size 1024 --kills 20 [--skip-single] [--skip-dledger]

Every server is its own process (`python -m rmq namesrv` / `controller` / `broker`, stores in
a temporary directory). Throughput: our own `Producer` keeps `--window` sends in flight for
`--duration` seconds (bench/dledger.py's load: msg/s, p50/p99, CPU per message per process)
against a lone ASYNC_FLUSH broker, a controller-mode group (three controllers, a master and
two slaves, ASYNC_FLUSH, SYNC_MASTER as controller mode makes it) with allAckInSyncStateSet
true and false, and a DLedger group of three. Failover: with one sender running, the
controller-mode group's master (allAckInSyncStateSet=true) is killed with SIGKILL `--kills`
times; each time from the kill to the first SEND_OK of a send begun after it (at the new
master: the old one is restarted only once another is named), min/median/max. Aims: at least
70 % of the lone broker's throughput with allAckInSyncStateSet=true, median failover under 5 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dledger import failovers, load, master_addr, members_registered, run_group, run_single
from bench.ha import free_port, spawn, stop_all

GROUP = "bench-c"
TIMINGS = (  # failover within a few seconds, as tests/faults' controller-mode cluster
    "controllerHeartBeatTimeoutMills=3000",
    "syncBrokerMetadataPeriod=1000",
    "checkSyncStateSetPeriod=1000",
    "haMaxTimeSlaveNotCatchup=5000",
)


def controller_confs(work: Path) -> tuple[list[Path], str]:
    """Three controller members' conf files, and their addresses as controllerAddr."""
    ports = [free_port() for _ in range(3)]
    peers = ";".join(f"c{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    confs = []
    for i in range(3):
        conf = work / f"c{i}.conf"
        conf.write_text(
            f"controllerDLegerGroup=bench\ncontrollerDLegerPeers={peers}\ncontrollerDLegerSelfId=c{i}\n"
            f"controllerStorePath={work / f'c{i}'}\nbindAddress=127.0.0.1\n"
            "scanNotActiveBrokerInterval=1000\nscanInactiveMasterInterval=1000\n"
        )
        confs.append(conf)
    return confs, ";".join(f"127.0.0.1:{p}" for p in ports)


async def run_controller_group(
    args: argparse.Namespace, all_ack: bool, kills: int
) -> tuple[dict[str, Any], list[float]]:
    with tempfile.TemporaryDirectory(prefix="rmq-bench-controller-") as tmp:
        work = Path(tmp)
        ns_port = free_port()
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        members: dict[str, tuple[Path, Any]] = {}
        try:
            confs, controllers = controller_confs(work)
            for conf in confs:
                procs.append(spawn(["controller", "-c", str(conf)], conf.with_suffix(".log")))
            for k in range(3):
                port = free_port(5)
                conf = work / f"b{k}.conf"
                conf.write_text(
                    f"brokerClusterName=BenchCluster\nbrokerName={GROUP}\nnamesrvAddr={ns}\nbrokerIP1=127.0.0.1\n"
                    f"bindAddress=127.0.0.1\nlistenPort={port}\nstorePathRootDir={work / f'b{k}'}\n"
                    f"flushDiskType=ASYNC_FLUSH\nenableControllerMode=true\ncontrollerAddr={controllers}\n"
                    f"allAckInSyncStateSet={'true' if all_ack else 'false'}\n"
                    + "".join(f"{line}\n" for line in (*TIMINGS, *args.conf))
                )
                members[f"127.0.0.1:{port}"] = (conf, spawn(["broker", "-c", str(conf)], work / f"b{k}.log"))
            await members_registered(ns, 3, group=GROUP)
            master = await master_addr(ns, group=GROUP)
            pids = {"namesrv": procs[0].pid}
            for addr, (conf, proc) in members.items():
                pids[f"master {conf.stem}" if addr == master else f"slave {conf.stem}"] = proc.pid
            result = await load(ns, "BenchController", args, pids)
            out = await failovers(ns, members, kills, group=GROUP, restart_after_failover=True) if kills else []
            return result, out
        finally:
            stop_all([*(p for _, p in members.values()), *procs])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--window", "-w", type=int, default=64)
    ap.add_argument("--size", "-s", type=int, default=1024)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-dledger", action="store_true")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line (repeat)")
    args = ap.parse_args(argv)
    # what bench/dledger.py's helpers read
    args.busy_poll_micros, args.flush, args.auto_batch, args.members = 0, "ASYNC_FLUSH", False, 3
    rows: list[tuple[str, dict[str, Any]]] = []
    if not args.skip_single:
        print(f"lone broker, {args.duration:.0f} s ...", flush=True)
        rows.append(("lone broker", trio.run(run_single, args)))
    print(f"controller mode, allAckInSyncStateSet=false, {args.duration:.0f} s ...", flush=True)
    rows.append(("controller, allAck off", trio.run(run_controller_group, args, False, 0)[0]))
    print(f"controller mode, allAckInSyncStateSet=true, {args.duration:.0f} s, then {args.kills} master kills ...")
    on, kills = trio.run(run_controller_group, args, True, args.kills)
    rows.append(("controller, allAck on", on))
    if not args.skip_dledger:
        print(f"DLedger group of 3, {args.duration:.0f} s ...", flush=True)
        rows.append(("DLedger group of 3", trio.run(run_group, argparse.Namespace(**{**vars(args), "kills": 0}))[0]))
    print(f"\n{args.size} B bodies, window {args.window}")
    print(f"{'setup':<24} {'msg/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'fail':>5}  CPU µs/msg per process (user+sys)")
    for label, r in rows:
        cpu = ", ".join(f"{name} {u + s:.0f}" for name, (u, s) in r["cpu"].items())
        print(f"{label:<24} {r['tps']:>9,.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} {r['failures']:>5.0f}  {cpu}")
    if not args.skip_single:
        lone = rows[0][1]["tps"]
        for label, r in rows[1:]:
            print(f"{label} / lone broker: {r['tps'] / lone:.1%}")
        print("aim: controller with allAck on at least 70% of the lone broker")
    if kills:
        print(
            f"failover over {len(kills)} master kills, kill to first SEND_OK at the new master: "
            f"min {min(kills):.2f} s, "
            f"median {statistics.median(kills):.2f} s, max {max(kills):.2f} s (aim: median under 5 s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
