"""Direct writes (stages/direct.py, Connection._write_now) over real sockets: which stage
stacks get one, and that frames written directly, partly, or queued behind them still
reach the peer whole and in order."""

from __future__ import annotations

import socket
import ssl

import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode
from rmq.remoting import Connection, Dispatcher, RequestContext
from rmq.remoting.stages.codec import CommandStream
from rmq.remoting.stages.direct import direct_writer
from rmq.remoting.stages.idle import IdleStream
from rmq.remoting.stages.prefixed import PrefixedStream
from tests.remoting.test_remoting_connection import echo_dispatcher


def socket_stream_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    left, right = trio.socket.socketpair()
    return trio.SocketStream(left), trio.SocketStream(right)


class WriterCounting(CommandStream):
    """A CommandStream that notes how many frames each of the writer's sends carries."""

    def __init__(self, stream: trio.abc.Stream, written: list[int]) -> None:
        super().__init__(stream)
        self.written = written

    async def send_frames(self, frames: list[bytes]) -> None:
        self.written.append(len(frames))
        await super().send_frames(frames)


class Collector:
    """A dispatcher keeping every SEND_MESSAGE it serves; `all_in` is set at `expected`."""

    def __init__(self, expected: int) -> None:
        self.got: list[RemotingCommand] = []
        self.all_in = trio.Event()
        self.expected = expected
        self.dispatcher = Dispatcher()
        self.dispatcher.register(RequestCode.SEND_MESSAGE, self._keep, inline=True)  # type: ignore[arg-type]

    async def _keep(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.got.append(request)
        if len(self.got) == self.expected:
            self.all_in.set()


async def test_plain_tcp_stages_get_a_direct_writer_and_others_do_not() -> None:
    left, right = socket_stream_pair()
    with trio.CancelScope() as scope:  # noqa: ASYNC100  only for IdleStream to hold
        idle = IdleStream(PrefixedStream(left, b"sniffed"), scope, 60.0)
        assert direct_writer(left) is not None
        assert direct_writer(idle) is not None
        assert CommandStream(idle).direct_write is not None
        # message transports write a frame per send; they keep the writer task
        assert CommandStream(idle, one_frame_per_send=True).direct_write is None
    with trio.CancelScope() as scope:  # noqa: ASYNC100  only for IdleStream to hold
        # TLS encrypts what it sends: the bytes cannot go to the socket as they are
        tls = trio.SSLStream(left, ssl.create_default_context(), server_hostname="localhost")
        assert direct_writer(tls) is None
        assert CommandStream(IdleStream(tls, scope, 60.0)).direct_write is None
    memory, _ = trio.testing.memory_stream_pair()
    assert direct_writer(memory) is None
    assert CommandStream(memory).direct_write is None
    await left.aclose()
    await right.aclose()


async def test_a_direct_write_moves_the_idle_deadline() -> None:
    left, right = socket_stream_pair()
    with trio.CancelScope() as scope:
        idle = IdleStream(left, scope, 60.0)
        scope.deadline = trio.current_time() + 1.0
        write = direct_writer(idle)
        assert write is not None
        assert write(b"ping") == 4
        assert scope.deadline > trio.current_time() + 59.0
        assert await right.receive_some(16) == b"ping"
    await left.aclose()
    await right.aclose()


async def test_frames_arrive_whole_and_in_order_when_the_socket_takes_only_part() -> None:
    """A frame far bigger than the socket's buffer is written partly at once; its rest goes
    first in the outbox, and the oneway frames sent after it queue behind it."""
    left_sock, right_sock = trio.socket.socketpair()
    left_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    left, right = trio.SocketStream(left_sock), trio.SocketStream(right_sock)
    collector = Collector(52)
    got, all_in = collector.got, collector.all_in
    sender = Connection(CommandStream(left), remote_address="receiver")
    receiver = Connection(CommandStream(right), collector.dispatcher, remote_address="sender")
    write = sender._direct_write
    assert write is not None
    direct: list[tuple[int, int]] = []  # (frame size, bytes the socket took)

    def recording(data: bytes) -> int:
        sent = write(data)
        direct.append((len(data), sent))
        return sent

    sender._direct_write = recording
    big = bytes(range(256)) * 8192  # 2 MiB
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(sender.run)
            await nursery.start(receiver.run)
            await sender.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": 0}, big))
            assert direct[0][0] > len(big) > direct[0][1] > 0  # the rest went to the writer
            for n in range(1, 52):
                await sender.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}, b"x" * n))
            await all_in.wait()
            sender.close()
            receiver.close()
    assert [int(r.ext_fields["n"]) for r in got] == list(range(52))
    assert got[0].body == big
    assert all(r.body == b"x" * n for n, r in enumerate(got[1:], 1))


async def test_round_trips_over_tcp_write_directly() -> None:
    """At one request in flight each request and each answer goes out directly: the writer
    tasks of both sides never write."""
    left, right = socket_stream_pair()
    dispatcher = echo_dispatcher()
    written: list[int] = []

    client = Connection(WriterCounting(left, written), remote_address="server")
    server = Connection(WriterCounting(right, written), dispatcher, remote_address="client")
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        await nursery.start(server.run)
        for n in range(20):
            response = await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}, b"b"), 5.0)
            assert response.ext_fields == {"n": str(n)}
        client.close()
        server.close()
    assert written == []


