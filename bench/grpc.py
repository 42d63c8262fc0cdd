"""The official 5.x Python client through rmq's gRPC proxy against our 4.x client straight to
the broker.

    python bench/grpc.py                          # 2,000 messages of 1 KiB, local and cluster mode
    python bench/grpc.py --count 5000 --size 256 --modes cluster --seconds 60

Each mode starts what it needs on 127.0.0.1 as processes, over a fresh store in a temporary
directory: `local`, a name server and `python -m rmq broker --enable-proxy` (the proxy in the
broker's process, mqbroker's local mode); `cluster`, a name server, a broker and `python -m
rmq proxy` in front of it. Then, each client in a process of its own, one after the other:

- `5.x`: rocketmq-python-client 5.1.2 (grpcio; installed by scripts/bootstrap.sh in
  .cache/rocketmq5): a Producer sends `--count` messages one at a time through the proxy
  (`send`, each waiting for its answer), then a SimpleConsumer receives them, batches of
  32, and acks each (`ack`, one call per message), as its documentation shows;
- `4.x`: rmq.client's Producer sends as many to the broker, one at a time, then its
  PushConsumer consumes them (a handler that counts; offsets committed as it goes).

Prints, per mode and client, sends a second with the p50 and p99 of one send's round trip,
and messages received and acked (5.x) or consumed (4.x) a second; after each, the CPU the
servers (broker and proxy processes) spent per message in that phase ("srv µs"). Each phase stops after
`--seconds` at most. The machine's load is printed with the figures: on a shared machine
they move from run to run; compare the rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# this file's name is grpcio's package name: keep its directory off the path, so that the
# 5.x client's `import grpc` finds grpcio
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
CLIENT5 = ROOT / ".cache" / "rocketmq5"
TOPIC5, TOPIC4 = "BenchGrpc5", "BenchGrpc4"


def summary(latencies: list[float], elapsed: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
    return {
        "count": len(ordered),
        "elapsed": elapsed,
        "p50": statistics.median(ordered) if ordered else 0.0,
        "p99": p99,
    }


# -- the clients, each run as a process of its own ---------------------------------------------


def send5(endpoint: str, count: int, size: int, seconds: float) -> dict[str, Any]:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC5,))
    producer.startup()
    latencies = []
    try:
        body = b"x" * size
        start = time.perf_counter()
        for _ in range(count):
            msg = Message()
            msg.topic = TOPIC5
            msg.body = body
            before = time.perf_counter()
            producer.send(msg)
            latencies.append(time.perf_counter() - before)
            if before - start > seconds:
                break
        elapsed = time.perf_counter() - start
    finally:
        producer.shutdown()
    return summary(latencies, elapsed)


def receive5(endpoint: str, count: int, seconds: float) -> dict[str, Any]:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    config = ClientConfiguration(endpoint, Credentials())
    consumer = SimpleConsumer(config, "BenchGrpc5Group", {TOPIC5: FilterExpression()}, await_duration=5)
    consumer.startup()
    got = 0
    try:
        start = time.perf_counter()
        while got < count and time.perf_counter() - start < seconds:
            for msg in consumer.receive(32, 30):
                consumer.ack(msg)
                got += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.shutdown()
    return {"count": got, "elapsed": elapsed}


async def send4(namesrv: str, count: int, size: int, seconds: float) -> dict[str, Any]:
    from rmq.client import Message, Producer

    latencies = []
    async with Producer("BenchGrpc4Producer", namesrv, send_timeout=30.0) as producer:
        body = b"x" * size
        start = time.perf_counter()
        for _ in range(count):
            before = time.perf_counter()
            await producer.send(Message(TOPIC4, body))
            latencies.append(time.perf_counter() - before)
            if before - start > seconds:
                break
        elapsed = time.perf_counter() - start
    return summary(latencies, elapsed)


async def receive4(namesrv: str, count: int, seconds: float) -> dict[str, Any]:
    import trio

    from rmq.client import ConsumeFromWhere, MessageExt, PushConsumer

    got = 0
    done = trio.Event()

    def handler(msg: MessageExt) -> None:
        nonlocal got
        got += 1
        if got >= count:
            done.set()

    consumer = PushConsumer(
        "BenchGrpc4Group", namesrv, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    consumer.subscribe(TOPIC4)
    async with consumer:
        start = time.perf_counter()
        with trio.move_on_after(seconds):
            await done.wait()
        elapsed = time.perf_counter() - start
    return {"count": got, "elapsed": elapsed}


def run_role(args: argparse.Namespace) -> dict[str, Any]:
    if args.role == "send5":
        return send5(args.target, args.count, args.size, args.seconds)
    if args.role == "receive5":
        return receive5(args.target, args.count, args.seconds)
    sys.path.insert(0, str(ROOT))
    import trio

    if args.role == "send4":
        return trio.run(send4, args.target, args.count, args.size, args.seconds)
    return trio.run(receive4, args.target, args.count, args.seconds)


def client(role: str, target: str, args: argparse.Namespace) -> dict[str, Any]:
    """`role` in a process of its own: the 5.x client with only its directory on the path
    (its import name, rocketmq, is also the C++ client's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if role.endswith("5"):
        env["PYTHONPATH"] = str(CLIENT5)
    command = [sys.executable, "-P", __file__, "--role", role, "--target", target]
    command += ["--count", str(args.count), "--size", str(args.size), "--seconds", str(args.seconds)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.seconds + 120, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{role} failed ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- the servers --------------------------------------------------------------------------------


def wait_for_port(port: int, proc: subprocess.Popen[str], log: Path) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}: {log.read_text()[-2000:]}")


def server_cpu(procs: list[subprocess.Popen[str]]) -> float:
    """CPU seconds the server processes used so far (Linux; 0 elsewhere)."""
    total = 0.0
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_mode(mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT))
    import trio

    from bench.ha import free_port, spawn, stop_all
    from bench.latency import create_topic

    with tempfile.TemporaryDirectory(prefix=f"rmq-bench-grpc-{mode}-") as tmp:
        work = Path(tmp)
        ns_port, port, proxy_port = free_port(), free_port(3), free_port()
        ns = f"127.0.0.1:{ns_port}"
        procs = [spawn(["namesrv", "-p", str(ns_port), "--host", "127.0.0.1"], work / "namesrv.log")]
        try:
            conf = work / "broker.conf"
            conf.write_text(
                f"brokerName=bench-grpc\nnamesrvAddr={ns}\nbrokerIP1=127.0.0.1\nlistenPort={port}\n"
                f"storePathRootDir={work / 'store'}\n"
            )
            if mode == "local":
                local = ["broker", "-c", str(conf), "--enable-proxy", "--proxy-port", str(proxy_port)]
                procs.append(spawn(local, work / "broker.log"))
                wait_for_port(proxy_port, procs[-1], work / "broker.log")
            else:
                procs.append(spawn(["broker", "-c", str(conf)], work / "broker.log"))
                proxy = ["proxy", "-n", ns, "--port", str(proxy_port), "--host", "127.0.0.1"]
                procs.append(spawn(proxy, work / "proxy.log"))
            for topic in (TOPIC5, TOPIC4):
                trio.run(create_topic, ns, f"127.0.0.1:{port}", topic, 4)
            endpoint = f"127.0.0.1:{proxy_port}"
            servers = procs[1:]  # the broker, and the proxy in cluster mode
            rows = []
            for who, target, via in (("5.x", endpoint, "proxy"), ("4.x", ns, "broker")):
                load = os.getloadavg()[0]
                cpu = server_cpu(servers)
                sent = client("send" + who[0], target, args)
                sent["server_cpu"] = server_cpu(servers) - cpu
                cpu = server_cpu(servers)
                received = client("receive" + who[0], target, args)
                received["server_cpu"] = server_cpu(servers) - cpu
                rows.append({"mode": mode, "client": who, "via": via, "load": load, "send": sent, "receive": received})
                print_row(rows[-1])
            return rows
        finally:
            stop_all(procs)


