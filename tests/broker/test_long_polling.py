"""PullWaiters: parked pulls as callbacks, run after a dispatch pass or at their deadline."""

from __future__ import annotations

import trio
import trio.testing

from rmq.broker.long_polling import PullWaiters


def _arrive(waiters: PullWaiters, topic: str, queue_id: int) -> None:
    waiters.arriving(topic, queue_id, 1, 0, 0, {})


async def test_arrivals_run_their_queues_pulls_after_the_dispatch_pass() -> None:
    waiters = PullWaiters()
    called: list[str] = []
    waiters.park("T", 0, 15, lambda: called.append("T0-a"))
    waiters.park("T", 0, 15, lambda: called.append("T0-b"))
    waiters.park("T", 1, 15, lambda: called.append("T1"))
    assert (len(waiters), waiters.awaited("T", 0), waiters.awaited("U", 0)) == (2, True, False)
    _arrive(waiters, "T", 0)
    _arrive(waiters, "T", 0)  # a second record of the same pass: nobody left to wake
    assert called == []  # not before the pass is over: the pull reads all it wrote
    assert not waiters.awaited("T", 0)
    waiters.dispatched()
    assert called == ["T0-a", "T0-b"]
    waiters.dispatched()
    assert called == ["T0-a", "T0-b"]  # each once
    assert len(waiters) == 1


async def test_deadlines_end_parked_pulls_in_order(autojump_clock: trio.testing.MockClock) -> None:
    waiters = PullWaiters()
    called: list[tuple[str, float]] = []
    start = trio.current_time()

    def note(name: str) -> None:
        called.append((name, round(trio.current_time() - start, 3)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiters.run)
        waiters.park("T", 0, 5, lambda: note("five"))
        await trio.sleep(1)
        waiters.park("T", 1, 1, lambda: note("two"))  # earlier than the one run sleeps for
        waiters.park("T", None, 0.5, lambda: note("short poll"))  # no queue: only its time
        waiters.park("T", 2, 3, lambda: note("woken"))
        _arrive(waiters, "T", 2)
        waiters.dispatched()
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert called == [("woken", 1.0), ("short poll", 1.5), ("two", 2.0), ("five", 5.0)]
    assert len(waiters) == 0


async def test_wake_all_answers_everything_and_parks_nothing_more() -> None:
    waiters = PullWaiters()
    called: list[str] = []
    waiters.park("T", 0, 15, lambda: called.append("queued"))
    waiters.park("T", None, 15, lambda: called.append("short"))
    waiters.wake_all()
    assert sorted(called) == ["queued", "short"]
    waiters.park("T", 0, 15, lambda: called.append("late"))
    assert called[-1] == "late"  # at once
    assert len(waiters) == 0


async def test_a_failing_pull_does_not_stop_the_others() -> None:
    waiters = PullWaiters()
    called: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    waiters.park("T", 0, 15, fail)
    waiters.park("T", 0, 15, lambda: called.append("next"))
    _arrive(waiters, "T", 0)
    waiters.dispatched()  # logs the failure, goes on
    assert called == ["next"]
