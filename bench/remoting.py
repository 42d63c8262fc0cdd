"""Remoting benchmark: rmq.remoting against a bare Trio length-prefixed echo, same run.

    python bench/remoting.py [--seconds 3] [--rounds 3] [--body 1024] [--in-flight 64]
                             [--serialize json|rocketmq]

Over 127.0.0.1, client and server in one Trio run, with a --body byte body:
  (a) synchronous round trips per second on one connection (one request at a time);
  (b) pipelined throughput with --in-flight requests outstanding on one connection.
Each is measured for:
  * rmq.remoting: RemotingServer + RemotingClient, an echo processor in worker tasks
    (the default), and again registered `inline=True` (run by the connection's reader);
  * bare trio: an echo server and client written here with nothing but trio streams and
    a 4-byte length prefix, reading and writing in the same task;
  * bare trio, reader+writer tasks: the same bare framing, but each side split into a
    reader task and a single writer task draining an outbox, as rmq.remoting is. It has
    no codec and no dispatch: the floor that shape of pipeline allows.
Figures are requests per second; the ratio column is against bare trio. Each figure
gets --seconds in total, split into --rounds slices interleaved with the others, so
that load from other processes spreads over all figures alike.
"""

from __future__ import annotations

import argparse
import collections
import functools
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import outcome
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmq.protocol import RemotingCommand, SerializeType
from rmq.remoting import Dispatcher, RemotingClient
from rmq.remoting.testing import serve_on_loopback

CODE = 10
_LENGTH = struct.Struct(">i")


async def timed(seconds: float, run: Callable[[float, list[int]], Awaitable[None]]) -> int:
    """Run `run(deadline, counter)`, which stops starting requests at `deadline`; return
    how many requests it completed. Nothing is cancelled midway, so every connection is
    left clean (no torn frame, no unread response) for the next measurement."""
    counter = [0]
    await run(trio.current_time() + seconds, counter)
    return counter[0]


async def sync_loop(call: Callable[[], Awaitable[Any]], deadline: float, counter: list[int]) -> None:
    while trio.current_time() < deadline:
        await call()
        counter[0] += 1


async def pipelined(call: Callable[[], Awaitable[Any]], in_flight: int, deadline: float, counter: list[int]) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(in_flight):
            nursery.start_soon(sync_loop, call, deadline, counter)


# -- rmq.remoting -------------------------------------------------------------------------


async def echo(ctx: object, request: RemotingCommand) -> RemotingCommand:
    return request.make_response(body=request.body)


def ours_call(client: RemotingClient, address: str, body: bytes, serialize: int) -> Callable[[], Awaitable[Any]]:
    async def call() -> RemotingCommand:
        request = RemotingCommand.request(CODE, {"topic": "BenchTopic", "queueId": 0}, body, serialize_type=serialize)
        return await client.invoke(address, request, 5.0)

    return call


# -- bare trio: one task per side reads and writes ----------------------------------------


class FrameReader:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def frames(self) -> int:
        """Wait for at least one complete frame; return how many are complete (consumed)."""
        buf = self.buf
        while True:
            count = pos = 0
            while len(buf) - pos >= 4:
                (n,) = _LENGTH.unpack_from(buf, pos)
                if len(buf) - pos - 4 < n:
                    break
                pos += 4 + n
                count += 1
            if count:
                del buf[:pos]
                return count
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError
            buf += data


def split_frames(buf: bytearray) -> list[bytes]:
    out, pos = [], 0
    while len(buf) - pos >= 4:
        (n,) = _LENGTH.unpack_from(buf, pos)
        if len(buf) - pos - 4 < n:
            break
        out.append(bytes(buf[pos : pos + 4 + n]))
        pos += 4 + n
    del buf[:pos]
    return out


async def bare_echo_handler(stream: trio.abc.Stream) -> None:
    buf = bytearray()
    try:
        while data := await stream.receive_some(65536):
            buf += data
            if out := split_frames(buf):
                await stream.send_all(b"".join(out))
    except trio.BrokenResourceError:
        pass


async def bare_sync(stream: trio.abc.Stream, frame: bytes, deadline: float, counter: list[int]) -> None:
    reader = FrameReader(stream)
    while trio.current_time() < deadline:
        await stream.send_all(frame)
        await reader.frames()
        counter[0] += 1


async def bare_pipelined(
    stream: trio.abc.Stream, frame: bytes, in_flight: int, deadline: float, counter: list[int]
) -> None:
    reader = FrameReader(stream)
    slots = trio.Semaphore(in_flight)
    sent = 0

    async def sender() -> None:
        nonlocal sent
        while trio.current_time() < deadline:
            await slots.acquire()
            n = 1
            while n < in_flight:  # take every free slot: one send_all for all of them
                try:
                    slots.acquire_nowait()
                except trio.WouldBlock:
                    break
                n += 1
            await stream.send_all(frame * n)
            sent += n

    async def receiver() -> None:
        done = 0
        while done < sent or trio.current_time() < deadline:
            n = await reader.frames()
            done += n
            counter[0] += n
            for _ in range(n):
                slots.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        nursery.start_soon(receiver)


# -- bare trio, reader + writer tasks ------------------------------------------------------


