"""RemotingServer and RemotingClient end to end on 127.0.0.1."""

from __future__ import annotations

import logging
import socket

import pytest
import trio
import trio.testing

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode, encode_frame
from rmq.remoting import (
    BUSY_OVERLOAD,
    ClientConfig,
    Connection,
    Dispatcher,
    RemotingClient,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
    RequestContext,
    ServerConfig,
)
from rmq.remoting.testing import echo, serve_on_loopback


def echo_dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo)
    return d


async def test_invoke_over_tcp() -> None:
    async with serve_on_loopback(echo_dispatcher()) as server, RemotingClient() as client:
        assert server.address == f"127.0.0.1:{server.port}"
        resp = await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": 1}, b"b"), 3)
        assert (resp.code, resp.ext_fields, resp.body) == (ResponseCode.SUCCESS, {"k": "1"}, b"b")
        await client.invoke_oneway(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE))
        resp = await client.invoke(server.address, RemotingCommand.request(777), 3)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_started_with_nursery_start() -> None:
    server = RemotingServer(echo_dispatcher(), ServerConfig(host="127.0.0.1", port=0))
    async with trio.open_nursery() as nursery:
        assert await nursery.start(server.serve) is server
        assert server.port
        async with RemotingClient() as client:
            await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
        await server.aclose()


async def test_client_shares_one_connection_and_reconnects() -> None:
    opened: list[Connection] = []
    async with serve_on_loopback(echo_dispatcher(), on_open=opened.append) as server, RemotingClient() as client:
        async with trio.open_nursery() as nursery:  # concurrent first calls share one connect
            for _ in range(10):
                nursery.start_soon(client.invoke, server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
        assert len(opened) == 1
        first = await client.connection(server.address)
        assert client.connected(server.address) is first
        server.get_connection(opened[0].remote_address).close("test")  # type: ignore[union-attr]
        await first.wait_closed()
        assert client.connected(server.address) is None  # no connect is started
        resp = await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
        assert resp.code == ResponseCode.SUCCESS
        assert len(opened) == 2
        assert client.connections[server.address] is not first
        client.close_connection(server.address)
        await first.wait_closed()


async def test_connect_refused_names_the_address() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    async with RemotingClient() as client:
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(address, RemotingCommand.request(RequestCode.HEART_BEAT), 3)
        assert info.value.address == address and address in str(info.value)
        with pytest.raises(RemotingConnectError, match="not an address"):
            await client.invoke("nonsense", RemotingCommand.request(RequestCode.HEART_BEAT), 3)


async def test_connect_timeout_names_the_address(autojump_clock: trio.testing.MockClock) -> None:
    # a listener that never accepts: the TCP connect succeeds but the TLS handshake hangs
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    async with RemotingClient(ClientConfig(connect_timeout=2.0, tls=True)) as client:
        with pytest.raises(RemotingConnectError) as info:
            await client.connection(address)
    assert address in str(info.value) and "timed out" in str(info.value)
    await listeners[0].aclose()


async def test_invoke_timeout_names_address_and_code() -> None:
    async def stuck(ctx: RequestContext, request: RemotingCommand) -> None:
        await trio.sleep_forever()

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, stuck)
    async with serve_on_loopback(d) as server, RemotingClient() as client:
        with pytest.raises(RemotingTimeoutError) as info:
            await client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), 0.2)
    text = str(info.value)
    assert server.address in text and "PULL_MESSAGE(11)" in text and "200 ms" in text


async def test_system_busy_under_overload() -> None:
    gate = trio.Event()

    async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await gate.wait()
        return request.make_response()

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, slow, concurrency=2, queue_size=3)
    codes: list[int] = []
    async with serve_on_loopback(d) as server, RemotingClient() as client:

        async def call() -> None:
            resp = await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 5)
            codes.append(resp.code)
            if resp.code == ResponseCode.SYSTEM_BUSY:
                assert resp.remark == BUSY_OVERLOAD
            if len(codes) == 5:  # all the busy answers are in
                gate.set()

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(call)
    assert sorted(codes) == [ResponseCode.SUCCESS] * 5 + [ResponseCode.SYSTEM_BUSY] * 5


async def test_server_initiated_request_answered_by_client_processor() -> None:
    async def check_state(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ext_fields={"producerGroup": request.ext_fields["producerGroup"]})

    client_d = Dispatcher()
    client_d.register(RequestCode.CHECK_TRANSACTION_STATE, check_state)
    async with serve_on_loopback(Dispatcher()) as server, RemotingClient(dispatcher=client_d) as client:
        # the server knows a connection once it has sent its first bytes (a heartbeat, in RocketMQ)
        await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT), 3)
        (conn,) = server.connections
        resp = await conn.invoke(
            RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"producerGroup": "g"}), 3
        )
        assert resp.ext_fields == {"producerGroup": "g"}
        await conn.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED))
        resp = await conn.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_registry_and_hooks() -> None:
    events: list[tuple[str, str, str | None]] = []

    def opened(conn: Connection) -> None:
        events.append(("open", conn.remote_address, conn.close_reason))

    def closed(conn: Connection) -> None:
        events.append(("close", conn.remote_address, conn.close_reason))
        raise RuntimeError("a failing hook is only logged")

    async with serve_on_loopback(echo_dispatcher(), on_open=opened, on_close=closed) as server:
        async with RemotingClient() as client:
            conn = await client.connection(server.address)
            await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
            (server_side,) = server.connections
            assert server_side.remote_address == conn.local_address
            assert server_side.local_address == server.address
            assert server.get_connection(conn.local_address) is server_side
        await server_side.wait_closed()
        assert server.connections == []
        assert server.get_connection(conn.local_address) is None
    assert events == [("open", conn.local_address, None), ("close", conn.local_address, "closed by peer")]


