"""AsyncMessageStore: group commit, flush timeouts, the async flusher, reput and the listener."""

from __future__ import annotations

import itertools
import threading
import time

import trio
import trio.testing

from rmq.protocol.message import iter_records
from rmq.store import FlushDiskType, FlushPlan, GetMessageStatus, MessageDraft, PutMessageStatus, batch_drafts
from rmq.store.aio import AsyncMessageStore, PutWait


class CountingFlush:
    """Wraps ``store.run_flush``, counting the CommitLog rounds and optionally blocking them."""

    def __init__(self, store, gate: threading.Event | None = None) -> None:
        self.store = store
        self.gate = gate
        self.commitlog_rounds = 0

    def __call__(self, plan: FlushPlan) -> None:
        if plan.commitlog_offset is not None:
            self.commitlog_rounds += 1
            if self.gate is not None:
                self.gate.wait(30)
        self.store.run_flush(plan)


async def put_concurrently(astore: AsyncMessageStore, count: int, body: bytes) -> list:
    """``count`` appends to T:0 at once (bodies ``body % i``); their results as they came."""
    results = []

    async def put(i: int) -> None:
        results.append(await astore.put(MessageDraft("T", 0, body % i)))

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(put, i)
    return results


async def test_group_commit_shares_syncs(open_store) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20)
    counter = CountingFlush(store)
    results = []
    async with AsyncMessageStore(store, flush_fn=counter) as astore:

        async def appender(i: int) -> None:
            for j in range(5):
                results.append(await astore.put(MessageDraft("T", i % 4, b"m-%d-%d" % (i, j))))

        async with trio.open_nursery() as nursery:
            for i in range(64):
                nursery.start_soon(appender, i)
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert len(results) == 320
        # Every acknowledged append is durable.
        assert astore.flushed_offset >= max(r.end_offset for r in results)
        assert store.flushed_offset >= max(r.end_offset for r in results)
        # Appends waiting together shared syncs: far fewer rounds than appends.
        assert counter.commitlog_rounds <= 320 // 8, counter.commitlog_rounds
        await astore.wait_dispatched()
        assert sum(store.get_max_offset_in_queue("T", q) for q in range(4)) == 320


async def test_flush_disk_timeout_when_sync_is_too_slow(open_store, autojump_clock: trio.testing.MockClock) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=5000, lone_sync_inline=False)
    gate = threading.Event()
    slow = CountingFlush(store, gate)
    async with AsyncMessageStore(store, flush_fn=slow) as astore:
        try:
            start = trio.current_time()
            results = await put_concurrently(astore, 10, b"slow-%d")
            assert trio.current_time() - start >= 5.0
            assert [r.status for r in results] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 10
            assert all("sync_flush_timeout=5000" in r.remark for r in results)
            assert all(r.ok for r in results)  # stored all the same
            # A message that says WAIT=false does not wait at all.
            quick = await astore.put(MessageDraft("T", 0, b"nowait", properties={"WAIT": "false"}))
            assert quick.status is PutMessageStatus.PUT_OK
            gate.set()
            await astore.wait_flushed(quick.end_offset)
            await astore.wait_dispatched()
            g = store.get_message("T", 0, 0, 32)
            assert g.status is GetMessageStatus.FOUND
            assert len(g.records) == 11
        finally:
            gate.set()


async def test_async_flush_runs_periodically(open_store) -> None:
    # Real time: the flusher's sync runs in a worker thread, which a MockClock cannot wait for.
    store = open_store(flush_disk_type=FlushDiskType.ASYNC_FLUSH, flush_interval_commitlog=50)
    counter = CountingFlush(store)
    async with AsyncMessageStore(store, flush_fn=counter) as astore:
        r = await astore.put(MessageDraft("T", 0, b"async"))
        assert r.status is PutMessageStatus.PUT_OK
        assert store.flushed_offset < r.end_offset  # returned before any sync
        with trio.fail_after(5):
            while store.flushed_offset < r.end_offset:  # noqa: ASYNC110 - watching the flusher
                await trio.sleep(0.01)
        rounds = counter.commitlog_rounds
        await trio.sleep(0.3)
        assert counter.commitlog_rounds == rounds  # nothing new to sync, no sync rounds


