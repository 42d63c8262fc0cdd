"""Split planning and scanning of CommitLog files written by our MessageStore (no Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from rmq.protocol.message import decompress_body
from rmq_spark.rows import batches
from rmq_spark.schema import arrow_schema
from rmq_spark.store_scan import DEFAULT_SPLIT_SIZE, list_segments, plan_splits, scan_split

from .spark_fixtures import FILE_SIZE, StoreWriter, fill, tear_tail, write_garbage


def _offsets(root: Path, split_size: int, **kw: object) -> list[int]:
    return [m.commitlog_offset for s in plan_splits(root, split_size) for m in scan_split(s, **kw)]  # type: ignore[arg-type]


def test_small_splits_read_every_record_once(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 400)
    w.close()
    assert len(list_segments(w.root)) >= 3
    whole = _offsets(w.root, DEFAULT_SPLIT_SIZE)
    assert whole == [s.commitlog_offset for s in w.sent]
    for split_size in (4096, 10_000, 50_000):
        splits = plan_splits(w.root, split_size)
        assert len(splits) > len(list_segments(w.root))  # files really were cut
        assert _offsets(w.root, split_size) == whole


def test_messages_decode_to_what_was_sent(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 60)
    w.close()
    got = [m for s in plan_splits(w.root) for m in scan_split(s)]
    assert len(got) == len(w.sent)
    for m, sent in zip(got, w.sent, strict=False):
        assert (m.topic, m.queue_id, m.queue_offset, m.store_timestamp) == (
            sent.topic, sent.queue_id, sent.queue_offset, sent.store_ms,
        )  # fmt: skip
        assert decompress_body(m.body, m.sys_flag) == sent.body
        assert m.properties == sent.properties


def test_torn_tail_stops_the_scan(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 50)
    w.close()
    torn_at = tear_tail(w.root)
    offsets = _offsets(w.root, 2048)
    assert offsets == [s.commitlog_offset for s in w.sent]
    assert max(offsets) < torn_at


def test_filters_by_topic_and_time(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 90)
    w.close()
    lo, hi = w.sent[10].store_ms, w.sent[70].store_ms
    got = [
        m.commitlog_offset
        for s in plan_splits(w.root, 8192, lo, hi)
        for m in scan_split(s, topics=frozenset({"orders"}), since_ms=lo, until_ms=hi)
    ]
    want = [s.commitlog_offset for s in w.sent if s.topic == "orders" and lo <= s.store_ms < hi]
    assert got == want and want


def test_time_pruning_skips_whole_files(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 400)
    w.close()
    last_ms = w.sent[-1].store_ms
    pruned = plan_splits(w.root, DEFAULT_SPLIT_SIZE, since_ms=last_ms)
    assert len(pruned) == 1 and pruned[0].path == list_segments(w.root)[-1].path


def test_batches_match_the_spark_schema(store_writer) -> None:
    w: StoreWriter = store_writer()
    fill(w, 20)
    w.close()
    schema = arrow_schema()
    out = list(batches((m for s in plan_splits(w.root) for m in scan_split(s)), schema))
    table = pa.Table.from_batches(out)
    assert table.schema.equals(schema)
    assert table.num_rows == 20
    row = table.slice(2, 1).to_pylist()[0]
    assert row["is_retry"] and row["retry_topic"] == "orders" and row["delay_level"] == 3
    assert row["keys"] == ["k2", "order-2"] and row["tags"] == "tag2"


_CRASHING_WRITER = """
import json, os, sys
from rmq.store import MessageDraft, MessageStore, StoreConfig
root, n = sys.argv[1], int(sys.argv[2])
cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commitlog={file_size},
                  mapped_file_size_consume_queue=20 * 1000, message_index_enable=False)
store = MessageStore(cfg)
offsets = []
for i in range(n):
    r = store.put(MessageDraft("crash", i % 2, b"payload %d " % i * 20, properties={{"KEYS": "k%d" % i}}))
    offsets.append(r.wrote_offset)
store.dispatch_pending(max_records=n // 2)  # the consume queues lag behind the CommitLog
print(json.dumps(offsets), flush=True)
os._exit(0)  # no close(): the abort file stays, as after a crash
"""


def crash_store(root: Path, n: int) -> list[int]:
    """Write n messages in a child process that dies without closing the store."""
    code = _CRASHING_WRITER.format(file_size=FILE_SIZE)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root), str(n)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo,
        check=True,
    )
    return json.loads(proc.stdout)


def test_crashed_store_reads_every_valid_record(tmp_path: Path) -> None:
    root = tmp_path / "crashed"
    written = crash_store(root, 700)
    assert (root / "abort").exists()
    write_garbage(root)
    for split_size in (DEFAULT_SPLIT_SIZE, 8192):
        assert _offsets(root, split_size) == written


def test_a_dledger_members_store_is_read_from_its_data_files(tmp_path: Path) -> None:
    """enableDLegerCommitLog: records sit in DLedger entries; splits step over the headers."""
    from rmq.store import MessageDraft, MessageStore, StoreConfig
    from rmq.store.dledger_log import DLedgerLog
    from rmq.store.dledger_view import DLedgerView

    dlog = DLedgerLog(tmp_path, "n0", data_file_size=FILE_SIZE)
    view = DLedgerView(dlog, max_entry_body=2000)

    def seal() -> bool:
        dlog.seal_pending(dlog.end_index + 1, 1, len(dlog.pending_body()))
        return True

    view.on_full = seal
    store = MessageStore(StoreConfig(store_path_root_dir=tmp_path), commitlog=lambda: view)
    dlog.append(0, 1, b"")
    sent = [
        store.put(MessageDraft(f"T{i % 3}", i % 2, b"body-%d" % i + bytes(300), properties={"KEYS": str(i)}))
        for i in range(300)
    ]
    seal()
    dlog.commit(dlog.end_index)
    store.dispatcher.limit = dlog.entry_end(dlog.end_index)
    store.close()
    dlog.close()
    assert len(list_segments(tmp_path)) >= 2
    want = [r.wrote_offset for r in sent]
    for split_size in (DEFAULT_SPLIT_SIZE, 3000):
        assert _offsets(tmp_path, split_size) == want
    got = [m for s in plan_splits(tmp_path, 5000, since_ms=0) for m in scan_split(s, topics=frozenset({"T1"}))]
    assert [m.body for m in got] == [b"body-%d" % i + bytes(300) for i in range(300) if i % 3 == 1]
