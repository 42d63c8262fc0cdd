"""Controller mode on the async front: dispatch only up to the confirm offset, and
AsyncMessageStore.truncate_to while the store's tasks run (flushes, waits, reput)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rmq.protocol.message import iter_records
from rmq.store import FlushDiskType, FlushPlan, MessageDraft, MessageStore, PutMessageStatus, StoreError
from rmq.store.aio import AsyncMessageStore, PutWait, Replication


class Arrivals:
    """An arrival listener that keeps what it is told: (topic, queue id, new max offset)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, int, int]] = []
        self.event = trio.Event()

    def arriving(self, topic: str, queue_id: int, logic_offset: int, *_: Any) -> None:
        self.told.append((topic, queue_id, logic_offset))
        self.event.set()


class OneSlave(Replication):
    """The HA master as the store sees it, with one slave connected that acks when told."""

    def __init__(self) -> None:
        self.pushed = 0

    def appended(self) -> None:
        self.pushed += 1

    def unavailable(self, end_offset: int) -> str | None:
        return None


def body_list(store: MessageStore, topic: str = "T", qid: int = 0) -> list[bytes]:
    return [m.body for m in iter_records(store.get_message(topic, qid, 0, 64).body)]


async def settle(astore: AsyncMessageStore) -> None:
    """Let the reput task run what it was woken for."""
    await astore.wait_dispatched()
    await trio.testing.wait_all_tasks_blocked()


async def test_consumers_see_only_confirmed_records(open_store: Any) -> None:
    store = open_store()
    arrivals = Arrivals()
    store.arrival_listener = arrivals
    async with AsyncMessageStore(store) as astore:
        astore.dispatch_confirmed_only = True
        astore.awaited = lambda topic, qid: True  # a pull parked on every queue: eager dispatch
        results = [await astore.put(MessageDraft("T", 0, b"m%d" % i)) for i in range(5)]
        await settle(astore)
        assert arrivals.told == [] and body_list(store) == []
        assert store.get_max_offset_in_queue("T", 0) == 0
        assert astore.confirmed_offset == 0

        astore.replica_acked(results[2].end_offset)  # the in-sync slave holds three
        await settle(astore)
        assert arrivals.told == [("T", 0, 3)]
        assert body_list(store) == [b"m0", b"m1", b"m2"]
        assert astore.confirmed_offset == results[2].end_offset

        astore.confirm(results[3].end_offset)  # set directly (a slave told by its master)
        await settle(astore)
        assert arrivals.told[-1] == ("T", 0, 4)
        astore.confirm(results[0].end_offset)  # it only rises
        assert astore.confirmed_offset == results[3].end_offset

        astore.confirm(None)  # alone in the SyncStateSet: every append confirms itself
        await settle(astore)
        assert arrivals.told[-1] == ("T", 0, 5)
        assert astore.confirmed_offset == store.max_phy_offset
        r = await astore.put(MessageDraft("T", 0, b"m5"))
        await settle(astore)
        assert arrivals.told[-1] == ("T", 0, 6) and astore.confirmed_offset == r.end_offset

        astore.confirm(r.end_offset)  # someone joined: back to numbers
        await astore.put(MessageDraft("T", 0, b"m6"))
        await settle(astore)
        assert store.get_max_offset_in_queue("T", 0) == 6

        astore.dispatch_confirmed_only = False  # off: the log's end again
        await settle(astore)
        assert store.get_max_offset_in_queue("T", 0) == 7
        assert arrivals.told[-1] == ("T", 0, 7)
    assert store.checkpoint.confirm_phy_offset == r.end_offset  # recorded, as RocketMQ does


async def test_sync_master_waits_end_at_the_confirm_offset(open_store: Any) -> None:
    store = open_store()
    async with AsyncMessageStore(store) as astore:
        astore.replication = OneSlave()
        astore.sync_replication = True
        astore.dispatch_confirmed_only = True
        waits = [astore.put_now(MessageDraft("T", 0, b"w%d" % i)) for i in range(3)]
        assert all(isinstance(w, PutWait) for w in waits)
        astore.confirm(waits[1].end)
        results = []
        for w in waits[:2]:
            results.append(await w)
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 2
        await settle(astore)
        assert body_list(store) == [b"w0", b"w1"]
        astore.replica_acked(waits[2].end)
        assert (await waits[2]).status is PutMessageStatus.PUT_OK
        await settle(astore)
        assert body_list(store) == [b"w0", b"w1", b"w2"]


