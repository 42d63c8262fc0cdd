"""Where a plain send's CPU goes: per-phase microseconds per message, broker and producer.

    python bench/send_profile.py                       # S2's shape: 1 producer, 64 sends in flight, 1 KiB
    python bench/send_profile.py --window 1            # S1's shape: one send at a time
    python bench/send_profile.py --no-auto-batch       # one request per message (auto_batch=False)
    python bench/send_profile.py --flush SYNC_FLUSH --seconds 8 --rate 250

Starts a name server and a broker (`python -m rmq namesrv` / `python -m rmq broker`, a fresh
store under a temporary directory) and a producer process sending with one `Producer.send`
call per message, `--window` of them in flight. While the load runs it reads each process's
CPU time (utime + stime from /proc) at the start and the end of the measured span, and
samples both with py-spy (`pip install py-spy`; run as root or with ptrace allowed). Each
sample is put in the phase of the innermost frame a rule below claims, so the table reads as
the CPU a message costs in each part of the path: the process's CPU per message, split by
the share of its samples. Without py-spy it prints the totals only.

The phases (first match from the innermost frame outwards):
    frames in     reading the socket and decoding frames and commands
    header        the send header's decoding and the broker's checks
    send logic    the send processor's own work (routing, the draft)
    store append  encoding the record and writing it
    dispatch      consume-queue and index entries, waking parked pulls
    answer        building and encoding the response, writing it to the socket
    scheduler     Trio's run loop and I/O wait bookkeeping
    other         everything no rule claims
The producer has its own table (the send path, encoding, decoding, the scheduler).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BROKER_PHASES: list[tuple[str, tuple[str, ...]]] = [
    ("dispatch", ("rmq/store/dispatch.py", "rmq/store/consume_queue.py", "rmq/store/index.py", "long_polling.py")),
    ("store append", ("rmq/store/append.py", "rmq/store/mapped_file.py", "rmq/store/commitlog.py", "rmq/store/aio.py")),
    ("header", ("rmq/protocol/headers.py", "rmq/protocol/header_codec.py", "rmq/protocol/properties.py")),
    ("answer", ("rmq/remoting/outbox.py", "send_all", "rmq/protocol/command.py:encode", "_respond")),
    ("frames in", ("rmq/protocol/frame.py", "rmq/remoting/stages/", "rmq/protocol/command.py", "receive_some")),
    ("send logic", ("rmq/broker/processors/send.py", "rmq/broker/routing.py", "rmq/protocol/message.py")),
    ("scheduler", ("trio/_core/",)),
]
CLIENT_PHASES: list[tuple[str, tuple[str, ...]]] = [
    (
        "encode",
        (
            "rmq/protocol/headers.py",
            "rmq/protocol/header_codec.py",
            "rmq/protocol/properties.py",
            "rmq/client/plain_send.py",  # a plain send's request and answer (the fast path)
        ),
    ),
    ("frames", ("rmq/protocol/frame.py", "rmq/protocol/command.py", "rmq/remoting/stages/", "send_all")),
    ("connection", ("rmq/remoting/connection.py", "rmq/remoting/outbox.py", "rmq/remoting/client.py")),
    ("send path", ("rmq/client/",)),
    ("scheduler", ("trio/_core/",)),
]

LOADER = """
import sys, trio
from rmq.client import Message, Producer

async def main(namesrv, topic, window, seconds, size, rate, auto_batch):
    body = b"x" * size
    sent = 0
    async with Producer("ProfilePG", namesrv=namesrv, auto_batch=auto_batch == "on") as producer:
        for _ in range(200):  # warm up, route known
            await producer.send(Message(topic, body))
        print("ready", flush=True)
        sys.stdin.readline()  # the measurement starts
        deadline = trio.current_time() + seconds
        gap = 0 if rate <= 0 else window / rate

        async def sender():
            nonlocal sent
            while trio.current_time() < deadline:
                await producer.send(Message(topic, body))
                sent += 1
                if gap:
                    await trio.sleep(gap)

        async with trio.open_nursery() as nursery:
            for _ in range(window):
                nursery.start_soon(sender)
    print(sent, flush=True)

trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]),
         sys.argv[7])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout} s")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """The process's CPU time so far: (user, system) seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def syscalls(pid: int) -> tuple[int, int]:
    """Read-like and write-like system calls the process made so far (/proc/PID/io)."""
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["syscr"]), int(fields["syscw"])


def phase_of(stack: list[str], rules: list[tuple[str, tuple[str, ...]]]) -> str:
    for frame in reversed(stack):  # innermost first
        for phase, needles in rules:
            if any(n in frame for n in needles):
                return phase
    return "other"


def read_samples(path: Path, rules: list[tuple[str, tuple[str, ...]]]) -> collections.Counter[str]:
    """py-spy's raw output: one line per distinct stack, frames joined by ';' (outermost
    first), then a space and its sample count."""
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[phase_of(stack.split(";"), rules)] += int(n)
    return counts


