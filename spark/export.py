"""`rmq export parquet`: RocketMQ messages → Parquet partitioned by topic and date, with Spark.

    rmq export parquet --store DIR [--store DIR ...] --out DIR [--topic T ...] [--since TIME] [--until TIME]
    rmq export parquet --namesrv ADDR --topic T [--topic T ...] --out DIR [--since TIME] [--until TIME]

--store reads CommitLog files directly (a broker's store directory, running or not);
--namesrv pulls from a live cluster, every queue from its earliest to its latest offset.
TIME is epoch milliseconds or ISO 8601 (no zone = UTC); since is inclusive, until
exclusive, both on the store timestamp. Re-running replaces rows by msg_id and never
duplicates them; see spark.parquet_sink for the exact rule.

Exit status: 0 done, 1 failed, 2 bad arguments, 3 no usable Java.

From Python, `to_parquet(out, store=...)` does the same in the active SparkSession, or starts
one and leaves it running: several exports in one process pay for one JVM start.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .java import JavaMissing, check_java
from .options import parse_time
from .parquet_sink import WriteResult, write
from .store_scan import commitlog_dir


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rmq export parquet",
        description="Export RocketMQ messages to Parquet (partitioned by topic and UTC date) with Spark.",
        epilog="Re-running over any range replaces the rows it exports (by msg_id) and keeps every other row; "
        "it never duplicates. Exit status: 0 done, 1 failed, 2 bad arguments, 3 no Java 17+.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--store", action="append", metavar="DIR", help="broker store directory (repeat for several brokers)"
    )
    src.add_argument("--namesrv", metavar="ADDR", help='name server(s) of a live cluster, "host:port;host:port"')
    p.add_argument(
        "--topic", action="append", default=[], metavar="T", help="topic to export (repeat or comma-separate)"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (local path)")
    p.add_argument("--since", metavar="TIME", help="first store time to include (ms or ISO 8601, UTC if no zone)")
    p.add_argument("--until", metavar="TIME", help="store time to stop before")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--driver-memory", default="1g", help="spark.driver.memory (default 1g)")
    p.add_argument("--group", default="rmq-spark", help="consumer group named in pulls (with --namesrv)")
    p.add_argument("--split-size", type=int, metavar="BYTES", help="CommitLog bytes per Spark partition (with --store)")
    return p


def _source(session: Any, args: argparse.Namespace, topics: list[str]) -> Any:
    reader = session.read
    if args.store:
        reader = reader.format("rocketmq-store").option("path", ",".join(args.store))
        if args.split_size:
            reader = reader.option("splitSize", str(args.split_size))
    else:
        reader = reader.format("rocketmq").option("namesrv", args.namesrv).option("group", args.group)
        reader = reader.option("startingOffsets", "earliest").option("endingOffsets", "latest")
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if args.since:
        reader = reader.option("since", str(parse_time(args.since)))
    if args.until:
        reader = reader.option("until", str(parse_time(args.until)))
    return reader.load()


def _check(args: argparse.Namespace) -> None:
    """Raise ValueError for arguments no export can run with."""
    if args.namesrv and not args.topics:
        raise ValueError("--namesrv needs at least one --topic")
    for value in (args.since, args.until):
        if value:
            parse_time(value)
    for store in args.store or []:
        try:
            commitlog_dir(store)
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parsed and checked arguments; exits with status 2 (argparse) on bad ones."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.topics = [t.strip() for arg in args.topic for t in arg.split(",") if t.strip()]
    try:
        _check(args)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def run(session: Any, args: argparse.Namespace, progress: Any = None) -> WriteResult:
    """Export with an existing SparkSession (sources registered, as build_session leaves it)."""
    return write(session, _source(session, args, args.topics), Path(args.out), progress)


def to_parquet(
    out: str | Path,
    *,
    store: str | Path | list[str | Path] | None = None,
    namesrv: str | None = None,
    topics: str | Sequence[str] = (),
    since: str | int | None = None,
    until: str | int | None = None,
    session: Any = None,
    master: str = "local[*]",
    group: str = "rmq-spark",
    split_size: int | None = None,
) -> WriteResult:
    """`rmq export parquet` from Python: the same arguments and rule for re-runs.

    `session` defaults to the active SparkSession, or one started with build_session(master)
    and left running, so the next call skips the JVM start; stop it with `.stop()` or let it
    end with the process. Raises ValueError for arguments the command would refuse.
    """
    stores = [store] if isinstance(store, (str, Path)) else list(store or [])
    if bool(stores) == bool(namesrv):
        raise ValueError("give either store or namesrv")
    names = [topics] if isinstance(topics, str) else list(topics)
    args = argparse.Namespace(
        store=[str(s) for s in stores] or None, namesrv=namesrv, out=str(out), group=group, split_size=split_size,
        topics=[t.strip() for arg in names for t in arg.split(",") if t.strip()],
        since=None if since is None else str(since), until=None if until is None else str(until),
    )  # fmt: skip
    _check(args)
    if session is None:
        from pyspark.sql import SparkSession

        from .session import build_session

        session = SparkSession.getActiveSession() or build_session(master, "rmq export parquet")
    from .sources import register

    register(session)  # a session the caller built without build_session
    return run(session, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_java()
    except JavaMissing as exc:
        print(f"rmq export: {exc}", file=sys.stderr)
        return 3

    from .progress import Progress
    from .session import build_session

    started = time.monotonic()
    session = build_session(args.master, "rmq export parquet", {"spark.driver.memory": args.driver_memory})
    try:
        with Progress(session.sparkContext.statusTracker()) as progress:
            what = (
                f"store {', '.join(args.store)}"
                if args.store
                else f"topics {', '.join(args.topics)} from {args.namesrv}"
            )
            progress.line(f"exporting {what} to {args.out}")
            result = run(session, args, progress)
    except Exception as exc:  # noqa: BLE001 - any failure ends the command with its message
        print(f"rmq export: failed: {exc}", file=sys.stderr)
        return 1
    finally:
        session.stop()
    seconds = time.monotonic() - started
    if result.rows == 0:
        where = "the range asked for" if (args.since or args.until or args.topics) else "the source"
        print(f"exported 0 rows to {args.out}: {where} holds no messages ({seconds:.1f} s)")
        return 0
    rate = result.rows / result.seconds if result.seconds else 0.0
    print(
        f"exported {result.rows} rows to {args.out}: {result.bytes / 1e6:.1f} MB of Parquet in {result.files} files, "
        f"{result.partitions} topic/date partitions ({result.merged} merged with earlier exports); "
        f"{seconds:.1f} s in all, {result.seconds:.1f} s exporting ({rate:,.0f} rows/s)"
    )
    return 0
