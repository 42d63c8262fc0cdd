"""A loopback TCP proxy with faults on demand: one per link between two processes.

    proxy = Proxy("127.0.0.1:40913", name="n0->n1")
    await nursery.start(proxy.serve)     # listens on 127.0.0.1, port 0: proxy.address
    proxy.cut("blackhole")               # or "refuse"
    proxy.drop("to_target")              # one direction only
    proxy.delay(0.2)                     # seconds added to every chunk, both directions
    proxy.reset()                        # every current connection closed with a RST
    proxy.heal()                         # all of the above undone (a reset stays done)

It runs in the test's own Trio loop, so the test steers it while the processes it connects
run elsewhere. Faults, as the two ends see them:

* ``cut("refuse")``: current connections are reset; a new one is accepted and reset at once.
* ``cut("blackhole")``: sockets stay open, nothing is forwarded either way; a new connection
  is accepted and waits, unconnected, for the heal. Bytes are held, not lost: TCP would
  retransmit them once the path came back, and so they arrive after the heal.
* ``drop(direction)``: the same, for one direction (``"to_target"`` or ``"to_client"``).
* ``delay(s)``: each chunk leaves ``s`` seconds after it arrived, in order.

A direction that is held stops reading from its source, so the sender meets TCP's own
backpressure (a full socket buffer), as it would on a real stalled path.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Literal

import trio

Direction = Literal["to_target", "to_client"]
CutMode = Literal["refuse", "blackhole"]

CHUNK = 64 * 1024
PIPELINE = 64  # chunks in flight per direction while a delay holds them
CONNECT_TIMEOUT = 5.0


def _abort(stream: trio.SocketStream | None) -> None:
    """Close with a RST (SO_LINGER 0): the peer sees the connection reset, not a clean end."""
    if stream is None:
        return
    sock = stream.socket
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


@dataclass(eq=False)
class _Conn:
    client: trio.SocketStream
    upstream: trio.SocketStream | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


@dataclass
class ProxyStats:
    accepted: int = 0
    refused: int = 0
    resets: int = 0
    to_target: int = 0  # bytes delivered
    to_client: int = 0


class Proxy:
    """Forwards every connection made to ``address`` to ``target`` ("host:port")."""

    def __init__(self, target: str, name: str = "") -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.name = name or target
        self.port = 0
        self.stats = ProxyStats()
        self._mode: Literal["up"] | CutMode = "up"
        self._dropped: set[Direction] = set()
        self._delay = 0.0
        self._conns: set[_Conn] = set()
        self._changed = trio.Event()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __repr__(self) -> str:
        return f"Proxy({self.name} {self.address} -> {self.target[0]}:{self.target[1]}, {self.state})"

    @property
    def state(self) -> str:
        """What is wrong with the link now, as words ("up" when nothing is)."""
        parts = [] if self._mode == "up" else [self._mode]
        parts += [f"drop {d}" for d in sorted(self._dropped)]
        if self._delay:
            parts.append(f"delay {self._delay:.3f}s")
        return ", ".join(parts) or "up"

    @property
    def connections(self) -> int:
        return len(self._conns)

    # -- faults --------------------------------------------------------------------------------

    def cut(self, mode: CutMode = "refuse") -> None:
        self._mode = mode
        if mode == "refuse":
            self.reset()
        self._notify()

    def drop(self, direction: Direction) -> None:
        self._dropped.add(direction)
        self._notify()

    def delay(self, seconds: float) -> None:
        self._delay = max(0.0, seconds)
        self._notify()

    def reset(self) -> None:
        """Every current connection closed abruptly, both ends (what is in flight is lost)."""
        for conn in list(self._conns):
            self.stats.resets += 1
            _abort(conn.client)
            _abort(conn.upstream)
            conn.scope.cancel()

    def heal(self) -> None:
        self._mode = "up"
        self._dropped.clear()
        self._delay = 0.0
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _held(self, direction: Direction) -> bool:
        return self._mode == "blackhole" or direction in self._dropped

    # -- forwarding ----------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and forward until cancelled; started() once ``address`` is valid."""
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listener.socket.getsockname()[1]
        try:
            async with listener, trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    stream = await listener.accept()
                    nursery.start_soon(self._handle, stream)
        finally:
            self.reset()

    async def _handle(self, client: trio.SocketStream) -> None:
        conn = _Conn(client)
        self._conns.add(conn)
        try:
            with conn.scope:
                if self._mode == "refuse":
                    self.stats.refused += 1
                    _abort(client)
                    return
                self.stats.accepted += 1
                while self._mode == "blackhole":  # a connect that goes nowhere, for now
                    await self._changed.wait()
                if self._mode == "refuse":
                    _abort(client)
                    return
                try:
                    with trio.fail_after(CONNECT_TIMEOUT):
                        conn.upstream = await trio.open_tcp_stream(*self.target)
                except (OSError, trio.TooSlowError):
                    _abort(client)  # the target is down: the client sees a reset
                    return
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._direction, conn, client, conn.upstream, "to_target")
                    nursery.start_soon(self._direction, conn, conn.upstream, client, "to_client")
        finally:
            self._conns.discard(conn)
            for s in (conn.client, conn.upstream):
                if s is not None:
                    s.socket.close()

    async def _direction(
        self, conn: _Conn, src: trio.SocketStream, dst: trio.SocketStream, direction: Direction
    ) -> None:
        send, receive = trio.open_memory_channel[tuple[float, bytes]](PIPELINE)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reader, src, send, direction)
            await self._writer(dst, receive, direction)
            conn.scope.cancel()  # one side ended: so does the connection

    async def _reader(
        self, src: trio.SocketStream, send: trio.MemorySendChannel[tuple[float, bytes]], direction: Direction
    ) -> None:
        async with send:
            while True:
                while self._held(direction):
                    await self._changed.wait()
                try:
                    data = await src.receive_some(CHUNK)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                await send.send((trio.current_time() + self._delay, data))
                if not data:
                    return

    async def _writer(
        self, dst: trio.SocketStream, receive: trio.MemoryReceiveChannel[tuple[float, bytes]], direction: Direction
    ) -> None:
        async for due, data in receive:
            await trio.sleep_until(due)
            while self._held(direction):
                await self._changed.wait()
            if not data:
                return
            try:
                await dst.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if direction == "to_target":
                self.stats.to_target += len(data)
            else:
                self.stats.to_client += len(data)