async def test_protocol_error_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    async with serve_on_loopback(echo_dispatcher(), max_frame_size=4096) as server, RemotingClient() as client:
        good = await client.connection(server.address)
        with caplog.at_level(logging.INFO, logger="rmq.remoting"):
            for garbage in (
                encode_frame(0, b"{}", b"x" * 10000),  # too large
                encode_frame(0, b"{not json", b""),  # garbage header
                b"\x00\x00\x00\x01\x00",  # bad length
                encode_frame(5, b"{}"),  # unknown serialize type
            ):
                assert server.port is not None
                stream = await trio.open_tcp_stream("127.0.0.1", server.port)
                await stream.send_all(garbage)
                with trio.fail_after(5):
                    try:
                        assert await stream.receive_some() == b""  # closed by the server
                    except trio.BrokenResourceError:
                        pass  # closed with our bytes unread: a reset
                await stream.aclose()
        resp = await good.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
        assert resp.code == ResponseCode.SUCCESS
    closes = [r for r in caplog.records if "closed: protocol error" in r.getMessage()]
    assert len(closes) == 4
    assert not any(r.exc_info for r in caplog.records), "a peer's bad bytes never log a traceback"


async def test_idle_connection_is_closed(autojump_clock: trio.testing.MockClock) -> None:
    closed: list[Connection] = []
    async with (
        serve_on_loopback(echo_dispatcher(), on_close=closed.append) as server,
        RemotingClient(ClientConfig(idle_timeout=None)) as client,
    ):
        conn = await client.connection(server.address)
        start = trio.current_time()
        for _ in range(3):  # traffic every 100 s keeps it open
            await trio.sleep(100)
            await conn.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
        await conn.wait_closed()
        elapsed = trio.current_time() - start
    assert 300 + 118 <= elapsed <= 300 + 121
    assert closed[0].close_reason == "idle for 120 s"


async def test_silent_socket_is_closed_after_idle_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async with serve_on_loopback(echo_dispatcher(), idle_timeout=30) as server:
        assert server.port is not None
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        start = trio.current_time()
        assert await stream.receive_some() == b""  # never sent a byte
        assert trio.current_time() - start == pytest.approx(30)
        await stream.aclose()


async def test_graceful_shutdown_finishes_in_flight() -> None:
    started = trio.Event()

    async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        started.set()
        await trio.sleep(0.2)
        return request.make_response(ext_fields={"done": "1"})

    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, slow)
    server = RemotingServer(d, ServerConfig(host="127.0.0.1", shutdown_grace=5))
    results: list[RemotingCommand] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with RemotingClient() as client:

            async def call() -> None:
                results.append(
                    await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 5)
                )

            nursery.start_soon(call)
            await started.wait()
            with trio.fail_after(3):
                await server.aclose()
            # no longer accepting
            with pytest.raises(RemotingConnectError):
                await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 1)
    assert results[0].ext_fields == {"done": "1"}


async def test_shutdown_grace_cuts_slow_requests(autojump_clock: trio.testing.MockClock) -> None:
    async def forever(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await trio.sleep_forever()

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, forever)
    async with (
        serve_on_loopback(d, shutdown_grace=2.0) as server,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):

        async def call() -> None:
            with pytest.raises(RemotingConnectError):
                await client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), 60)

        nursery.start_soon(call)
        await trio.sleep(1)
        start = trio.current_time()
        await server.aclose()
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.1)


def test_config_validation() -> None:
    from rmq.remoting import TlsMode

    with pytest.raises(ValueError, match="ssl_context"):
        ServerConfig(tls_mode=TlsMode.ENFORCING)
    with pytest.raises(ValueError):
        ServerConfig(port=70000)
    with pytest.raises(ValueError):
        ServerConfig(idle_timeout=0)
    with pytest.raises(ValueError):
        ClientConfig(connect_timeout=0)


async def test_the_log_names_the_bound_addresses(caplog: pytest.LogCaptureFixture) -> None:
    """A host name (or 0.0.0.0) is logged as the addresses bound, not as where to connect."""
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    server = RemotingServer(echo_dispatcher(), ServerConfig(host="localhost", port=0))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        resolved = socket.getaddrinfo("localhost", server.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        await server.aclose()
    bound = {
        f"[{ai[4][0]}]:{server.port}" if ai[0] == socket.AF_INET6 else f"{ai[4][0]}:{server.port}" for ai in resolved
    }
    (serving,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("serving on ")]
    (stopped,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stopped serving on ")]
    assert set(serving.removeprefix("serving on ").split(", ")) == bound  # not "localhost:port"
    assert stopped == f"stopped {serving}"


async def test_a_port_probe_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    """A readiness check that connects and closes (quickstart.sh's, a load balancer's) is
    logged at DEBUG only: the first lines an operator sees are not about it."""
    caplog.set_level(logging.DEBUG, logger="rmq.remoting")

    def probe_records() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "closed before sending anything" in r.getMessage()]

    async with serve_on_loopback(echo_dispatcher()) as server:
        probe = await trio.open_tcp_stream("127.0.0.1", server.port)
        await probe.aclose()
        with trio.fail_after(10):
            while not probe_records():
                await trio.sleep(0.01)
    assert [r.levelno for r in probe_records()] == [logging.DEBUG]
