"""Full-disk runs: a broker process on a small real filesystem, sent to until it refuses.

    python bench/full_disk.py [--disk-mib 96] [--fs tmpfs,ext4] [--code DIR] [--quick]

Each run starts a name server (in this process) and `python -m rmq broker` on a fresh
filesystem of --disk-mib MiB (tests/small_disk.py: a tmpfs in a user and mount
namespace, or a loop-mounted ext4 image, which needs root), a quarter of it taken by another
file. Then:

1. 8 senders send 3,000-byte messages until each is refused (at most 200,000 sends, 300 s);
2. another file takes every block left, and 20 more sends are tried;
3. a new consumer group reads from the first offset (on the full disk);
4. the files go, and the time until a send is taken again is measured; 200 more are sent;
5. a group reads everything again; the broker restarts (SIGTERM) and a group reads again.

Per run: acked sends, refusals by response code, what each read got of what it should (the
acknowledged messages retention had not deleted), acknowledged messages that retention
deleted (below their queue's min offset: CommitLog files deleted above
diskSpaceCleanForciblyRatio, by RocketMQ's rules) and those lost otherwise, and how the
broker exited each time (a negative code is the signal that killed it). Goal: 0 lost, 0
signals.

Then the levels of disk use against one store (MessageStore, disk use read from a stand-in
probe, nothing on a real disk): which files each level deletes and whether writes are
refused.

--code DIR runs another checkout's broker (its rmq package) for a before/after table; the
clients and this script stay this tree's. Where no small filesystem can be made the runs are
skipped with a note; tests/store/test_disk_full.py simulates the disk's answers in-process.
"""

from __future__ import annotations

import argparse
import logging
import os
import struct
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from rmq.client import ConsumeFromWhere, Message, Producer, PullConsumer
from rmq.client.admin import MQAdmin
from rmq.client.errors import MQBrokerError, MQClientError
from rmq.store import MessageDraft
from tests.broker.cluster import loopback_namesrv
from tests.broker.full_disk import ROOT, DiskBroker
from tests.small_disk import SmallDisk

