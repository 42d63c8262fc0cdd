"""WebSocket stage: RocketMQ frames over WebSocket binary messages (a second transport).

`WebSocketStream` adapts trio-websocket's message API to trio.abc.Stream, so the codec
stage above it is the same as over TCP. Every `send_all` becomes one binary message; the
codec writes each frame with its own `send_all` on this transport, so one message holds
one frame. Receiving re-splits nothing: the FrameDecoder above re-frames whatever it gets.

`accept_websocket` (server) and `connect_websocket` (client) run the HTTP upgrade on a
stream that is already connected (and TLS-wrapped for wss://), so TLS and idle handling
are the same stages as for TCP. trio-websocket needs a nursery for its reader task; the
caller passes one that lives as long as the connection. A failure of that reader task
(for example a client-side handshake rejection) is caught and turned into
RemotingConnectError, never left to crash the caller's nursery.
"""

from __future__ import annotations

import importlib
import logging
import operator
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from ..errors import RemotingConnectError

if TYPE_CHECKING:
    import trio_websocket
else:
    # trio-websocket (and wsproto, h11 under it) is loaded on first use: most servers
    # never open a WebSocket port, and importing it costs a tenth of a second at startup.
    trio_websocket = None


def _load() -> None:
    global trio_websocket
    if trio_websocket is None:
        trio_websocket = importlib.import_module("trio_websocket")


log = logging.getLogger("rmq.remoting.websocket")

DEFAULT_WS_PATH = "/rocketmq"
_MESSAGE_QUEUE_SIZE = 4  # messages the reader may hold ahead of us (each ≤ max_message_size)
_RECEIVE_SIZE = 64 * 1024
_NORMAL_CLOSE = (1000, 1001)


class WebSocketStream(trio.abc.Stream):
    """A byte Stream over one WebSocketConnection.

    `send_all(data)` sends `data` as one binary message (an empty `data` sends nothing).
    `receive_some` returns bytes from the current message, then waits for the next. A
    normal close by the peer reads as EOF (b""); an abnormal one, or a text message,
    raises BrokenResourceError. After `aclose()` the stream raises ClosedResourceError.
    """

    def __init__(
        self,
        websocket: trio_websocket.WebSocketConnection,
        transport_stream: trio.abc.Stream | None = None,
        reader_scopes: list[trio.CancelScope] | None = None,
    ) -> None:
        self.websocket = websocket
        self.transport_stream = transport_stream
        self._reader_scopes = reader_scopes if reader_scopes is not None else []
        self._buffer = memoryview(b"")
        self._closed = False
        self._receiving = False
        self._sending = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Up to `max_bytes` of the current message; waits for a message if none is left.

        Cancellation: a message taken from the connection is kept for the next call.
        """
        if max_bytes is not None:
            max_bytes = operator.index(max_bytes)
            if max_bytes < 1:
                raise ValueError("max_bytes must be >= 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this stream")
        self._receiving = True
        try:
            if self._closed:
                await trio.lowlevel.checkpoint()
                raise trio.ClosedResourceError("stream is closed")
            if self._buffer:
                await trio.lowlevel.checkpoint()
                if self._closed:
                    raise trio.ClosedResourceError("stream is closed")
            while not self._buffer:
                try:
                    message = await self.websocket.get_message()
                except trio_websocket.ConnectionClosed as exc:
                    if self._closed:
                        raise trio.ClosedResourceError("stream is closed") from None
                    if exc.reason is None or exc.reason.code in _NORMAL_CLOSE:
                        await trio.lowlevel.checkpoint()  # the websocket may not have yielded
                        return b""
                    raise trio.BrokenResourceError(f"websocket closed: {exc.reason}") from None
                if isinstance(message, str):
                    raise trio.BrokenResourceError("text message on a binary RocketMQ websocket")
                self._buffer = memoryview(message)
            n = len(self._buffer) if max_bytes is None else min(max_bytes, len(self._buffer))
            chunk = bytes(self._buffer[:n])
            self._buffer = self._buffer[n:]
            return chunk
        finally:
            self._receiving = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Send `data` as one binary message.

        Cancellation: the message may or may not have been written; the connection
        should then be closed, as for any Stream.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this stream")
        self._sending = True
        try:
            if self._closed:
                await trio.lowlevel.checkpoint()
                raise trio.ClosedResourceError("stream is closed")
            if not data:
                await trio.lowlevel.checkpoint()
                return
            try:
                await self.websocket.send_message(bytes(data))
            except trio_websocket.ConnectionClosed as exc:
                if self._closed:
                    raise trio.ClosedResourceError("stream is closed") from None
                raise trio.BrokenResourceError(f"websocket closed: {exc.reason}") from None
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")

    async def aclose(self) -> None:
        """Close handshake, then close the transport; a cancelled call still closes it.

        The caller bounds the wait for the peer's half of the close handshake; when this
        returns or is cancelled, the transport is closed and the WebSocket reader task is
        stopped too. (trio-websocket leaves the transport open when the peer closed
        first, so it is closed here.)
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        self._buffer = memoryview(b"")
        try:
            await self.websocket.aclose()
            await trio.lowlevel.checkpoint()  # the websocket returns at once if the peer closed first
        finally:
            for scope in self._reader_scopes:
                scope.cancel()
            if self.transport_stream is not None:
                await trio.aclose_forcefully(self.transport_stream)


