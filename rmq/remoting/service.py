"""`async with` for a server that is also usable as `await nursery.start(server.serve)`."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Any, Self

import trio


class Service(abc.ABC):
    """Mixin: `async with` opens a nursery, starts `serve` in it and returns once it is up.

    A subclass provides `async serve(*, task_status)` and `shutdown()`. Leaving the block
    normally shuts down gracefully; leaving it with an exception cancels at once. A start
    failure and the body's own exception come out as raised, not wrapped in an
    ExceptionGroup (Trio's nurseries are strict).
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
        if exc_type is None:
            self.shutdown()
        else:
            nursery.cancel_scope.cancel()
        # The body's exception is not handed to the nursery, so it propagates as raised.
        await manager.__aexit__(None, None, None)
        return None