class ReadLogging(CommandStream):
    """A CommandStream that notes each read the connection's reader starts."""

    def __init__(self, stream: trio.abc.Stream, events: list[str]) -> None:
        super().__init__(stream)
        self.events = events

    async def receive_batch(self) -> list[RemotingCommand]:
        self.events.append("read")
        return await super().receive_batch()


async def test_a_lone_answer_wakes_its_caller_before_the_reader_reads_again() -> None:
    """The task an answer wakes runs (and writes its next request) before the reader tries
    the socket again, a try that mostly finds nothing and costs a recv and an epoll_ctl."""
    left, right = socket_stream_pair()
    events: list[str] = []
    client = Connection(ReadLogging(left, events), remote_address="server")
    server = Connection(CommandStream(right), echo_dispatcher(), remote_address="client")
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        await nursery.start(server.run)
        for n in range(10):
            await client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}), 5.0)
            events.append("answered")
        client.close()
        server.close()
    assert events[:20] == ["read", "answered"] * 10


async def test_answers_to_a_pipelined_read_are_left_to_the_writer() -> None:
    """Several requests in one read are a pipeline: none of their answers is written
    directly, so that the writer joins them rather than the first leaving alone."""
    left, right = socket_stream_pair()
    dispatcher = echo_dispatcher()
    written: list[int] = []

    server = Connection(WriterCounting(right, written), dispatcher, remote_address="client")
    peer = CommandStream(left)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        requests = [RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}) for n in range(3)]
        for opaque, request in enumerate(requests):
            request.opaque = opaque
        await peer.send_frames([r.encode() for r in requests])  # one write: one read, most likely
        answers: list[RemotingCommand] = []
        with trio.fail_after(5):
            while len(answers) < 3:
                answers += await peer.receive_batch()
        server.close()
    assert sorted(a.opaque for a in answers) == [0, 1, 2]
    assert sum(written) == 3


async def test_send_oneway_nowait_writes_each_frame_at_once_and_refuses_on_a_closed_connection() -> None:
    """A caller without pipelines (a DLedger member's pushes and acks) writes every frame
    from its own task, one after another, never through the writer task."""
    left, right = socket_stream_pair()
    collector = Collector(10)
    got, all_in = collector.got, collector.all_in
    written: list[int] = []
    sender = Connection(WriterCounting(left, written), remote_address="receiver")
    receiver = Connection(CommandStream(right), collector.dispatcher, remote_address="sender")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(sender.run)
            await nursery.start(receiver.run)
            for n in range(10):
                assert sender.send_oneway_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}, b"b"))
            await all_in.wait()
            sender.close()
            receiver.close()
    assert [int(r.ext_fields["n"]) for r in got] == list(range(10))
    assert all(r.is_oneway for r in got)
    assert written == []
    assert not sender.send_oneway_nowait(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": 10}))


class Grouped:
    """An ordered route with `begin_many` (as the broker's sends): each request answered at
    once with its body as the remark, `pad` bytes of body added to each answer."""

    def __init__(self, pad: int = 0) -> None:
        self.pad = pad
        self.groups: list[int] = []

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> None:
        raise AssertionError("started by begin_many")

    def begin(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        answer = request.make_response(0, request.body.decode())
        answer.body = b"a" * self.pad
        return answer

    def begin_many(self, jobs: list[tuple[RequestContext, RemotingCommand]]) -> list[RemotingCommand]:
        self.groups.append(len(jobs))
        return [self.begin(ctx, request) for ctx, request in jobs]


def _numbered(count: int) -> list[bytes]:
    out = []
    for n in range(count):
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=b"%d" % n)
        request.opaque = n
        out.append(request.encode())
    return out


async def test_answers_to_a_group_started_together_go_out_in_one_write_of_the_reader() -> None:
    """The requests of one read that a route starts together (`begin_many`) are answered in
    one write from the reader, without a turn of the writer task."""
    left, right = socket_stream_pair()
    grouped = Grouped()
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, grouped, concurrency=1000)
    written: list[int] = []
    server = Connection(WriterCounting(right, written), dispatcher, remote_address="client")
    peer = CommandStream(left)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        await peer.send_frames(_numbered(5))  # one write: one read, most likely
        answers: list[RemotingCommand] = []
        with trio.fail_after(5):
            while len(answers) < 5:
                answers += await peer.receive_batch()
        server.close()
    assert grouped.groups == [5]
    assert [(a.opaque, a.remark) for a in answers] == [(n, str(n)) for n in range(5)]
    assert written == []


async def test_a_group_answer_the_socket_does_not_take_at_once_is_finished_by_the_writer() -> None:
    """Answers bigger than the socket takes without waiting: the reader writes what it can,
    the writer the rest, whole and in order, once the peer reads."""
    left, right = socket_stream_pair()
    right.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    grouped = Grouped(pad=48 * 1024)
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, grouped, concurrency=1000)
    written: list[int] = []
    server = Connection(WriterCounting(right, written), dispatcher, remote_address="client")
    peer = CommandStream(left)
    count = 40
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        await peer.send_frames(_numbered(count))
        await trio.sleep(0.2)  # the peer reads nothing yet: the socket fills
        answers: list[RemotingCommand] = []
        with trio.fail_after(10):
            while len(answers) < count:
                answers += await peer.receive_batch()
        server.close()
    assert [(a.opaque, a.remark, len(a.body)) for a in answers] == [(n, str(n), 48 * 1024) for n in range(count)]
    assert sum(grouped.groups) == count
    assert written  # the writer finished what the reader's write left
