"""Writer for test_small_filesystem.py: a store on a small filesystem that another file fills.

Usage: python full_disk_writer.py DIR [holes]   (DIR: the root of a small filesystem, tests/small_disk.py)

With ``holes``: a store whose CommitLog ends at a page and whose consume queue's last write
stopped inside an entry at a page (the rest of both files holes) is opened again on the full
filesystem; reading a hole through a mapping of a full tmpfs is a SIGBUS.

Appends and reads messages, appends more, fills the rest of the filesystem with a ballast file
(another process filling the disk), then dispatches, reads, flushes and appends on the full
disk; deletes the ballast and appends again; reopens the store and reads everything back.
Prints one JSON line: acked, refused and delivered counts, and the remarks of the refusals.
A store that writes through a mapping into unallocated blocks dies of SIGBUS on the way.
"""

from __future__ import annotations

import errno
import json
import os
import sys

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageDraft, MessageStore, StoreConfig
from rmq.store.formats import CQ_ENTRY

QUEUES = 4
BODY = 1024


def config(root: str) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commitlog=256 * 1024,
        mapped_file_size_consume_queue=20 * 2000,
        max_hash_slot_num=2000,
        max_index_num=8000,
    )


def fill(path: str) -> int:
    """Write ``path`` until the filesystem has no block left; returns its size."""
    total = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
            data = bytes(chunk)
            for _ in range(1 << 16):
                try:
                    n = os.write(fd, data)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                total += n
                if n < chunk:
                    break
        os.fsync(fd)
    finally:
        os.close(fd)
    return total


def main(base: str) -> None:
    root = os.path.join(base, "store")
    store = MessageStore(config(root))
    acked: dict[tuple[int, int], bytes] = {}
    refused: list[str] = []
    n = 0

    def put(count: int) -> None:
        nonlocal n
        for _ in range(count):
            body = (b"%08d" % n) * (BODY // 8)
            q = n % QUEUES
            r = store.put(MessageDraft("FullDisk", q, body, properties={"KEYS": f"k{n}"}))
            n += 1
            if r.ok:
                acked[(q, r.queue_offset)] = body
            else:
                refused.append(f"{r.status.value}: {r.remark}")

    def delivered() -> int:
        got = 0
        for q in range(QUEUES):
            offset = store.get_min_offset_in_queue("FullDisk", q)
            for _ in range(100_000):
                g = store.get_message("FullDisk", q, offset, 32)
                if g.status is not GetMessageStatus.FOUND:
                    break
                for qo, rec in zip(g.queue_offsets, iter_records(g.body), strict=True):
                    got += acked.get((q, qo)) == rec.body
                offset = g.next_begin_offset
        return got

    put(300)
    store.dispatch_pending()
    store.flush()
    delivered()  # readers map the consume queue files
    put(300)  # in the CommitLog, not dispatched yet
    ballast = os.path.join(base, "ballast")
    fill(ballast)
    store.dispatch_pending()  # consume queue and index entries on a full disk
    on_full = delivered()
    store.flush()
    store.check_disk()  # the periodic disk check
    put(100)
    refused_on_full = len(refused)
    os.unlink(ballast)  # space is freed
    store.check_disk()
    store.flush()  # the flush round writes what waited
    put(100)
    store.dispatch_pending()
    freed = delivered()
    store.close()
    store = MessageStore(config(root))
    restarted = delivered()
    store.close()
    print(
        json.dumps(
            {
                "acked": len(acked),
                "delivered_on_full": on_full,
                "delivered_after_free": freed,
                "delivered_after_restart": restarted,
                "refused_on_full": refused_on_full,
                "refused_after_free": len(refused) - refused_on_full,
                "remarks": sorted(set(refused))[:5],
            }
        ),
        flush=True,
    )


def holes(base: str) -> None:
    root = os.path.join(base, "store")
    store = MessageStore(config(root))
    first = store.put(MessageDraft("T", 0, b"x"))
    head = first.wrote_bytes - 1  # a record's size without its body
    last = store.put(MessageDraft("T", 0, b"y" * (4096 - first.wrote_bytes - head)))
    assert last.end_offset == 4096
    store.close()
    torn = os.path.join(root, "consumequeue", "U", "0")
    os.makedirs(torn)
    entries = b"".join(CQ_ENTRY.pack(i, 100, 7) for i in range(205))
    with open(os.path.join(torn, f"{0:020d}"), "wb") as f:
        f.write(entries[: 204 * 20 + 12])  # entry 204 across the page, its tags never written
        f.truncate(config(root).mapped_file_size_consume_queue)
    fill(os.path.join(base, "ballast"))
    store = MessageStore(config(root))
    got = store.get_message("T", 0, 0, 32)
    print(
        json.dumps(
            {
                "commitlog_end": store.max_phy_offset,
                "messages": got.message_count,
                "torn_queue_end": store.get_max_offset_in_queue("U", 0),
            }
        ),
        flush=True,
    )
    store.close()


if __name__ == "__main__":
    if sys.argv[2:] == ["holes"]:
        holes(sys.argv[1])
    else:
        main(sys.argv[1])
