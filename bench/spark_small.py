"""Spark for small data: where the time of a 20,000-row `rmq export parquet` goes.

    python bench/spark_small.py [--messages 20000] [--body 256] [--repeat 3] [--master local[2]]
                                [--code DIR ...] [--no-command] [--conf KEY=VALUE ...]

Writes one store of --messages records with the synchronous MessageStore, then per repeat
and per checkout (--code, default this tree; several alternate run by run, so the machine's
drift falls on each) runs two fresh processes:
  (a) the phases, each timed in one process: the session start (JVM, `build_session`), the
      first query (a count of the "rocketmq-store" source: Python workers start, classes
      load), the export (rmq_spark.export.run into an empty directory, as the command does)
      and the re-export of the same store over it (the merge path); then session.stop();
  (b) the real command, `python -m rmq export parquet --store ... --out ...`, wall clock
      from start to exit (skip with --no-command).
A checkout that keeps a class archive of Spark (spark/class_archive.py) writes it when its
first process exits, once per machine: the first run then shows that in its process and
command times; repeat runs (or one run beforehand) show the steady state.
Prints a table of the medians per checkout, wall seconds and the CPU seconds of the process
tree (the JVM and its Python workers: steadier than wall time on a busy machine; in brackets
the driver JVM's own), rows/s of
the export alone and of the whole command, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if "--child" not in sys.argv:  # a child imports the checkout under test, from PYTHONPATH
    sys.path.insert(0, str(ROOT))

PHASES = ("session", "first query", "export", "re-export", "stop", "process")


def make_store(root: Path, messages: int, body: int, topics: int) -> None:
    from rmq.store import MessageDraft, MessageStore, StoreConfig

    t0 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
    clock = [t0]
    cfg = StoreConfig(store_path_root_dir=str(root), message_index_enable=False)
    pool = [os.urandom(body) for _ in range(64)]
    with MessageStore(cfg, clock=lambda: clock[0]) as store:
        for i in range(messages):
            clock[0] = t0 + i * 10
            props = {"KEYS": f"key-{i}", "TAGS": f"tag{i % 8}", "UNIQ_KEY": f"{i:032X}"}
            draft = MessageDraft(f"Small{i % topics}", i % 4, pool[i % len(pool)], properties=props)
            if not store.put(draft).ok:
                raise RuntimeError(f"store refused message {i}")
            if i % 5_000 == 4_999:
                store.dispatch_pending()


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of `pid` and every live descendant (the JVM, Python workers) with the
    children they waited for; and of those, what the driver JVM itself used."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                head, tail = (d / "stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            f = tail.split()
            own, waited = int(f[11]) + int(f[12]), int(f[13]) + int(f[14])
            stats[int(d.name)] = (int(f[1]), own, waited, head.endswith("(java"))
    total = jvm = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        _, own, waited, is_java = stats.get(p, (0, 0, 0, False))
        total += own + waited
        jvm += own if is_java else 0
        todo += [c for c, st in stats.items() if st[0] == p]
    return total / tick, jvm / tick


def child(store: str, out: str, master: str, conf: dict[str, str]) -> None:
    """Run the phases in this process and print them (wall and CPU seconds) as one JSON line."""
    started = time.monotonic()
    from rmq_spark import export
    from rmq_spark.session import build_session

    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    jvm: dict[str, float] = {}
    mark = [time.monotonic(), *tree_cpu(os.getpid())]

    def phase(name: str) -> None:
        now, (used, used_jvm) = time.monotonic(), tree_cpu(os.getpid())
        times[name], cpu[name], jvm[name] = now - mark[0], used - mark[1], used_jvm - mark[2]
        mark[:] = [now, used, used_jvm]

    session = build_session(master, "rmq bench small", {"spark.driver.memory": "1g", **conf})
    phase("session")
    rows = session.read.format("rocketmq-store").load(store).count()
    phase("first query")
    args = export.parse_args(["--store", store, "--out", out])
    result = export.run(session, args)
    phase("export")
    again = export.run(session, args)
    phase("re-export")
    session.stop()
    phase("stop")
    del cpu["stop"], jvm["stop"]  # the JVM and its workers are gone: their CPU no longer counts
    times["process"] = time.monotonic() - started
    report = {"rows": rows, "exported": result.rows, "again": again.rows, "times": times, "cpu": cpu, "jvm": jvm}
    report["code"] = str(Path(export.__file__).resolve().parents[1])
    print(json.dumps(report))


def _env(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Only the checkout under test: the session puts its own package roots on the workers' path.
    env["PYTHONPATH"] = str(code)
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    return env


def run_phases(
    code: Path, store: Path, out: Path, master: str, conf: list[str]
) -> tuple[dict[str, float], dict[str, float]]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(store), str(out), "--master", master]
    for c in conf:
        cmd += ["--conf", c]
    t = time.monotonic()
    proc = subprocess.run(cmd, env=_env(code), capture_output=True, text=True, check=False, timeout=1800)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise RuntimeError(f"phases failed ({code}): {proc.stderr[-3000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
    report = json.loads(line)
    if Path(report["code"]) != code:
        raise RuntimeError(f"the phases ran {report['code']}, not {code}")
    rows = {report["rows"], report["exported"], report["again"]}
    if len(rows) != 1:
        raise RuntimeError(f"row counts differ: {report}")
    times: dict[str, float] = report["times"]
    times["interpreter+imports"] = wall - times["process"]
    return times, {**report["cpu"], **{f"{k} jvm": v for k, v in report["jvm"].items()}}


def run_command(code: Path, store: Path, out: Path, master: str) -> float:
    cmd = [sys.executable, "-m", "rmq", "export", "parquet", "--store", str(store), "--out", str(out)]
    cmd += ["--master", master]
    t = time.monotonic()
    proc = subprocess.run(cmd, env=_env(code), cwd=code, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({code}): {proc.stderr[-3000:]}")
    return time.monotonic() - t


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--body", type=int, default=256)
    p.add_argument("--topics", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--code", action="append", default=[], help="checkout to measure (repeat to alternate)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting (phases)")
    p.add_argument("--no-command", action="store_true", help="skip the `rmq export parquet` process")
    p.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    p.add_argument("--child", nargs=2, metavar=("STORE", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child, args.master, dict(c.split("=", 1) for c in args.conf))
        return 0

    codes = [Path(c).resolve() for c in args.code] or [ROOT]
    work = Path(args.dir or tempfile.mkdtemp(prefix="rmq-spark-small-"))
    try:
        store = work / "store"
        t = time.monotonic()
        make_store(store, args.messages, args.body, args.topics)
        print(f"store: {args.messages:,} messages of {args.body} B in {time.monotonic() - t:.1f} s")
        load_before = _load()
        walls: dict[Path, list[dict[str, float]]] = {c: [] for c in codes}
        cpus: dict[Path, list[dict[str, float]]] = {c: [] for c in codes}
        for n in range(args.repeat):
            for i, code in enumerate(codes):
                times, cpu = run_phases(code, store, work / f"out-{n}-{i}", args.master, args.conf)
                if not args.no_command:
                    times["command"] = run_command(code, store, work / f"cmd-{n}-{i}", args.master)
                walls[code].append(times)
                cpus[code].append(cpu)
                shown = "  ".join(f"{k} {v:.1f}" for k, v in times.items())
                print(f"run {n + 1} {code.name}: {shown}  (load {_load()})", flush=True)
        print(f"\n{args.messages:,} rows, master {args.master}, medians of {args.repeat} runs: wall s / CPU s "
              f"of the process tree (of the driver JVM); load {load_before} before, {_load()} after")  # fmt: skip
        print(f"{'phase':<22}" + "".join(f"{c.name[:22]:>24}" for c in codes))
        for name in [*PHASES[:-1], "interpreter+imports", *([] if args.no_command else ["command"])]:
            cells = []
            for c in codes:
                wall = statistics.median(r[name] for r in walls[c])
                used = [r[name] for r in cpus[c] if name in r]
                jvm = [r[f"{name} jvm"] for r in cpus[c] if f"{name} jvm" in r]
                cells.append(
                    f"{wall:.1f} / {statistics.median(used):.1f} ({statistics.median(jvm):.1f})"
                    if used
                    else f"{wall:.1f}"
                )
            print(f"{name:<22}" + "".join(f"{x:>24}" for x in cells))
        for label, key in (("rows/s export", "export"), ("rows/s command", "command")):
            if key in walls[codes[0]][0]:
                rates = [args.messages / statistics.median(r[key] for r in walls[c]) for c in codes]
                print(f"{label:<22}" + "".join(f"{x:>24,.0f}" for x in rates))
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
