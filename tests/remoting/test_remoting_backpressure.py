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


async def test_many_requests_in_flight_do_not_hold_every_answer() -> None:
    """Small requests with big answers and a high in-flight bound (as a broker allows, since
    a consumer parks a pull per queue): the reader stops taking requests once the queued
    answers weigh the outbox's byte bound, not once thousands are held."""
    d = Dispatcher()

    async def big(ctx: object, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=b"y" * BODY)

    d.register(RequestCode.PULL_MESSAGE, big, concurrency=1 << 20)
    opened: list[Connection] = []
    requests = 4000  # ~250 MiB of answers
    frames = []
    for i in range(requests):
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE)
        cmd.opaque = i
        frames.append(cmd.encode())
    tracemalloc.start()
    try:
        async with serve_on_loopback(d, max_in_flight=16384, on_open=opened.append) as server:
            assert server.port is not None
            stream = await trio.open_tcp_stream("127.0.0.1", server.port)
            baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    sent = 0

                    async def sender() -> None:
                        nonlocal sent
                        for frame in frames:
                            await stream.send_all(frame)
                            sent += 1

                    nursery.start_soon(sender)
                    await trio.sleep(2)  # the sender gets far: requests are small
                    (conn,) = opened
                    assert conn.statistics().in_flight < 1000
                    stalled_peak = tracemalloc.get_traced_memory()[1] - baseline
                    decoder = FrameDecoder(4 * BODY)
                    answered = 0
                    while answered < requests:
                        data = await stream.receive_some(1 << 20)
                        assert data
                        decoder.feed(data)
                        answered += sum(1 for _ in decoder)
            await stream.aclose()
    finally:
        tracemalloc.stop()
    assert stalled_peak < 24 * 1024 * 1024, f"peak {stalled_peak} bytes while stalled"
