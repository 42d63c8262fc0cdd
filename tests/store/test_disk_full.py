"""The store on a full disk, simulated: a write that stops short, one that fails with ENOSPC.
Nothing acknowledged may go missing, before or after a restart, and nothing may raise out of
the store's own rounds (flush, dispatch)."""

from __future__ import annotations

from rmq.protocol.message import iter_records
from rmq.store import GetMessageStatus, MessageStore

from .conftest import SimulatedDisk


def _fill(store: MessageStore, n: int, queues: int = 2) -> None:
    for i in range(n):
        r = store.put_message("T", i % queues, b"m%d" % i, properties={"KEYS": f"k{i}"})
        assert r.ok, r


def _bodies(store: MessageStore, qid: int) -> list[bytes]:
    out, off = [], store.get_min_offset_in_queue("T", qid)
    for _ in range(10_000):
        g = store.get_message("T", qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in iter_records(g.body)]
        off = g.next_begin_offset
    raise AssertionError("the queue does not end")


def _expect_all(store: MessageStore, n: int, queues: int = 2) -> None:
    for q in range(queues):
        assert _bodies(store, q) == [b"m%d" % i for i in range(q, n, queues)]


def test_a_short_consume_queue_write_loses_no_entry(open_store, disk: SimulatedDisk) -> None:
    """A nearly full disk writes part of a pwrite and returns the count without an error: the
    rest must be written (or the write fail), never counted as written."""
    store = open_store()
    _fill(store, 400)  # 200 entries per queue, four consume queue files each
    store.dispatch_pending()
    disk.short("consumequeue", times=8)
    store.flush()
    assert disk.calls["consumequeue"] == 8
    _expect_all(store, 400)
    store.close()
    store = open_store()
    _expect_all(store, 400)
