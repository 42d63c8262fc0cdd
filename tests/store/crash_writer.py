"""Writer for test_crash.py: appends with SYNC_FLUSH until killed (one at a time, and in
groups as the broker appends the sends of one read).

Usage: python crash_writer.py STORE_ROOT ROUND

Prints "READY" once the store is open (after recovery), then one line per acknowledged message,
"<uniq key> <queue id> <queue offset> <body length>", only after its sync flush returned PUT_OK.
"""

from __future__ import annotations

import random
import sys

import trio

from rmq.store import FlushDiskType, MessageDraft, MessageStore, PutMessageResult, PutMessageStatus, StoreConfig
from rmq.store.aio import AsyncMessageStore

APPENDERS = 8
TOPIC = "CrashTopic"


def config(root: str) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=root,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commitlog=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_hash_slot_num=256,
        max_index_num=1000,
        flush_interval_consume_queue=20,
        flush_consume_queue_thorough_interval=100,
    )


def body_for(uniq: str, size: int) -> bytes:
    return (uniq.encode() * (size // len(uniq) + 1))[:size]


async def main(root: str, round_no: int) -> None:
    store = MessageStore(config(root))
    print("READY", flush=True)
    rng = random.Random(round_no)
    async with AsyncMessageStore(store) as astore:

        async def appender(a: int) -> None:
            n = 0
            while True:
                # odd appenders put groups, as the broker puts the sends of one read
                group = rng.randint(1, 5) if a % 2 else 0
                drafts = []
                for _ in range(max(group, 1)):
                    uniq = f"r{round_no}-a{a}-{n}"
                    size = rng.randint(len(uniq), 3000)
                    drafts.append(
                        MessageDraft(TOPIC, a % 4, body_for(uniq, size), properties={"UNIQ_KEY": uniq, "KEYS": f"k{a}"})
                    )
                    n += 1
                waits = astore.put_group_now(drafts) if group else [await astore.put(drafts[0])]
                for d, w in zip(drafts, waits, strict=True):
                    r = w if isinstance(w, PutMessageResult) else await w
                    if r.status is PutMessageStatus.PUT_OK:
                        sys.stdout.write(f"{d.properties['UNIQ_KEY']} {a % 4} {r.queue_offset} {len(d.body)}\n")
                        sys.stdout.flush()

        async with trio.open_nursery() as nursery:
            for a in range(APPENDERS):
                nursery.start_soon(appender, a)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
