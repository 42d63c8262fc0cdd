"""RemotingServer: accepts connections and runs the pipeline on each one.

Structure (hypercorn's worker_serve, trio's serve_listeners):

    serve()
    └── handler nursery                      one task per accepted connection
        │   transport nursery                (WebSocket reader task, if any)
        │   └── idle CancelScope             deadline moved by IdleStream on each I/O
        │       negotiate TLS → [WebSocket upgrade] → IdleStream → CommandStream
        │       → Connection.run()           reader, writer, request tasks
        └── accept nursery                   serve_listeners for TCP (and WebSocket) ports

Shutdown (`shutdown()`, `aclose()`, or leaving `async with`): the accept nursery is
cancelled, so no new connections; every connection is asked to `drain()` (stop reading,
finish in-flight requests, flush); the handler nursery gets a deadline of now + grace,
after which whatever is left is cancelled. A cancellation of `serve()` from outside
skips the grace and stops everything at once.

A handler never lets an exception out: a peer's bad bytes close that connection with
one log line, and even a bug in a handler is logged and contained, so one connection
cannot bring the server down.

Limits: a connection accepted while the server holds `max_connections` (or its address
holds `max_connections_per_address`) is closed at once, before the TLS handshake, and
counted in `refused`; a WARNING says so at most once a minute per address. Every accepted
connection counts until its handler ends, handshakes included.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import ssl
from collections import OrderedDict
from collections.abc import Callable

import trio

from rmq.lifetime import Service
from rmq.protocol import DEFAULT_MAX_FRAME_SIZE

from .connection import DEFAULT_MAX_IN_FLIGHT, DEFAULT_OUTBOX_SIZE, Connection
from .dispatcher import Dispatcher
from .errors import RemotingConnectError
from .stages.codec import CommandStream
from .stages.idle import DEFAULT_IDLE_TIMEOUT, IdleStream
from .stages.tls import DEFAULT_HANDSHAKE_TIMEOUT, TlsMode, negotiate
from .stages.websocket import DEFAULT_WS_PATH, accept_websocket

log = logging.getLogger("rmq.remoting.server")

ConnectionHook = Callable[[Connection], None]
_CLOSE_TIMEOUT = 1.0
REFUSAL_LOG_INTERVAL = 60.0  # seconds between two WARNINGs about refusing one address
_REFUSAL_LOG_ADDRESSES = 4096  # addresses remembered for that, oldest forgotten first

# Why a connection was refused: the keys of RemotingServer.refused.
SERVER_LIMIT = "server_limit"
ADDRESS_LIMIT = "address_limit"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How a RemotingServer listens and bounds each connection. Validated on creation.

    Attributes:
      host, port: TCP listen address; port 0 picks a free port (see `server.port`).
      tls_mode, ssl_context: TLS policy (stages/tls.py); the context is required
        unless tls_mode is DISABLED.
      handshake_timeout: limit on the TLS handshake and the WebSocket upgrade.
      idle_timeout: close a connection after this many seconds without traffic
        (None: never).
      max_frame_size: largest frame accepted from a peer, length prefix included.
      outbox_size: frames queued per connection before senders wait.
      max_in_flight: peer requests processed at once per connection.
      shutdown_grace: seconds connections get to finish in-flight work on shutdown.
      ws_port: also accept RocketMQ over WebSocket on this port (0: a free port;
        None: no WebSocket listener); ws_path is the one path accepted there.
      max_connections: connections held at once, WebSocket ones included (0: no limit).
      max_connections_per_address: connections held at once from one IP address (0: no limit).
    """

    host: str = "0.0.0.0"
    port: int = 0
    tls_mode: TlsMode = TlsMode.DISABLED
    ssl_context: ssl.SSLContext | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    outbox_size: int = DEFAULT_OUTBOX_SIZE
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    shutdown_grace: float = 5.0
    ws_port: int | None = None
    ws_path: str = DEFAULT_WS_PATH
    max_connections: int = 0
    max_connections_per_address: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or (self.ws_port is not None and not 0 <= self.ws_port <= 65535):
            raise ValueError("ports must be in 0..65535")
        if self.tls_mode is not TlsMode.DISABLED and self.ssl_context is None:
            raise ValueError(f"tls_mode {self.tls_mode.value} needs an ssl_context")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None)")
        if self.max_frame_size < 64:
            raise ValueError("max_frame_size is too small for any frame")
        if self.handshake_timeout <= 0 or self.shutdown_grace < 0:
            raise ValueError("handshake_timeout must be positive and shutdown_grace >= 0")
        if self.outbox_size < 1 or self.max_in_flight < 1:
            raise ValueError("outbox_size and max_in_flight must be >= 1")
        if not self.ws_path.startswith("/"):
            raise ValueError("ws_path must start with '/'")
        if self.max_connections < 0 or self.max_connections_per_address < 0:
            raise ValueError("max_connections and max_connections_per_address must be >= 0 (0: no limit)")


