"""Pipeline stages over memory streams: each one is a well-behaved trio Stream."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from rmq.protocol import (
    FrameTooLarge,
    RemoteProtocolError,
    RemotingCommand,
    encode_frame,
)
from rmq.remoting.stages.codec import CommandStream
from rmq.remoting.stages.idle import IdleStream
from rmq.remoting.stages.prefixed import PrefixedStream
from rmq.remoting.stages.websocket import (
    WebSocketStream,
    accept_websocket,
    connect_websocket,
)

# -- PrefixedStream -----------------------------------------------------------------------


async def test_prefixed_stream_is_a_stream() -> None:
    async def maker() -> tuple[trio.abc.Stream, trio.abc.Stream]:
        a, b = trio.testing.memory_stream_pair()
        return PrefixedStream(a), PrefixedStream(b)

    await trio.testing.check_two_way_stream(maker, None)


async def test_prefixed_stream_gives_back_the_prefix_first() -> None:
    a, b = trio.testing.memory_stream_pair()
    stream = PrefixedStream(b, b"hello")
    await a.send_all(b" world")
    assert await stream.receive_some(3) == b"hel"
    assert await stream.receive_some() == b"lo"
    assert await stream.receive_some() == b" world"
    await stream.send_all(b"back")
    assert await a.receive_some() == b"back"
    with pytest.raises(ValueError):
        await stream.receive_some(0)
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await stream.receive_some()


async def test_prefixed_stream_closed_with_prefix_left() -> None:
    _, b = trio.testing.memory_stream_pair()
    stream = PrefixedStream(b, b"unread")
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await stream.receive_some()


# -- IdleStream ---------------------------------------------------------------------------


async def test_idle_stream_is_a_stream() -> None:
    with trio.CancelScope() as scope:

        async def maker() -> tuple[trio.abc.Stream, trio.abc.Stream]:
            a, b = trio.testing.memory_stream_pair()
            return IdleStream(a, scope, 1000.0), IdleStream(b, scope, 1000.0)

        await trio.testing.check_two_way_stream(maker, None)
    assert not scope.cancel_called


async def test_idle_stream_expires_without_traffic(autojump_clock: trio.testing.MockClock) -> None:
    a, b = trio.testing.memory_stream_pair()
    start = trio.current_time()
    with trio.CancelScope() as scope:
        idle = IdleStream(b, scope, 120.0)
        for _ in range(5):  # traffic every 100 s keeps it alive
            await trio.sleep(100)
            await a.send_all(b"ping")
            assert await idle.receive_some() == b"ping"
        await idle.receive_some()  # nothing more comes: expires 120 s after the last traffic
    assert scope.cancelled_caught
    elapsed = trio.current_time() - start
    assert 500 + 120 - idle._slack <= elapsed <= 500 + 120 + 1e-6


async def test_idle_stream_counts_sends(autojump_clock: trio.testing.MockClock) -> None:
    a, b = trio.testing.memory_stream_pair()
    with trio.CancelScope() as scope:
        idle = IdleStream(b, scope, 10.0)
        for _ in range(10):
            await trio.sleep(6)
            await idle.send_all(b"x")
    assert not scope.cancel_called
    assert await a.receive_some() == b"x" * 10


# -- WebSocketStream ----------------------------------------------------------------------


async def websocket_pair(nursery: trio.Nursery) -> tuple[WebSocketStream, WebSocketStream]:
    """Client and server WebSocketStreams over memory streams; their reader tasks run in
    `nursery` until the streams are closed."""
    client_raw, server_raw = trio.testing.memory_stream_pair()
    accepted: list[WebSocketStream] = []

    async def server() -> None:
        accepted.append(
            await accept_websocket(nursery, server_raw, path="/rocketmq", max_message_size=1 << 21, handshake_timeout=5)
        )

    async with trio.open_nursery() as handshake:
        handshake.start_soon(server)
        client = await connect_websocket(
            nursery, client_raw, host="test", resource="/rocketmq", max_message_size=1 << 21
        )
    return client, accepted[0]


async def test_websocket_stream_is_a_stream(nursery: trio.Nursery) -> None:
    async def maker() -> tuple[WebSocketStream, WebSocketStream]:
        return await websocket_pair(nursery)

    await trio.testing.check_two_way_stream(maker, None)


async def test_websocket_stream_one_message_per_send(nursery: trio.Nursery) -> None:
    client, server = await websocket_pair(nursery)
    await client.send_all(b"frame-1")
    await client.send_all(b"frame-2")
    assert await server.websocket.get_message() == b"frame-1"
    assert await server.receive_some(3) == b"fra"
    assert await server.receive_some() == b"me-2"
    await client.aclose()
    assert await server.receive_some() == b""


async def test_websocket_text_message_breaks_the_stream(nursery: trio.Nursery) -> None:
    client, server = await websocket_pair(nursery)
    await client.websocket.send_message("text")
    with pytest.raises(trio.BrokenResourceError):
        await server.receive_some()
    with trio.fail_after(5):  # closing both also stops their reader tasks
        await client.aclose()
        await server.aclose()


# -- CommandStream ------------------------------------------------------------------------


async def test_command_stream_batches_and_coalesces() -> None:
    a, b = trio.testing.memory_stream_pair()
    sender, receiver = CommandStream(a), CommandStream(b)
    cmds = [RemotingCommand.request(10, {"n": i}, b"x" * i) for i in range(5)]
    await sender.send_frames([c.encode() for c in cmds])
    got: list[RemotingCommand] = []
    while len(got) < 5:
        got += await receiver.receive_batch()
    assert got == cmds
    await sender.send(cmds[0])
    assert await receiver.receive_batch() == [cmds[0]]
    await a.aclose()
    assert await receiver.receive_batch() == []


async def test_command_stream_partial_frames() -> None:
    a, b = trio.testing.memory_stream_pair()
    receiver = CommandStream(b)
    wire = RemotingCommand.request(34, {"k": "v"}, b"body").encode()

    async def trickle() -> None:
        for i in range(len(wire)):
            await a.send_all(wire[i : i + 1])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trickle)
        (cmd,) = await receiver.receive_batch()
    assert cmd.ext_fields == {"k": "v"}
    assert receiver.buffered == 0


async def test_command_stream_rejects_oversized_and_garbage() -> None:
    a, b = trio.testing.memory_stream_pair()
    receiver = CommandStream(b, max_frame_size=1024)
    await a.send_all(encode_frame(0, b"{}", b"x" * 2000))
    with pytest.raises(FrameTooLarge):
        await receiver.receive_batch()
    a, b = trio.testing.memory_stream_pair()
    receiver = CommandStream(b)
    await a.send_all(encode_frame(0, b"{garbage", b""))
    with pytest.raises(RemoteProtocolError):
        await receiver.receive_batch()


async def test_command_stream_one_frame_per_send() -> None:
    sent: list[bytes] = []

    class Recorder(trio.abc.Stream):
        async def send_all(self, data: bytes | bytearray | memoryview) -> None:
            sent.append(bytes(data))

        async def wait_send_all_might_not_block(self) -> None: ...

        async def receive_some(self, max_bytes: int | None = None) -> bytes:
            return b""

        async def aclose(self) -> None: ...

    frames = [RemotingCommand.request(10).encode(), RemotingCommand.request(11).encode()]
    await CommandStream(Recorder(), one_frame_per_send=True).send_frames(frames)
    assert sent == frames
    sent.clear()
    await CommandStream(Recorder()).send_frames(frames)
    assert sent == [b"".join(frames)]
