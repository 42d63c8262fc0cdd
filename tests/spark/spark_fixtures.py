"""Stores written by our own MessageStore for the Spark tests, and ways to damage them."""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from rmq.protocol.message import COMPRESSED_FLAG, COMPRESSION_ZLIB, encode_record
from rmq.store import MessageDraft, MessageStore, StoreConfig

DAY_MS = 86_400_000
T0 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
FILE_SIZE = 64 * 1024  # small CommitLog files, so a test store spans several


@dataclass
class Sent:
    """What a test wrote, to compare with what Spark reads back."""

    topic: str
    body: bytes
    properties: dict[str, str]
    store_ms: int
    compressed: bool = False
    commitlog_offset: int = -1
    queue_id: int = 0
    queue_offset: int = -1


@dataclass
class StoreWriter:
    """A MessageStore with a controllable clock: each put is stored `step_ms` after the last."""

    root: Path
    now: int = T0
    step_ms: int = 1
    sent: list[Sent] = field(default_factory=list)
    store: MessageStore | None = None

    def open(self) -> MessageStore:
        cfg = StoreConfig(
            store_path_root_dir=str(self.root),
            mapped_file_size_commitlog=FILE_SIZE,
            mapped_file_size_consume_queue=20 * 1000,
            message_index_enable=False,
        )
        self.store = MessageStore(cfg, clock=self.clock)
        return self.store

    def clock(self) -> int:
        return self.now

    def put(
        self, topic: str, body: bytes, props: dict[str, str] | None = None, *, compress: bool = False, queue_id: int = 0
    ) -> Sent:
        assert self.store is not None
        self.now += self.step_ms
        props = dict(props or {})
        stored, sys_flag = (zlib.compress(body), COMPRESSED_FLAG | COMPRESSION_ZLIB) if compress else (body, 0)
        r = self.store.put(MessageDraft(
            topic, queue_id, stored, properties=props, sys_flag=sys_flag, born_timestamp=self.now - 5,
            born_host=("10.1.2.3", 40000), store_host=("10.9.8.7", 10911),
        ))  # fmt: skip
        assert r.ok, r
        sent = Sent(topic, body, props, self.now, compress, r.wrote_offset, queue_id, r.queue_offset)
        self.sent.append(sent)
        return sent

    def close(self) -> None:
        assert self.store is not None
        self.store.close()
        self.store = None


def fill(writer: StoreWriter, n: int, topics: tuple[str, ...] = ("orders", "payments", "%RETRY%billing")) -> None:
    """n messages over several topics: keys, tags, extra properties, every 5th body compressed."""
    for i in range(n):
        topic = topics[i % len(topics)]
        props = {"KEYS": f"k{i} order-{i % 17}", "TAGS": f"tag{i % 3}", "UNIQ_KEY": f"{i:032X}", "shop": f"s{i % 5}"}
        if topic.startswith("%RETRY%"):
            props["RETRY_TOPIC"] = "orders"
            props["DELAY"] = "3"
        body = (f"message {i} ".encode() * (1 + i % 40))[: 50 + (i * 37) % 3000]
        writer.put(topic, body, props, compress=i % 5 == 0, queue_id=i % 4)


def tear_tail(root: Path, topic: str = "orders") -> int:
    """Write the first half of a valid record at the CommitLog's write position (a torn append).

    Returns the offset where the torn record starts.
    """
    files = sorted((root / "commitlog").iterdir())
    last = files[-1]
    data = bytearray(last.read_bytes())
    base = int(last.name)
    pos = _write_position(data)
    rec = encode_record(topic=topic, body=os.urandom(3000), commitlog_offset=base + pos, store_timestamp=T0)
    half = rec[: len(rec) // 2]
    with open(last, "r+b") as f:
        f.seek(pos)
        f.write(half)
    return base + pos


def write_garbage(root: Path, n: int = 4096) -> int:
    """Random bytes at the CommitLog's write position (a crashed writer's leftovers)."""
    files = sorted((root / "commitlog").iterdir())
    last = files[-1]
    pos = _write_position(bytearray(last.read_bytes()))
    with open(last, "r+b") as f:
        f.seek(pos)
        f.write(os.urandom(min(n, FILE_SIZE - pos)))
    return int(last.name) + pos


def _write_position(data: bytearray) -> int:
    """End of the records in a CommitLog file (walks the size fields)."""
    pos = 0
    for _ in range(len(data)):  # bounded: each step moves forward by a record
        if pos + 8 > len(data):
            break
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        if size <= 0:
            break
        pos += size
    return pos


def read_parquet(out: Path) -> list[dict[str, Any]]:
    """Every row of an export, read with pyarrow (hive partitions), in CommitLog order."""
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: r["commitlog_offset"])
