"""A peer that sends requests but never reads responses cannot make the server buffer
without bound: the outbox fills, processors wait, the reader stops reading, and TCP
pushes back on the peer. When the peer reads again, every request is answered."""

from __future__ import annotations

import tracemalloc

import trio

from rmq.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import Connection, Dispatcher
from rmq.remoting.stages.codec import DEFAULT_RECEIVE_SIZE
from rmq.remoting.testing import echo, serve_on_loopback

BODY = 64 * 1024
REQUESTS = 1500  # ~96 MiB each way: far beyond what socket buffers hold
OUTBOX = 8
IN_FLIGHT = 8


async def test_slow_reader_is_pushed_back() -> None:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo, concurrency=64)
    opened: list[Connection] = []
    frames = []
    for i in range(REQUESTS):
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"x" * BODY)
        cmd.opaque = i
        frames.append(cmd.encode())
    tracemalloc.start()
    try:
        async with serve_on_loopback(
            d, outbox_size=OUTBOX, max_in_flight=IN_FLIGHT, max_frame_size=2 * BODY, on_open=opened.append
        ) as server:
            assert server.port is not None
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            sent = 0

            async def sender() -> None:
                nonlocal sent
                for frame in frames:
                    await stream.send_all(frame)
                    sent += 1

            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(sender)
                    # wait until the sender stalls: nobody reads, so everything fills up
                    last = -1
                    while sent != last:
                        last = sent
                        await trio.sleep(0.3)
                    assert sent < REQUESTS, "the server kept reading although nobody read its answers"
                    (conn,) = opened
                    stats = conn.statistics()
                    assert stats.outbox <= OUTBOX
                    assert stats.in_flight <= IN_FLIGHT
                    assert stats.buffered <= 2 * BODY + DEFAULT_RECEIVE_SIZE
                    stalled_peak = tracemalloc.get_traced_memory()[1] - baseline

                    # now read: every request gets its answer, in full
                    decoder = FrameDecoder(4 * BODY)
                    answered: set[int] = set()
                    while len(answered) < REQUESTS:
                        data = await stream.receive_some(1 << 20)
                        assert data
                        decoder.feed(data)
                        for frame in decoder:
                            resp = RemotingCommand.decode(frame)
                            assert resp.code == ResponseCode.SUCCESS and len(resp.body) == BODY
                            answered.add(resp.opaque)
            assert answered == set(range(REQUESTS))
            await stream.aclose()
    finally:
        tracemalloc.stop()
    # the server held a few frames per bound, not the ~96 MiB the peer tried to push
    assert stalled_peak < 12 * 1024 * 1024, f"peak {stalled_peak} bytes while stalled"