async def test_the_index_is_synced_every_index_interval_not_every_queue_round(open_store) -> None:
    # Real time, as above: the rounds run in worker threads.
    store = open_store(flush_interval_consume_queue=20, flush_interval_index=300)
    rounds: list[tuple[float, bool]] = []  # (when, whether the round synced the index)

    def flush(plan: FlushPlan) -> None:
        if plan.logics_offset is not None:
            rounds.append((time.monotonic(), plan.index_offset is not None))
        store.run_flush(plan)

    async with AsyncMessageStore(store, flush_fn=flush) as astore:
        start = time.monotonic()
        for i in range(20):
            await astore.put(MessageDraft("T", 0, b"m%d" % i, properties={"KEYS": f"k{i}"}))
            await trio.sleep(0.05)
        with trio.fail_after(10):
            while sum(synced for _, synced in rounds) < 2:  # noqa: ASYNC110 - watching the flusher
                await trio.sleep(0.02)
        seen = rounds[:]  # not the final round of the exit, which syncs everything
    with_index = [t for t, synced in seen if synced]
    assert len(seen) > 2 * len(with_index)  # most rounds leave the index alone
    # (timed in the worker thread, a little after each round's start: some slack)
    assert with_index[0] - start >= 0.25
    assert all(b - a >= 0.25 for a, b in itertools.pairwise(with_index))


async def test_reput_wakes_the_listener_and_exit_flushes(open_store) -> None:
    arrivals: list[tuple[str, int, int]] = []
    woken = trio.Event()

    class Listener:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, properties) -> None:
            arrivals.append((topic, queue_id, logic_offset))
            woken.set()

    store = open_store()
    store.arrival_listener = Listener()
    async with AsyncMessageStore(store) as astore:
        await astore.put(MessageDraft("T", 2, b"hello"))
        with trio.fail_after(5):
            await woken.wait()
        assert arrivals == [("T", 2, 1)]
        results = await astore.put_many(batch_drafts(MessageDraft("T", 2, b""), [_msg(b"a"), _msg(b"b")]))
        await astore.wait_dispatched()
        assert arrivals[-1] == ("T", 2, 3)
        assert [m.body for m in iter_records(store.get_message("T", 2, 0).body)] == [b"hello", b"a", b"b"]
        end = results.end_offset
    # Leaving the context dispatched and synced everything, including the checkpoint.
    assert store.flushed_offset >= end
    assert store.checkpoint.physic_offset == store.max_phy_offset
    assert store.checkpoint.logics_offset == store.max_phy_offset


async def test_an_append_a_reader_awaits_is_dispatched_at_once(open_store) -> None:
    """With a reader parked on the queue, the append itself dispatches (its arrival is told
    before put_now returns); elsewhere the reput task does it later. wait_dispatched
    still returns in both cases."""
    arrivals: list[tuple[str, int, int]] = []

    class Listener:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, properties) -> None:
            arrivals.append((topic, queue_id, logic_offset))

    store = open_store()
    store.arrival_listener = Listener()
    async with AsyncMessageStore(store) as astore:
        astore.awaited = lambda topic, queue_id: queue_id == 1
        assert astore.put_now(MessageDraft("T", 1, b"awaited")).ok  # no checkpoint in between
        assert arrivals == [("T", 1, 1)]
        assert store.dispatch_behind == 0
        assert astore.put_now(MessageDraft("T", 0, b"not awaited")).ok
        assert arrivals == [("T", 1, 1)]  # left to the reput task
        await astore.wait_dispatched()
        assert arrivals == [("T", 1, 1), ("T", 0, 1)]
        result = await astore.put_many(batch_drafts(MessageDraft("T", 1, b""), [_msg(b"a"), _msg(b"b")]))
        # one pass stored both: the listener hears of the queue once, with its newest entry
        assert result.ok and arrivals[-2:] == [("T", 0, 1), ("T", 1, 3)]
        with trio.fail_after(5):
            await astore.wait_dispatched()


async def test_retention_task_runs(open_store, autojump_clock: trio.testing.MockClock) -> None:
    usage = {"ratio": 0.1}
    store = open_store(disk_usage=lambda _p: usage["ratio"], clean_resource_interval=10_000)
    async with AsyncMessageStore(store):
        usage["ratio"] = 0.95
        await trio.sleep(11)
        assert store.refusal is not None
        usage["ratio"] = 0.2
        await trio.sleep(10)
        assert store.refusal is None


def _msg(body: bytes):
    from rmq.protocol.message import Message

    return Message("", body, 0, {})