class _GuardedNursery:
    """What trio-websocket gets as its nursery: runs its reader task in `nursery`, and if
    that task raises, records the error and cancels `scope` instead of crashing. While
    `in_handshake` is true, the reader ending at all cancels `scope` (nobody else would
    wake a handshake whose connection went away).

    The reader runs shielded, in one of `reader_scopes`, so that cancelling the
    connection does not kill it before the WebSocket close handshake it must complete;
    WebSocketStream.aclose (or a failed handshake) cancels those scopes.
    """

    def __init__(self, nursery: trio.Nursery, scope: trio.CancelScope) -> None:
        self._nursery = nursery
        self.scope = scope
        self.in_handshake = True
        self.error: BaseException | None = None
        self.reader_scopes: list[trio.CancelScope] = []

    def cancel_readers(self) -> None:
        for reader in self.reader_scopes:
            reader.cancel()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: object = None) -> None:
        self._nursery.start_soon(self._guard, fn, args, name=name or fn)

    async def _guard(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        reader = trio.CancelScope(shield=True)
        self.reader_scopes.append(reader)
        try:
            with reader:
                await fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported to the connection's owner
            log.debug("websocket reader failed: %r", exc)
            self.error = exc
            self.scope.cancel()
        else:
            if self.in_handshake:
                self.scope.cancel()


async def accept_websocket(
    nursery: trio.Nursery,
    stream: trio.abc.Stream,
    *,
    path: str,
    max_message_size: int,
    handshake_timeout: float,
    address: str = "",
    scope: trio.CancelScope | None = None,
) -> WebSocketStream:
    """Server side: read the HTTP upgrade on `stream`, accept it if the path is `path`.

    Args:
      nursery: runs the WebSocket reader task; must outlive the returned stream. The
        reader ignores cancellation (it must finish the close handshake) until the
        returned stream is closed: always `aclose()` it.
      scope: cancelled if the reader task fails later (normally the connection's scope).

    Raises:
      RemotingConnectError: timeout, bad upgrade request, or a path other than `path`
        (answered 404 first).
    """
    _load()
    handshake = trio.CancelScope()
    guard = _GuardedNursery(nursery, handshake)
    try:
        with trio.fail_after(handshake_timeout), handshake:
            request = await trio_websocket.wrap_server_stream(
                guard,  # type: ignore[arg-type]
                stream,
                message_queue_size=_MESSAGE_QUEUE_SIZE,
                max_message_size=max_message_size,
                receive_buffer_size=_RECEIVE_SIZE,
            )
            if path and request.path != path:
                await request.reject(404)
                raise RemotingConnectError(address, f"no WebSocket endpoint at {request.path!r}")
            websocket = await request.accept()
    except trio.TooSlowError:
        guard.cancel_readers()
        raise RemotingConnectError(address, "WebSocket handshake timed out") from None
    except trio_websocket.ConnectionClosed as exc:
        guard.cancel_readers()
        raise RemotingConnectError(address, f"WebSocket handshake failed: {exc.reason}") from None
    except BaseException:
        guard.cancel_readers()
        raise
    if handshake.cancelled_caught:
        guard.cancel_readers()
        raise RemotingConnectError(address, f"WebSocket handshake failed: {guard.error or 'connection closed'}")
    guard.in_handshake = False
    guard.scope = scope if scope is not None else nursery.cancel_scope
    return WebSocketStream(websocket, stream, guard.reader_scopes)


async def connect_websocket(
    nursery: trio.Nursery,
    stream: trio.abc.Stream,
    *,
    host: str,
    resource: str,
    max_message_size: int,
    address: str = "",
    scope: trio.CancelScope | None = None,
) -> WebSocketStream:
    """Client side: send the HTTP upgrade for `resource` on a connected stream.

    The caller bounds the time (the client's connect timeout). `nursery` runs the
    WebSocket reader task and must outlive the returned stream; the reader ignores
    cancellation until the returned stream is closed, so always `aclose()` it. If the
    reader fails later, `scope` (default: the nursery's scope) is cancelled.

    Raises:
      RemotingConnectError: the server rejected the upgrade or closed the connection.
    """
    _load()
    handshake = trio.CancelScope()
    guard = _GuardedNursery(nursery, handshake)
    try:
        with handshake:
            websocket = await trio_websocket.wrap_client_stream(
                guard,  # type: ignore[arg-type]
                stream,  # type: ignore[arg-type]
                host,
                resource,
                message_queue_size=_MESSAGE_QUEUE_SIZE,
                max_message_size=max_message_size,
                receive_buffer_size=_RECEIVE_SIZE,
            )
    except BaseException:
        guard.cancel_readers()
        raise
    if handshake.cancelled_caught:
        guard.cancel_readers()
        reason = guard.error
        if isinstance(reason, trio_websocket.ConnectionRejected):
            raise RemotingConnectError(address, f"WebSocket upgrade rejected with HTTP {reason.status_code}")
        raise RemotingConnectError(address, f"WebSocket handshake failed: {reason or 'connection closed'}")
    guard.in_handshake = False
    guard.scope = scope if scope is not None else nursery.cancel_scope
    return WebSocketStream(websocket, stream, guard.reader_scopes)
