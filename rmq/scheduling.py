"""Who runs first: Trio runs the tasks of one scheduler pass in either order (it reverses
each batch at random, to shake out code that depends on an order). A task that wakes another
and then writes to a socket may therefore write before the woken task runs, one time in two.
Where the woken task's work is the one in a hurry, the waker lets it go first.

And how long one task may run: `Turns` hands the loop over every few milliseconds to the
other tasks while one works through a long list."""

from __future__ import annotations

import time

import trio


async def after_woken() -> None:
    """Return once the tasks this one woke have run a step: one checkpoint may come back
    before them (this task first in the next pass), two cannot."""
    await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()


class Turns:
    """Gives the other tasks a turn once the caller has held the event loop `step` seconds
    (real time), so a long run of small synchronous pieces keeps every connection served.

        turns = Turns()
        for item in many:
            handle(item)
            await turns.take()   # a checkpoint only every `step` seconds
    """

    __slots__ = ("_since", "step")

    def __init__(self, step: float = 0.002) -> None:
        self.step = step
        self._since = time.perf_counter()

    async def take(self) -> None:
        if time.perf_counter() - self._since >= self.step:
            await trio.lowlevel.checkpoint()
            self._since = time.perf_counter()