async def test_batches_time_out_in_order_and_then_complete(open_store, autojump_clock: trio.testing.MockClock) -> None:
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=1000, lone_sync_inline=False)
    gate = threading.Event()
    slow = CountingFlush(store, gate)
    async with AsyncMessageStore(store, flush_fn=slow) as astore:
        try:
            done: list[tuple[float, PutMessageStatus]] = []
            start = trio.current_time()

            async def put(delay: float) -> None:
                await trio.sleep(delay)
                r = await astore.put(MessageDraft("T", 0, b"x"))
                done.append((trio.current_time() - start, r.status))

            async with trio.open_nursery() as nursery:
                for delay in (0, 0.3, 0.6):  # the first round stalls; the others wait behind it
                    nursery.start_soon(put, delay)
            assert [s for _, s in done] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 3
            # Each waited its own full timeout, not the age of a batch it joined.
            assert [round(t, 2) for t, _ in done] == [1.0, 1.3, 1.6]
            gate.set()
            # The stalled rounds finish and a later append gets through. (Under the MockClock a
            # sync in a worker thread may still outlast the virtual timeout, so check the data.)
            r = await astore.put(MessageDraft("T", 0, b"after"))
            assert r.ok
            await astore.wait_flushed(r.end_offset)
            assert store.flushed_offset >= r.end_offset
            assert slow.commitlog_rounds >= 2
        finally:
            gate.set()


async def test_a_waiting_append_calls_back_from_the_round_that_synced_it(open_store) -> None:
    """put_now hands back a PutWait: its callback runs in the flusher's task once
    the round covering the append is done (no task per waiting append), in append order."""
    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, lone_sync_inline=False
    )
    counter = CountingFlush(store)
    async with AsyncMessageStore(store, flush_fn=counter) as astore:
        called: list[tuple[int, int, int]] = []  # (append, end offset, flushed when called)
        waits = [astore.put_now(MessageDraft("T", 0, b"m-%d" % i)) for i in range(50)]
        for i, w in enumerate(waits):
            w.then(lambda r, i=i: called.append((i, r.end_offset, astore.flushed_offset)))
        assert called == []  # nothing is durable yet
        with trio.fail_after(5):
            while len(called) < 50:
                await trio.sleep(0.01)
        assert [i for i, _, _ in called] == list(range(50))
        assert all(flushed >= end for _, end, flushed in called)  # only after the sync
        assert counter.commitlog_rounds <= 2
        assert all(w.done and w.result.status is PutMessageStatus.PUT_OK for w in waits)
        late: list[PutMessageStatus] = []
        waits[0].then(lambda r: late.append(r.status))  # a callback after the fact runs at once
        assert late == [PutMessageStatus.PUT_OK]
        assert (await waits[1]).status is PutMessageStatus.PUT_OK


async def test_the_commitlog_sync_runs_in_a_worker_thread_and_its_failure_stops_the_store(open_store) -> None:
    import pytest

    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, lone_sync_inline=False
    )
    threads: list[int] = []
    fail = False

    def flush(plan: FlushPlan) -> None:
        if plan.commitlog_offset is not None:
            threads.append(threading.get_ident())
            if fail:
                raise OSError(5, "Input/output error")
        store.run_flush(plan)

    with pytest.raises(BaseExceptionGroup) as info:
        async with AsyncMessageStore(store, flush_fn=flush) as astore:
            result = await astore.put(MessageDraft("T", 0, b"synced"))
            assert result.status is PutMessageStatus.PUT_OK
            assert threads and threading.get_ident() not in threads
            assert astore.flushed_offset >= result.end_offset
            fail = True
            with trio.fail_after(10):
                await astore.put(MessageDraft("T", 0, b"never synced"))
    assert info.group_contains(OSError, match="Input/output error")


async def test_sync_flush_rounds_go_through_the_kernel_where_linux_has_it(open_store) -> None:
    import os

    import pytest

    from rmq.store.kernel_sync import KernelSync

    probe = KernelSync.open()
    if probe is None:
        pytest.skip("no kernel sync here")
    probe.close()
    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, lone_sync_inline=False
    )
    async with AsyncMessageStore(store) as astore:
        assert astore._kernel_sync is not None
        # an append that finds no round running submits one itself, before it returns
        waiting = astore.put_now(MessageDraft("T", 0, b"first"))
        assert astore._round is not None and astore.flush_rounds == 1
        assert (await waiting).status is PutMessageStatus.PUT_OK
        assert astore._round is None and astore.flushed_offset >= store.max_phy_offset
        results = await put_concurrently(astore, 50, b"m-%d")
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 50
        assert 1 <= astore.flush_rounds < 50
        end = max(r.end_offset for r in results)
        assert astore.flushed_offset >= end and store.flushed_offset >= end
        # the CommitLog file keeps one descriptor for its syncs, to this file
        (mf,) = store.commitlog.files.files
        assert mf._sync_fd >= 0 and os.path.samefile(f"/proc/self/fd/{mf._sync_fd}", mf.path)
    assert astore._kernel_sync is None  # closed with the store's tasks


