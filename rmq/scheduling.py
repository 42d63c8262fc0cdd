"""Who runs first: Trio runs the tasks of one scheduler pass in either order (it reverses
each batch at random, to shake out code that depends on an order). A task that wakes another
and then writes to a socket may therefore write before the woken task runs, one time in two.
Where the woken task's work is the one in a hurry, the waker lets it go first."""

from __future__ import annotations

import trio


async def after_woken() -> None:
    """Return once the tasks this one woke have run a step: one checkpoint may come back
    before them (this task first in the next pass), two cannot."""
    await trio.lowlevel.checkpoint()
    await trio.lowlevel.checkpoint()
