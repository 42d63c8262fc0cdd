"""Writer for test_crash.py: appends with SYNC_FLUSH until killed.

Usage: python crash_writer.py STORE_ROOT ROUND

Prints "READY" once the store is open (after recovery), then one line per acknowledged message,
"<uniq key> <queue id> <queue offset> <body length>", only after its sync flush returned PUT_OK.
"""

from __future__ import annotations

import random
import sys

import trio

from rmq.store import FlushDiskType, MessageDraft, MessageStore, PutMessageStatus, StoreConfig
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
                uniq = f"r{round_no}-a{a}-{n}"
                size = rng.randint(len(uniq), 3000)
                r = await astore.put(
                    MessageDraft(TOPIC, a % 4, body_for(uniq, size), properties={"UNIQ_KEY": uniq, "KEYS": f"k{a}"})
                )
                if r.status is PutMessageStatus.PUT_OK:
                    sys.stdout.write(f"{uniq} {a % 4} {r.queue_offset} {size}\n")
                    sys.stdout.flush()
                n += 1

        async with trio.open_nursery() as nursery:
            for a in range(APPENDERS):
                nursery.start_soon(appender, a)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]))
