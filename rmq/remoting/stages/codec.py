"""Codec stage: a byte Stream in, RemotingCommands out (RocketMQ's NettyDecoder/Encoder).

Reading feeds `protocol.FrameDecoder` with whatever `receive_some` returns and decodes
every complete frame; one read can yield many commands, which the connection's reader
handles in a batch. Writing takes frames already encoded by the sender (so encoding
errors surface in the task that made the command) and joins a batch of them into one
`send_all`, which is where the writer task's coalescing turns into fewer syscalls.

Memory: the decoder holds at most one incomplete frame (≤ max_frame_size, checked as
soon as a length prefix arrives) plus one read of `receive_size` bytes.
"""

from __future__ import annotations

import trio

from rmq.protocol import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, RemotingCommand

from .direct import DirectWrite, direct_writer

DEFAULT_RECEIVE_SIZE = 64 * 1024
# Join at most this many bytes into one send_all: large enough to amortise the syscall,
# small enough that a big join does not copy megabytes needlessly.
COALESCE_LIMIT = 256 * 1024


class CommandStream:
    """RemotingCommands over a trio.abc.Stream.

    Only one task may call `receive_batch` and only one `send_frames` at a time (the
    connection's reader and writer); the underlying stream enforces it with
    BusyResourceError.

    Args:
      stream: the byte stream (after TLS, WebSocket and idle stages).
      max_frame_size: the largest frame accepted, length prefix included.
      receive_size: bytes asked for per read.
      one_frame_per_send: write each frame with its own `send_all` (message transports,
        where one send is one message) instead of joining them.
    """

    __slots__ = ("_decoder", "_one_frame_per_send", "_receive_size", "direct_write", "stream")

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        receive_size: int = DEFAULT_RECEIVE_SIZE,
        one_frame_per_send: bool = False,
    ) -> None:
        self.stream = stream
        self._decoder = FrameDecoder(max_frame_size)
        self._receive_size = receive_size
        self._one_frame_per_send = one_frame_per_send
        self.direct_write: DirectWrite | None = None if one_frame_per_send else direct_writer(stream)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet decoded (part of a frame)."""
        return self._decoder.buffered

    async def receive_batch(self) -> list[RemotingCommand]:
        """Read until at least one command is complete; return all complete commands.

        Returns:
          The commands, in arrival order; an empty list at end of stream. Bytes of an
          incomplete frame left at end of stream are dropped.

        Raises:
          RemoteProtocolError: bad framing or an undecodable header (FrameTooLarge for
            an oversized frame). The stream cannot be trusted afterwards.
          trio.BrokenResourceError / ClosedResourceError: from the stream.

        Cancellation: bytes already read stay buffered for the next call.
        """
        decoder = self._decoder
        receive_some = self.stream.receive_some
        size = self._receive_size
        decode = RemotingCommand.decode
        while True:
            data = await receive_some(size)
            if not data:
                return []
            decoder.feed(data)
            commands = [decode(frame) for frame in decoder]
            if commands:
                return commands

    async def send_frames(self, frames: list[bytes]) -> None:
        """Write encoded frames (length prefix included), joined into one write.

        Cancellation: part of the data may have been written; the connection must then
        be closed, since the peer would see a torn frame.
        """
        if self._one_frame_per_send:
            for frame in frames:
                await self.stream.send_all(frame)
        elif len(frames) == 1:
            await self.stream.send_all(frames[0])
        else:
            await self.stream.send_all(b"".join(frames))

    async def send(self, command: RemotingCommand) -> None:
        """Encode and write one command (tests and one-off use; connections batch)."""
        await self.send_frames([command.encode()])

    async def aclose(self) -> None:
        await self.stream.aclose()
