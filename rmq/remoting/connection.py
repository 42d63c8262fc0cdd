"""Connection: one RocketMQ remoting connection, symmetric, on a CommandStream.

Theory of operation
-------------------
Either side sends requests: a client invokes the broker, and the broker sends
CHECK_TRANSACTION_STATE or NOTIFY_CONSUMER_IDS_CHANGED back on the same connection
(PROTOCOL.md 1.7). Each side numbers its own requests (the opaque) and flag bit 0 tells
a response from a request, so one table of pending requests per side is enough.

`run()` owns one nursery holding everything the connection does:

* the reader (the `run` task itself) decodes batches of commands. A response wakes the
  task waiting in `invoke` (looked up by opaque; late ones are dropped). A request goes
  through `Dispatcher.admit`: an immediate answer (busy, not supported) is queued at
  once, otherwise a worker task runs the processor.
* the writer task drains the outbox (outbox.py: a bounded queue of encoded frames) and
  joins what it finds into one `send_all`. On plain TCP a frame may skip it: when nothing
  is queued or being written, the first frame after a read of a single command is written
  at once by the task that made it (`_write_now`), which saves the writer's task switch and
  scheduler passes at one request in flight. After a read of several commands (a pipeline)
  every frame queues and the writer joins them, as before: writing the first alone would
  split the peer's next read in two.
* worker tasks, one per request being processed; each queues its response (routes
  registered `inline=True` run in the reader instead, saving a task switch). A processor
  with a `begin` method (an ordered route, the broker's sends) is started in the reader,
  in arrival order, and only what it leaves to wait for (a flush) goes to a worker. A worker
  that finishes waits, parked, for the next request instead of exiting (at most
  `_MAX_IDLE_WORKERS` wait), which saves a task spawn per request. Processors must
  therefore not rely on context variables being fresh for each request.
* the timer task fails invokes whose deadline passed. Deadlines sit in a heap and the
  timer sleeps until the earliest: one CancelScope per expiry rather than one per
  request (a `move_on_after` around each invoke measured 13-20 µs with trio 0.22-0.35
  on the 2-core CI machine, 5-10% of a loopback round trip).

Backpressure, so that a peer can never make us buffer without bound:
* at most `max_in_flight` requests from the peer are processed at once; the reader
  stops reading (TCP pushes back on the peer) until one finishes;
* the outbox holds at most `outbox_size` frames; a sender waits when it is full, so a
  peer that stops reading stalls our processors, then our reader;
* the reader also takes no new request while the outbox holds `outbox_bytes` or more: with
  thousands of requests allowed in flight (a consumer parks a pull per queue), a peer that
  sends pulls and never reads would otherwise make us hold every answer;
* at most `max_pending` of our requests wait for responses.

When `run` ends (end of stream, protocol error, write failure, `close()`, or the
caller's cancel scope, e.g. the idle timeout) the nursery is cancelled, every waiting
`invoke` fails with RemotingConnectError, later sends fail with
RemotingSendRequestError, and the stream is closed (bounded by a short timeout).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import logging
from collections.abc import Callable
from typing import Any

import outcome
import trio

from rmq.later import Later
from rmq.protocol import (
    RPC_ONEWAY,
    RPC_TYPE,
    ProtocolError,
    RemotingCommand,
    ResponseCode,
)
from rmq.scheduling import after_woken

from .abc import RequestContext
from .dispatcher import EMPTY_DISPATCHER, Dispatcher, Route
from .errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from .outbox import Outbox, Parked
from .stages.codec import COALESCE_LIMIT, CommandStream

log = logging.getLogger("rmq.remoting.connection")

DEFAULT_OUTBOX_SIZE = 256  # frames queued for the writer
DEFAULT_OUTBOX_BYTES = 4 << 20  # queued bytes above which no new request is read
DEFAULT_MAX_IN_FLIGHT = 256  # peer requests processed at once on one connection
DEFAULT_MAX_PENDING = 65535  # our requests awaiting responses (RocketMQ's semaphoreAsync)
DEFAULT_ONEWAY_TIMEOUT = 3.0
_CLOSE_TIMEOUT = 1.0  # for the stream's aclose: TLS close_notify, WebSocket close handshake
_OPAQUE_MASK = 0x7FFFFFFF  # opaques stay non-negative, wrapping to 0
_MAX_IDLE_WORKERS = 64  # finished workers kept parked for the next request
_ADMIT_STEP = 32  # requests of one received batch admitted between checks of the outbox
# Answers of one received batch handed to their callers between yields. A caller that sends
# again at once (a producer keeping 64 sends in flight) then has its next request written
# while the reader works through the rest of the batch, not after all of it: answers that come
# in bursts (a SYNC_FLUSH group commit, a DLedger entry) kept the broker idle meanwhile.
# Measured with 64 sends in flight: SYNC_FLUSH +15 %, SYNC_MASTER +23 %, ASYNC_FLUSH +5 % msg/s.
_ANSWER_STEP = 8


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionStatistics:
    in_flight: int  # peer requests being processed
    pending: int  # our requests awaiting a response
    outbox: int  # frames queued for the writer
    buffered: int  # bytes received but not yet decoded


class _Slot:
    """A pending invoke: the task waiting, or the outcome if it came before the wait."""

    __slots__ = ("code", "on_answer", "result", "task", "timeout")

    def __init__(self, code: int, timeout: float, on_answer: Callable[[RemotingCommand], None] | None = None) -> None:
        self.task: Any = None
        self.result: RemotingCommand | RemotingError | None = None
        self.code = code
        self.timeout = timeout
        self.on_answer = on_answer

    def abort(self, _raise_cancel: Any) -> trio.lowlevel.Abort:
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def finish(self, result: RemotingCommand | RemotingError) -> None:
        on_answer = self.on_answer
        if on_answer is not None and not isinstance(result, RemotingError):
            self.on_answer = None  # the slot stays in the deadline heap until its timeout
            try:
                on_answer(result)
            except Exception:  # noqa: BLE001 - the caller's bug must not end the reader
                log.exception("on_answer of a %d response failed", self.code)
        task = self.task
        if task is None:
            self.result = result
        else:
            self.task = None
            trio.lowlevel.reschedule(
                task, outcome.Error(result) if isinstance(result, RemotingError) else outcome.Value(result)
            )

    async def wait(self) -> RemotingCommand:
        result = self.result
        if result is None:
            self.task = trio.lowlevel.current_task()
            return await trio.lowlevel.wait_task_rescheduled(self.abort)  # type: ignore[no-any-return]
        self.result = None  # not kept while the slot lingers in the deadline heap
        await trio.lowlevel.checkpoint()
        if isinstance(result, RemotingError):
            raise result
        return result


class Sent:
    """A request `Connection.invoke_nowait` sent, its response not taken yet; the response
    (or the timeout, or the connection's end) waits here until `wait` or `forget`."""

    __slots__ = ("_opaque", "_pending", "_slot")

    def __init__(self, pending: dict[int, _Slot], opaque: int, slot: _Slot) -> None:
        self._pending = pending
        self._opaque = opaque
        self._slot = slot

    async def wait(self) -> RemotingCommand:
        """The response, as `Connection.invoke` returns it (raising what it raises)."""
        try:
            return await self._slot.wait()
        finally:
            self.forget()

    def forget(self) -> None:
        """Give up on the response: one that comes later is dropped."""
        if self._pending.get(self._opaque) is self._slot:
            del self._pending[self._opaque]


class Connection:
    """A symmetric RocketMQ connection. Start it with `run()` (usually through
    `nursery.start(conn.run)`); it serves until closed.

    Args:
      stream: the codec stage over the transport.
      dispatcher: processors for requests the peer sends (None: answer them all
        REQUEST_CODE_NOT_SUPPORTED).
      remote_address, local_address: "ip:port", for processors, logs and errors.
      outbox_size, outbox_bytes, max_in_flight, max_pending: the bounds in the module
        docstring.

    Attributes:
      attrs: free per-connection state for processors (client id, language, ...).
      close_reason: why the connection closed (None while open).
    """

    def __init__(
        self,
        stream: CommandStream,
        dispatcher: Dispatcher | None = None,
        *,
        remote_address: str = "",
        local_address: str = "",
        outbox_size: int = DEFAULT_OUTBOX_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_pending: int = DEFAULT_MAX_PENDING,
        outbox_bytes: int = DEFAULT_OUTBOX_BYTES,
    ) -> None:
        if outbox_size < 1 or max_in_flight < 1 or max_pending < 1:
            raise ValueError("outbox_size, max_in_flight and max_pending must be >= 1")
        self.stream = stream
        self.dispatcher = dispatcher if dispatcher is not None else EMPTY_DISPATCHER
        self.remote_address = remote_address
        self.local_address = local_address
        self.attrs: dict[str, Any] = {}
        self.close_reason: str | None = None
        self._max_in_flight = max_in_flight
        self._max_pending = max_pending
        # our requests
        self._pending: dict[int, _Slot] = {}
        self._next_opaque = 0
        self._deadlines: list[tuple[float, int, _Slot]] = []  # heap of (deadline, opaque, slot)
        self._timer = Parked()
        self._timer_scope: trio.CancelScope | None = None
        # frames for the writer task
        self._outbox = Outbox(outbox_size, outbox_bytes)
        self._writing = False
        self._write_idle: trio.Event | None = None
        self._direct_write = stream.direct_write
        self._may_write_now = True  # until a frame goes out directly or a pipelined read comes
        # peer requests
        self._in_flight = 0
        self._in_flight_changed: trio.Event | None = None
        self._idle_workers: list[Parked] = []
        # lifetime
        self._nursery: trio.Nursery | None = None
        self._read_scope: trio.CancelScope | None = None
        self._started = False
        self._close_requested = False
        self._draining = False
        self._closed = False
        self._closed_event = trio.Event()
        self._now = trio.current_time  # replaced by the clock's own method in run()

    def __repr__(self) -> str:
        state = f"closed: {self.close_reason}" if self._closed else "open"
        return f"<Connection {self.local_address} -> {self.remote_address} {state}>"

    # -- lifetime ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection has stopped (or `close()` was called)."""
        return self._closed or self._close_requested

    async def wait_closed(self) -> None:
        """Wait until `run()` has finished and the stream is closed."""
        await self._closed_event.wait()

    async def run(self, *, task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until it closes; then close the stream.

        Reports itself to `nursery.start` once its tasks are running. Returns normally
        at end of stream, on a protocol error or a write failure (see `close_reason`),
        after `close()` or `drain()`; a cancellation from outside (idle timeout, server
        shutdown) propagates as usual. Either way every task it started has finished,
        every pending `invoke` has failed and the stream is closed when it exits.
        """
        if self._started:
            raise RuntimeError("Connection.run() was already called")
        self._started = True
        self._now = trio.lowlevel.current_clock().current_time
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self._close_requested:
                    nursery.cancel_scope.cancel()
                nursery.start_soon(self._write_loop)
                nursery.start_soon(self._timer_loop)
                task_status.started(self)
                with trio.CancelScope() as self._read_scope:
                    if self._draining:
                        self._read_scope.cancel()
                    await self._read_loop()
                if self._draining:
                    await self._wait_drained()
                    self._set_reason("drained")
                nursery.cancel_scope.cancel()
        finally:
            self._shutdown()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(_CLOSE_TIMEOUT):
                    try:
                        await self.stream.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
            self._closed_event.set()

    def close(self, reason: str = "closed locally") -> None:
        """Ask the connection to stop now: in-flight work is cancelled, pending invokes
        fail. Returns at once; `wait_closed()` waits for the end."""
        self._set_reason(reason)
        self._close_requested = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def drain(self) -> None:
        """Ask the connection to stop gracefully: read no more requests, finish those in
        flight, flush the outbox, then close. The caller bounds how long that may take
        (the server's shutdown grace). Returns at once."""
        self._draining = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    async def aclose(self) -> None:
        """`close()`, then wait until closed (at once if `run` never started)."""
        self.close()
        if self._started:
            await self._closed_event.wait()
        else:
            self._shutdown()
            with trio.move_on_after(_CLOSE_TIMEOUT):
                await self.stream.aclose()
            self._closed_event.set()

    def statistics(self) -> ConnectionStatistics:
        return ConnectionStatistics(
            in_flight=self._in_flight,
            pending=len(self._pending),
            outbox=len(self._outbox),
            buffered=self.stream.buffered,
        )

    # -- sending ----------------------------------------------------------------------

    async def invoke(
        self, request: RemotingCommand, timeout: float, on_answer: Callable[[RemotingCommand], None] | None = None
    ) -> RemotingCommand:
        """Send `request` and wait for its response.

        Sets `request.opaque` (next number of this connection) and clears its flag bits.
        `on_answer(response)`, if given, runs in the reader as the response arrives, before
        the waiting task is woken: work that must not wait for the scheduler to come round
        to that task (it must be quick and must not raise).

        Returns:
          The response; its code may be any ResponseCode (SYSTEM_BUSY included): the
          caller decides what it means.

        Raises:
          RemotingTimeoutError: no response within `timeout` seconds (time spent waiting
            for room in the outbox counts).
          RemotingConnectError: the connection closed while waiting.
          RemotingSendRequestError: the connection is closed or not running; nothing
            was sent.
          RemotingTooMuchRequestError: `max_pending` requests already await responses.
          LocalProtocolError: the request cannot be encoded.

        Cancellation: the request may or may not have been sent; a late response is
        dropped. Nothing is left registered.
        """
        pending = self._pending
        if self._outbox.closed or self._nursery is None:
            raise RemotingSendRequestError(self.remote_address, request.code, self._closed_text())
        if len(pending) >= self._max_pending:
            raise RemotingTooMuchRequestError(
                self.remote_address, request.code, f"{len(pending)} requests already await responses"
            )
        opaque, frame = self._request_frame(request)
        slot = _Slot(request.code, timeout, on_answer)
        deadline = self._now() + timeout
        pending[opaque] = slot
        try:
            if not self._write_now(frame) and not self._outbox.put_nowait(frame):
                queued = False
                with trio.move_on_at(deadline):
                    await self._outbox.put(frame)
                    queued = True
                if self._outbox.closed:
                    raise RemotingSendRequestError(self.remote_address, request.code, self._closed_text())
                if not queued:
                    raise RemotingTimeoutError(self.remote_address, request.code, timeout)
            self._add_deadline(deadline, opaque, slot)
            return await slot.wait()
        finally:
            pending.pop(opaque, None)

    def invoke_nowait(self, request: RemotingCommand, timeout: float) -> Sent | None:
        """Send `request` now, from the calling task, and leave its response to be taken
        later with `Sent.wait()`: a caller that knows its next request before it has dealt
        with the last answer (a pull's next offset is in the answer's header) sends it
        first. None, with nothing sent, when the request cannot leave at once: the
        connection is closed, `max_pending` requests await responses, or the outbox is full."""
        if self._outbox.closed or self._nursery is None or len(self._pending) >= self._max_pending:
            return None
        opaque, frame = self._request_frame(request)
        if not self._write_now(frame) and not self._outbox.put_nowait(frame):
            return None
        slot = _Slot(request.code, timeout)
        self._pending[opaque] = slot
        self._add_deadline(self._now() + timeout, opaque, slot)
        return Sent(self._pending, opaque, slot)

    async def invoke_oneway(self, request: RemotingCommand, timeout: float = DEFAULT_ONEWAY_TIMEOUT) -> None:
        """Queue `request` with the oneway flag; no response is expected.

        Sets `request.opaque` and the RPC_ONEWAY flag. Returns once the frame is queued
        for the writer (not once it is written).

        Raises:
          RemotingTooMuchRequestError: the outbox stayed full for `timeout` seconds.
          RemotingSendRequestError: the connection is closed.

        Cancellation: the request was either queued whole or not at all.
        """
        if self._outbox.closed:
            raise RemotingSendRequestError(self.remote_address, request.code, self._closed_text())
        frame = self._oneway_frame(request)
        if self._write_now(frame) or self._outbox.put_nowait(frame):
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(timeout):
            await self._outbox.put(frame)
        if self._outbox.closed:
            raise RemotingSendRequestError(self.remote_address, request.code, self._closed_text())
        raise RemotingTooMuchRequestError(self.remote_address, request.code, f"outbox full for {timeout * 1000:.0f} ms")

    def send_oneway_nowait(self, request: RemotingCommand) -> bool:
        """`invoke_oneway` from synchronous code, for a caller whose requests do not come in
        pipelines (a DLedger member's pushes and acks): the frame is written at once when
        nothing is queued or being written, else queued. False, with nothing sent, when the
        connection is closed or its outbox full."""
        if self._outbox.closed or self._outbox.full:
            return False
        frame = self._oneway_frame(request)
        return self._write_now(frame, unpipelined=True) or self._outbox.put_nowait(frame)

    def _request_frame(self, request: RemotingCommand) -> tuple[int, bytes]:
        opaque = request.opaque = self._take_opaque()
        request.flag &= ~(RPC_TYPE | RPC_ONEWAY)
        return opaque, request.encode()

    def _oneway_frame(self, request: RemotingCommand) -> bytes:
        request.opaque = self._take_opaque()
        request.flag = (request.flag & ~RPC_TYPE) | RPC_ONEWAY
        return request.encode()

    async def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Queue `response` to `request` (for a processor that returned None and answers
        later). Sets the response's opaque, response flag and serialize type from the
        request.

        Raises:
          RemotingSendRequestError: the connection is closed.

        Cancellation: the response was either queued whole or not at all.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._queue_response(request, response)
        if self._outbox.closed:
            raise RemotingSendRequestError(self.remote_address, request.code, self._closed_text())

    # -- invoke internals -------------------------------------------------------------

    def _take_opaque(self) -> int:
        opaque = self._next_opaque
        while opaque in self._pending:  # only after a wrap-around past a very old request
            opaque = (opaque + 1) & _OPAQUE_MASK
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        return opaque

    def _add_deadline(self, deadline: float, opaque: int, slot: _Slot) -> None:
        heap = self._deadlines
        if len(heap) > 2 * len(self._pending) + 1024:
            # entries of answered requests linger until the timer passes them; drop them
            heap[:] = [entry for entry in heap if self._pending.get(entry[1]) is entry[2]]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, opaque, slot))
        scope = self._timer_scope
        if scope is None:
            self._timer.wake()
        elif deadline < scope.deadline:  # a new earliest deadline: the timer must wake sooner
            scope.deadline = deadline

    async def _timer_loop(self) -> None:
        """Fail the requests whose deadline passed. It sleeps until the earliest deadline of a
        request still waiting: the entries of answered requests ahead of it are dropped
        first, or it would wake for each of them, one timeout after each request (hundreds
        of wake-ups a second under load, for nothing)."""
        heap = self._deadlines
        pending = self._pending
        while True:
            now = trio.current_time()
            while heap:
                deadline, opaque, slot = heap[0]
                if pending.get(opaque) is not slot:  # answered (or failed) already
                    heapq.heappop(heap)
                elif deadline <= now:
                    heapq.heappop(heap)
                    del pending[opaque]
                    slot.finish(RemotingTimeoutError(self.remote_address, slot.code, slot.timeout))
                else:
                    break
            if not heap:
                await self._timer.wait()
                continue
            with trio.CancelScope(deadline=heap[0][0]) as self._timer_scope:
                await trio.sleep_forever()
            self._timer_scope = None

    def _closed_text(self) -> str:
        if self._nursery is None and not self._closed:
            return "connection not running"
        return f"connection closed ({self.close_reason})"

    # -- outbox ---------------------------------------------------------------------

    async def _queue_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        frame = self._encode_response(request, response)
        if not self._write_now(frame) and not self._outbox.put_nowait(frame):
            await self._outbox.put(frame)

    def _encode_response(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        response.opaque = request.opaque
        response.flag = (response.flag | RPC_TYPE) & ~RPC_ONEWAY
        response.serialize_type = request.serialize_type
        try:
            return response.encode()
        except Exception as exc:  # noqa: BLE001 - whatever the processor built, the peer gets an answer
            log.error("cannot encode the response to %r for %s: %s", request, self.remote_address, exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"cannot encode the response: {exc}").encode()

    def _write_now(self, frame: bytes, *, unpipelined: bool = False) -> bool:
        """Write `frame` to the socket from the calling task, if the stream allows it, nothing
        is queued or being written, and the last read held one command and no frame went out
        since, or the caller sends no pipelines (`unpipelined`); otherwise frames queue, so
        that the writer joins them into one send. True when the frame went out, or its
        unwritten rest is first in the outbox; False to queue it as usual (also when the
        socket fails: the writer then meets the error and closes)."""
        write = self._direct_write
        if write is None or not (unpipelined or self._may_write_now) or self._writing:
            return False
        if len(self._outbox) or self._outbox.closed:
            return False
        try:
            sent = write(frame)
        except OSError:  # BlockingIOError included: the socket's buffer is full
            return False
        self._may_write_now = False
        if sent < len(frame):
            self._outbox.put_first(frame[sent:])
        return True

    async def _write_loop(self) -> None:
        outbox = self._outbox
        send_frames = self.stream.send_frames
        try:
            while True:
                if not len(outbox):
                    if self._write_idle is not None:
                        self._write_idle.set()
                    await outbox.wait_frames()
                frames = outbox.take(COALESCE_LIMIT)
                self._writing = True
                await send_frames(frames)
                self._writing = False
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._set_reason(f"write failed: {exc.__cause__ or exc or type(exc).__name__}")
            self._nursery.cancel_scope.cancel()  # type: ignore[union-attr]

    async def _wait_drained(self) -> None:
        while self._in_flight:
            await self._wait_in_flight_changed()
        while len(self._outbox) or self._writing:
            self._write_idle = trio.Event()
            await self._write_idle.wait()
        self._write_idle = None

    # -- reading and serving ----------------------------------------------------------

    def _set_reason(self, reason: str) -> None:
        if self.close_reason is None:
            self.close_reason = reason

    async def _read_loop(self) -> None:
        receive_batch = self.stream.receive_batch
        pending = self._pending
        current_time = self._now
        try:
            while True:
                batch = await receive_batch()
                if not batch:
                    self._set_reason("closed by peer")
                    return
                # one command: its answer (or our next request) may go out directly; after a
                # pipeline's many, let the writer join them
                many = len(batch) > 1
                self._may_write_now = not many
                now = current_time()
                admitted = 0
                answered = 0
                # Consecutive requests of one ordered route with `begin_many` (sends) wait here
                # and start together before anything else happens: before any other request,
                # any checkpoint and the end of the batch, so that order and bounds hold.
                group: list[tuple[RequestContext, RemotingCommand]] = []
                group_route: Route | None = None
                for command in batch:
                    if command.flag & RPC_TYPE:
                        slot = pending.pop(command.opaque, None)
                        if slot is None:
                            log.debug("dropped a late or unknown response %r from %s", command, self.remote_address)
                        else:
                            slot.finish(command)
                            answered += 1
                            if not answered % _ANSWER_STEP:
                                if group:
                                    group = self._start_group(group_route, group)
                                await trio.lowlevel.checkpoint()
                        continue
                    if group and (
                        self._in_flight >= self._max_in_flight or not (admitted + 1) % _ADMIT_STEP or self._outbox.full
                    ):
                        group = self._start_group(group_route, group)
                    while self._in_flight >= self._max_in_flight:
                        await self._wait_in_flight_changed()
                    admitted += 1
                    if not admitted % _ADMIT_STEP:
                        # let the workers just started answer, so that the check below sees
                        # what their answers weigh before we take more from this batch
                        await trio.lowlevel.checkpoint()
                    if self._outbox.full:
                        await self._outbox.wait_not_full()
                    ctx = RequestContext(self, now)
                    decision = self.dispatcher.admit(ctx, command)
                    if decision is None:
                        continue
                    if isinstance(decision, Route) and decision.begin_many is not None and many and not ctx.queued:
                        self._in_flight += 1
                        if group and decision is not group_route:
                            group = self._start_group(group_route, group)
                        group_route = decision
                        group.append((ctx, command))
                        continue
                    if group:
                        group = self._start_group(group_route, group)
                    if isinstance(decision, Route):
                        self._in_flight += 1
                        if decision.begin is not None:
                            await self._serve_ordered(decision, ctx, command)
                            continue
                        if decision.inline and not ctx.queued:
                            await self._serve_inline(decision, ctx, command)
                            continue
                        self._to_worker((decision.run, ctx, command, None))
                    else:
                        await self._queue_response(command, decision)
                if group:
                    self._start_group(group_route, group)
                if answered and not pending and self._may_write_now:
                    # The answer to the only request out: its caller goes first (its next
                    # request is often ready), then the reader, whose next read would find
                    # nothing and cost two syscalls.
                    await after_woken()
        except ProtocolError as exc:
            self._set_reason(f"protocol error: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._set_reason(f"read failed: {exc.__cause__ or exc or type(exc).__name__}")

    async def _serve_inline(self, route: Route, ctx: RequestContext, request: RemotingCommand) -> None:
        try:
            response = await route.run(ctx, request)
            if response is not None:
                await self._queue_response(request, response)
        finally:
            self._in_flight -= 1

    async def _serve_ordered(self, route: Route, ctx: RequestContext, request: RemotingCommand) -> None:
        """An ordered route starts each request here, in the reader, so requests of one
        connection reach the processor in the order they came; only what is left to wait
        for (a flush) moves to a worker. When the route is full the reader waits for a
        slot (the peer is pushed back by TCP) rather than let a later request overtake."""
        rest: Any = None
        try:
            await route.wait_slot(ctx)
            rest = route.start(ctx, request)
            if isinstance(rest, Later):
                rest.then(lambda outcome: self._answer_later(route, ctx, request, outcome))
                return
            if rest is not None and not isinstance(rest, RemotingCommand):
                self._to_worker((route.finish, ctx, request, rest))
                return
            if rest is not None:
                await self._queue_response(request, rest)
            rest = None
        finally:
            if rest is None:
                self._done_one()

    def _start_group(
        self, route: Route | None, group: list[tuple[RequestContext, RemotingCommand]]
    ) -> list[tuple[RequestContext, RemotingCommand]]:
        """Start the requests of one ordered route that came in one read together
        (`Route.start_many`) and queue or schedule each one's answer as `_serve_ordered`
        does; returns a new empty group. Past the outbox's bound if need be: the requests
        were admitted, and admitted requests are bounded by `max_in_flight`."""
        assert route is not None
        # The answers made here go out in one write from this task, not the writer's next
        # turn: this runs without a checkpoint, so nothing else queues meanwhile.
        outbox = self._outbox
        hold = self._direct_write is not None and not outbox.held
        if hold:
            outbox.held = True
        try:
            outs = route.start_many(group)
            for (ctx, request), rest in zip(group, outs, strict=True):
                if isinstance(rest, Later):
                    rest.then(functools.partial(self._answer_later, route, ctx, request))
                    continue
                if rest is not None and not isinstance(rest, RemotingCommand):
                    self._to_worker((route.finish, ctx, request, rest))
                    continue
                self._answer_admitted(request, rest)
        finally:
            if hold:
                self._write_held()
        return []

    def _write_held(self) -> None:
        """Write what queued while the outbox was held in one direct write (`_write_now`, as
        far as the socket takes it without waiting); the writer is woken for the rest."""
        outbox = self._outbox
        outbox.held = False
        if len(outbox) and not self._writing and not outbox.closed:
            frames = outbox.take(COALESCE_LIMIT)
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            # a pipeline's answers, joined here as the writer would: no pipelining left to wait for
            if not self._write_now(data, unpipelined=True):
                outbox.put_first(data)
        outbox.release()  # the writer takes what is left, if anything

    def _to_worker(self, job: tuple[Any, RequestContext, RemotingCommand, Any]) -> None:
        """Hand `job` (what to run, its context and request, what is left of it) to a parked
        worker, or to a new one."""
        idle = self._idle_workers
        while idle:
            if idle.pop().wake(job):
                return
        self._nursery.start_soon(self._worker, *job)  # type: ignore[union-attr]

    def _answer_later(self, route: Route, ctx: RequestContext, request: RemotingCommand, outcome: Any) -> None:
        """A `Later` from `_serve_ordered` settled: queue its response now, from whichever
        task settled it (a flusher, a commit), past the outbox's bound if need be: the
        request was admitted, and admitted requests are bounded by `max_in_flight`."""
        try:
            response = route.settled(ctx, request, outcome)
        except BaseException:
            self._done_one()
            raise
        self._answer_admitted(request, response)

    def _answer_admitted(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """Queue the answer (None: none) to an admitted request now, past the outbox's bound
        if need be (admitted requests are bounded by `max_in_flight`), and count it done."""
        try:
            if response is not None:
                frame = self._encode_response(request, response)
                if not self._write_now(frame):
                    self._outbox.put_nowait(frame, force=True)
        finally:
            self._done_one()

    def _done_one(self) -> None:
        self._in_flight -= 1
        changed = self._in_flight_changed
        if changed is not None:
            self._in_flight_changed = None
            changed.set()

    async def _worker(self, run: Any, ctx: RequestContext, request: RemotingCommand, rest: Any = None) -> None:
        idle = self._idle_workers
        parked = Parked()
        while True:
            try:
                response = await (run(ctx, request) if rest is None else run(ctx, request, rest))
                if response is not None:
                    await self._queue_response(request, response)
            finally:
                self._done_one()
            if len(idle) >= _MAX_IDLE_WORKERS:
                return
            idle.append(parked)
            try:
                run, ctx, request, rest = await parked.wait()
            finally:
                if parked.task is None and parked in idle:  # cancelled while parked
                    idle.remove(parked)

    async def _wait_in_flight_changed(self) -> None:
        if self._in_flight_changed is None:
            self._in_flight_changed = trio.Event()
        await self._in_flight_changed.wait()

    def _shutdown(self) -> None:
        """Mark closed, fail every pending invoke, refuse further sends."""
        if self._closed:
            return
        self._closed = True
        self._outbox.closed = True
        self._set_reason("cancelled")
        if self._pending:
            reason = f"closed while waiting for a response ({self.close_reason})"
            for slot in self._pending.values():
                slot.finish(RemotingConnectError(self.remote_address, reason))
            self._pending.clear()
        self._deadlines.clear()
        self._outbox.close()
