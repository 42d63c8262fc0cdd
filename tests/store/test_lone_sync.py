"""SYNC_FLUSH: the sync of a request in flight alone runs on the event loop (``_lone``),
those of requests that come together are shared off it."""

from __future__ import annotations

import errno
import threading
import time

import pytest
import trio

from rmq.store import FlushDiskType, FlushPlan, MessageDraft, PutMessageResult, PutMessageStatus
from rmq.store.aio import LONE_SLOW, AsyncMessageStore, PutWait


class WhereFlushed:
    """Wraps ``store.run_flush``: records the thread of each CommitLog round, optionally
    taking ``delay`` seconds or failing with EIO once ``fail`` is set."""

    def __init__(self, store, delay: float = 0.0) -> None:
        self.store = store
        self.delay = delay
        self.fail = False
        self.threads: list[int] = []

    def __call__(self, plan: FlushPlan) -> None:
        if plan.syncs:
            self.threads.append(threading.get_ident())
            if self.fail:
                raise OSError(errno.EIO, "Input/output error")
            time.sleep(self.delay)
        self.store.run_flush(plan)


def sync_store(open_store, **overrides):
    return open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commitlog=1 << 20, **overrides)


async def test_a_lone_send_is_synced_on_the_loop_before_its_append_returns(open_store) -> None:
    """Its append returns the result itself, as under ASYNC_FLUSH: nothing to wait for."""
    store = sync_store(open_store)
    flushed = WhereFlushed(store)
    loop = threading.get_ident()
    async with AsyncMessageStore(store, flush_fn=flushed) as astore:
        for n in range(5):
            await trio.sleep(0.005)  # the loop goes idle between sends, as with one in flight
            rounds = astore.flush_rounds
            result = astore.put_now(MessageDraft("T", 0, b"lone-%d" % n))
            assert isinstance(result, PutMessageResult) and result.status is PutMessageStatus.PUT_OK
            assert astore.flushed_offset >= result.end_offset
            assert store.flushed_offset >= result.end_offset
            assert astore.flush_rounds == rounds + 1
        assert flushed.threads == [loop] * 5


async def test_the_real_sync_of_a_lone_send(open_store) -> None:
    """The store's own flush (the kernel's way for the rest): the lone round syncs on the loop."""
    store = sync_store(open_store)
    async with AsyncMessageStore(store) as astore:
        await trio.sleep(0.005)
        result = astore.put_now(MessageDraft("T", 0, b"lone"))
        assert isinstance(result, PutMessageResult) and result.status is PutMessageStatus.PUT_OK
        assert store.flushed_offset >= result.end_offset
        assert astore._round is None  # nothing was handed to the kernel


async def test_sends_that_come_together_share_rounds_off_the_loop(open_store) -> None:
    """Once one round ended, the loop has not gone idle: the sends of the same pass wait
    together for one round in the flusher's thread, rather than each syncing on the loop."""
    store = sync_store(open_store)
    flushed = WhereFlushed(store)
    loop = threading.get_ident()
    async with AsyncMessageStore(store, flush_fn=flushed) as astore:
        results = []

        async def put(i: int) -> None:
            results.append(await astore.put(MessageDraft("T", 0, b"together-%d" % i)))

        await trio.sleep(0.005)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(put, i)
        assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 20
        assert astore.flushed_offset >= max(r.end_offset for r in results)
        # the first, from an idle loop, alone on it; the other 19 in at most two rounds
        assert flushed.threads[0] == loop
        assert 2 <= len(flushed.threads) <= 3
        assert loop not in flushed.threads[1:]


async def test_a_batch_alone_is_synced_on_the_loop_too(open_store) -> None:
    """A batch request in flight alone is one request: its round is lone."""
    store = sync_store(open_store)
    flushed = WhereFlushed(store)
    async with AsyncMessageStore(store, flush_fn=flushed) as astore:
        await trio.sleep(0.005)
        result = astore.put_many_now([MessageDraft("T", 0, b"item-%d" % i) for i in range(8)])
        assert isinstance(result, PutMessageResult) and result.status is PutMessageStatus.PUT_OK
        assert store.flushed_offset >= result.end_offset
        assert flushed.threads == [threading.get_ident()]


async def test_without_lone_sync_inline_every_round_leaves_the_loop(open_store) -> None:
    store = sync_store(open_store, lone_sync_inline=False)
    flushed = WhereFlushed(store)
    async with AsyncMessageStore(store, flush_fn=flushed) as astore:
        for n in range(3):
            await trio.sleep(0.005)
            wait = astore.put_now(MessageDraft("T", 0, b"lone-%d" % n))
            assert isinstance(wait, PutWait) and not wait.done
            assert (await wait).status is PutMessageStatus.PUT_OK
        assert len(flushed.threads) == 3
        assert threading.get_ident() not in flushed.threads


async def test_slow_lone_syncs_leave_the_loop_for_a_while(open_store) -> None:
    """A disk whose syncs average over LONE_SLOW would hold up the loop that long each time:
    the lone rounds after go to the flusher's thread."""
    store = sync_store(open_store)
    flushed = WhereFlushed(store, delay=2.5 * LONE_SLOW)
    loop = threading.get_ident()
    async with AsyncMessageStore(store, flush_fn=flushed) as astore:
        for n in range(12):
            await trio.sleep(0.005)
            result = await astore.put(MessageDraft("T", 0, b"slow-%d" % n))
            assert result.status is PutMessageStatus.PUT_OK
            assert store.flushed_offset >= result.end_offset
    on_loop = [t == loop for t in flushed.threads]
    # The moving average (1/8 of each) passes LONE_SLOW at the fourth sync of 2.5 times it
    # (sooner where a busy machine makes them slower); then none on the loop for a second.
    first = on_loop.index(False)
    assert 2 <= first <= 4
    assert on_loop == [True] * first + [False] * (12 - first)


async def test_a_lone_sync_that_fails_stops_the_store(open_store) -> None:
    store = sync_store(open_store)
    flushed = WhereFlushed(store)
    loop = threading.get_ident()
    answered: list[PutMessageStatus] = []
    with pytest.raises(BaseExceptionGroup) as info:
        async with AsyncMessageStore(store, flush_fn=flushed) as astore:
            await trio.sleep(0.005)
            assert (await astore.put(MessageDraft("T", 0, b"synced"))).status is PutMessageStatus.PUT_OK
            flushed.fail = True
            await trio.sleep(0.005)
            wait = astore.put_now(MessageDraft("T", 0, b"never synced"))
            assert isinstance(wait, PutWait)
            wait.then(lambda r: answered.append(r.status))
            with trio.fail_after(10):
                await trio.sleep_forever()  # the flusher raises the sync's error
    assert info.group_contains(OSError, match="Input/output error")
    assert flushed.threads[:2] == [loop, loop]  # (then the exit's last flush, in a thread)
    assert answered == []  # never acknowledged
