"""A gRPC server on Trio over h2: unary, server-streaming and bidirectional methods.

Chosen over grpcio's asyncio server in a thread so that the proxy stays one Trio program:
its calls to brokers, its cancel scopes and its shutdown are the same as everywhere else in
rmq, and no thread hands messages across event loops.

gRPC over HTTP/2: a call is a stream, POST `/<service>/<method>`, `content-type:
application/grpc`; each message is a 5-byte prefix (compressed flag, big-endian length) and
the encoded protobuf; the answer is headers (`:status 200`), messages and trailers with
`grpc-status` and `grpc-message`. An error before any message goes out as trailers only.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import struct
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import trio
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as Proto

from rmq.lifetime import Service
from rmq.remoting import RemotingConnectError, TlsMode
from rmq.remoting.stages.tls import negotiate

log = logging.getLogger("rmq.proxy.grpc")

# grpc status codes (grpc/status.h)
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED = 0, 1, 2, 3, 4
RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE = 8, 12, 13, 14

MAX_MESSAGE = 130 * 1024 * 1024  # a larger request is refused with RESOURCE_EXHAUSTED (Java's default)
_PREFIX = struct.Struct(">BI")
FIRST_BYTES_TIMEOUT = 30.0  # seconds a connection may stay silent before TLS or plain is known
STALL_TIMEOUT = 30.0  # seconds an answer may wait for the peer's flow-control window, or its reads
IDLE_TIMEOUT = 120.0  # seconds a connection may go without a call (Java's grpcClientIdleTimeMills)
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}

Send = Callable[[Proto], Awaitable[None]]


class GrpcError(Exception):
    """Ends a call with this grpc-status (not the proxy's own `Status`, which is data)."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Call:
    """What a handler knows of its call: the method, the request headers, the peer."""

    method: str
    headers: dict[str, str]
    peer: tuple[str, int]
    deadline: float = float("inf")  # trio time; from grpc-timeout
    received_at: float = 0.0  # trio time the call's headers came
    local: tuple[str, int] = ("", 0)  # the server's end of the connection

    def metadata(self, key: str) -> str:
        return self.headers.get(key, "")


UNKNOWN_METHOD = "unknown"  # the method an observer is told of a path the server does not serve
# observes each call as it ends: (call, its grpc-status, the `Status` code of its first
# response that had one, or None); the proxy's metrics (rmq.metrics.proxy)
Observer = Callable[[Call, int, int | None], None]


Kind = Literal["unary", "server_stream", "bidi"]


@dataclass(frozen=True)
class Method:
    """`handler` by kind: unary (call, request) -> response; server_stream (call, request,
    send); bidi (call, requests, send), `requests` a receive channel of decoded requests."""

    request_type: type[Proto]
    kind: Kind
    handler: Callable[..., Awaitable[Any]]


def parse_timeout(value: str) -> float | None:
    """grpc-timeout: at most 8 digits and a unit; None for anything else (no deadline)."""
    digits, unit = value[:-1], value[-1:]
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 8 and unit in _TIMEOUT_UNITS):
        return None
    return int(digits) * _TIMEOUT_UNITS[unit]


