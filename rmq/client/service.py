"""AsyncService: the `async with` shell shared by producers and consumers.

Each client object describes its life as one async context manager (`_lifecycle`):
start the connections and loops, yield while the application uses it, then commit,
unregister and close. This class turns that into `__aenter__` / `__aexit__`, so the
object itself is used with `async with`.

Trio nurseries wrap whatever crosses them in an ExceptionGroup (strict exception
groups). An exception that is alone in such a group, be it the application's own from
the `async with` body or an MQClientError from starting up, is given back unwrapped,
as trio-websocket's `open_websocket` does, so `except KeyError:` around an
`async with producer:` block still works. Groups of several exceptions stay groups.

For frameworks with separate startup and shutdown hooks, `await obj.start()` runs the same
lifecycle in a Trio system task (no nursery to keep open) and `await obj.close()` ends it.
"""

from __future__ import annotations

import abc
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Self

import trio

from rmq.lifetime import unwrapped

from .errors import MQClientStateError


class AsyncService(abc.ABC):
    """Base of the client objects used as `async with obj:`; see the module docstring."""

    _stack: AsyncExitStack | None = None
    _close_wanted: trio.Event | None = None  # set by close() when started by start()
    _closed: trio.Event | None = None
    _close_error: BaseException | None = None

    @abc.abstractmethod
    def _lifecycle(self) -> AbstractAsyncContextManager[None]:
        """Start everything, yield while running, clean up on exit."""

    @property
    def running(self) -> bool:
        return self._stack is not None

    async def start(self) -> Self:
        """Start without an `async with` block, e.g. in a web framework's startup hook;
        `close()` stops it. The object runs in a Trio system task until then (or until the
        Trio run ends). Raises what starting raised (MQClientError)."""
        if self._stack is not None or self._close_wanted is not None:
            raise MQClientStateError(f"{self!r} is already running")
        wanted, closed = trio.Event(), trio.Event()
        self._close_wanted, self._closed, self._close_error = wanted, closed, None
        started = trio.Event()
        failure: list[Exception] = []

        async def run() -> None:
            try:
                async with self:
                    started.set()
                    await wanted.wait()
            except Exception as exc:  # noqa: BLE001 - handed to start() or close()
                if started.is_set():
                    self._close_error = exc
                else:
                    failure.append(exc)
            finally:
                started.set()
                closed.set()

        trio.lowlevel.spawn_system_task(run)
        await started.wait()
        if failure:
            self._close_wanted = self._closed = None
            raise failure[0]
        return self

    async def close(self) -> None:
        """Stop what `start()` started: commit offsets, unregister, close connections.
        Does nothing when not started that way (leave `async with` instead)."""
        wanted, closed = self._close_wanted, self._closed
        if wanted is None or closed is None:
            return
        wanted.set()
        await closed.wait()
        self._close_wanted = self._closed = None
        error, self._close_error = self._close_error, None
        if error is not None:
            raise error

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise MQClientStateError(f"{self!r} is already running")
        stack = AsyncExitStack()
        async with unwrapped():
            await stack.enter_async_context(self._lifecycle())
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if stack is None:
            return None
        async with unwrapped():
            suppressed = await stack.__aexit__(exc_type, exc, tb)
        return suppressed
