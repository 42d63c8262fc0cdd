"""Connection limits of a RemotingServer over real sockets: the server's, an address's,
the refusal (closed at once, counted, logged once a minute per address)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from rmq.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import Dispatcher, RemotingServer, ServerConfig
from rmq.remoting.server import ADDRESS_LIMIT, SERVER_LIMIT
from rmq.remoting.testing import echo, serve_on_loopback

LIMIT = 5.0  # seconds any one step may take


def echo_dispatcher() -> Dispatcher:
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.SEND_MESSAGE, echo)
    return dispatcher


@asynccontextmanager
async def connect(server: RemotingServer, source: str = "127.0.0.1") -> AsyncIterator[trio.SocketStream]:
    """A TCP connection to `server` from `source` (any 127.x.y.z address is this host's)."""
    sock = trio.socket.socket()
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", server.port))
    async with trio.SocketStream(sock) as stream:
        yield stream


async def served(stream: trio.SocketStream) -> bool:
    """Whether a request on `stream` gets its answer (False: the server closed it)."""
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"})
    decoder = FrameDecoder()
    with trio.fail_after(LIMIT):
        try:
            await stream.send_all(request.encode())
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return False
                decoder.feed(data)
                for frame in decoder:
                    answer = RemotingCommand.decode(frame)
                    return answer.code == ResponseCode.SUCCESS and answer.opaque == request.opaque
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False


async def held(server: RemotingServer, count: int) -> None:
    with trio.fail_after(LIMIT):
        while server.connection_count != count:
            await trio.sleep(0.005)


async def test_the_connection_past_the_servers_limit_is_closed_and_one_closing_lets_another_in(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rmq.remoting.server")
    async with serve_on_loopback(echo_dispatcher(), max_connections=3) as server:
        async with connect(server) as a, connect(server) as b, connect(server, "127.0.0.2") as c:
            for stream in (a, b, c):
                assert await served(stream)
            await held(server, 3)
            async with connect(server, "127.0.0.3") as extra:
                assert not await served(extra)
            assert server.refused == {SERVER_LIMIT: 1, ADDRESS_LIMIT: 0}
            (warning,) = [r.getMessage() for r in caplog.records]
            assert "refused connection from 127.0.0.3:" in warning
            assert "the server holds 3 connections, its limit (serverMaxConnections)" in warning
            await a.aclose()
            await held(server, 2)
            async with connect(server, "127.0.0.3") as d:
                assert await served(d)
            for stream in (b, c):
                assert await served(stream)  # the others never noticed


async def test_an_address_past_its_limit_is_refused_and_others_are_not() -> None:
    async with serve_on_loopback(echo_dispatcher(), max_connections_per_address=2) as server:
        async with connect(server) as a, connect(server) as b:
            assert await served(a) and await served(b)
            await held(server, 2)
            async with connect(server) as third:
                assert not await served(third)
            assert server.refused == {SERVER_LIMIT: 0, ADDRESS_LIMIT: 1}
            async with connect(server, "127.0.0.2") as other, connect(server, "127.0.0.2") as other2:
                assert await served(other) and await served(other2)
            await b.aclose()
            await held(server, 1)
            async with connect(server) as again:
                assert await served(again)


async def test_refusals_are_logged_once_a_minute_per_address(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="rmq.remoting.server")
    async with serve_on_loopback(echo_dispatcher(), max_connections_per_address=1) as server:
        async with connect(server) as kept:
            assert await served(kept)
            for _ in range(5):
                async with connect(server) as refused:
                    assert not await served(refused)
            async with connect(server, "127.0.0.2") as other:
                assert await served(other)
            assert server.refused[ADDRESS_LIMIT] == 5
            messages = [r.getMessage() for r in caplog.records]
            assert len(messages) == 1 and "127.0.0.1 holds 1 connections" in messages[0]
            # a minute on, the next refusal is logged with the count of those that were not
            monkeypatch.setattr(trio, "current_time", lambda real=trio.current_time: real() + 61)
            async with connect(server) as refused:
                assert not await served(refused)
            assert "4 more refused since the last report" in caplog.records[-1].getMessage()


async def test_the_limit_counts_handshakes_and_websocket_connections() -> None:
    async with serve_on_loopback(echo_dispatcher(), max_connections=1, ws_port=0) as server:
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", server.ws_port))
        async with trio.SocketStream(sock) as silent:  # a WebSocket peer still in its upgrade
            await held(server, 1)
            async with connect(server) as tcp:
                assert not await served(tcp)
            assert server.refused[SERVER_LIMIT] == 1
            await silent.aclose()
        await held(server, 0)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        ServerConfig(max_connections=-1)
    with pytest.raises(ValueError, match="max_connections"):
        ServerConfig(max_connections_per_address=-1)
    assert ServerConfig().max_connections == 0  # no limit unless asked
