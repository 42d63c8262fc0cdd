"""DLedger broker group benchmark: a 3-member group vs a single broker, and failover time.

    python bench/dledger.py                      # 10 s each, 1 KiB bodies, window 64, 20 kills
    python bench/dledger.py --duration 10 --window 64 --size 1024 --kills 20 [--skip-single]
    python bench/dledger.py --members 1 --kills 0     # a group of one: the leader's path alone
    python bench/dledger.py --kills 0 --pairs 5       # five single/group pairs, alternated: median ratio
    python bench/dledger.py --kills 0 --flush SYNC_FLUSH   # every broker SYNC_FLUSH (default ASYNC_FLUSH)

Every server is its own process (`python -m rmq namesrv` / `broker`, stores in a temporary
directory, default DLedger timeouts: election 3 s, heartbeat 1 s). Throughput: our own
`Producer` in this process keeps `--window` sends in flight for `--duration` seconds against a
single ASYNC_FLUSH broker, then against a DLedger group (each SEND_OK means a majority has the
message on disk); prints msg/s and p50/p99 latency. Failover: with one sender running, the
group's master is killed with SIGKILL `--kills` times (restarted each time, and back in the
group before the next kill); each time from the kill to the first SEND_OK of a send begun
after it, min/median/max. Aim: the group keeps at least half the single broker's throughput,
and the median failover stays under 5 s.

Every server and the producer share this machine's cores, so the run also prints each
process's CPU per message (user + system, from /proc), and how much of a core each one spent
running and waiting in a run queue (schedstat): a leader whose two figures add up to about 1
never idles, and then the group's throughput is its share of a core over its CPU per
message. `--members 1` runs a group of one
member, which commits on its own: what the leader's send path costs without replication.
This machine's speed drifts by 10-30 % within minutes: `--pairs N` alternates N single
broker and group runs and prints the median of their ratios (kills follow the last pair).

A low-level variant that appends to bare DLedger members is bench/dledger_log.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ha import free_port, spawn, stop_all
from rmq.client import Message, MQAdmin, Producer
from rmq.client.errors import MQClientError

GROUP = "bench-d"


def member_conf(
    work: Path,
    namesrv: str,
    k: int,
    port: int,
    peers: str,
    busy_poll: int = 0,
    flush: str = "ASYNC_FLUSH",
    extra: tuple[str, ...] = (),
) -> Path:
    conf = work / f"n{k}.conf"
    conf.write_text(
        f"brokerClusterName=BenchCluster\nbrokerName={GROUP}\nnamesrvAddr={namesrv}\n"
        f"brokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort={port}\n"
        f"storePathRootDir={work / f'n{k}'}\nflushDiskType={flush}\nbusyPollMicros={busy_poll}\n"
        f"enableDLegerCommitLog=true\ndLegerGroup={GROUP}\ndLegerPeers={peers}\ndLegerSelfId=n{k}\n"
        + "".join(f"{line}\n" for line in extra)
    )
    return conf


async def master_addr(ns: str, not_: str | None = None, timeout: float = 60, group: str = GROUP) -> str:
    async with MQAdmin(namesrv=ns) as admin:
        with trio.fail_after(timeout):
            while True:
                try:
                    addrs = (await admin.cluster_info()).brokers[group].addrs
                    if addrs.get(0) and addrs[0] != not_:
                        return addrs[0]
                except (MQClientError, KeyError):
                    pass
                await trio.sleep(0.05)


async def members_registered(ns: str, count: int, timeout: float = 60, group: str = GROUP) -> None:
    async with MQAdmin(namesrv=ns) as admin:
        with trio.fail_after(timeout):
            while True:
                try:
                    addrs = (await admin.cluster_info()).brokers[group].addrs
                    if len(addrs) == count and 0 in addrs:
                        return
                except (MQClientError, KeyError):
                    pass
                await trio.sleep(0.1)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def run_wait_seconds(pid: int) -> tuple[float, float] | None:
    """Seconds a process's threads have run and waited in a run queue for a core so far, from
    /proc/<pid>/task/*/schedstat; None where the kernel keeps no such counts."""
    run = wait = 0
    stats = list(Path(f"/proc/{pid}/task").glob("*/schedstat"))
    for stat in stats:
        try:
            r, w, _ = stat.read_text().split()
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
        run += int(r)
        wait += int(w)
    return (run / 1e9, wait / 1e9) if stats else None


