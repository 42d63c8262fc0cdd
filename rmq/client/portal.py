"""A Trio loop in a background thread: how asyncio and blocking code use the one Trio client.

The client's logic exists once, on Trio (producer.py, consumer.py, pull_consumer.py). The
asyncio facade (aio.py) and the blocking facade (blocking.py) hand each call to a shared
``Portal``: a daemon thread running ``trio.run``, started on first use. ``TrioToken.
run_sync_soon`` is safe from any thread and any event loop, so an asyncio application needs no
threads of its own and a blocking call simply waits for its answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")

_START_TIMEOUT = 10.0


class Portal:
    """One background Trio loop; tasks run in its nursery until they finish."""

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _ensure(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._ready.clear()
                self._thread = threading.Thread(target=trio.run, args=(self._main,), name="rmq-portal", daemon=True)
                self._thread.start()
        if not self._ready.wait(_START_TIMEOUT):
            raise RuntimeError("the rmq client's Trio thread did not start")

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            self._token = trio.lowlevel.current_trio_token()
            self._nursery = nursery
            self._ready.set()
            await trio.sleep_forever()

    def _submit(
        self, fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], done: Callable[[bool, Any], None]
    ) -> None:
        """Start ``fn(*args)`` in the Trio thread; ``done(ok, value_or_exception)`` runs there
        when it ends."""
        self._ensure()
        assert self._token is not None

        async def run() -> None:
            # Whatever happens, it goes to the caller: one call must never end the loop that
            # every other facade object shares.
            try:
                value = await fn(*args)
            except trio.Cancelled:
                done(False, RuntimeError("the rmq client's Trio thread is shutting down"))
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                done(False, exc)
            else:
                done(True, value)

        def spawn() -> None:
            assert self._nursery is not None
            self._nursery.start_soon(run)

        self._token.run_sync_soon(spawn)

    def submit(self, fn: Callable[[], Awaitable[T]], done: Callable[[bool, Any], None]) -> None:
        """Start ``fn()`` in the Trio thread and return at once; ``done(ok, value_or_exception)``
        runs in that thread when it ends."""
        self._submit(fn, (), done)

    def run_sync_soon(self, fn: Callable[[], object]) -> None:
        """Run the plain function ``fn`` in the Trio thread soon; returns at once."""
        self._ensure()
        assert self._token is not None
        self._token.run_sync_soon(fn)

    def call_sync(self, fn: Callable[[], T]) -> T:
        """Run the plain function ``fn`` in the Trio thread and block until it returns."""

        async def run() -> T:
            return fn()

        return self.call(run)

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float | None = None) -> T:
        """Run ``fn(*args)`` in the Trio thread and block until it returns (or raises)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def done(ok: bool, value: Any) -> None:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        self._submit(fn, args, done)
        return future.result(timeout)

    async def acall(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await ``fn(*args)``, run in the Trio thread, from an asyncio coroutine."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def done(ok: bool, value: Any) -> None:
            def settle() -> None:
                if future.cancelled():
                    return
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the caller's loop has closed: nobody waits any more
                pass

        self._submit(fn, args, done)
        return await future


_default: Portal | None = None
_default_lock = threading.Lock()


def default_portal() -> Portal:
    """The process's shared portal (one Trio thread for every facade object)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Portal()
        return _default
