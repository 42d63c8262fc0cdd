"""The fault proxy over real loopback sockets: it forwards, and each fault does what it says
to both ends. Absence is checked over short waits (a slow machine can only make those pass
for the right reason); presence with generous bounds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from .proxy import Proxy

BOUND = 10.0  # seconds for anything that should happen
QUIET = 0.3  # seconds in which something that should not happen does not


class Server:
    """Accepts connections and keeps each one's received bytes and how it ended."""

    def __init__(self) -> None:
        self.streams: list[trio.SocketStream] = []
        self.received: list[bytearray] = []
        self.ended: dict[int, str] = {}  # connection number -> "reset" or "closed"
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listener.socket.getsockname()[1]
        async with listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._read, stream)

    async def _read(self, stream: trio.SocketStream) -> None:
        buf = bytearray()
        n = len(self.streams)
        self.streams.append(stream)
        self.received.append(buf)
        try:
            while data := await stream.receive_some(65536):
                buf += data
        except trio.BrokenResourceError:
            self.ended[n] = "reset"
        else:
            self.ended[n] = "closed"

    async def ending(self, conn: int) -> str:
        with trio.fail_after(BOUND):
            while conn not in self.ended:
                await trio.sleep(0.01)
        return self.ended[conn]

    async def wait_for(self, conn: int, data: bytes, timeout: float = BOUND) -> None:
        with trio.fail_after(timeout):
            while len(self.received) <= conn or bytes(self.received[conn]) != data:
                await trio.sleep(0.01)


async def receive_exactly(stream: trio.SocketStream, n: int, timeout: float = BOUND) -> bytes:
    out = bytearray()
    with trio.fail_after(timeout):
        while len(out) < n:
            data = await stream.receive_some(n - len(out))
            if not data:
                raise EOFError(bytes(out))
            out += data
    return bytes(out)


async def nothing_arrives(stream: trio.SocketStream) -> bool:
    with trio.move_on_after(QUIET):
        await stream.receive_some(1)
        return False
    return True


async def ending(stream: trio.SocketStream) -> str:
    """How the connection ended within BOUND: "reset" or "closed" (a clean end)."""
    with trio.fail_after(BOUND):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            return "reset"
    return "closed"


@pytest.fixture
async def link() -> AsyncIterator[tuple[Server, Proxy]]:
    server = Server()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        proxy = Proxy(server.address, name="test")
        await nursery.start(proxy.serve)
        yield server, proxy
        nursery.cancel_scope.cancel()


async def connect(proxy: Proxy) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", proxy.port)


async def test_forwards_both_ways_and_counts(link: tuple[Server, Proxy]) -> None:
    server, proxy = link
    client = await connect(proxy)
    await client.send_all(b"ping")
    await server.wait_for(0, b"ping")
    await server.streams[0].send_all(b"pong")
    assert await receive_exactly(client, 4) == b"pong"
    with trio.fail_after(BOUND):  # counted once the write returned, maybe after the client read
        while proxy.stats.to_client < 4:
            await trio.sleep(0.01)
    assert proxy.stats.to_target == 4 and proxy.stats.to_client == 4 and proxy.connections == 1
    await client.aclose()  # a clean end on one side ends the other side too
    assert await server.ending(0) == "closed"
    with trio.fail_after(BOUND):
        while proxy.connections:
            await trio.sleep(0.01)


async def test_delay_holds_every_chunk_and_keeps_their_order(link: tuple[Server, Proxy]) -> None:
    server, proxy = link
    client = await connect(proxy)
    proxy.delay(0.3)
    t0 = trio.current_time()
    for i in range(5):
        await client.send_all(b"%d" % i)
    await server.wait_for(0, b"01234")
    assert trio.current_time() - t0 >= 0.3
    await server.streams[0].send_all(b"back")
    t1 = trio.current_time()
    assert await receive_exactly(client, 4) == b"back"
    assert trio.current_time() - t1 >= 0.3
    proxy.heal()
    await client.send_all(b"5")
    await server.wait_for(0, b"012345")


async def test_drop_holds_one_direction_only_and_the_heal_delivers_what_was_held(
    link: tuple[Server, Proxy],
) -> None:
    server, proxy = link
    client = await connect(proxy)
    await client.send_all(b"a")
    await server.wait_for(0, b"a")
    proxy.drop("to_target")
    await client.send_all(b"b")
    await trio.sleep(QUIET)
    assert bytes(server.received[0]) == b"a"  # held
    await server.streams[0].send_all(b"still")  # the other way is open
    assert await receive_exactly(client, 5) == b"still"
    proxy.heal()
    await server.wait_for(0, b"ab")
    proxy.drop("to_client")
    await server.streams[0].send_all(b"x")
    assert await nothing_arrives(client)
    await client.send_all(b"c")
    await server.wait_for(0, b"abc")
    proxy.heal()
    assert await receive_exactly(client, 1) == b"x"


async def test_blackhole_keeps_sockets_open_and_new_connections_wait_for_the_heal(
    link: tuple[Server, Proxy],
) -> None:
    server, proxy = link
    old = await connect(proxy)
    await old.send_all(b"1")
    await server.wait_for(0, b"1")
    proxy.cut("blackhole")
    await old.send_all(b"2")
    await server.streams[0].send_all(b"r")
    new = await connect(proxy)  # accepted by the proxy...
    await new.send_all(b"n")
    assert await nothing_arrives(old)
    assert bytes(server.received[0]) == b"1"
    assert len(server.streams) == 1  # ...but not passed on
    assert proxy.state == "blackhole"
    proxy.heal()
    await server.wait_for(0, b"12")
    await server.wait_for(1, b"n")
    assert await receive_exactly(old, 1) == b"r"


async def test_refuse_resets_current_and_new_connections(link: tuple[Server, Proxy]) -> None:
    server, proxy = link
    old = await connect(proxy)
    await old.send_all(b"1")
    await server.wait_for(0, b"1")
    proxy.cut("refuse")
    assert await ending(old) == "reset"
    assert await server.ending(0) == "reset"
    new = await connect(proxy)
    assert await ending(new) == "reset"
    assert len(server.streams) == 1 and proxy.stats.refused == 1
    proxy.heal()
    again = await connect(proxy)
    await again.send_all(b"ok")
    await server.wait_for(1, b"ok")


async def test_reset_closes_what_is_open_and_later_connections_work(link: tuple[Server, Proxy]) -> None:
    server, proxy = link
    first = await connect(proxy)
    await first.send_all(b"1")
    await server.wait_for(0, b"1")
    proxy.reset()
    assert await ending(first) == "reset"
    assert await server.ending(0) == "reset"
    assert proxy.stats.resets == 1
    second = await connect(proxy)
    await second.send_all(b"2")
    await server.wait_for(1, b"2")


async def test_a_target_that_is_down_resets_the_client() -> None:
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with trio.open_nursery() as nursery:
        proxy = Proxy(f"127.0.0.1:{port}")
        await nursery.start(proxy.serve)
        client = await connect(proxy)
        assert await ending(client) == "reset"
        nursery.cancel_scope.cancel()
