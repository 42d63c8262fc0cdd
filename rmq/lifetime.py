"""How long-running objects start and stop on Trio: one shell, one runner.

* `Service`: a server written as `serve(task_status)` and `shutdown()` is also an `async with`
  object that returns once it serves (RemotingServer, NamesrvServer, BrokerController,
  RemotingClient).
* `unwrapped()` / `sole_exception`: Trio's nurseries are strict, so a lone exception that
  crosses one comes out inside an ExceptionGroup. Callers catch by type (`except OSError:`
  around a start), so a lone exception is handed on as itself; several stay a group.
* `until_signalled()`: the body of a server process (mqbroker, mqnamesrv, `rmq dev`, a DLedger
  member): start servers in its nursery, wait for SIGINT or SIGTERM, stop gracefully; a second
  signal stops at once.
* `exit_status()`: a server command's main, from what its run raised to the process's exit
  status and one line on stderr.
"""

from __future__ import annotations

import abc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

import trio


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside (possibly nested) groups, or None if there are more."""
    leaves = group.exceptions
    if len(leaves) != 1:
        return None
    leaf = leaves[0]
    if isinstance(leaf, BaseExceptionGroup):
        return sole_exception(leaf)
    return leaf


@asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """Hand on a lone exception out of the block's ExceptionGroup as itself."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = sole_exception(group)
        if leaf is None:
            raise
    else:
        return
    raise leaf  # outside the except clause: the leaf keeps its own cause and context


class Service(abc.ABC):
    """Mixin: `async with` opens a nursery, starts `serve` in it and returns once it is up.

    A subclass provides `async serve(*, task_status)` and `shutdown()`. Leaving the block
    calls `shutdown()`, a graceful stop; leaving it with an exception also cancels at once. A
    start failure and the body's own exception come out as raised, not wrapped in an
    ExceptionGroup.
    """

    _service_nursery: Any = None

    @abc.abstractmethod
    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run until shut down; call `task_status.started(...)` once serving."""

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Begin a graceful stop; `serve` returns when it is done."""

    async def __aenter__(self) -> Self:
        manager = trio.open_nursery()
        nursery = await manager.__aenter__()
        try:
            await nursery.start(self.serve)
        except BaseException:
            nursery.cancel_scope.cancel()
            await manager.__aexit__(None, None, None)
            raise
        self._service_nursery = (manager, nursery)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        manager, nursery = self._service_nursery
        self._service_nursery = None
        self.shutdown()
        if exc_type is not None:
            nursery.cancel_scope.cancel()
        # The body's exception is not handed to the nursery, so it propagates as raised.
        await manager.__aexit__(None, None, None)
        return None


class SignalledRun:
    """What `until_signalled` gives its body: a nursery to serve in, and the signals."""

    def __init__(self, nursery: trio.Nursery, signals: AsyncIterator[int], log: logging.Logger) -> None:
        self.nursery = nursery
        self._signals = signals
        self._log = log

    async def wait(self) -> None:
        """Until the first SIGINT or SIGTERM."""
        async for signum in self._signals:
            self._log.info("%s received, shutting down", signal.Signals(signum).name)
            return

    async def stop(self, stopping: Callable[[], Awaitable[object]]) -> None:
        """Await `stopping()`, a graceful stop; a second signal meanwhile cancels the run."""
        async with trio.open_nursery() as waiting:
            waiting.start_soon(self._cancel_on_signal)
            await stopping()
            waiting.cancel_scope.cancel()

    def cancel(self) -> None:
        """Stop everything started in the nursery at once."""
        self.nursery.cancel_scope.cancel()

    async def _cancel_on_signal(self) -> None:
        async for signum in self._signals:
            self._log.warning("%s received again, stopping now", signal.Signals(signum).name)
            self.cancel()
            return


@asynccontextmanager
async def until_signalled(log: logging.Logger) -> AsyncIterator[SignalledRun]:
    """Serve in the yielded run's nursery until the body returns.

    The signal receiver is open before the body starts anything, so an early SIGTERM is not
    lost (and Ctrl-C raises no KeyboardInterrupt meanwhile). What stops a start (a port in
    use, a locked store) comes out as itself, not in an ExceptionGroup.
    """
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with unwrapped(), trio.open_nursery() as nursery:
            yield SignalledRun(nursery, signals, log)


def exit_status(
    prog: str,
    run: Callable[[], object],
    *,
    bad_config: tuple[type[Exception], ...] = (),
    cannot_start: tuple[type[Exception], ...] = (OSError,),
) -> int:
    """Call `run()` and give the exit status of a server command: 0 when it returns, 2 for a
    bad configuration, 1 when it cannot start, 130 after Ctrl-C; the first two say why on
    stderr, prefixed with `prog`."""
    try:
        run()
    except bad_config as exc:
        print(f"{prog}: bad configuration: {exc}", file=sys.stderr)
        return 2
    except cannot_start as exc:
        print(f"{prog}: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