class RemotingServer(Service):
    """Serves RocketMQ remoting on TCP (and optionally WebSocket) with one Dispatcher.

    Use as `async with RemotingServer(dispatcher, config) as server:` or
    `server = await nursery.start(RemotingServer(dispatcher, config).serve)`.
    Either way `server.port` (and `server.ws_port`) are bound when it returns.

    Args:
      dispatcher: processors for every connection's requests.
      config: listen address and per-connection bounds.
      on_open, on_close: called (synchronously, on the Trio thread) with each
        Connection right after it is registered / right after it closed and was
        unregistered; `conn.close_reason` says why. A hook that raises is logged.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        config: ServerConfig | None = None,
        *,
        on_open: ConnectionHook | None = None,
        on_close: ConnectionHook | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.config = config if config is not None else ServerConfig()
        self.on_open = on_open
        self.on_close = on_close
        self.port: int | None = None
        self.ws_port: int | None = None
        self._connections: dict[str, Connection] = {}
        self._held = 0  # accepted and not yet closed, handshakes included
        self._held_by_host: dict[str, int] = {}
        self.refused: dict[str, int] = {SERVER_LIMIT: 0, ADDRESS_LIMIT: 0}
        self._refusals_logged: OrderedDict[str, tuple[float, int]] = OrderedDict()  # host → (when, since)
        self._accept_nursery: trio.Nursery | None = None
        self._serving = False
        self._shutting_down = False
        self._stopped = trio.Event()

    def __repr__(self) -> str:
        return f"<RemotingServer {self.config.host}:{self.port} connections={len(self._connections)}>"

    # -- registry ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """ "host:port" to connect to (127.0.0.1 when listening on every address)."""
        host = self.config.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    @property
    def ws_url(self) -> str | None:
        """ws://host:port/path of the WebSocket listener, or None."""
        if self.ws_port is None:
            return None
        scheme = "ws" if self.config.tls_mode is TlsMode.DISABLED else "wss"
        return f"{scheme}://{self.address.rpartition(':')[0]}:{self.ws_port}{self.config.ws_path}"

    @property
    def connection_count(self) -> int:
        """Connections held now: accepted and not closed, those still in a handshake included."""
        return self._held

    @property
    def connections(self) -> list[Connection]:
        """The live connections (a snapshot)."""
        return list(self._connections.values())

    def get_connection(self, remote_address: str) -> Connection | None:
        """The live connection from `remote_address` ("ip:port"), if any."""
        return self._connections.get(remote_address)

    # -- lifetime ---------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[RemotingServer] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind, report `self` to `nursery.start`, serve until shut down or cancelled.

        Raises OSError if a port cannot be bound (before reporting started).
        """
        if self._serving:
            raise RuntimeError("RemotingServer.serve() was already called")
        self._serving = True
        cfg = self.config
        listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
        bound = _bound(listeners)  # what is bound, which `address` (where to connect) is not
        ws_listeners: list[trio.SocketListener] = []
        try:
            if cfg.ws_port is not None:
                ws_listeners = await trio.open_tcp_listeners(cfg.ws_port, host=cfg.host)
            self.port = listeners[0].socket.getsockname()[1]
            if ws_listeners:
                self.ws_port = ws_listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as handlers:
                async with trio.open_nursery() as acceptors:
                    self._accept_nursery = acceptors
                    acceptors.start_soon(
                        functools.partial(trio.serve_listeners, self._handle_tcp, listeners, handler_nursery=handlers)
                    )
                    if ws_listeners:
                        acceptors.start_soon(
                            functools.partial(
                                trio.serve_listeners, self._handle_websocket, ws_listeners, handler_nursery=handlers
                            )
                        )
                    ws = f", WebSocket on {_bound(ws_listeners)} ({cfg.ws_path})" if ws_listeners else ""
                    log.info("serving on %s%s", bound, ws)
                    task_status.started(self)
                    if self._shutting_down:
                        acceptors.cancel_scope.cancel()
                self._shutting_down = True
                for conn in list(self._connections.values()):
                    conn.drain()
                handlers.cancel_scope.deadline = trio.current_time() + cfg.shutdown_grace
        finally:
            self._shutting_down = True
            for listener in listeners + ws_listeners:
                await trio.aclose_forcefully(listener)
            log.info("stopped serving on %s", bound)
            self._stopped.set()

    def shutdown(self) -> None:
        """Begin a graceful shutdown (see the module docstring). Returns at once."""
        self._shutting_down = True
        if self._accept_nursery is not None:
            self._accept_nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Shut down gracefully and wait until every connection is closed."""
        self.shutdown()
        if self._serving:
            await self._stopped.wait()

    # -- per connection ---------------------------------------------------------------

    async def _handle_tcp(self, raw: trio.SocketStream) -> None:
        await self._handle(raw, websocket=False)

    async def _handle_websocket(self, raw: trio.SocketStream) -> None:
        await self._handle(raw, websocket=True)

    async def _handle(self, raw: trio.SocketStream, *, websocket: bool) -> None:
        remote, local = _addresses(raw)
        host = remote.rpartition(":")[0] or remote
        refusal = self._over_limit(host)
        if refusal is not None:
            self._refuse(raw, remote, host, refusal)
            return
        self._held += 1
        self._held_by_host[host] = self._held_by_host.get(host, 0) + 1
        try:
            await self._handle_held(raw, remote, local, websocket=websocket)
        finally:
            self._held -= 1
            left = self._held_by_host.pop(host) - 1
            if left:
                self._held_by_host[host] = left

    def _over_limit(self, host: str) -> str | None:
        cfg = self.config
        if cfg.max_connections and self._held >= cfg.max_connections:
            return SERVER_LIMIT
        if cfg.max_connections_per_address and self._held_by_host.get(host, 0) >= cfg.max_connections_per_address:
            return ADDRESS_LIMIT
        return None

    def _refuse(self, raw: trio.SocketStream, remote: str, host: str, reason: str) -> None:
        """Close at once (no handshake, nothing read) and count it; log it at most once a
        REFUSAL_LOG_INTERVAL per address, with how many went unlogged."""
        self.refused[reason] += 1
        try:
            raw.socket.close()  # synchronous: a refusal costs no task switch and holds nothing
        except OSError:
            pass
        now = trio.current_time()
        last, since = self._refusals_logged.get(host, (-REFUSAL_LOG_INTERVAL, 0))
        if now - last < REFUSAL_LOG_INTERVAL:
            self._refusals_logged[host] = (last, since + 1)
            return
        self._refusals_logged[host] = (now, 0)
        self._refusals_logged.move_to_end(host)
        if len(self._refusals_logged) > _REFUSAL_LOG_ADDRESSES:
            self._refusals_logged.popitem(last=False)
        cfg = self.config
        if reason == SERVER_LIMIT:
            why = f"the server holds {self._held} connections, its limit (serverMaxConnections)"
        else:
            why = (
                f"{host} holds {cfg.max_connections_per_address} connections, the limit per address "
                "(serverMaxConnectionsPerAddress)"
            )
        more = f"; {since} more refused since the last report" if since else ""
        log.warning("refused connection from %s: %s%s", remote, why, more)

    async def _handle_held(self, raw: trio.SocketStream, remote: str, local: str, *, websocket: bool) -> None:
        cfg = self.config
        idle_timeout = cfg.idle_timeout
        served = False
        try:
            async with trio.open_nursery() as transport:
                with trio.CancelScope() as idle:
                    if idle_timeout is not None:
                        idle.deadline = trio.current_time() + idle_timeout
                    try:
                        stream = await negotiate(
                            raw, cfg.tls_mode, cfg.ssl_context, address=remote, handshake_timeout=cfg.handshake_timeout
                        )
                        tls = isinstance(stream, trio.SSLStream)
                        if websocket:
                            stream = await accept_websocket(
                                transport,
                                stream,
                                path=cfg.ws_path,
                                max_message_size=cfg.max_frame_size,
                                handshake_timeout=cfg.handshake_timeout,
                                address=remote,
                                scope=idle,
                            )
                    except RemotingConnectError as exc:
                        level = logging.DEBUG if exc.probe else logging.INFO
                        log.log(level, "refused connection from %s: %s", remote, exc.reason)
                    else:
                        try:
                            if not self._shutting_down:
                                served = True
                                await self._serve(stream, remote, local, idle, websocket=websocket, tls=tls)
                        finally:
                            # Connection.run closed it already, unless it never ran
                            with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
                                await stream.aclose()
                if idle.cancelled_caught and not served:
                    log.info("closed connection from %s: idle for %g s before its first frame", remote, idle_timeout)
                transport.cancel_scope.cancel()
        except Exception:
            log.exception("connection handler for %s failed; connection closed", remote)

    async def _serve(
        self, stream: trio.abc.Stream, remote: str, local: str, idle: trio.CancelScope, *, websocket: bool, tls: bool
    ) -> None:
        cfg = self.config
        if cfg.idle_timeout is not None:
            stream = IdleStream(stream, idle, cfg.idle_timeout)
        commands = CommandStream(stream, max_frame_size=cfg.max_frame_size, one_frame_per_send=websocket)
        conn = Connection(
            commands,
            self.dispatcher,
            remote_address=remote,
            local_address=local,
            outbox_size=cfg.outbox_size,
            max_in_flight=cfg.max_in_flight,
        )
        kind = (" over WebSocket" if websocket else "") + (" with TLS" if tls else "")
        self._connections[remote] = conn
        log.info("connection from %s opened%s", remote, kind)
        _call_hook(self.on_open, conn)
        try:
            await conn.run()
        finally:
            if conn.close_reason == "cancelled":
                if idle.cancel_called:
                    conn.close_reason = f"idle for {cfg.idle_timeout:g} s"
                elif self._shutting_down:
                    conn.close_reason = "server shutdown"
            if self._connections.get(remote) is conn:
                del self._connections[remote]
            log.info("connection from %s closed: %s", remote, conn.close_reason)
            _call_hook(self.on_close, conn)


def _call_hook(hook: ConnectionHook | None, conn: Connection) -> None:
    if hook is None:
        return
    try:
        hook(conn)
    except Exception:
        log.exception("connection hook %r failed for %s", hook, conn.remote_address)


def _addresses(stream: trio.SocketStream) -> tuple[str, str]:
    try:
        remote = stream.socket.getpeername()
        local = stream.socket.getsockname()
    except OSError:
        return "unknown", "unknown"
    return f"{remote[0]}:{remote[1]}", f"{local[0]}:{local[1]}"


def _bound(listeners: list[trio.SocketListener]) -> str:
    """What the listeners are bound to ("0.0.0.0:9876, [::]:9876"), for the log."""
    names = []
    for listener in listeners:
        host, port = listener.socket.getsockname()[:2]
        names.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return ", ".join(names)
