"""Request dispatch: request code → processor, with RocketMQ's flow-control answers.

RocketMQ gives each processor an executor (threads + bounded queue) and answers
SYSTEM_BUSY when the queue is full. Here each registration gets a `Route`: a limit on
how many requests of that route run at once (across all connections, like a
CapacityLimiter) and a queue bound (how many more may wait for a slot). The rules, from
NettyRemotingAbstract.processRequestCommand (PROTOCOL.md 1.4):

    situation                          answer (code, remark)                   oneway?
    no processor, no default           3  " request type <code> not supported"  answered too
    processor.reject_request() True    2  "[REJECTREQUEST]system busy, ..."     answered too
    all slots busy and queue full      2  "[OVERLOAD]system busy, ..."          not answered
    processor raises ProtocolError     1  the error's message                   not answered
    processor raises anything else     1  "<ExceptionType>: <message>" (1 line) not answered
    processor returns None             nothing
    processor returns a response       the response                             not answered

`answer_unsupported=False` drops unknown codes silently, as a 4.x name server does.
The connection (connection.py) calls `admit` in its reader and `Route.run` in a task.

`Dispatcher(hook=...)` runs a check before any processor (RocketMQ's server RPCHook
doBeforeRequest, e.g. the broker's ACL validator): `hook(ctx, request)` is called in
`admit`, synchronously, for every request; it returns None to let the request through or
a response (`request.make_response(...)`) to answer instead, and the processor never
runs. A refused oneway request is dropped, as RocketMQ answers no oneway request. A
hook that raises is logged and the request answered SYSTEM_ERROR.

`Dispatcher.observe_with(fn)` calls `fn(request, response, ctx)` as each
processed request is answered (the metrics' latency histogram, rmq/metrics).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from rmq.protocol import (
    RPC_ONEWAY,
    ProtocolError,
    RemotingCommand,
    ResponseCode,
    code_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from .abc import ProcessFunction, RequestContext, RequestProcessor

    RequestHook = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]
    Observer = Callable[[RemotingCommand, Any, RequestContext], None]

P = TypeVar("P", bound="RequestProcessor")
log = logging.getLogger("rmq.remoting.dispatcher")

BUSY_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
BUSY_REJECT = "[REJECTREQUEST]system busy, start flow control for a while"

DEFAULT_CONCURRENCY = 64
DEFAULT_QUEUE_SIZE = 1024  # requests waiting for a slot, per route (RocketMQ queues hold 10k-100k)
_REMARK_LIMIT = 512


class Route:
    """One registration: the processor and its flow-control state.

    Attributes:
      name: for logs (the processor's class or function name).
      concurrency: at most this many requests of the route run at once.
      queue_size: at most this many wait for a slot; beyond, SYSTEM_BUSY.
      inline: run in the connection's reader task instead of a worker task.
      active: requests running now.
      waiting: requests waiting for a slot now.

    (A counter and a ParkingLot rather than a trio.CapacityLimiter: the same semantics,
    a slot handed straight to the next waiter, at a third of the cost per request.)
    """

    __slots__ = (
        "_lot",
        "active",
        "begin",
        "begin_many",
        "concurrency",
        "inline",
        "name",
        "observe",
        "process",
        "queue_size",
        "reject",
        "waiting",
    )

    def __init__(
        self, processor: RequestProcessor | ProcessFunction, concurrency: int, queue_size: int, inline: bool = False
    ) -> None:
        if concurrency < 1 or queue_size < 0:
            raise ValueError("concurrency must be >= 1 and queue_size >= 0")
        process = getattr(processor, "process", None)
        if process is None:
            if not callable(processor):
                raise TypeError(f"{processor!r} is neither a RequestProcessor nor an async function")
            process = processor
        self.name: str = getattr(processor, "__qualname__", type(processor).__qualname__)
        self.process = process
        self.reject = getattr(processor, "reject_request", None)
        # An ordered processor: `begin(ctx, request)` runs in the reader, in arrival order,
        # and returns the response (or None), a `Later`, or an awaitable finishing it in a worker.
        self.begin: Callable[[RequestContext, RemotingCommand], Any] | None = getattr(processor, "begin", None)
        # Optional, with `begin`: `begin_many([(ctx, request), ...])` starts requests that came
        # in one read as `begin` would one by one, in order, and returns what each would.
        self.begin_many: Callable[[list[tuple[RequestContext, RemotingCommand]]], list[Any]] | None = (
            getattr(processor, "begin_many", None) if self.begin is not None else None
        )
        self.concurrency = concurrency
        self.queue_size = queue_size
        self.inline = inline
        self.active = 0
        self.waiting = 0
        # observe(request, response or None, ctx): set by Dispatcher.observe_with
        self.observe: Observer | None = None
        self._lot = trio.lowlevel.ParkingLot()

    def _release(self) -> None:
        if self._lot:
            self._lot.unpark()  # the slot passes to the longest waiter; `active` stays
        else:
            self.active -= 1

    async def wait_slot(self, ctx: RequestContext) -> None:
        """Wait for the slot `admit` queued the request for (no-op if it holds one)."""
        if ctx.queued:
            ctx.queued = False
            try:
                await self._lot.park()
            finally:
                self.waiting -= 1

    async def run(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """Wait for a slot if `admit` queued the request, run the processor, and map
        its outcome to the response to send (None: send nothing).

        Cancellation: the slot (or the place in the queue) is given back; nothing is
        returned or sent.
        """
        await self.wait_slot(ctx)
        try:
            response = await self.process(ctx, request)
        except Exception as exc:
            response = self._failed(ctx, request, exc)
        finally:
            self._release()
        return self._answer(ctx, request, response)

    def start(self, ctx: RequestContext, request: RemotingCommand) -> Any:
        """Run an ordered route's `begin` (the caller holds the slot, see `wait_slot`).

        Returns the response to send (None: nothing), a `Later` (pass its outcome to
        `settled`), or an awaitable: pass it to `finish`. Either still holds the slot.
        """
        assert self.begin is not None
        try:
            response = self.begin(ctx, request)
        except Exception as exc:
            response = self._failed(ctx, request, exc)
        if response is None or isinstance(response, RemotingCommand):
            self._release()
            return self._answer(ctx, request, response)
        return response

    def start_many(self, jobs: list[tuple[RequestContext, RemotingCommand]]) -> list[Any]:
        """`start` for requests that came together (the caller holds a slot for each): what
        `start` returns, for each in order. An Exception in `begin_many`'s list is what that
        request raised; if `begin_many` itself raises, every request is answered so."""
        assert self.begin_many is not None
        try:
            outs = self.begin_many(jobs)
        except Exception as exc:
            outs = [self._failed(ctx, request, exc) for ctx, request in jobs]
        results = []
        for (ctx, request), response in zip(jobs, outs, strict=True):
            if isinstance(response, Exception):
                response = self._failed(ctx, request, response)
            if response is None or isinstance(response, RemotingCommand):
                self._release()
                response = self._answer(ctx, request, response)
            results.append(response)
        return results

    async def finish(self, ctx: RequestContext, request: RemotingCommand, rest: Any) -> RemotingCommand | None:
        """Await what `start` returned, then answer as `run` does."""
        try:
            response = await rest
        except Exception as exc:
            response = self._failed(ctx, request, exc)
        finally:
            self._release()
        return self._answer(ctx, request, response)

    def settled(self, ctx: RequestContext, request: RemotingCommand, outcome: Any) -> RemotingCommand | None:
        """What `start` returned as a `Later` settled with `outcome`: answer as `finish` does."""
        self._release()
        if isinstance(outcome, Exception):
            outcome = self._failed(ctx, request, outcome)
        return self._answer(ctx, request, outcome)

    def _failed(self, ctx: RequestContext, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, ProtocolError):
            log.info("%s from %s: %s", code_name(request.code, response=False), ctx.connection.remote_address, exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, _one_line(exc, with_type=False))
        log.error(
            "processor %s failed on %s from %s",
            self.name,
            code_name(request.code, response=False),
            ctx.connection.remote_address,
            exc_info=exc,
        )
        return request.make_response(ResponseCode.SYSTEM_ERROR, _one_line(exc, with_type=True))

    def _answer(self, ctx: RequestContext, request: RemotingCommand, response: Any) -> RemotingCommand | None:
        if self.observe is not None:  # metrics: request latency by request and response code
            self.observe(request, response, ctx)
        if request.flag & RPC_ONEWAY:
            return None
        if response is None or isinstance(response, RemotingCommand):
            return response
        log.error("processor %s returned %r instead of a RemotingCommand", self.name, type(response))
        return request.make_response(ResponseCode.SYSTEM_ERROR, "processor returned a bad response")


class Dispatcher:
    """Request code → Route. Shared by every connection of a server (or of a client).

    Args:
      answer_unsupported: answer codes nobody registered with
        REQUEST_CODE_NOT_SUPPORTED (default), or drop them (a 4.x name server).
      hook: a check run before any processor (see the module docstring).
    """

    def __init__(self, *, answer_unsupported: bool = True, hook: RequestHook | None = None) -> None:
        self.answer_unsupported = answer_unsupported
        self.hook = hook
        self._routes: dict[int, Route] = {}
        self._default: Route | None = None
        self._observe: Observer | None = None

    def register(
        self,
        codes: int | Iterable[int],
        processor: RequestProcessor | ProcessFunction,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        inline: bool = False,
    ) -> Route:
        """Serve `codes` with `processor`. Codes registered in one call share one Route
        (one concurrency limit and queue, like RocketMQ codes sharing an executor).

        Args:
          concurrency: requests of this route running at once, over all connections.
          queue_size: requests waiting for a slot before SYSTEM_BUSY [OVERLOAD].
          inline: run the processor in the connection's reader task (one task switch
            less per request). Only for processors that return without waiting on I/O
            (in-memory lookups): while it runs, the connection reads nothing, so a
            processor that awaits a response on its own connection would deadlock
            until its timeout.

        Raises ValueError if a code already has a processor.
        """
        code_list = [codes] if isinstance(codes, int) else list(codes)
        taken = [c for c in code_list if c in self._routes]
        if taken:
            raise ValueError(f"codes already registered: {taken}")
        route = Route(processor, concurrency, queue_size, inline)
        route.observe = self._observe
        for code in code_list:
            self._routes[code] = route
        return route

    def register_default(
        self,
        processor: RequestProcessor | ProcessFunction,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        inline: bool = False,
    ) -> Route:
        """Serve every code without its own processor (RocketMQ's default processor).
        Arguments as for `register`."""
        if self._default is not None:
            raise ValueError("a default processor is already registered")
        self._default = Route(processor, concurrency, queue_size, inline)
        self._default.observe = self._observe
        return self._default

    def observe_with(self, observe: Observer | None) -> None:
        """Call `observe(request, response, ctx)` as each processed request is answered
        (response None for a processor answering nothing; `ctx.received_at` is when it
        came, `ctx.suspended` whether it was parked): the metrics' latency histogram.
        Requests refused in `admit` are not observed."""
        self._observe = observe
        for route in {*self._routes.values(), *([self._default] if self._default else [])}:
            route.observe = observe

    @property
    def codes(self) -> frozenset[int]:
        """The codes with their own processor."""
        return frozenset(self._routes)

    def route(self, code: int) -> Route | None:
        """The route serving `code` (maybe the default), or None."""
        return self._routes.get(code, self._default)

    def processor_of(self, code: int, kind: type[P], *, inline: bool = False) -> P:
        """The `kind` object serving `code`, made (with no arguments) and registered at first
        use: one per dispatcher for everyone sharing it (a client instance's producers)."""
        route = self.route(code)
        owner = getattr(route.process, "__self__", None) if route is not None else None
        if isinstance(owner, kind):
            return owner
        processor = kind()
        self.register(code, processor, inline=inline)
        return processor

    def admit(self, ctx: RequestContext, request: RemotingCommand) -> Route | RemotingCommand | None:
        """Decide, without waiting, what happens to an incoming request.

        Returns:
          A Route: run `route.run(ctx, request)` in a task; the request holds a slot,
            or is counted as waiting for one (`ctx.queued`) and `run` waits for it.
          A RemotingCommand: an immediate answer to write (refused by the hook, busy
            or not supported).
          None: drop the request.
        """
        if self.hook is not None:
            refusal = self._run_hook(ctx, request)
            if refusal is not None:
                return None if request.flag & RPC_ONEWAY else refusal
        route = self._routes.get(request.code, self._default)
        if route is None:
            if self.answer_unsupported:
                return request.make_response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
                )
            return None
        reject = route.reject
        if reject is not None and reject():
            return request.make_response(ResponseCode.SYSTEM_BUSY, BUSY_REJECT)
        if route.active < route.concurrency:
            route.active += 1
        elif route.waiting < route.queue_size:
            route.waiting += 1
            ctx.queued = True
        elif request.flag & RPC_ONEWAY:
            return None
        else:
            return request.make_response(ResponseCode.SYSTEM_BUSY, BUSY_OVERLOAD)
        return route

    def _run_hook(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        assert self.hook is not None
        try:
            return self.hook(ctx, request)
        except Exception as exc:
            name = code_name(request.code, response=False)
            log.exception("request hook failed on %s from %s", name, ctx.remote_address)
            return request.make_response(ResponseCode.SYSTEM_ERROR, _one_line(exc, with_type=True))


EMPTY_DISPATCHER = Dispatcher()
"""Serves nothing: answers every request REQUEST_CODE_NOT_SUPPORTED."""


def _one_line(exc: BaseException, *, with_type: bool) -> str:
    text = str(exc).strip().splitlines()
    message = text[0] if text else ""
    if with_type:
        message = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return message[:_REMARK_LIMIT]
