"""RocketMQ frames over WebSocket (ws:// and wss://), end to end on 127.0.0.1."""

from __future__ import annotations

import ssl

import pytest
import trio
import trustme

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType
from rmq.remoting import (
    ClientConfig,
    Dispatcher,
    RemotingClient,
    RemotingConnectError,
    RequestContext,
    TlsMode,
)
from rmq.remoting.testing import echo, serve_on_loopback


def echo_dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo)
    return d


async def test_ws_roundtrips_and_pipelining() -> None:
    async with serve_on_loopback(echo_dispatcher(), ws_port=0, ws_path="/rocketmq") as server:
        url = server.ws_url
        assert url == f"ws://127.0.0.1:{server.ws_port}/rocketmq"
        async with RemotingClient() as client:
            for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
                req = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"}, b"x" * 70000, serialize_type=stype)
                resp = await client.invoke(url, req, 3)
                assert (resp.code, resp.ext_fields, len(resp.body), resp.serialize_type) == (
                    0,
                    {"k": "v"},
                    70000,
                    stype,
                )

            results: list[int] = []

            async def one(n: int) -> None:
                resp = await client.invoke(url, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": n}), 5)
                results.append(int(resp.ext_fields["n"]))

            async with trio.open_nursery() as nursery:
                for n in range(64):
                    nursery.start_soon(one, n)
            assert sorted(results) == list(range(64))
            # TCP still works alongside
            resp = await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
            assert resp.code == ResponseCode.SUCCESS
            assert len(server.connections) == 2


async def test_ws_wrong_path_is_rejected() -> None:
    async with serve_on_loopback(echo_dispatcher(), ws_port=0) as server, RemotingClient() as client:
        with pytest.raises(RemotingConnectError, match="HTTP 404"):
            await client.invoke(f"ws://127.0.0.1:{server.ws_port}/elsewhere", RemotingCommand.request(10), 3)
        # the listener keeps serving
        resp = await client.invoke(server.ws_url, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)  # type: ignore[arg-type]
        assert resp.code == ResponseCode.SUCCESS


async def test_ws_server_initiated_request() -> None:
    async def notified(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ext_fields={"seen": "yes"})

    client_d = Dispatcher()
    client_d.register(RequestCode.GET_CONSUMER_RUNNING_INFO, notified)
    async with serve_on_loopback(Dispatcher(), ws_port=0) as server, RemotingClient(dispatcher=client_d) as client:
        await client.invoke(server.ws_url, RemotingCommand.request(RequestCode.HEART_BEAT), 3)  # type: ignore[arg-type]
        (conn,) = server.connections
        resp = await conn.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3)
        assert resp.ext_fields == {"seen": "yes"}


async def test_wss() -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    async with serve_on_loopback(
        echo_dispatcher(), ws_port=0, tls_mode=TlsMode.ENFORCING, ssl_context=server_context
    ) as server:
        assert server.ws_url is not None and server.ws_url.startswith("wss://")
        async with RemotingClient(ClientConfig(ssl_context=client_context)) as client:
            resp = await client.invoke(server.ws_url, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"a": 1}), 3)
            assert resp.ext_fields == {"a": "1"}
            plain = server.ws_url.replace("wss://", "ws://")
            with pytest.raises(RemotingConnectError):
                await client.invoke(plain, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)


async def test_ws_peer_closing_fails_pending_invokes() -> None:
    async def stuck(ctx: RequestContext, request: RemotingCommand) -> None:
        await trio.sleep_forever()

    d = Dispatcher()
    d.register(RequestCode.PULL_MESSAGE, stuck)
    async with serve_on_loopback(d, ws_port=0) as server, RemotingClient() as client, trio.open_nursery() as nursery:

        async def call() -> None:
            with pytest.raises(RemotingConnectError):
                await client.invoke(server.ws_url, RemotingCommand.request(RequestCode.PULL_MESSAGE), 10)  # type: ignore[arg-type]

        nursery.start_soon(call)
        while not server.connections:
            await trio.sleep(0.01)
        server.connections[0].close("test")
