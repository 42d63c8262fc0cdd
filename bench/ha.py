"""Replication benchmark: a lone master vs ASYNC_MASTER vs SYNC_MASTER, each with its slave.

    python bench/ha.py                       # 10 s per mode, 1 KiB bodies, 64 sends in flight
    python bench/ha.py --duration 20 --window 64 --size 1024 --modes lone,async,sync

For each mode it starts a name server and the brokers as separate processes (`python -m rmq
namesrv` / `broker`, stores in a temporary directory, ASYNC_FLUSH), drives the master with our
own `Producer` from this process (`--window` concurrent senders), and prints msg/s, p50/p99
send latency, failures, and for modes with a slave its replication lag in bytes (sampled every
100 ms from GET_BROKER_RUNTIME_INFO of both brokers) and how long after the load it reached 0.
The aim: SYNC_MASTER keeps at least 70% of ASYNC_MASTER's throughput (acks are group-committed).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.client import Message, Producer
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient

ROOT = Path(__file__).resolve().parents[1]


def free_port(span: int = 1) -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            for p in range(base - 2, base + span):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


def spawn(args: list[str], log: Path) -> subprocess.Popen[str]:
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", *args, "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=f,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, "RMQ_RUN_DIR": str(log.parent / "run")},
        )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "boot success" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    raise RuntimeError(f"{args[0]} did not start: {log.read_text()[-2000:]}")


def broker(
    work: Path, namesrv: str, name: str, role: str, port: int, flush: str = "ASYNC_FLUSH", extra: str = ""
) -> subprocess.Popen[str]:
    """A broker process; `extra` is more of its configuration, lines of key=value."""
    conf = work / f"{name}-{role}.conf"
    conf.write_text(
        f"brokerClusterName=BenchCluster\nbrokerName={name}\nbrokerRole={role}\n"
        f"brokerId={1 if role == 'SLAVE' else 0}\n"
        f"namesrvAddr={namesrv}\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nlistenPort={port}\n"
        f"storePathRootDir={work / (name + '-' + role)}\nflushDiskType={flush}\n{extra}"
    )
    return spawn(["broker", "-c", str(conf)], work / f"{name}-{role}.log")


def stop_all(procs: Iterable[subprocess.Popen[str]]) -> None:
    """Terminate the processes still running, then wait for each (killed after 20 s)."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


async def runtime_max_offset(client: RemotingClient, addr: str) -> int:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3.0)
    return int(json_body.loads(r.body)["table"]["commitLogMaxOffset"])


async def run_mode(mode: str, args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"rmq-bench-ha-{mode}-") as tmp:
        work = Path(tmp)
        ns_port = free_port()
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        namesrv = f"127.0.0.1:{ns_port}"
        try:
            m_port, s_port = free_port(3), free_port(3)
            role = {"lone": "ASYNC_MASTER", "async": "ASYNC_MASTER", "sync": "SYNC_MASTER"}[mode]
            procs.append(broker(work, namesrv, "bench-a", role, m_port))
            if mode != "lone":
                procs.append(broker(work, namesrv, "bench-a", "SLAVE", s_port))
            master, slave = f"127.0.0.1:{m_port}", f"127.0.0.1:{s_port}"
            return await drive(mode, args, namesrv, master, slave if mode != "lone" else None)
        finally:
            stop_all(procs)


async def drive(mode: str, args: argparse.Namespace, namesrv: str, master: str, slave: str | None) -> dict[str, object]:
    topic = "BenchHa"
    body = b"x" * args.size
    async with RemotingClient() as client:
        r = await client.invoke(
            master,
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": "8", "writeQueueNums": "8", "perm": "6"},
            ),
            5.0,
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        async with Producer("bench_ha", namesrv=namesrv, retry_times=0) as producer:
            # warm up until a send is stored and (for SYNC_MASTER) acked by the slave
            with trio.fail_after(30):
                while (await producer.send(Message(topic, body))).status.value != "SEND_OK":
                    await trio.sleep(0.2)
            latencies: list[float] = []
            failures = 0
            lags: list[int] = []
            stop_at = trio.current_time() + args.duration

            async def sender() -> None:
                nonlocal failures
                while trio.current_time() < stop_at:
                    t0 = trio.current_time()
                    try:
                        result = await producer.send(Message(topic, body))
                        ok = result.status.value == "SEND_OK"
                    except Exception:  # noqa: BLE001 - a benchmark counts failures
                        ok = False
                    if ok:
                        latencies.append(trio.current_time() - t0)
                    else:
                        failures += 1

            async def sample_lag() -> None:
                assert slave is not None
                while True:
                    m = await runtime_max_offset(client, master)
                    s = await runtime_max_offset(client, slave)
                    lags.append(max(0, m - s))
                    await trio.sleep(0.1)

            t0 = trio.current_time()
            async with trio.open_nursery() as outer:
                if slave is not None:
                    outer.start_soon(sample_lag)
                async with trio.open_nursery() as senders:
                    for _ in range(args.window):
                        senders.start_soon(sender)
                elapsed = trio.current_time() - t0
                catch_up = None
                if slave is not None:
                    end = trio.current_time()
                    with trio.move_on_after(10):
                        while await runtime_max_offset(client, slave) != await runtime_max_offset(client, master):
                            await trio.sleep(0.01)
                        catch_up = trio.current_time() - end
                outer.cancel_scope.cancel()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {
        "mode": mode,
        "msgs": len(latencies),
        "tps": len(latencies) / elapsed,
        "p50": pct(0.50),
        "p99": pct(0.99),
        "failures": failures,
        "lag_max": max(lags) if lags else None,
        "lag_mean": statistics.fmean(lags) if lags else None,
        "catch_up": catch_up,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--window", "-w", type=int, default=64)
    ap.add_argument("--size", "-s", type=int, default=1024)
    ap.add_argument("--modes", default="lone,async,sync")
    args = ap.parse_args(argv)
    labels = {"lone": "lone master", "async": "ASYNC_MASTER + slave", "sync": "SYNC_MASTER + slave"}
    results = []
    for mode in args.modes.split(","):
        print(f"running {labels[mode]} for {args.duration:.0f} s ...", flush=True)
        results.append(trio.run(run_mode, mode, args))
    load = os.getloadavg()[0]
    print(f"\n{args.size} B bodies, window {args.window}, {args.duration:.0f} s per mode, load {load:.2f}")
    print(
        f"{'mode':<22} {'msg/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'fail':>5} "
        f"{'lag max B':>10} {'lag avg B':>10} {'to 0 s':>7}"
    )
    for r in results:
        lag_max = "-" if r["lag_max"] is None else f"{r['lag_max']:,}"
        lag_avg = "-" if r["lag_mean"] is None else f"{r['lag_mean']:,.0f}"
        catch = "-" if r["catch_up"] is None else f"{r['catch_up']:.2f}"
        print(
            f"{labels[str(r['mode'])]:<22} {r['tps']:>9,.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} {r['failures']:>5} "
            f"{lag_max:>10} {lag_avg:>10} {catch:>7}"
        )
    by_mode = {r["mode"]: r for r in results}
    if "async" in by_mode and "sync" in by_mode:
        ratio = float(by_mode["sync"]["tps"]) / float(by_mode["async"]["tps"])  # type: ignore[arg-type]
        print(f"SYNC_MASTER / ASYNC_MASTER throughput: {ratio:.0%} (aim: at least 70%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