async def test_an_append_ends_a_synced_round_before_the_flusher_hears(open_store) -> None:
    import time

    import pytest

    from rmq.store.kernel_sync import UringSync

    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, lone_sync_inline=False
    )
    async with AsyncMessageStore(store) as astore:
        ks = astore._kernel_sync
        if not isinstance(ks, UringSync):
            pytest.skip("no io_uring here: only its ring shows a completion without a syscall")
        first = astore.put_now(MessageDraft("T", 0, b"first"))
        rnd = astore._round
        assert rnd is not None
        deadline = time.monotonic() + 10
        while not ks.completed():  # the loop stays busy: the flusher cannot hear yet
            assert time.monotonic() < deadline
            time.sleep(0.001)  # noqa: ASYNC251  blocks on purpose: the loop must not run the flusher
        second = astore.put_now(MessageDraft("T", 0, b"second"))
        assert astore._round not in (None, rnd) and astore.flush_rounds == 2
        assert first.done  # answered by that append
        assert (await first).status is PutMessageStatus.PUT_OK
        assert (await second).status is PutMessageStatus.PUT_OK
        assert astore.flushed_offset >= store.max_phy_offset


async def test_a_kernel_that_refuses_aio_syncs_leaves_them_to_a_thread(open_store) -> None:
    import errno

    import pytest

    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, lone_sync_inline=False
    )
    async with AsyncMessageStore(store) as astore:
        ks = astore._kernel_sync
        if ks is None:
            pytest.skip("no kernel sync here")

        class Refusing(type(ks)):  # a filesystem without fsync there answers EINVAL
            def submit(self, fds, tag) -> None:
                raise OSError(errno.EINVAL, "io_submit: Invalid argument")

        ks.__class__ = Refusing
        first = await astore.put(MessageDraft("T", 0, b"one"))
        assert first.status is PutMessageStatus.PUT_OK and astore._kernel_sync is None
        second = await astore.put(MessageDraft("T", 0, b"two"))
        assert second.status is PutMessageStatus.PUT_OK
        assert store.flushed_offset >= second.end_offset
    ks.close()


async def test_sends_of_one_read_are_answered_by_one_round_not_the_flush_interval(open_store, tmp_path) -> None:
    """A group's first wait used to start a round that closed the batch, so the rest of the
    group joined a batch of its own, which waited for the flush interval (500 ms by default)
    although the round had synced it."""
    for way in ("kernel", "thread"):
        store = open_store(
            root=tmp_path / way, flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20,
            flush_interval_commitlog=60_000,
        )  # fmt: skip
        async with AsyncMessageStore(store, flush_fn=None if way == "kernel" else CountingFlush(store)) as astore:
            with trio.fail_after(10):
                for n in range(3):
                    waits = astore.put_group_now([MessageDraft("T", 0, b"m-%d-%d" % (n, i)) for i in range(20)])
                    durable_when_answered: list[bool] = []

                    def answered(result, seen=durable_when_answered, s=store) -> None:
                        seen.append(s.flushed_offset >= result.end_offset)

                    for w in waits:  # the answer comes only once the disk has the message
                        assert isinstance(w, PutWait)
                        w.then(answered)
                    results = [await w for w in waits]
                    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 20
                    assert durable_when_answered == [True] * 20
            assert astore.flushed_offset >= store.max_phy_offset
            assert astore.flush_rounds <= 3, astore.flush_rounds


async def test_an_append_after_a_round_began_is_synced_without_waiting_for_the_interval(open_store) -> None:
    """The second append joins a batch the running round does not cover; its wake of the
    flusher came before the flusher took up the round, which used to drop it: the flusher
    then slept out the flush interval once the round ended."""
    store = open_store(
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        mapped_file_size_commitlog=1 << 20,
        flush_interval_commitlog=60_000,
        lone_sync_inline=False,
    )
    async with AsyncMessageStore(store) as astore:
        with trio.fail_after(10):
            for n in range(3):
                first = astore.put_now(MessageDraft("T", 0, b"first-%d" % n))
                second = astore.put_now(MessageDraft("T", 0, b"second-%d" % n))
                assert (await first).status is PutMessageStatus.PUT_OK
                assert (await second).status is PutMessageStatus.PUT_OK
        assert astore.flushed_offset >= store.max_phy_offset
