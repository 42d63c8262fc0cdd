"""RemotingClient: connections to many servers, made lazily and shared, one per address.

Addresses are what RocketMQ hands around: "ip:port" (TCP, or TLS when the config says
so), plus "ws://host:port/path" and "wss://host:port/path" for the WebSocket transport.

Each connection runs as a task in the client's nursery: connect (under the connect
timeout), TLS, WebSocket upgrade, then `Connection.run()` inside an idle cancel scope.
The first caller for an address connects while later callers wait on a per-address lock
and share the result. When a connection closes it leaves the cache, and the next call
connects again. Requests the server sends on these connections (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED, ...) go to the client's Dispatcher.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
import urllib.parse
from collections.abc import Callable

import trio

from rmq.lifetime import Service
from rmq.protocol import DEFAULT_MAX_FRAME_SIZE, RemotingCommand

from .connection import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_PENDING,
    DEFAULT_ONEWAY_TIMEOUT,
    DEFAULT_OUTBOX_SIZE,
    Connection,
    Sent,
)
from .dispatcher import Dispatcher
from .errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError
from .stages.codec import CommandStream
from .stages.idle import DEFAULT_IDLE_TIMEOUT, IdleStream
from .stages.tls import wrap_client
from .stages.websocket import connect_websocket

log = logging.getLogger("rmq.remoting.client")

_CLOSE_TIMEOUT = 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """How a RemotingClient connects. Validated on creation.

    Attributes:
      connect_timeout: limit on TCP connect + TLS handshake + WebSocket upgrade.
      tls: speak TLS on plain "ip:port" addresses (wss:// addresses always do).
      ssl_context: context for TLS; None means `ssl.create_default_context()`.
      idle_timeout: close a connection after this many seconds without traffic
        (None: never); the next call reconnects.
      max_frame_size, outbox_size, max_in_flight, max_pending: per-connection bounds
        (connection.py).
    """

    connect_timeout: float = 3.0
    tls: bool = False
    ssl_context: ssl.SSLContext | None = None
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    outbox_size: int = DEFAULT_OUTBOX_SIZE
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_pending: int = DEFAULT_MAX_PENDING

    def __post_init__(self) -> None:
        if self.connect_timeout <= 0:
            raise ValueError("connect_timeout must be positive")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None)")
        if min(self.outbox_size, self.max_in_flight, self.max_pending) < 1:
            raise ValueError("outbox_size, max_in_flight and max_pending must be >= 1")


@dataclasses.dataclass(frozen=True)
class _Target:
    scheme: str  # "tcp", "ws" or "wss"
    host: str
    port: int
    resource: str  # WebSocket path and query


def parse_address(address: str) -> _Target:
    """Split "ip:port", "[v6]:port", "ws://h:p/path" or "wss://h:p/path".

    Raises RemotingConnectError for anything else.
    """
    try:
        if "://" in address:
            url = urllib.parse.urlsplit(address)
            if url.scheme not in ("ws", "wss") or not url.hostname:
                raise ValueError(address)
            port = url.port or (443 if url.scheme == "wss" else 80)
            resource = (url.path or "/") + (f"?{url.query}" if url.query else "")
            return _Target(url.scheme, url.hostname, port, resource)
        host, sep, port_text = address.rpartition(":")
        if not sep or not host:
            raise ValueError(address)
        return _Target("tcp", host.strip("[]"), int(port_text), "")
    except ValueError:
        raise RemotingConnectError(address, "not an address (ip:port, ws://host:port/path or wss://...)") from None


class RemotingClient(Service):
    """Shared connections to RocketMQ servers; an `async with` object owning a nursery.

    Args:
      config: connect and per-connection settings.
      dispatcher: processors for requests servers send to us (None: answer them
        REQUEST_CODE_NOT_SUPPORTED).

    Leaving `async with` closes every connection; calls waiting on them fail.
    """

    def __init__(self, config: ClientConfig | None = None, dispatcher: Dispatcher | None = None) -> None:
        self.config = config if config is not None else ClientConfig()
        self.dispatcher = dispatcher
        self._connections: dict[str, Connection] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery the connections run in until `shutdown()`."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def shutdown(self) -> None:
        """Close every connection; calls waiting on them fail."""
        nursery, self._nursery = self._nursery, None
        if nursery is not None:
            nursery.cancel_scope.cancel()

    @property
    def connections(self) -> dict[str, Connection]:
        """Live connections by address (a snapshot)."""
        return {addr: conn for addr, conn in self._connections.items() if not conn.closed}

    def connected(self, address: str) -> Connection | None:
        """The open connection to `address`, or None (no connect is started)."""
        conn = self._connections.get(address)
        return conn if conn is not None and not conn.closed else None

    async def connection(self, address: str, *, timeout: float | None = None) -> Connection:
        """The open connection to `address`, connecting first if there is none.

        Args:
          timeout: connect limit; default `config.connect_timeout`.

        Raises:
          RemotingConnectError: bad address, connect/TLS/WebSocket failure or timeout.

        Cancellation: a connect in progress is abandoned and its socket closed; callers
        waiting for the same address then try again themselves.
        """
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.get(address)
        if lock is None:
            lock = self._locks[address] = trio.Lock()
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            if self._nursery is None:
                raise RuntimeError("RemotingClient is not open: use it as `async with RemotingClient(...)`")
            limit = self.config.connect_timeout if timeout is None else timeout
            fresh: Connection = await self._nursery.start(self._run_connection, address, limit)
            self._connections[address] = fresh
            return fresh

    async def invoke(
        self,
        address: str,
        request: RemotingCommand,
        timeout: float,
        on_answer: Callable[[RemotingCommand], None] | None = None,
    ) -> RemotingCommand:
        """Send `request` to `address` and wait for the response (connecting if needed).

        `timeout` covers connecting too. Sets `request.opaque`. `on_answer`: as
        Connection.invoke.

        Raises:
          RemotingConnectError: cannot connect, or the connection closed while waiting.
          RemotingTimeoutError: no response within `timeout` seconds.
          RemotingTooMuchRequestError: too many requests outstanding on the connection.

        Cancellation: as Connection.invoke.
        """
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:  # the common case: an open connection
            try:
                return await conn.invoke(request, timeout, on_answer)
            except RemotingSendRequestError:
                pass  # it closed between lookup and send; nothing went out: connect afresh
        deadline = trio.current_time() + timeout
        conn = await self.connection(address, timeout=min(self.config.connect_timeout, timeout))
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            raise RemotingTimeoutError(address, request.code, timeout)
        try:
            return await conn.invoke(request, remaining, on_answer)
        except RemotingTimeoutError:
            raise RemotingTimeoutError(address, request.code, timeout) from None

    def invoke_nowait(self, address: str, request: RemotingCommand, timeout: float) -> Sent | None:
        """`Connection.invoke_nowait` on the open connection to `address`; None, with nothing
        sent, when there is none (connecting means waiting) or the request cannot leave at once."""
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            return None
        return conn.invoke_nowait(request, timeout)

    async def invoke_oneway(
        self, address: str, request: RemotingCommand, timeout: float = DEFAULT_ONEWAY_TIMEOUT
    ) -> None:
        """Queue `request` as oneway on the connection to `address` (connecting if needed).

        Raises RemotingConnectError, RemotingTooMuchRequestError (outbox full for
        `timeout`), RemotingSendRequestError (connection closed meanwhile).
        """
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = await self.connection(address, timeout=min(self.config.connect_timeout, timeout))
        await conn.invoke_oneway(request, timeout)

    def close_connection(self, address: str) -> None:
        """Close the connection to `address`, if any; the next call reconnects."""
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close("closed by the client")

    # -- connection task --------------------------------------------------------------

    async def _run_connection(
        self, address: str, connect_timeout: float, *, task_status: trio.TaskStatus[Connection]
    ) -> None:
        target = parse_address(address)
        error: RemotingConnectError | None = None
        async with trio.open_nursery() as transport:
            with trio.CancelScope() as idle:
                try:
                    with trio.fail_after(connect_timeout):
                        stream, local = await self._open_stream(address, target, transport, idle)
                except trio.TooSlowError:
                    error = RemotingConnectError(address, f"connect timed out after {connect_timeout * 1000:.0f} ms")
                except OSError as exc:
                    error = RemotingConnectError(address, f"connect failed: {exc}")
                except RemotingConnectError as exc:
                    error = exc
                if error is None:
                    try:
                        await self._serve(address, stream, local, idle, target, task_status)
                    finally:
                        # Connection.run closed it already, unless it never ran
                        with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
                            await stream.aclose()
            transport.cancel_scope.cancel()
        if error is not None:
            raise error

    async def _open_stream(
        self, address: str, target: _Target, transport: trio.Nursery, idle: trio.CancelScope
    ) -> tuple[trio.abc.Stream, str]:
        cfg = self.config
        tcp = await trio.open_tcp_stream(target.host, target.port)
        try:
            sockname = tcp.socket.getsockname()
            local = f"{sockname[0]}:{sockname[1]}"
            stream: trio.abc.Stream = tcp
            if target.scheme == "wss" or (target.scheme == "tcp" and cfg.tls):
                context = cfg.ssl_context if cfg.ssl_context is not None else ssl.create_default_context()
                stream = await wrap_client(
                    stream, context, server_hostname=target.host, address=address, handshake_timeout=cfg.connect_timeout
                )
            if target.scheme != "tcp":
                stream = await connect_websocket(
                    transport,
                    stream,
                    host=f"{target.host}:{target.port}",
                    resource=target.resource,
                    max_message_size=cfg.max_frame_size,
                    address=address,
                    scope=idle,
                )
            return stream, local
        except BaseException:
            await trio.aclose_forcefully(tcp)
            raise

    async def _serve(
        self,
        address: str,
        stream: trio.abc.Stream,
        local: str,
        idle: trio.CancelScope,
        target: _Target,
        task_status: trio.TaskStatus[Connection],
    ) -> None:
        cfg = self.config
        if cfg.idle_timeout is not None:
            stream = IdleStream(stream, idle, cfg.idle_timeout)
        conn = Connection(
            CommandStream(stream, max_frame_size=cfg.max_frame_size, one_frame_per_send=target.scheme != "tcp"),
            self.dispatcher,
            remote_address=address,
            local_address=local,
            outbox_size=cfg.outbox_size,
            max_in_flight=cfg.max_in_flight,
            max_pending=cfg.max_pending,
        )
        log.debug("connected to %s from %s", address, local)
        try:
            await conn.run(task_status=task_status)
        finally:
            if conn.close_reason == "cancelled":
                if idle.cancel_called:
                    conn.close_reason = f"idle for {cfg.idle_timeout:g} s"
                elif self._nursery is None:
                    conn.close_reason = "client closed"
            if self._connections.get(address) is conn:
                del self._connections[address]
            log.info("connection to %s closed: %s", address, conn.close_reason)
