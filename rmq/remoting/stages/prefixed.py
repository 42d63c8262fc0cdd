"""PrefixedStream: give back bytes already read from a stream, then delegate to it.

TLS sniffing (stages/tls.py) reads the first chunk of a connection to decide whether it
is a TLS handshake; whatever the decision, the next stage must still see those bytes.
"""

from __future__ import annotations

import operator

import trio

from .direct import DirectWrite, direct_writer


class PrefixedStream(trio.abc.Stream):
    """A Stream that returns `prefix` from `receive_some` first, then reads `transport_stream`.

    Sending, `wait_send_all_might_not_block` and closing go straight to the transport.
    After `aclose()` every receive raises ClosedResourceError, even with prefix bytes left.
    """

    def __init__(self, transport_stream: trio.abc.Stream, prefix: bytes | bytearray = b"") -> None:
        self.transport_stream = transport_stream
        self._prefix = memoryview(bytes(prefix))
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        """Bytes from the prefix while any are left, else from the transport.

        Cancellation: prefix bytes are only consumed when returned.
        """
        if max_bytes is not None:
            max_bytes = operator.index(max_bytes)
            if max_bytes < 1:
                raise ValueError("max_bytes must be >= 1")
        if self._closed:
            await trio.lowlevel.checkpoint()
            raise trio.ClosedResourceError("stream is closed")
        if not self._prefix:
            return await self.transport_stream.receive_some(max_bytes)
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise trio.ClosedResourceError("stream is closed")
        n = len(self._prefix) if max_bytes is None else min(max_bytes, len(self._prefix))
        chunk = bytes(self._prefix[:n])
        self._prefix = self._prefix[n:]
        return chunk

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport_stream.send_all(data)

    def direct_writer(self) -> DirectWrite | None:
        """The transport's direct write (direct.py): sending passes straight through."""
        return direct_writer(self.transport_stream)

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        self._closed = True
        self._prefix = memoryview(b"")
        await self.transport_stream.aclose()