class Split:
    """One side of a connection as a reader task and a writer task draining an outbox."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.outbox: collections.deque[bytes] = collections.deque()
        self.writer: Any = None
        self.waiters: collections.deque[Any] = collections.deque()  # client: tasks awaiting a response

    def queue(self, frame: bytes) -> None:
        self.outbox.append(frame)
        if self.writer is not None:
            task, self.writer = self.writer, None
            trio.lowlevel.reschedule(task)

    async def write_loop(self) -> None:
        while True:
            if not self.outbox:
                self.writer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.SUCCEEDED)
                continue
            frames = list(self.outbox)
            self.outbox.clear()
            await self.stream.send_all(frames[0] if len(frames) == 1 else b"".join(frames))

    async def read_loop(self, on_frame: Callable[[bytes], None]) -> None:
        buf = bytearray()
        while data := await self.stream.receive_some(65536):
            buf += data
            for frame in split_frames(buf):
                on_frame(frame)

    async def call(self, frame: bytes) -> bytes:
        self.queue(frame)
        self.waiters.append(trio.lowlevel.current_task())
        # not cancellable: the bench never cancels a request midway
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)  # type: ignore[no-any-return]

    def deliver(self, frame: bytes) -> None:
        trio.lowlevel.reschedule(self.waiters.popleft(), outcome.Value(frame))


async def split_echo_handler(stream: trio.abc.Stream) -> None:
    side = Split(stream)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(side.write_loop)
            await side.read_loop(side.queue)
            nursery.cancel_scope.cancel()
    except trio.BrokenResourceError:
        pass


# -- driver -------------------------------------------------------------------------------


def codec_cost(body: bytes, serialize: int, count: int = 5000) -> float:
    """Seconds per request spent in rmq.protocol alone: build, encode and decode a request,
    then build, encode and decode its response."""
    start = time.perf_counter()
    for opaque in range(count):
        request = RemotingCommand.request(CODE, {"topic": "BenchTopic", "queueId": 0}, body, serialize_type=serialize)
        request.opaque = opaque
        received = RemotingCommand.decode(request.encode()[4:])
        response = received.make_response(body=received.body)
        RemotingCommand.decode(response.encode()[4:])
    return (time.perf_counter() - start) / count


async def main(args: argparse.Namespace) -> None:
    body = b"x" * args.body
    frame = _LENGTH.pack(len(body)) + body
    serialize = SerializeType.ROCKETMQ if args.serialize == "rocketmq" else SerializeType.JSON
    slice_ = args.seconds / args.rounds
    counts: dict[str, int] = collections.defaultdict(int)

    workers, inline = Dispatcher(), Dispatcher()
    workers.register(CODE, echo, concurrency=1024)
    inline.register(CODE, echo, concurrency=1024, inline=True)
    async with (
        serve_on_loopback(workers) as server,
        serve_on_loopback(inline) as inline_server,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        ours = ours_call(client, server.address, body, serialize)
        ours_inline = ours_call(client, inline_server.address, body, serialize)
        await ours()
        await ours_inline()
        bare_listeners = await nursery.start(functools.partial(trio.serve_tcp, bare_echo_handler, 0, host="127.0.0.1"))
        split_listeners = await nursery.start(
            functools.partial(trio.serve_tcp, split_echo_handler, 0, host="127.0.0.1")
        )
        bare = await trio.open_tcp_stream("127.0.0.1", bare_listeners[0].socket.getsockname()[1])
        split = Split(await trio.open_tcp_stream("127.0.0.1", split_listeners[0].socket.getsockname()[1]))
        nursery.start_soon(split.write_loop)
        nursery.start_soon(split.read_loop, split.deliver)
        split_call = functools.partial(split.call, frame)

        for _ in range(args.rounds):
            counts["a ours"] += await timed(slice_, functools.partial(sync_loop, ours))
            counts["a inline"] += await timed(slice_, functools.partial(sync_loop, ours_inline))
            counts["a bare"] += await timed(slice_, functools.partial(bare_sync, bare, frame))
            counts["a split"] += await timed(slice_, functools.partial(sync_loop, split_call))
            counts["b ours"] += await timed(slice_, functools.partial(pipelined, ours, args.in_flight))
            counts["b inline"] += await timed(slice_, functools.partial(pipelined, ours_inline, args.in_flight))
            counts["b bare"] += await timed(slice_, functools.partial(bare_pipelined, bare, frame, args.in_flight))
            counts["b split"] += await timed(slice_, functools.partial(pipelined, split_call, args.in_flight))
        nursery.cancel_scope.cancel()

    rate = {key: count / args.seconds for key, count in counts.items()}
    codec = codec_cost(body, serialize)
    print(
        f"body {args.body} B, serialize {args.serialize}, {args.seconds:g} s per figure in {args.rounds} rounds, "
        f"(b) with {args.in_flight} in flight; requests/s"
    )
    print(f"{'':40s}{'(a) sync':>12s}{'vs bare':>9s}{'(b) pipelined':>15s}{'vs bare':>9s}")
    for key, name in (
        ("ours", "rmq.remoting (worker tasks, default)"),
        ("inline", "rmq.remoting (processor inline)"),
        ("bare", "bare trio echo"),
        ("split", "bare trio, reader+writer tasks"),
    ):
        a, b = rate[f"a {key}"], rate[f"b {key}"]
        print(f"{name:40s}{a:12,.0f}{a / rate['a bare']:9.0%}{b:15,.0f}{b / rate['b bare']:9.0%}")
    # What the protocol codec alone costs per request (encode + decode of request and
    # response, all on this one thread), and the ratio it would leave if it were the
    # only work added to bare trio.
    ceiling = {k: 1 / (1 + codec * rate[f"{k} bare"]) for k in ("a", "b")}
    print(
        f"{'codec alone: ' + format(codec * 1e6, '.1f') + ' us/request, caps':40s}"
        f"{'':12s}{ceiling['a']:9.0%}{'':15s}{ceiling['b']:9.0%}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="total duration of each figure")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved slices per figure")
    parser.add_argument("--body", type=int, default=1024, help="body size in bytes")
    parser.add_argument("--in-flight", type=int, default=64, help="requests outstanding in (b)")
    parser.add_argument("--serialize", choices=("json", "rocketmq"), default="json")
    trio.run(main, parser.parse_args())