HEADER = (
    f"{'mode':<8} {'cli':<4} {'via':<7} {'load':>5} {'sent':>7} {'send/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
    f"{'srv µs':>7} {'recv':>7} {'recv/s':>8} {'srv µs':>7}"
)


def print_row(row: dict[str, Any]) -> None:
    """srv µs: CPU of the servers (broker, proxy) per message in that phase."""
    sent, received = row["send"], row["receive"]
    rate = sent["count"] / sent["elapsed"] if sent["elapsed"] else 0.0
    taken = received["count"] / received["elapsed"] if received["elapsed"] else 0.0
    send_cpu = sent["server_cpu"] * 1e6 / max(sent["count"], 1)
    receive_cpu = received["server_cpu"] * 1e6 / max(received["count"], 1)
    print(
        f"{row['mode']:<8} {row['client']:<4} {row['via']:<7} {row['load']:>5.2f} {sent['count']:>7,} "
        f"{rate:>8,.0f} {sent['p50'] * 1000:>7.2f} {sent['p99'] * 1000:>7.2f} {send_cpu:>7.0f} "
        f"{received['count']:>7,} {taken:>8,.0f} {receive_cpu:>7.0f}",
        flush=True,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="messages each client sends (default 2,000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long per phase (default 60)")
    parser.add_argument("--modes", default="local,cluster", help="local, cluster or both (default)")
    parser.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    parser.add_argument("--role", choices=("send5", "receive5", "send4", "receive4"), help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.count < 1 or args.size < 1 or args.seconds <= 0 or not set(modes) <= {"local", "cluster"} or not modes:
        parser.error("--count, --size and --seconds must be positive; --modes local, cluster or both")
    if args.role is not None:
        print(json.dumps(run_role(args)), flush=True)
        return 0
    if not (CLIENT5 / "rocketmq" / "v5").is_dir():
        parser.error(f"the 5.x client is not in {CLIENT5.relative_to(ROOT)}: run scripts/bootstrap.sh")
    print(f"{args.count:,} messages of {args.size} B per client, sends one at a time; one broker, 4 queues")
    print(HEADER)
    rows = [row for mode in modes for row in run_mode(mode, args)]
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