async def load(ns: str, topic: str, args: argparse.Namespace, procs: dict[str, int] | None = None) -> dict[str, Any]:
    """Keep `args.window` sends in flight; msg/s, latency and, per process, CPU µs per message."""
    procs = {**(procs or {}), "producer": os.getpid()}
    body = b"x" * args.size
    latencies: list[float] = []
    failures = 0
    async with Producer(
        "bench_dledger",
        namesrv=ns,
        retry_times=0,
        busy_poll_micros=args.busy_poll_micros,
        auto_batch=args.auto_batch,
    ) as producer:
        with trio.fail_after(60):
            while True:
                try:
                    if (await producer.send(Message(topic, body))).status.value == "SEND_OK":
                        break
                except MQClientError:
                    pass
                await trio.sleep(0.2)
        stop_at = trio.current_time() + args.duration

        async def sender() -> None:
            nonlocal failures
            while trio.current_time() < stop_at:
                t0 = trio.current_time()
                try:
                    ok = (await producer.send(Message(topic, body))).status.value == "SEND_OK"
                except MQClientError:
                    ok = False
                if ok:
                    latencies.append(trio.current_time() - t0)
                else:
                    failures += 1

        t0 = trio.current_time()
        cpu0 = {name: cpu_seconds(pid) for name, pid in procs.items()}
        sched0 = {name: run_wait_seconds(pid) for name, pid in procs.items()}
        async with trio.open_nursery() as nursery:
            for _ in range(args.window):
                nursery.start_soon(sender)
        elapsed = trio.current_time() - t0
        cpu1 = {name: cpu_seconds(pid) for name, pid in procs.items()}
        sched1 = {name: run_wait_seconds(pid) for name, pid in procs.items()}
    latencies.sort()
    # cores' worth of running and of waiting for a core (threads that ended drop out: >= 0)
    queued = {
        name: (max(b[0] - a[0], 0.0) / elapsed, max(b[1] - a[1], 0.0) / elapsed)
        for name in procs
        if (a := sched0[name]) is not None and (b := sched1[name]) is not None
    }
    used = {name: (cpu1[name][0] - cpu0[name][0], cpu1[name][1] - cpu0[name][1]) for name in procs}
    sent = max(1, len(latencies))
    cpu = {name: (u / sent * 1e6, s / sent * 1e6) for name, (u, s) in used.items()}

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {
        "tps": len(latencies) / elapsed,
        "p50": pct(0.5),
        "p99": pct(0.99),
        "failures": failures,
        "cpu": cpu,
        "busy": sum(u + s for u, s in used.values()) / elapsed,
        "queued": queued,
    }


async def failovers(
    ns: str,
    members: dict[str, tuple[Path, subprocess.Popen[str]]],
    kills: int,
    *,
    group: str = GROUP,
    restart_after_failover: bool = False,
) -> list[float]:
    """Kill the master `kills` times; seconds from each kill to the first SEND_OK after it.
    With `restart_after_failover` the killed master is restarted only once the name server
    names another master (a controller-mode group: back at once, it would still be master)."""
    answered: list[tuple[float, float]] = []  # (started, answered) of every SEND_OK
    out: list[float] = []
    async with Producer("bench_failover", namesrv=ns, send_timeout=3.0) as producer, trio.open_nursery() as nursery:

        async def sender() -> None:
            while True:
                t0 = trio.current_time()
                try:
                    if (await producer.send(Message("BenchFailover", b"x" * 1024))).status.value == "SEND_OK":
                        answered.append((t0, trio.current_time()))
                        continue
                except MQClientError:
                    pass
                await trio.sleep(0.02)

        nursery.start_soon(sender)
        for i in range(kills):
            await members_registered(ns, len(members), group=group)
            master = await master_addr(ns, group=group)
            await trio.sleep(1.0)
            conf, proc = members[master]
            killed_at = trio.current_time()
            proc.kill()
            proc.wait()
            with trio.fail_after(120):
                while not any(s >= killed_at for s, _ in answered):
                    await trio.sleep(0.01)
            out.append(min(a for s, a in answered if s >= killed_at) - killed_at)
            print(f"  kill {i + 1}: first SEND_OK after {out[-1]:.2f} s", flush=True)
            if restart_after_failover:
                await master_addr(ns, not_=master, group=group)
            restarted = await trio.to_thread.run_sync(spawn, ["broker", "-c", str(conf)], conf.with_suffix(".log"))
            members[master] = (conf, restarted)
        nursery.cancel_scope.cancel()
    return out


async def run_group(args: argparse.Namespace) -> tuple[dict[str, Any], list[float]]:
    with tempfile.TemporaryDirectory(prefix="rmq-bench-dledger-") as tmp:
        work = Path(tmp)
        ns_port = free_port()
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        members: dict[str, tuple[Path, subprocess.Popen[str]]] = {}
        try:
            ports = [free_port(5) for _ in range(args.members)]
            peers = ";".join(f"n{k}-127.0.0.1:{p + 2}" for k, p in enumerate(ports))
            for k, port in enumerate(ports):
                conf = member_conf(work, ns, k, port, peers, args.busy_poll_micros, args.flush, tuple(args.conf))
                members[f"127.0.0.1:{port}"] = (conf, spawn(["broker", "-c", str(conf)], work / f"n{k}.log"))
            master = await master_addr(ns)
            async with MQAdmin(namesrv=ns) as admin:
                before = int((await admin.broker_runtime_info(master)).get("dLegerEndIndex", 0))
                pids = {"namesrv": procs[0].pid}
                for addr, (conf, proc) in members.items():
                    pids[f"leader {conf.stem}" if addr == master else f"follower {conf.stem}"] = proc.pid
                result = await load(ns, "BenchDLedger", args, pids)
                entries = int((await admin.broker_runtime_info(master)).get("dLegerEndIndex", 0)) - before
            result["per_entry"] = result["tps"] * args.duration / max(1, entries)
            kills = await failovers(ns, members, args.kills) if args.kills else []
            return result, kills
        finally:
            stop_all([*(p for _, p in members.values()), procs[0]])