TOPIC = "FullDisk"
BODY = 3000
SENDERS = 8
MAX_SENDS = 200_000
PHASE_SECONDS = 300.0
SMALL_FILES = {
    "mappedFileSizeCommitLog": str(1024 * 1024),
    "mappedFileSizeConsumeQueue": str(3000 * 20),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
}
DEFAULT_FILES = {  # RocketMQ's defaults (the helper's small files undone)
    "mappedFileSizeCommitLog": str(1024 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(300_000 * 20),
    "maxHashSlotNum": "5000000",
    "maxIndexNum": "20000000",
}
RUNS = {
    "default config": DEFAULT_FILES,
    "small files": SMALL_FILES,
    "small files, cleanFileForciblyEnable=false": {**SMALL_FILES, "cleanFileForciblyEnable": "false"},
    "small files, warmMapedFileEnable=true": {**SMALL_FILES, "warmMapedFileEnable": "true"},
}


@dataclass
class Outcome:
    name: str
    fs: str
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (queue id, queue offset)
    refused: Counter[int] = field(default_factory=Counter)  # response code -> count
    remark: str = ""
    failed: Counter[str] = field(default_factory=Counter)  # sends that got no answer, by error
    reads: dict[str, tuple[int, int]] = field(default_factory=dict)  # phase -> (read, acked and not deleted)
    deleted: int = 0  # acked, below its queue's min offset: deleted by retention
    taken_after: float | None = None  # seconds from freeing the disk to a taken send
    exits: list[int | None] = field(default_factory=list)
    error: str = ""

    @property
    def lost(self) -> int:
        """Acknowledged messages neither read at the end nor deleted by retention."""
        return len(self.acked) - self.reads.get("restarted", (0, 0))[0] - self.deleted

    def read(self, phase: str) -> str:
        got, expected = self.reads.get(phase, (0, 0))
        return f"{got}/{expected}"


class Sender:
    def __init__(self, producer: Producer, out: Outcome) -> None:
        self.producer = producer
        self.out = out
        self.seq = 0

    async def one(self) -> bool:
        n = self.seq
        self.seq += 1
        try:
            result = await self.producer.send(Message(TOPIC, struct.pack(">Q", n) + os.urandom(BODY - 8)))
        except MQBrokerError as exc:
            self.out.refused[exc.response_code] += 1
            self.out.remark = self.out.remark or exc.remark
            return False
        except MQClientError as exc:  # no answer: a dead broker, a timeout
            self.out.failed[type(exc).__name__] += 1
            return False
        self.out.acked[n] = (result.message_queue.queue_id, result.queue_offset)
        return True

    async def until_refused(self) -> None:
        async def task() -> None:
            while self.seq < MAX_SENDS and await self.one():
                pass

        with trio.move_on_after(PHASE_SECONDS):
            async with trio.open_nursery() as nursery:
                for _ in range(SENDERS):
                    nursery.start_soon(task)


async def read_phase(namesrv: str, broker: str, group: str, out: Outcome) -> None:
    """What ``group`` reads now of what it should: the acknowledged messages retention has not
    deleted by the end of the read (it may delete while the group reads)."""
    acked = dict(out.acked)
    seen = await read_all(namesrv, group, acked)
    gone = await deleted_by_retention(namesrv, broker, acked)
    out.deleted = len(gone)
    held = acked.keys() - gone
    out.reads[group] = (len(seen & held), len(held))


async def read_all(namesrv: str, group: str, acked: dict[int, tuple[int, int]], seconds: float = 60) -> set[int]:
    """The acknowledged messages a new group reads from the first offset."""
    consumer = PullConsumer(group, namesrv, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False)
    consumer.subscribe(TOPIC)
    seen: set[int] = set()
    quiet = 0
    async with consumer:
        await consumer.wait_for_assignment(timeout=20)
        with trio.move_on_after(seconds):
            while quiet < 5 and len(seen & acked.keys()) < len(acked):
                batch = await consumer.poll(timeout=1)
                quiet = 0 if batch else quiet + 1
                seen.update(struct.unpack_from(">Q", m.body)[0] for m in batch)
    return seen & acked.keys()


async def deleted_by_retention(namesrv: str, broker: str, acked: dict[int, tuple[int, int]]) -> set[int]:
    """The acknowledged messages below their queue's min offset."""
    async with MQAdmin(namesrv=namesrv) as admin:
        stats = await admin.topic_stats_on(broker, TOPIC)
    low = {mq.queue_id: offsets.min_offset for mq, offsets in stats.items()}
    return {n for n, (qid, offset) in acked.items() if offset < low.get(qid, 0)}


async def one_run(name: str, conf: dict[str, str], fs: str, disk_mib: int, code: Path) -> Outcome:
    out = Outcome(name, fs)
    base = Path(tempfile.mkdtemp(prefix="rmq-full-disk-"))
    groups = ("on-full", "after-free", "restarted")
    async with loopback_namesrv() as ns:
        with SmallDisk(base, disk_mib * 1024, fs) as disk:
            disk.fill(leave_kib=disk_mib * 1024 * 3 // 4)
            broker = DiskBroker(base, disk.root / "store", ns.address, code=code, **conf)
            try:
                await trio.to_thread.run_sync(broker.start)
                async with Producer("full-disk", ns.address, retry_times=0, send_timeout=10) as producer:
                    sender = Sender(producer, out)
                    await sender.one()  # the topic is made
                    for group in groups:  # known before the disk fills
                        await read_all(ns.address, group, {}, 10)
                    await sender.until_refused()
                    disk.fill()
                    for _ in range(20):
                        await sender.one()
                    await read_phase(ns.address, broker.address, "on-full", out)
                    disk.free()
                    start = time.monotonic()
                    with trio.move_on_after(30):
                        while not await sender.one():
                            await trio.sleep(0.1)
                        out.taken_after = time.monotonic() - start
                    for _ in range(200):
                        await sender.one()
                    await read_phase(ns.address, broker.address, "after-free", out)
                    out.exits.append(await trio.to_thread.run_sync(broker.stop))
                    await trio.to_thread.run_sync(broker.start)
                    await read_phase(ns.address, broker.address, "restarted", out)
            except (OSError, RuntimeError, MQClientError, trio.TooSlowError) as exc:
                out.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]
            finally:
                if broker.proc is not None:
                    out.exits.append(await trio.to_thread.run_sync(broker.stop))
                    if broker.exit_codes and broker.exit_codes[-1] not in (0, None):
                        out.error = out.error or f"exit {broker.exit_codes[-1]}: {broker.log()[-300:]}"
    return out


def levels_table() -> list[tuple[str, str, str, str, str]]:
    """What one retention round does at each level of disk use (a store in a temporary
    directory; its disk use read from a stand-in probe)."""
    return [
        _one_level(ratio, forcibly, expired)
        for ratio in (0.70, 0.80, 0.87, 0.92)
        for forcibly in (True, False)
        for expired in (False, True)
    ]


def _one_level(ratio: float, forcibly: bool, expired: bool) -> tuple[str, str, str, str, str]:
    from rmq.store import MessageStore, StoreConfig

    now = [int(time.mktime((2024, 3, 5, 13, 0, 0, 0, 0, -1)) * 1000)]  # not deleteWhen (04)
    usage = [0.5]
    with tempfile.TemporaryDirectory() as root:
        cfg = StoreConfig(
            store_path_root_dir=root, mapped_file_size_commitlog=4096, file_reserved_time=1,
            clean_file_forcibly_enable=forcibly, delete_files_batch_max=100,
        )  # fmt: skip
        store = MessageStore(cfg, clock=lambda: now[0], disk_usage=lambda _p: usage[0])
        for _ in range(80):
            now[0] += 1000
            store.put(MessageDraft("T", 0, b"r" * 200))
        store.dispatch_pending()
        files = len(store.commitlog.files.files)
        if expired:
            now[0] += 2 * 3_600_000
        usage[0] = ratio
        res = store.run_retention()
        refused = not store.put(MessageDraft("T", 0, b"x")).ok
        store.close()
    return (
        f"{ratio:.0%}",
        "true" if forcibly else "false",
        "expired" if expired else "not expired",
        f"{res.commitlog_files_deleted} of {files - 1}",
        "refused" if refused else "taken",
    )


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


async def main(args: argparse.Namespace) -> None:
    fss = [fs for fs in args.fs.split(",") if fs]
    runs = dict(list(RUNS.items())[:2]) if args.quick else RUNS
    outcomes: list[Outcome] = []
    for fs in fss:
        if not SmallDisk.allowed(fs):
            print(f"note: no small {fs} here (tmpfs: unshare -rm and mount; ext4: root and mkfs.ext4); skipped")
            continue
        for name, conf in runs.items():
            print(f"... {fs}, {name}", file=sys.stderr, flush=True)
            outcomes.append(await one_run(name, conf, fs, args.disk_mib, Path(args.code).resolve()))
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
    code = "this tree" if Path(args.code).resolve() == ROOT else args.code
    print(f"\nfull-disk runs: {args.disk_mib} MiB filesystems, broker code: {code}, load {' '.join(load)}\n")
    if outcomes:
        rows = [
            [
                o.fs,
                o.name,
                str(len(o.acked)),
                " ".join(f"{code}:{n}" for code, n in sorted(o.refused.items())) or "-",
                o.read("on-full"),
                o.read("after-free"),
                o.read("restarted"),
                str(o.deleted),
                str(o.lost),
                "-" if o.taken_after is None else f"{o.taken_after:.1f}",
                ",".join(str(c) for c in o.exits),
            ]
            for o in outcomes
        ]
        headers = ["fs", "config", "acked", "refused (code:n)", "read on full", "after free", "after restart",
                   "deleted by retention", "lost", "taken again (s)", "exits"]  # fmt: skip
        print(table(headers, rows))
        for o in outcomes:
            if o.error or o.failed:
                print(f"  {o.fs}, {o.name}: {o.error} {dict(o.failed) or ''}")
        remarks = {o.remark for o in outcomes if o.remark}
        for remark in sorted(remarks)[:4]:
            print(f"  refusal remark: {remark}")
    if Path(args.code).resolve() != ROOT:
        print("\n(levels of disk use: this tree's store only, not shown with --code)")
        return
    print("\nlevels of disk use (defaults 75 / 85 / 90; one store, a stand-in disk probe, fileReservedTime 1 h):\n")
    print(
        table(
            ["disk used", "cleanFileForciblyEnable", "files", "CommitLog files deleted", "sends"],
            [list(r) for r in levels_table()],
        )
    )


if __name__ == "__main__":
    logging.getLogger("rmq").addHandler(logging.NullHandler())  # the levels' store logs its deletions
    logging.getLogger("rmq").propagate = False
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk-mib", type=int, default=96, help="size of each small filesystem")
    parser.add_argument("--fs", default="tmpfs,ext4", help="filesystems to run on: tmpfs, ext4 (root)")
    parser.add_argument("--code", default=str(ROOT), help="checkout whose broker runs (default: this one)")
    parser.add_argument("--quick", action="store_true", help="two configurations only")
    trio.run(main, parser.parse_args())
