"""DLedger group benchmark: appends through a 3-member group vs a lone member, and failover time.

    python bench/dledger_log.py [--seconds 8] [--window 64] [--size 1024] [--kills 20]

Members run as separate processes (`python -m rmq.broker.dledger`, each with its own store in
a temporary directory). Throughput: `--window` concurrent APPEND requests (1 KiB bodies) to the
leader for `--seconds`, each answered once its entry is on a majority's disks; prints msg/s and
p50/p99 latency. Failover: the leader is killed with SIGKILL `--kills` times (restarted each
time); each time from the kill to the first append acknowledged by the new leader.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ha import stop_all
from rmq.protocol import RemotingCommand, ResponseCode
from rmq.raft import messages as M
from rmq.remoting import RemotingClient, RemotingError

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Group:
    def __init__(self, work: Path, n: int, election_ms: int, heartbeat_ms: int) -> None:
        self.work = work
        self.addrs = {f"n{i}": f"127.0.0.1:{free_port()}" for i in range(n)}
        self.peers = ";".join(f"{k}-{v}" for k, v in self.addrs.items())
        self.election_ms, self.heartbeat_ms = election_ms, heartbeat_ms
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def start(self, ident: str) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq.broker.dledger", "--self", ident, "--peers", self.peers,
             "--store", str(self.work / ident), "--election-timeout-ms", str(self.election_ms),
             "--heartbeat-ms", str(self.heartbeat_ms), "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=dict(os.environ),
        )  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.readline()
        self.procs[ident] = proc

    def kill(self, ident: str) -> None:
        self.procs[ident].send_signal(signal.SIGKILL)
        self.procs[ident].wait(10)

    def stop(self) -> None:
        stop_all(self.procs.values())


async def leader(client: RemotingClient, addrs: dict[str, str]) -> str:
    while True:
        for ident, addr in addrs.items():
            try:
                r = await client.invoke(addr, RemotingCommand.request(M.METADATA), 0.5)
            except RemotingError:
                continue
            if json.loads(r.body)["role"] == "LEADER":
                return ident
        await trio.sleep(0.01)


async def throughput(group: Group, seconds: float, window: int, size: int) -> tuple[float, float, float]:
    body = b"x" * size
    latencies: list[float] = []
    async with RemotingClient() as client:
        addr = group.addrs[await leader(client, group.addrs)]
        stop_at = trio.current_time() + seconds

        async def sender() -> None:
            while trio.current_time() < stop_at:
                t = trio.current_time()
                r = await client.invoke(addr, RemotingCommand.request(M.APPEND, body=body), 10.0)
                if r.code == ResponseCode.SUCCESS:
                    latencies.append(trio.current_time() - t)

        t0 = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(window):
                nursery.start_soon(sender)
        elapsed = trio.current_time() - t0
    latencies.sort()
    return len(latencies) / elapsed, latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


async def failovers(group: Group, kills: int) -> list[float]:
    times = []
    async with RemotingClient() as client:
        for _ in range(kills):
            old = await leader(client, group.addrs)
            t0 = trio.current_time()
            group.kill(old)
            rest = {k: v for k, v in group.addrs.items() if k != old}
            while True:
                new = await leader(client, rest)
                try:
                    r = await client.invoke(rest[new], RemotingCommand.request(M.APPEND, body=b"probe"), 5.0)
                except RemotingError:
                    continue
                if r.code == ResponseCode.SUCCESS:
                    break
            times.append(trio.current_time() - t0)
            group.start(old)
            # as an operator would: the next kill only once the restarted member has caught up
            target = json.loads((await client.invoke(rest[new], RemotingCommand.request(M.METADATA), 2.0)).body)
            while True:
                try:
                    r = await client.invoke(group.addrs[old], RemotingCommand.request(M.METADATA), 0.5)
                    if json.loads(r.body)["endIndex"] >= target["commitIndex"]:
                        break
                except RemotingError:
                    pass
                await trio.sleep(0.05)
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--election-ms", type=int, default=3000, help="election timeout (default 3000, as DLedger's)")
    p.add_argument("--heartbeat-ms", type=int, default=1000)
    args = p.parse_args()
    rows = []
    for n in (1, 3):
        with tempfile.TemporaryDirectory(prefix="rmq-bench-dledger-") as tmp:
            group = Group(Path(tmp), n, args.election_ms, args.heartbeat_ms)
            try:
                for ident in group.addrs:
                    group.start(ident)
                rows.append((n, *trio.run(throughput, group, args.seconds, args.window, args.size)))
                if n == 3 and args.kills:
                    times = trio.run(failovers, group, args.kills)
            finally:
                group.stop()
    load = os.getloadavg()[0]
    print(f"\n{args.size} B appends, window {args.window}, {args.seconds:.0f} s each, load {load:.2f}")
    for n, tps, p50, p99 in rows:
        label = "lone member" if n == 1 else f"{n}-member group"
        print(f"{label:<16} {tps:>9,.0f} appends/s   p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    if len(rows) == 2:
        print(f"group / lone: {rows[1][1] / rows[0][1]:.0%}")
    if args.kills:
        print(
            f"failover over {len(times)} leader kills (election timeout {args.election_ms} ms): "
            f"min {min(times):.2f} s, median {statistics.median(times):.2f} s, max {max(times):.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