async def test_a_slave_dispatches_the_lower_of_its_whole_records_and_the_confirm_offset(
    open_store: Any, tmp_path: Path
) -> None:
    master = open_store(root=tmp_path / "m")
    written = [master.put(MessageDraft("T", 0, b"r%d" % i)) for i in range(6)]
    data = master.transfer_data(0, 1 << 20)
    assert data is not None
    slave = open_store(root=tmp_path / "s")
    async with AsyncMessageStore(slave) as astore:
        astore.dispatch_confirmed_only = True
        astore.confirm(written[1].end_offset)  # the master says two are confirmed
        cut = written[4].wrote_offset + 20  # the chunk ends inside the fifth record
        astore.append_replica(0, data[:cut])
        await settle(astore)
        assert body_list(slave) == [b"r0", b"r1"]
        astore.confirm(written[5].end_offset)
        await settle(astore)
        assert body_list(slave) == [b"r0", b"r1", b"r2", b"r3"]  # the fifth is not whole yet
        astore.append_replica(cut, data[cut:])
        await settle(astore)
        assert body_list(slave) == [b"r%d" % i for i in range(6)]


async def test_the_switch_refuses_a_dledger_commitlog(open_store: Any) -> None:
    store = open_store()
    astore = AsyncMessageStore(store)
    store.commitlog.in_dledger_entries = True
    with pytest.raises(ValueError, match="DLedger"):
        astore.dispatch_confirmed_only = True
    store.commitlog.in_dledger_entries = False


# --- truncation while the tasks run -----------------------------------------------------------