def _text(value: bytes | str) -> str:
    """A header name or value as text; bytes that are not UTF-8 become U+FFFD."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def status_code(message: Proto) -> int | None:
    """The code of the message's `status` field (rocketmq.v2's responses), None without one."""
    if "status" in type(message).DESCRIPTOR.fields_by_name and message.HasField("status"):
        return int(message.status.code)
    return None


def frame(message: Proto) -> bytes:
    body: bytes = message.SerializeToString()
    return _PREFIX.pack(0, len(body)) + body


@dataclass
class _Stream:
    call: Call
    method: Method
    inbox: trio.MemorySendChannel[Proto]
    outbox_receive: trio.MemoryReceiveChannel[Proto]
    buffer: bytearray = field(default_factory=bytearray)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    headers_sent: bool = False
    closed: bool = False
    error: tuple[int, str] | None = None  # why the request stream was refused; its status


class _Connection:
    """One HTTP/2 connection: a reader task and a task per call, writes under one lock."""

    def __init__(
        self, server: GrpcServer, stream: trio.abc.Stream, peer: tuple[str, int], local: tuple[str, int]
    ) -> None:
        self.server = server
        self.local = local
        self.sock = stream
        # headers stay bytes: _start decodes them leniently (h2's own decoding raises on bad UTF-8)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self.lock = trio.Lock()
        self.window = trio.Event()  # set (and replaced) when the peer opens its windows
        self.streams: dict[int, _Stream] = {}
        self.peer = peer
        self.scope = trio.CancelScope()  # the connection's tasks: cancelled, the connection ends
        self.active_at = trio.current_time()  # when a call last started or ended

    async def flush(self) -> None:
        """Write what h2 has to send. A peer that takes none of it for STALL_TIMEOUT ends
        the connection (BrokenResourceError), so it cannot hold the lock, and the reader,
        for ever."""
        data = self.h2.data_to_send()
        if data:
            with trio.move_on_after(STALL_TIMEOUT) as waited:
                await self.sock.send_all(data)
            if waited.cancelled_caught:
                log.info("gRPC connection from %s: nothing read for %g s; closed", self.peer, STALL_TIMEOUT)
                self.scope.cancel()
                raise trio.BrokenResourceError("the peer reads nothing")

    async def run(self) -> None:
        with self.scope:
            await self._run()

    async def _idle_watch(self) -> None:
        """Java's maxConnectionIdle (grpcClientIdleTimeMills): a connection with no call in
        progress for that long is closed, after a GOAWAY."""
        idle = self.server.idle_timeout
        while True:
            await trio.sleep_until(self.active_at + idle)
            if self.streams:
                self.active_at = trio.current_time()
            elif trio.current_time() >= self.active_at + idle:
                break
        log.info("gRPC connection from %s: idle for %g s; closed", self.peer, idle)
        quiet = contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, h2.exceptions.ProtocolError)
        with trio.move_on_after(1.0), quiet:
            async with self.lock:
                self.h2.close_connection()
                await self.flush()
        self.scope.cancel()

    async def _run(self) -> None:
        async with self.lock:
            self.h2.initiate_connection()
            await self.flush()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._idle_watch)
            try:
                while True:
                    data = await self.sock.receive_some(65536)
                    if not data:
                        break
                    async with self.lock:
                        try:
                            events = self.h2.receive_data(data)
                        except h2.exceptions.ProtocolError as exc:
                            log.info("gRPC connection from %s: %s: %s", self.peer, type(exc).__name__, exc)
                            await self.flush()
                            break
                        for event in events:
                            self._event(event, nursery)
                        await self.flush()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                nursery.cancel_scope.cancel()
                self._wake()

    def _wake(self) -> None:
        self.window.set()
        self.window = trio.Event()

    def _event(self, event: h2.events.Event, nursery: trio.Nursery) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._start(event, nursery)
        elif isinstance(event, h2.events.DataReceived):
            assert event.stream_id is not None and event.data is not None
            self.h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
            s = self.streams.get(event.stream_id)
            if s is not None:
                s.buffer += event.data
                self._deliver(s)
        elif isinstance(event, h2.events.StreamEnded):
            s = self.streams.get(event.stream_id or 0)
            if s is not None:
                s.inbox.close()
        elif isinstance(event, h2.events.StreamReset):
            s = self.streams.pop(event.stream_id or 0, None)
            if s is not None:
                s.closed = True
                s.scope.cancel()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._wake()
        elif isinstance(event, h2.events.ConnectionTerminated):
            for s in self.streams.values():
                s.closed = True
                s.scope.cancel()

    def _refuse(self, s: _Stream, code: int, message: str) -> None:
        """End the call with this status: the handler's task is cancelled and answers it
        (_serve_call); what else comes on the stream is dropped."""
        s.error = (code, message)
        s.buffer.clear()
        s.scope.cancel()
        s.inbox.close()

    def _deliver(self, s: _Stream) -> None:
        buf = s.buffer
        while len(buf) >= 5 and s.error is None:
            flag, size = _PREFIX.unpack_from(buf)
            if flag:  # rmq decompresses nothing (the gRPC spec's answers to a compressed message)
                encoding = s.call.metadata("grpc-encoding")
                if flag == 1 and encoding and encoding != "identity":
                    self._refuse(s, UNIMPLEMENTED, f"grpc-encoding {encoding[:64]} is not supported")
                else:
                    why = "compressed flag set without grpc-encoding" if flag == 1 else f"bad message flag {flag}"
                    self._refuse(s, INTERNAL, why)
                return
            if size > self.server.max_message:
                self._refuse(
                    s, RESOURCE_EXHAUSTED, f"gRPC message exceeds maximum size {self.server.max_message}: {size}"
                )
                return
            if len(buf) < 5 + size:
                return
            body = bytes(buf[5 : 5 + size])
            del buf[: 5 + size]
            message = s.method.request_type()
            try:
                message.ParseFromString(body)
            except DecodeError as exc:
                self._refuse(s, INVALID_ARGUMENT, f"malformed request message: {exc}")
                return
            try:
                s.inbox.send_nowait(message)
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                self._refuse(s, RESOURCE_EXHAUSTED, "too many request messages waiting on the stream")

    def _start(self, event: h2.events.RequestReceived, nursery: trio.Nursery) -> None:
        stream_id = event.stream_id
        assert stream_id is not None
        headers = {_text(k): _text(v) for k, v in (event.headers or [])}
        path = headers.get(":path", "")
        method = self.server.methods.get(path)
        now = trio.current_time()
        call = Call(path.rsplit("/", 1)[-1] if method is not None else UNKNOWN_METHOD, headers, self.peer)
        call.received_at = now
        call.local = self.local
        self.active_at = now
        timeout = parse_timeout(headers.get("grpc-timeout", ""))
        if timeout is not None:
            call.deadline = now + timeout
        if method is None:
            self._trailers_only(stream_id, UNIMPLEMENTED, f"unknown method {path}")
            self.server.ended(call, UNIMPLEMENTED, None, started=False)
            return
        inbox, inbox_receive = trio.open_memory_channel[Proto](64)
        outbox, outbox_receive = trio.open_memory_channel[Proto](0)
        s = _Stream(call, method, inbox, outbox_receive)
        self.streams[stream_id] = s
        self.server.started(call)
        nursery.start_soon(self._serve_call, stream_id, s, inbox_receive)

    def _trailers_only(self, stream_id: int, code: int, message: str) -> None:
        self.h2.send_headers(
            stream_id,
            [
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", str(code)),
                ("grpc-message", urllib.parse.quote(message, safe=" !#$&'()*+,/:;=?@[]~")),
            ],
            end_stream=True,
        )

    async def _send_message(self, stream_id: int, s: _Stream, message: Proto, *, flush: bool = True) -> None:
        """The message on the stream (after the response headers, the first time), as the
        peer's window allows. Without `flush` its last bytes wait in h2's buffer for the
        next flush: a unary call's answer goes out with its trailers in one write."""
        data = frame(message)
        while data:
            async with self.lock:
                if s.closed:
                    raise trio.ClosedResourceError
                try:
                    if not s.headers_sent:
                        self.h2.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
                        s.headers_sent = True
                    room = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size)
                    if room > 0:
                        self.h2.send_data(stream_id, data[:room])
                        data = data[room:]
                except h2.exceptions.ProtocolError:  # h2 ended the connection or stream meanwhile
                    s.closed = True
                    raise trio.ClosedResourceError from None
                if room > 0:
                    if data or flush:
                        await self.flush()
                    continue
                await self.flush()  # what is buffered, the headers too, before waiting
                waiter = self.window
            # a peer that opens no window holds the call only until its deadline or STALL_TIMEOUT
            with trio.move_on_at(min(s.call.deadline, trio.current_time() + STALL_TIMEOUT)):
                await waiter.wait()
                continue
            await self._reset(stream_id, s)
            raise trio.ClosedResourceError

    async def _reset(self, stream_id: int, s: _Stream) -> None:
        """End the call with RST_STREAM (CANCEL): a client sees its call cancelled."""
        async with self.lock:
            if s.closed:
                return
            s.closed = True
            self.streams.pop(stream_id, None)
            log.info("gRPC %s from %s: no flow-control window to answer in; reset", s.call.method, self.peer)
            try:
                self.h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
                await self.flush()
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass

    async def _end(self, stream_id: int, s: _Stream, code: int, message: str, last: Proto | None = None) -> None:
        """The trailers, after `last` (a unary call's answer) when there is one."""
        if last is not None:
            try:
                await self._send_message(stream_id, s, last, flush=False)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
        async with self.lock:
            if s.closed:
                return
            s.closed = True
            self.streams.pop(stream_id, None)
            try:
                if not s.headers_sent:
                    self._trailers_only(stream_id, code, message)
                else:
                    trailers = [("grpc-status", str(code))]
                    if message:
                        trailers.append(("grpc-message", urllib.parse.quote(message, safe=" !#$&'()*+,/:;=?@[]~")))
                    self.h2.send_headers(stream_id, trailers, end_stream=True)
                await self.flush()
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass

    async def _serve_call(self, stream_id: int, s: _Stream, requests: trio.MemoryReceiveChannel[Proto]) -> None:
        code, message, last = OK, "", None
        observed: int | None = None  # the first Status sent, for the server's observer
        observing = self.server.observer is not None

        async def send(response: Proto) -> None:
            nonlocal observed
            if observing and observed is None:
                observed = status_code(response)
            await self._send_message(stream_id, s, response)

        try:
            with s.scope:
                s.scope.deadline = s.call.deadline
                code, message, last = await self._dispatch(s, requests, send)
            if s.scope.cancelled_caught and not s.closed:
                last = None
                if s.error is not None:
                    code, message = s.error
                else:
                    code, message = DEADLINE_EXCEEDED, "deadline exceeded"
            if observing and last is not None:
                observed = status_code(last)
            if s.closed:  # reset by the client, or the connection ended
                code = CANCELLED
            else:
                await self._end(stream_id, s, code, message, last)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            code = CANCELLED
        except Exception as exc:  # a handler's bug ends its call, not the connection
            log.exception("gRPC %s failed", s.call.method)
            code, message = UNKNOWN, f"{type(exc).__name__}: {exc}"
            await self._end(stream_id, s, code, message)
        finally:  # also when the connection's end cancels the call
            self.active_at = trio.current_time()
            self.server.ended(s.call, code, observed)

    async def _dispatch(
        self, s: _Stream, requests: trio.MemoryReceiveChannel[Proto], send: Send
    ) -> tuple[int, str, Proto | None]:
        """The call's status, and a unary call's answer, which _end sends with the trailers."""
        m = s.method
        try:
            if m.kind == "bidi":
                await m.handler(s.call, requests, send)
                return OK, "", None
            try:
                request = await requests.receive()
            except trio.EndOfChannel:
                return INVALID_ARGUMENT, "no request message", None
            if m.kind == "unary":
                return OK, "", await m.handler(s.call, request)
            await m.handler(s.call, request, send)
            return OK, "", None
        except GrpcError as exc:
            return exc.code, exc.message, None


