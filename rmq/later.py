"""Later: an outcome that follows once other work is done, with no task waiting for it.

Whoever finishes the work calls `settle`, and the callback registered with `then` runs there
and then, in the settling task. Thousands of sends waiting for one sync round or one ack cost
one pass over their callbacks instead of a task switch each. Awaiting a Later works too.

The store's appends hand one back (`rmq.store.aio.PutWait`) and so do the broker's ordered
processors (`Route.start`), whose connection queues the answer from the callback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

log = logging.getLogger("rmq.later")


class Later:
    __slots__ = ("_callback", "_event", "_map", "_outcome", "_settled")

    def __init__(self) -> None:
        self._callback: Callable[[Any], None] | None = None
        self._map: Callable[[Any], Any] | None = None
        self._event: trio.Event | None = None
        self._outcome: Any = None
        self._settled = False

    @property
    def done(self) -> bool:
        return self._settled

    def settle(self, outcome: Any) -> None:
        """Finish with `outcome` (a value, or the Exception the work failed with); only the
        first call counts. The callback runs now; if it raises, that is logged, and the
        settling task goes on."""
        if self._settled:
            return
        if self._map is not None:
            outcome = _mapped(self._map, outcome)
        self._settled, self._outcome = True, outcome
        callback, self._callback = self._callback, None
        if callback is not None:
            try:
                callback(outcome)
            except Exception:
                log.exception("a callback on %s failed", type(self).__name__)
        if self._event is not None:
            self._event.set()

    def settle_call(self, fn: Callable[[], Any]) -> None:
        """Settle with what ``fn()`` returns, or with the Exception it raises."""
        try:
            outcome = fn()
        except Exception as exc:  # noqa: BLE001 - the exception is the outcome
            outcome = exc
        self.settle(outcome)

    def map(self, fn: Callable[[Any], Any]) -> None:
        """Settle with ``fn(outcome)`` (or the Exception it raises) instead of a value
        outcome: the store's wait becomes the processor's answer with no second Later. On a
        Later settled already it maps the outcome now (call it before `then`)."""
        if self._settled:
            self._outcome = _mapped(fn, self._outcome)
        else:
            self._map = fn

    def then(self, callback: Callable[[Any], None]) -> None:
        """Call `callback(outcome)` once settled (now, if it is); one callback per Later."""
        if self._settled:
            callback(self._outcome)
        else:
            self._callback = callback

    def __await__(self) -> Any:
        if not self._settled:
            if self._event is None:
                self._event = trio.Event()
            yield from self._event.wait().__await__()
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome


def _mapped(fn: Callable[[Any], Any], outcome: Any) -> Any:
    """``fn(outcome)`` for a value outcome, or the Exception it raises; an Exception as is."""
    if isinstance(outcome, Exception):
        return outcome
    try:
        return fn(outcome)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return exc
