"""Idle stage: close a connection after `timeout` seconds without traffic.

RocketMQ's IdleStateHandler(ALL_IDLE) plus closing the channel on the event, expressed
as a Trio cancel scope. The connection runs inside one CancelScope; every completed
receive or send moves that scope's deadline to now + timeout. When nothing moves for
`timeout` seconds the deadline passes and everything inside the scope is cancelled.

Moving a deadline costs a heap update inside Trio, so the stream only moves it when it
has gone stale by more than `slack` (1/64 of the timeout, at most 1 s). The connection
therefore closes between `timeout - slack` and `timeout` seconds after its last traffic.
"""

from __future__ import annotations

import trio

from .direct import DirectWrite, direct_writer

DEFAULT_IDLE_TIMEOUT = 120.0  # RocketMQ serverChannelMaxIdleTimeSeconds


class IdleStream(trio.abc.Stream):
    """Delegates to `transport_stream`, pushing `scope.deadline` forward on I/O.

    The caller owns `scope` and must run every use of this stream inside it; it may read
    `scope.cancel_called` afterwards to learn that the connection expired.
    """

    def __init__(self, transport_stream: trio.abc.Stream, scope: trio.CancelScope, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError("idle timeout must be positive")
        self.transport_stream = transport_stream
        self.scope = scope
        self.timeout = timeout
        self._slack = min(timeout / 64, 1.0)
        self._now = trio.lowlevel.current_clock().current_time  # trio.current_time without its wrapper
        self._touch()

    def _touch(self) -> None:
        deadline = self._now() + self.timeout
        current = self.scope.deadline
        # stale by more than the slack, or further away than one timeout (e.g. inf at start)
        if deadline - current > self._slack or current > deadline:
            self.scope.deadline = deadline

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.transport_stream.receive_some(max_bytes)
        self._touch()
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport_stream.send_all(data)
        self._touch()

    def direct_writer(self) -> DirectWrite | None:
        """The transport's direct write (direct.py), moving the deadline as `send_all` does."""
        write = direct_writer(self.transport_stream)
        if write is None:
            return None
        touch = self._touch

        def write_touching(data: bytes) -> int:
            sent = write(data)
            touch()
            return sent

        return write_touching

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.transport_stream.aclose()