class GrpcServer(Service):
    """Serves `methods` (path `/<service>/<method>` → Method) on host:port; port 0 picks one.

    With `tls` (a mode and the server's context) each connection's first bytes decide, as
    Java's TlsModeHandler: a TLS handshake gets TLS (ALPN h2), anything else (the HTTP/2
    preface) plain, as the mode allows (rmq.remoting's negotiate)."""

    def __init__(
        self,
        methods: dict[str, Method],
        host: str = "0.0.0.0",
        port: int = 8081,
        tls: tuple[TlsMode, ssl.SSLContext] | None = None,
        *,
        max_message: int = MAX_MESSAGE,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.methods = methods
        self.max_message = max_message  # bytes of one request message (grpcMaxInboundMessageSize)
        self.idle_timeout = idle_timeout  # seconds a connection may go without a call
        self.host = host
        self.port = port
        self.tls = tls
        self.observer: Observer | None = None
        self.connections = 0  # held now
        self.calls: dict[str, int] = {}  # method → calls in progress
        if tls is not None:
            tls[1].set_alpn_protocols(["h2"])
        self._scope = trio.CancelScope()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        with self._scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                task_status.started(self.port)
        for listener in listeners:
            await listener.aclose()

    def shutdown(self) -> None:
        self._scope.cancel()

    def observe_with(self, observer: Observer | None) -> None:
        """Call `observer(call, grpc_status, status_code)` as each call ends."""
        self.observer = observer

    def started(self, call: Call) -> None:
        self.calls[call.method] = self.calls.get(call.method, 0) + 1

    def ended(self, call: Call, code: int, observed: int | None, *, started: bool = True) -> None:
        if started:
            self.calls[call.method] -= 1
        if self.observer is not None:
            self.observer(call, code, observed)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            name, own = stream.socket.getpeername(), stream.socket.getsockname()
        except OSError:  # gone already
            await stream.aclose()
            return
        peer, local = (str(name[0]), int(name[1])), (str(own[0]), int(own[1]))
        self.connections += 1
        try:
            spoken: trio.abc.Stream = stream
            if self.tls is not None:
                with trio.move_on_after(FIRST_BYTES_TIMEOUT) as waited:
                    spoken = await negotiate(stream, *self.tls, address=f"{peer[0]}:{peer[1]}")
                if waited.cancelled_caught:
                    log.info("gRPC connection from %s: nothing sent in %g s", peer, FIRST_BYTES_TIMEOUT)
                    return
            await _Connection(self, spoken, peer, local).run()
        except RemotingConnectError as exc:
            log.info("gRPC connection from %s refused: %s", peer, exc)
        except Exception:  # a bug: it ends this connection, not the server
            log.exception("gRPC connection from %s failed", peer)
        finally:
            self.connections -= 1
            await stream.aclose()