def table(title: str, cpu_us: float, kernel_us: float, counts: collections.Counter[str], order: list[str]) -> None:
    total = sum(counts.values())
    print(f"\n{title}: {cpu_us:.1f} µs of CPU per message, {kernel_us:.1f} of them in the kernel")
    if not total:
        return
    print(f"  {'phase':<14}{'µs/msg':>8}{'share':>8}")
    for phase in [*order, "other"]:
        n = counts.get(phase, 0)
        print(f"  {phase:<14}{cpu_us * n / total:>8.1f}{100 * n / total:>7.0f}%")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0, help="the measured span")
    p.add_argument("--window", type=int, default=64, help="sends in flight (S2: 64, S1: 1)")
    p.add_argument("--size", type=int, default=1024, help="body bytes")
    p.add_argument("--rate", type=float, default=0, help="msg/s in all (0: as fast as it goes)")
    p.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    p.add_argument("--sample-rate", type=int, default=400, help="py-spy samples per second")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a broker.conf line")
    p.add_argument(
        "--auto-batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the producer's auto_batch (on, as by default; --no-auto-batch: one request per message)",
    )
    p.add_argument(
        "--keep",
        "--raw",
        dest="keep",
        type=Path,
        metavar="DIR",
        help="copy py-spy's raw samples (broker.txt, producer.txt) here",
    )
    args = p.parse_args(argv)
    py_spy = shutil.which("py-spy")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    work = Path(tempfile.mkdtemp(prefix="rmq-send-profile-"))
    ns_port, broker_port = free_port(), free_port()
    conf = work / "broker.conf"
    conf.write_text(
        "\n".join(
            [
                "brokerClusterName=Profile",
                "brokerName=profile",
                f"namesrvAddr=127.0.0.1:{ns_port}",
                "brokerIP1=127.0.0.1",
                f"listenPort={broker_port}",
                "vipChannelEnable=false",
                f"storePathRootDir={work / 'store'}",
                f"flushDiskType={args.flush}",
                *args.conf,
            ]
        )
        + "\n"
    )
    procs: list[subprocess.Popen[str]] = []
    try:
        namesrv = subprocess.Popen(
            [sys.executable, "-m", "rmq", "namesrv", "-p", str(ns_port)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        procs.append(namesrv)
        wait_port(ns_port)
        broker = subprocess.Popen(
            [sys.executable, "-m", "rmq", "broker", "-c", str(conf)], env=env, stdout=subprocess.DEVNULL,
            stderr=open(work / "broker.log", "w"), text=True,  # noqa: SIM115 - closed with the process
        )  # fmt: skip
        procs.append(broker)
        wait_port(broker_port)
        subprocess.run(
            [sys.executable, "-m", "rmq", "admin", "updateTopic", "-n", f"127.0.0.1:{ns_port}", "-c", "Profile",
             "-t", "ProfileTopic", "-r", "1", "-w", "1"],
            env=env, check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        time.sleep(1.0)  # the route reaches the name server with the next registration
        loader = subprocess.Popen(
            [sys.executable, "-c", LOADER, f"127.0.0.1:{ns_port}", "ProfileTopic", str(args.window),
             str(args.seconds), str(args.size), str(args.rate), "on" if args.auto_batch else "off"],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(loader)
        assert loader.stdin is not None and loader.stdout is not None
        if loader.stdout.readline().strip() != "ready":
            raise SystemExit("the producer did not start")
        spies = []
        if py_spy:
            for name, pid in (("broker", broker.pid), ("producer", loader.pid)):
                out = work / f"{name}.txt"
                spies.append((name, out, subprocess.Popen(
                    [py_spy, "record", "-p", str(pid), "-r", str(args.sample_rate), "-d", str(int(args.seconds)),
                     "-f", "raw", "-o", str(out), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )))  # fmt: skip
        cpu0 = {pid: cpu_seconds(pid) for pid in (broker.pid, loader.pid)}
        calls0 = syscalls(broker.pid)
        loader.stdin.write("go\n")
        loader.stdin.flush()
        sent = int(loader.stdout.readline().strip() or 0)
        cpu1 = {pid: cpu_seconds(pid) for pid in (broker.pid, loader.pid)}
        calls1 = syscalls(broker.pid)
        loader.wait(30)
        for _, _, spy in spies:
            spy.wait(60)
        if not sent:
            raise SystemExit("nothing was sent")
        print(f"{sent} messages in {args.seconds:.0f} s ({sent / args.seconds:,.0f} msg/s), window {args.window}, "
              f"{args.size} B, {args.flush}; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        reads, writes = (b - a for a, b in zip(calls0, calls1, strict=True))
        print(f"broker system calls per message: {reads / sent:.2f} reads, {writes / sent:.2f} writes")
        results = {name: out for name, out, _ in spies}
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for out in results.values():
                if out.exists():
                    shutil.copy(out, args.keep / out.name)
        for name, pid, rules in (("broker", broker.pid, BROKER_PHASES), ("producer", loader.pid, CLIENT_PHASES)):
            (user0, system0), (user1, system1) = cpu0[pid], cpu1[pid]
            cpu_us = (user1 + system1 - user0 - system0) / sent * 1e6
            kernel_us = (system1 - system0) / sent * 1e6
            counts = read_samples(results[name], rules) if name in results and results[name].exists() else {}
            table(name, cpu_us, kernel_us, collections.Counter(counts), [phase for phase, _ in rules])
        if not py_spy:
            print("\n(py-spy not found: `pip install py-spy` for the per-phase split)")
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