class GatedFlush:
    """``store.run_flush`` in the worker thread, held at a gate for the rounds asked for."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.commitlog_gate = threading.Event()
        self.logics_gate = threading.Event()
        self.commitlog_gate.set()
        self.logics_gate.set()
        self.in_logics = threading.Event()

    def __call__(self, plan: FlushPlan) -> None:
        if plan.commitlog_offset is not None and plan.syncs:
            self.commitlog_gate.wait(30)
        if plan.logics_offset is not None and plan.commitlog_offset is None:
            self.in_logics.set()
            self.logics_gate.wait(30)
        self.store.run_flush(plan)


@pytest.mark.parametrize("kernel", [False, True])
async def test_truncate_waits_for_the_sync_and_answers_the_waits(open_store: Any, tmp_path: Path, kernel: bool) -> None:
    """SYNC_FLUSH appends waiting for a slow sync when a truncation comes: they are answered
    once synced, appends meanwhile are refused, waits for the slave past the cut end as
    timed out, and appends then go on at the cut."""
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    gated = GatedFlush(store)
    arrivals = Arrivals()
    store.arrival_listener = arrivals
    async with AsyncMessageStore(store, flush_fn=None if kernel else gated) as astore:
        astore.replication = OneSlave()
        astore.sync_replication = True
        first = [await _acked(astore, i) for i in range(4)]
        gated.commitlog_gate.clear()
        waits = [astore.put_now(MessageDraft("T", 0, b"late%d" % i)) for i in range(3)]
        cut = first[-1].end_offset  # the three late ones go
        done = trio.Event()

        async def truncate() -> None:
            await astore.truncate_to(cut)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(truncate)
            await trio.testing.wait_all_tasks_blocked()
            refused = await astore.put(MessageDraft("T", 0, b"refused"))
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert "truncated" in refused.remark
            with pytest.raises(StoreError, match="truncated"):
                astore.append_replica(store.max_phy_offset, b"x")
            if not kernel:
                assert not done.is_set()  # the sync round is still running
            gated.commitlog_gate.set()
        results = [await w for w in waits]
        assert [r.status for r in results] == [PutMessageStatus.FLUSH_SLAVE_TIMEOUT] * 3
        assert store.max_phy_offset == cut and astore.flushed_offset == cut
        assert astore.replicated_offset == cut
        after = await _acked(astore, 4)
        assert after.wrote_offset == cut and after.queue_offset == 4
        await settle(astore)
        assert body_list(store) == [b"acked%d" % i for i in range(5)]
        assert arrivals.told[-1] == ("T", 0, 5)
    assert store.checkpoint.physic_offset == store.max_phy_offset == after.end_offset


async def _acked(astore: AsyncMessageStore, i: int) -> Any:
    """A SYNC_FLUSH, SYNC_MASTER append that the slave acks at once."""
    w = astore.put_now(MessageDraft("T", 0, b"acked%d" % i))
    assert isinstance(w, PutWait)
    astore.replica_acked(w.end)
    result = await w
    assert result.status is PutMessageStatus.PUT_OK, result
    return result


async def test_truncate_waits_out_a_consume_queue_flush_in_flight(open_store: Any, tmp_path: Path) -> None:
    """A logics round begun before the cut would record the checkpoint's offsets and the
    queues' synced entries past it: the truncation waits until it ends."""
    store = open_store(flush_interval_consume_queue=10)
    gated = GatedFlush(store)
    async with AsyncMessageStore(store, flush_fn=gated) as astore:
        results = [await astore.put(MessageDraft("T", i % 2, b"q%d" % i)) for i in range(40)]
        await settle(astore)
        gated.in_logics.clear()
        gated.logics_gate.clear()
        await trio.to_thread.run_sync(gated.in_logics.wait, 10)  # a round holds its plan
        async with trio.open_nursery() as nursery:
            nursery.start_soon(astore.truncate_to, results[10].wrote_offset)
            await trio.testing.wait_all_tasks_blocked()
            assert store.max_phy_offset == results[-1].end_offset  # not cut yet
            gated.logics_gate.set()
        assert store.max_phy_offset == results[10].wrote_offset
        ck = store.checkpoint
        assert ck.logics_offset <= results[10].wrote_offset and ck.index_offset <= results[10].wrote_offset
        assert [store.get_max_offset_in_queue("T", q) for q in (0, 1)] == [5, 5]
        more = [await astore.put(MessageDraft("T", i % 2, b"n%d" % i)) for i in range(10, 14)]
        assert [r.queue_offset for r in more] == [5, 5, 6, 6]
        await settle(astore)
    store.close()
    again = open_store()
    assert body_list(again, "T", 0) == [b"q%d" % i for i in range(0, 10, 2)] + [b"n10", b"n12"]
    assert body_list(again, "T", 1) == [b"q%d" % i for i in range(1, 10, 2)] + [b"n11", b"n13"]


async def test_truncate_refusals_and_the_end(open_store: Any) -> None:
    store = open_store()
    async with AsyncMessageStore(store) as astore:
        r = await astore.put(MessageDraft("T", 0, b"one"))
        with pytest.raises(StoreError, match="record boundary"):
            await astore.truncate_to(r.wrote_offset + 3)
        await astore.truncate_to(r.end_offset)  # the end: nothing to do
        assert store.refusal is None
        assert (await astore.put(MessageDraft("T", 0, b"two"))).ok


async def test_truncate_lowers_the_confirm_offset(open_store: Any) -> None:
    store = open_store()
    async with AsyncMessageStore(store) as astore:
        astore.dispatch_confirmed_only = True
        results = [await astore.put(MessageDraft("T", 0, b"c%d" % i)) for i in range(4)]
        astore.confirm(results[3].end_offset)
        await settle(astore)
        await astore.truncate_to(results[2].wrote_offset)
        assert astore.confirmed_offset == results[2].wrote_offset
        assert store.dispatcher.limit == results[2].wrote_offset
        assert body_list(store) == [b"c0", b"c1"]
        await astore.put(MessageDraft("T", 0, b"d2"))
        await settle(astore)
        assert body_list(store) == [b"c0", b"c1"]  # not confirmed yet
        astore.confirm(store.max_phy_offset)
        await settle(astore)
        assert body_list(store) == [b"c0", b"c1", b"d2"]