async def run_single(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rmq-bench-single-") as tmp:
        work = Path(tmp)
        ns_port, port = free_port(), free_port(3)
        ns = f"127.0.0.1:{ns_port}"
        conf = work / "single.conf"
        conf.write_text(
            f"brokerClusterName=BenchCluster\nbrokerName=bench-single\nnamesrvAddr={ns}\nbrokerIP1=127.0.0.1\n"
            f"bindAddress=127.0.0.1\nlistenPort={port}\nstorePathRootDir={work / 'single'}\n"
            f"flushDiskType={args.flush}\nbusyPollMicros={args.busy_poll_micros}\n"
        )
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        try:
            procs.append(spawn(["broker", "-c", str(conf)], work / "single.log"))
            return await load(ns, "BenchSingle", args, {"namesrv": procs[0].pid, "broker": procs[1].pid})
        finally:
            stop_all(procs)


def report(args: argparse.Namespace, single: dict[str, Any] | None, group: dict[str, Any]) -> None:
    print(f"\n{args.size} B bodies, window {args.window}, load {os.getloadavg()[0]:.2f}")
    print(f"{'setup':<26} {'msg/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'fail':>5}")
    for label, r in (("single broker", single), (f"DLedger group of {args.members}", group)):
        if r is not None:
            print(f"{label:<26} {r['tps']:>9,.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} {r['failures']:>5.0f}")
    print(f"DLedger entries: {group['per_entry']:.1f} messages per entry")
    print("\nCPU per message, µs user + system (busy: cores kept busy on average)")
    for label, r in (("single broker", single), ("DLedger group", group)):
        if r is not None:
            parts = ", ".join(f"{name} {u:.0f}+{s:.0f}" for name, (u, s) in r["cpu"].items())
            total = sum(u + s for u, s in r["cpu"].values())
            print(f"  {label}: {parts}; total {total:.0f} µs, busy {r['busy']:.2f} cores")
    if group["queued"]:
        print("\nRunning / waiting for a core, cores on average (schedstat; a process whose sum is near 1 never idles)")
        for label, r in (("single broker", single), ("DLedger group", group)):
            if r is not None and r["queued"]:
                parts = ", ".join(f"{name} {run:.2f}/{wait:.2f}" for name, (run, wait) in r["queued"].items())
                print(f"  {label}: {parts}")
    if single is not None:
        print(f"group / single throughput: {group['tps'] / single['tps']:.1%} (aim: at least 50%)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--window", "-w", type=int, default=64)
    ap.add_argument("--size", "-s", type=int, default=1024)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--members", type=int, default=3, help="members of the group (1, 3 or 5)")
    ap.add_argument("--busy-poll-micros", type=int, default=0, help="busyPollMicros of every broker and the producer")
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH", help="every broker's")
    ap.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line for every member (repeat)"
    )
    ap.add_argument(
        "--auto-batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the producer coalesces concurrent sends (auto_batch, on by default)",
    )
    ap.add_argument("--pairs", type=int, default=1, help="single and group runs, alternated; prints the median ratio")
    args = ap.parse_args(argv)
    if args.members < 1:
        ap.error("--members must be at least 1")
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    if args.kills and args.members < 3:
        ap.error("leader kills need a group of at least 3 members (--kills 0)")
    ratios: list[float] = []
    kills: list[float] = []
    for i in range(args.pairs):
        last = i == args.pairs - 1
        if args.pairs > 1:
            print(f"\npair {i + 1} of {args.pairs}", flush=True)
        single = None
        if not args.skip_single:
            print(f"single broker, {args.duration:.0f} s ...", flush=True)
            single = trio.run(run_single, args)
        n_kills = args.kills if last else 0  # leader kills after the last pair only
        what = f"{args.members}-member DLedger group, {args.duration:.0f} s, then {n_kills} leader kills"
        print(f"{what} ...", flush=True)
        group, kills = trio.run(run_group, argparse.Namespace(**{**vars(args), "kills": n_kills}))
        report(args, single, group)
        if single is not None:
            ratios.append(group["tps"] / single["tps"])
    if len(ratios) > 1:
        listed = ", ".join(f"{r:.1%}" for r in ratios)
        print(f"\ngroup / single over {len(ratios)} pairs: median {statistics.median(ratios):.1%} ({listed})")
    if kills:
        print(
            f"failover over {len(kills)} leader kills, kill to first SEND_OK: min {min(kills):.2f} s, "
            f"median {statistics.median(kills):.2f} s, max {max(kills):.2f} s (aim: median under 5 s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
